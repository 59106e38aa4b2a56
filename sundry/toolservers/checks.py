"""The admin's "test connection": connect, list the tools, make the sample calls, and say what looks wrong.

Warnings, each a sentence an admin can act on:
- a listed tool the declaration file does not declare (usable, not harvested, writes held);
- a declared tool the server does not list;
- a result field whose values look like identifiers but that no declared path covers;
- a declared result path that never occurs in the tool's sample result.

Sample calls are made only to tools that read: declared lookups (or declared neither
lookup nor write) and undeclared tools the server marks read-only. A write is never
called to test it. Samples run in the order given, each reported with its own
outcome; one that kills the server costs only its own result. When the server
fails to start, list or answer, the tail of its stderr is shown (stdio servers).
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from dataclasses import dataclass, field
from typing import Any

from django.utils import timezone

from sundry.tooling import mcp_client
from sundry.tooling.domain import Domain, ToolDecl
from sundry.toolservers import catalog, declfile, offered
from sundry.toolservers.models import ToolServer

# Generic shape of an identifier: 6+ letters, digits, #, _ or -, with a digit; no spaces.
ID_LIKE = re.compile(r"#?(?=[A-Za-z0-9_#-]*\d)[A-Za-z0-9][A-Za-z0-9_#-]{5,}")
_KEY_ID = re.compile(r"(?:^|_)ids?$")


@dataclass
class ToolRow:
    name: str
    description: str
    declared: bool
    kind: str  # lookup, write, other
    read_only: bool
    sampled: str = ""  # "ok", an error, or "" (not sample-called)


@dataclass
class SampleRow:
    tool: str
    arguments: dict
    outcome: str  # "ok", "error: …", "failed: …", "not called: …"
    ok: bool = False

    @property
    def shown(self) -> str:
        return json.dumps(self.arguments, ensure_ascii=False)


@dataclass
class Report:
    server: str
    ok: bool
    error: str = ""
    tools: list[ToolRow] = field(default_factory=list)
    samples: list[SampleRow] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    stderr: str = ""  # the tail of a stdio server's stderr, when something failed


def _locate(data: Any, path: str) -> list[tuple]:
    """The concrete locations `path` selects in `data` (the path language of `tooling.domain.select`)."""
    nodes: list[tuple[tuple, Any]] = [((), data)]
    for segment in path.split(".") if path else []:
        lists = 0
        while segment.endswith("[]"):
            segment, lists = segment[:-2], lists + 1
        step = []
        for loc, node in nodes:
            if segment == "*" and isinstance(node, dict):
                step += [((*loc, ("k", k)), v) for k, v in node.items()]
            elif segment == "~" and isinstance(node, dict):
                step += [((*loc, ("key", k)), k) for k in node]
            elif segment == "":
                step.append((loc, node))
            elif isinstance(node, dict) and segment in node:
                step.append(((*loc, ("k", segment)), node[segment]))
        for _ in range(lists):
            step = [
                ((*loc, ("i", i)), item) for loc, node in step if isinstance(node, list) for i, item in enumerate(node)
            ]
        nodes = step
    return [loc for loc, _ in nodes]


def _looks_like_id(key: str, value: Any, decls: Domain) -> bool:
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        return False
    text = str(value).strip()
    if not text:
        return False
    if decls.kind_of(text):
        return True
    return bool(ID_LIKE.fullmatch(text)) or (bool(_KEY_ID.search(key)) and " " not in text)


def _leaves(data: Any, decls: Domain, loc: tuple = (), key: str = ""):
    """(location, value) for every ID-looking scalar in a result, mapping keys that look like IDs included."""
    if isinstance(data, dict):
        keyed = sum(1 for k in data if _looks_like_id("", k, decls)) > len(data) / 2
        for k, v in data.items():
            if keyed and _looks_like_id("", k, decls):
                yield (*loc, ("key", k)), k
            yield from _leaves(v, decls, (*loc, ("k", k)), k)
    elif isinstance(data, list):
        for i, v in enumerate(data):
            yield from _leaves(v, decls, (*loc, ("i", i)), key)
    elif _looks_like_id(key, data, decls):
        yield loc, data


def _general(loc: tuple, data: Any) -> str:
    """A location as a path: list positions as [], ID-keyed mapping entries as * (their keys as ~)."""
    parts: list[str] = []
    node = data
    for kind, step in loc:
        if kind == "i":
            parts[-1:] = [(parts[-1] if parts else "") + "[]"]
            node = node[step]
        elif kind == "key":
            parts.append("~")
        else:
            keyed = isinstance(node, dict) and sum(1 for k in node if ID_LIKE.fullmatch(str(k))) > len(node) / 2
            parts.append("*" if keyed else str(step))
            node = node[step]
    return ".".join(parts)


def result_warnings(name: str, decl: ToolDecl, data: Any, decls: Domain) -> list[str]:
    """What a sample result shows about the declaration: undeclared ID-like fields, declared paths not there."""
    if isinstance(data, str):
        declared = {v for _p, _k, v in decl.ids(data, kind_of=decls.kind_of)}
        shaped = [t for t in re.findall(r"[^\s,;:()\"']+", data) if _looks_like_id("", t, decls)]
        return [
            f"{name}: its result '{t}' looks like an identifier but no pattern in 'bare' reads it."
            for t in shaped
            if t not in declared
        ][:3]
    covered = {loc for path in decl.results for loc in _locate(data, path)}
    out, seen = [], set()
    for loc, value in _leaves(data, decls):
        if loc in covered:
            continue
        path = _general(loc, data)
        if path not in seen:
            seen.add(path)
            out.append(
                f"{name}: result field {path} holds values that look like identifiers (e.g. '{value}') "
                "but is not declared, so the ledger will not hold them."
            )
    for path in decl.results:
        # A field the result has, null in this sample (an order's exchange before any exchange), occurs.
        if not _locate(data, path) and not _locate(data, path.replace("[]", "")):
            out.append(f"{name}: declared result path {path} does not occur in the sample result.")
    return out


def _may_sample(listed: mcp_client.ListedTool, decls: Domain) -> bool:
    decl = decls.tools.get(listed.name)
    return (not decl.write) if decl is not None else listed.read_only


_QUERY_ARG = re.compile(r"^(?:sql|query|statement|stmt|expression|expr|filter|where|script|command|code)$", re.I)


def free_form_query(input_schema: dict | None) -> str:
    """The name of a string argument that carries a free-form query ("" when none)."""
    props = (input_schema or {}).get("properties") or {}
    return next(
        (
            name
            for name, p in props.items()
            if _QUERY_ARG.match(name) and isinstance(p, dict) and p.get("type", "string") == "string"
        ),
        "",
    )


def test_connection(server: ToolServer) -> Report:
    """Connect to `server` afresh, list its tools, sample-call the ones that read, and report."""
    report = Report(server=server.name, ok=False)
    try:
        decls = catalog.declarations(server)
    except declfile.DeclarationError as exc:
        report.warnings.append(
            f"Declaration file: {str(exc).rstrip('.')}. Every tool counts as undeclared until it is fixed."
        )
        decls = Domain(name=server.name)
    spec = catalog.server_spec(server)
    if spec.refused:  # outside the deployment's limits: nothing is started or contacted
        report.error = spec.refused
        return report
    missing_env = [n for n in server.env_name_list() if not os.environ.get(n)]
    missing_env += [v for v in (server.header_env or {}).values() if not os.environ.get(v)]
    if missing_env:
        report.warnings.append(f"Environment variables not set here: {', '.join(sorted(set(missing_env)))}.")
    samples = server.sample_list()
    with tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace") as errlog:
        try:
            listed, results = mcp_client.probe(
                spec,
                timeout=server.timeout_seconds,
                samples=samples,
                may_call=lambda t: _may_sample(t, decls),
                errlog=errlog,
            )
        except mcp_client.ToolServerError as exc:
            report.error = str(exc)
            report.stderr = mcp_client.stderr_tail(errlog)
            return report
        if any(not isinstance(r, mcp_client.CallResult) and r is not None for r in results):
            report.stderr = mcp_client.stderr_tail(errlog)
    report.ok = True
    _keep_listing(server, listed)
    by_name = {t.name: t for t in listed}
    for (name, arguments), got in zip(samples, results):
        report.samples.append(_sample_row(name, arguments, got, by_name, decls, report))
    for t in listed:
        decl = decls.tools.get(t.name)
        kind = "write" if (decl.write if decl else not t.read_only) else ("lookup" if decl and decl.lookup else "other")
        first = " ".join((t.description or "").strip().split("\n\n")[0].split())
        row = ToolRow(
            name=t.name,
            description=first if len(first) <= 160 else first[:159] + "…",
            declared=decl is not None,
            kind=kind,
            read_only=t.read_only,
        )
        row.sampled = "; ".join(s.outcome for s in report.samples if s.tool == t.name)
        if not offered.offers(server, t.name):
            row.sampled = (row.sampled + "; " if row.sampled else "") + "not offered to the model (allow/deny list)"
        report.tools.append(row)
        # A write taking a free-form query: which records it changes is inside the query.
        if kind == "write" and (query := free_form_query(t.input_schema)) and not (decl is not None and decl.opaque):
            report.warnings.append(
                f"{t.name}: takes a free-form query ({query}); the guards cannot see which "
                'records it touches. Declare it "opaque": true so each call waits for staff.'
            )
        if decl is None:
            held = " and its calls are held for staff" if (not t.read_only and server.hold_undeclared_writes) else ""
            report.warnings.append(f"{t.name}: undeclared — usable, but its results are not harvested{held}.")
    for name in decls.tools:
        if name not in by_name:
            report.warnings.append(f"{name}: declared, but the server does not list it.")
    server.refresh_from_db(fields=["listed_tools"])
    found = offered.clashes(server, ToolServer.objects.filter(ticket_class_id=server.ticket_class_id))
    if found:
        report.warnings.append(
            offered.clash_message(server, found) + " Until then the class skips the later server's copies."
        )
    return report


def _sample_row(name: str, arguments: dict, got, by_name, decls: Domain, report: Report) -> SampleRow:
    """One sample call's line, labelled by its own outcome; warnings it raises go on the report."""
    row = SampleRow(tool=name, arguments=arguments, outcome="")
    if name not in by_name:
        row.outcome = "not called: the server does not list this tool"
        report.warnings.append(f"{name}: a sample call names a tool the server does not list.")
    elif got is None:
        row.outcome = "not called: it may write"
        report.warnings.append(f"{name}: not sample-called, because it may write.")
    elif isinstance(got, str):
        row.outcome = f"failed: {got}"
        report.warnings.append(f"{name}: the sample call failed ({got}).")
    elif not got.ok:
        row.outcome = f"error: {got.text}"
        report.warnings.append(f"{name}: the sample call returned an error ({got.text}).")
    else:
        row.outcome, row.ok = "ok", True
        decl = decls.tools.get(name)
        if decl is not None:
            report.warnings += [w for w in result_warnings(name, decl, got.data, decls) if w not in report.warnings]
    return row


def _keep_listing(server: ToolServer, listed: list[mcp_client.ListedTool]) -> None:
    """The listing just made becomes the server's last listing, so a save can see its tool names."""
    as_json = [t.as_json() for t in listed]
    if as_json != server.listed_tools:
        ToolServer.objects.filter(pk=server.pk).update(listed_tools=as_json, listed_at=timezone.now())
