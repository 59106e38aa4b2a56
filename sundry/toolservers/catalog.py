"""A ticket class's tools when it has tool servers: listed from each server at class load, read by its
declaration file.

`class_tools(ticket_class)` is None for a class without servers (it works with
the in-process tools as before). Otherwise it holds what the model may call —
Sundry's own lane tools and every tool the servers list — each remote one a
`RemoteTool` whose guard-facing facts (ID arguments, write, target, repeat key,
consent) come from the declaration file. A tool the file does not declare is
usable but undeclared: nothing in its results is harvested, and a call that may
write is held for staff unless the server's settings say otherwise.

A process lists a class's tools once and again when a server's settings change
or `RELIST_SECONDS` pass; a server that cannot be reached keeps its last listing,
so its tools stay visible and their calls fail with an error the model reads.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, ClassVar

from django.utils import timezone
from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError
from pydantic import BaseModel, ConfigDict, create_model, model_serializer, model_validator

from sundry.tooling import mcp_client
from sundry.tooling.domain import INFER, Domain, ToolDecl, domain_for
from sundry.tooling.tools import REGISTRY, IdField, Tool, ToolContext, ToolError
from sundry.toolservers import declfile, limits, offered
from sundry.toolservers.models import ToolServer

log = logging.getLogger("sundry.toolservers")

RELIST_SECONDS = 600.0


# --- a remote tool as the guards see it -------------------------------------------------


class RemoteArgs(BaseModel):
    """A remote tool's arguments: checked against the server's JSON Schema, kept as sent.

    ID arguments the declaration names are fields marked with `IdField`, so the
    ID guard checks them; every other argument passes through untouched."""

    model_config = ConfigDict(extra="allow")
    json_schema: ClassVar[dict] = {}

    @model_validator(mode="before")
    @classmethod
    def _matches_schema(cls, data: Any) -> Any:
        if isinstance(data, dict) and cls.json_schema:
            try:
                errors = sorted(Draft202012Validator(cls.json_schema).iter_errors(data), key=lambda e: list(e.path))
            except SchemaError:
                errors = []  # the server's schema is its own business; the server checks again
            if errors:
                raise ValueError(
                    "; ".join(f"{'.'.join(str(p) for p in e.path) or '(arguments)'}: {e.message}" for e in errors[:5])
                )
        return data

    @model_serializer(mode="wrap")
    def _as_given(self, handler):
        # Only what the call gave: an ID field the call left out is not sent as null.
        data = handler(self)
        return {k: v for k, v in data.items() if k in self.model_fields_set or k in (self.model_extra or {})}


def _unavailable(ctx: ToolContext, args) -> BaseModel:
    raise ToolError("a remote tool runs through its server, not in process")


@dataclass
class RemoteTool(Tool):
    """A tool a server listed. `run` is never called: the agent calls the server outside any transaction."""

    server_id: int = 0
    server_name: str = ""
    connect: mcp_client.ServerSpec | None = None  # how to reach its server
    decl: ToolDecl | None = None
    declarations: Domain | None = None
    input_schema: dict = field(default_factory=dict)
    output_schema: dict | None = None
    timeout: float = 15.0
    read_only: bool = False

    @property
    def declared(self) -> bool:
        return bool(self.decl and self.decl.declared)

    def spec(self, domain=None) -> dict:  # what the model sees: the server's own schema, in every domain
        return {"name": self.name, "description": self.description, "parameters": self.input_schema}


def _arg_field(path: str) -> str | None:
    """The top-level argument a declared path names (`order_id`, `item_ids[]`); None for deeper paths."""
    name = path[:-2] if path.endswith("[]") else path
    return name if name and "." not in name and "[" not in name else None


def remote_tool(
    server: ToolServer, spec: mcp_client.ServerSpec, listed: mcp_client.ListedTool, decls: Domain
) -> RemoteTool:
    decl = decls.tools.get(listed.name) or declfile.undeclared(
        listed.name, listed.input_schema, read_only=listed.read_only
    )
    fields = {}
    for path, kind in decl.args.items():
        name = _arg_field(path)
        if name:
            fields[name] = (Any, IdField(kind if kind != INFER else "id", default=None))
    args_model = create_model(f"{listed.name}_args", __base__=RemoteArgs, **fields)
    args_model.json_schema = listed.input_schema or {}
    write = decl.write
    return RemoteTool(
        name=listed.name,
        description=listed.description or decl.description or listed.name.replace("_", " "),
        args_model=args_model,
        result_model=BaseModel,
        run=_unavailable,
        side_effect=write,
        resolves=decl.completes,
        target_arg=_arg_field(decl.target) if decl.target else None,
        repeat_key=tuple(decl.repeat_key),
        reversible=decl.reversible,
        consent_action=decl.consent,
        server_id=server.pk,
        server_name=server.name,
        connect=spec,
        decl=decl,
        declarations=decls,
        input_schema=listed.input_schema,
        output_schema=listed.output_schema,
        timeout=server.timeout_seconds,
        read_only=listed.read_only,
    )


# --- reaching a server ------------------------------------------------------------------------


def server_spec(server: ToolServer) -> mcp_client.ServerSpec:
    """How to reach `server`, with its secrets read from the environment now (never from the database).

    A server outside the deployment's limits (a row written past the admin's checks, or limits
    narrowed since) gets a spec marked `refused`, holding no value from the environment: connecting
    to it raises `ToolServerError` with the reason, and nothing is started or contacted."""
    refused = limits.server_refusal(server)
    if refused:
        return mcp_client.ServerSpec(
            name=server.name,
            refused=refused,
            **({"url": server.url} if server.transport == ToolServer.Transport.HTTP else {"command": server.command}),
        )
    cwd = limits.working_dir(server.working_dir)
    if server.transport == ToolServer.Transport.HTTP:
        # A header whose variable is unset is left out, never sent empty ("Authorization: ").
        headers = tuple(
            (h, os.environ[var]) for h, var in sorted((server.header_env or {}).items()) if os.environ.get(var)
        )
        return mcp_client.ServerSpec(
            name=server.name, url=server.url, headers=headers, connect_timeout=server.connect_timeout
        )
    env = tuple((n, os.environ[n]) for n in server.env_name_list() if n in os.environ)
    return mcp_client.ServerSpec(
        name=server.name, command=server.command, cwd=cwd, env=env, connect_timeout=server.connect_timeout
    )


def declarations(server: ToolServer) -> Domain:
    """The server's declaration file, validated; an empty one when the server names none. A path outside
    the deployment's declarations folder raises `DeclarationError` before anything there is opened."""
    if not server.declaration_path:
        return Domain(name=server.name)
    return declfile.load(limits.declaration_file(server.declaration_path), shown=server.declaration_path)


def list_server(server: ToolServer, spec: mcp_client.ServerSpec) -> list[mcp_client.ListedTool]:
    """The server's tools, listed now and kept on its row; its last listing when it cannot be reached."""
    try:
        listed = mcp_client.connection(spec).list_tools(server.timeout_seconds)
    except mcp_client.ToolServerError as exc:
        log.warning("tool server %s: could not list tools (%s); using its last listing", server.name, exc)
        return [mcp_client.ListedTool.from_json(t) for t in server.listed_tools or []]
    as_json = [t.as_json() for t in listed]
    if as_json != server.listed_tools:
        ToolServer.objects.filter(pk=server.pk).update(listed_tools=as_json, listed_at=timezone.now())
    return listed


# --- a class's tools ----------------------------------------------------------------------------


@dataclass
class ClassTools:
    tools: dict[str, Tool]  # everything the model may call, Sundry's lane tools first
    remote: dict[str, RemoteTool]
    declarations: list[Domain]  # one per server: its file's, or an empty one where it names none or fails
    problems: list[str] = field(default_factory=list)
    files: list[Domain] = field(default_factory=list)  # the declaration files that loaded
    key: tuple = ()
    loaded_at: float = 0.0
    # The class's own domain: Sundry's lane tools name its state fields (`record_fact`).
    fields_domain: Domain | None = None

    @cached_property
    def spec_list(self) -> list[dict]:
        """The tools as the model sees them; one list per listing, so assembly counts its tokens once."""
        return [t.spec(self.fields_domain) for t in self.tools.values()]

    @property
    def lookup_tools(self) -> frozenset[str]:
        return frozenset(n for n, t in self.remote.items() if t.decl and t.decl.lookup)

    @cached_property
    def domain(self) -> Domain:
        """The class's remote tools as one domain, for code that asks what a tool is: the guards read
        a done action's consent, a call's refund declaration and the lookup to name for an ID here,
        not in the class's in-process domain (which does not hold these tools)."""
        return _merged(self.declarations, {n: t.decl for n, t in self.remote.items() if t.decl is not None})

    @cached_property
    def declared(self) -> Domain:
        """The tools the class's declaration files declare, as one domain: what a rule stated in a
        message is mapped onto (a declared tool no server lists counts too)."""
        tools: dict[str, ToolDecl] = {}
        for d in self.files:
            for name, decl in d.tools.items():
                tools.setdefault(name, decl)
        return _merged(self.files, tools)

    def approval_holds(self, hold_undeclared: dict[int, bool]) -> dict[str, dict]:
        """Approval rules the class's undeclared writes add: every call held."""
        return {
            n: {}
            for n, t in self.remote.items()
            if not t.declared and t.side_effect and hold_undeclared.get(t.server_id, True)
        }

    def typed_ids(self, text: str) -> list[tuple[str, str]]:
        return _typed(self.files, text)

    def result_ids(self, name: str, data: Any) -> list[tuple[str, str]]:
        """(kind, value) a declared tool's result holds; nothing for an undeclared tool."""
        tool = self.remote.get(name)
        if tool is None or not tool.declared:
            return []
        return [(kind, v) for _path, kind, v in tool.decl.ids(data, kind_of=tool.declarations.kind_of)]


def _merged(decls: list[Domain], tools: dict[str, ToolDecl]) -> Domain:
    """One domain of `tools` with the declaration files' ID formats, ID nouns and lookup hints (the first
    file's name and owner kind)."""
    hints: dict[str, list[str]] = {}
    patterns: dict[str, str] = {}
    nouns: dict[str, list[str]] = {}
    for d in decls:
        for kind, words in d.id_nouns.items():
            nouns[kind] = list(dict.fromkeys([*nouns.get(kind, []), *words]))
        for kind, names in d.lookup_hints.items():
            hints.setdefault(kind, [])
            hints[kind] += [n for n in names if n in tools and n not in hints[kind]]
        for kind, pattern in d.id_patterns.items():
            patterns.setdefault(kind, pattern)
    first = decls[0] if decls else None
    customer_kind = next((d.customer_kind for d in decls if d.customer_kind), "")
    owns = list(
        dict.fromkeys(k for d in decls for k in (d.customer_owns or ([d.owner_kind] if d.customer_kind else [])))
    )
    return Domain(
        name=first.name if first else "tool servers",
        owner_kind=first.owner_kind if first else "order",
        customer_kind=customer_kind,
        customer_owns=owns,
        id_patterns=patterns,
        # Only kinds this class's tools or formats know: a file's nouns for a tool the server no longer lists drop.
        id_nouns={
            k: v
            for k, v in nouns.items()
            if k in patterns or any(k in (*t.args.values(), *t.results.values()) for t in tools.values())
        },
        lookup_hints={k: v for k, v in hints.items() if v},
        tools=tools,
    )


def _typed(decls: list[Domain], text: str) -> list[tuple[str, str]]:
    out: dict[str, str] = {}
    for d in decls:
        for kind, value in d.typed_ids(text):
            out.setdefault(value, kind)
    return [(k, v) for v, k in out.items()]


_CACHE: dict[int, ClassTools] = {}
_LOCK = threading.Lock()


def _servers(ticket_class) -> list[ToolServer]:
    return list(ToolServer.objects.filter(ticket_class_id=ticket_class.pk, enabled=True).order_by("pk"))


def class_tools(ticket_class, *, servers: list[ToolServer] | None = None) -> ClassTools | None:
    """The class's tools (None: it has no tool servers), listed from its servers at class load."""
    servers = _servers(ticket_class) if servers is None else servers
    if not servers:
        return None
    # An edited declaration file counts as a change, as a saved server does: the next step reads it;
    # so does another domain for the class, whose state fields the lane tools name.
    own = domain_for(ticket_class)
    key = (os.getpid(), tuple((s.pk, s.updated_at, _file_stamp(s)) for s in servers))
    with _LOCK:
        hit = _CACHE.get(ticket_class.pk)
        fresh = hit is not None and hit.key == key and hit.fields_domain is own
        if fresh and time.monotonic() - hit.loaded_at < RELIST_SECONDS:
            return hit
    loaded = _load(servers)
    loaded.key, loaded.loaded_at, loaded.fields_domain = key, time.monotonic(), own
    with _LOCK:
        _CACHE[ticket_class.pk] = loaded
    return loaded


def _file_stamp(server: ToolServer) -> tuple | None:
    """The declaration file's modification time and size (None: no file, or not one we may read)."""
    if not server.declaration_path:
        return None
    try:
        st = os.stat(limits.declaration_file(server.declaration_path))
    except (OSError, declfile.DeclarationError):
        return None
    return (st.st_mtime_ns, st.st_size)


def forget(ticket_class_id: int | None = None) -> None:
    """Drop the cached listing (a server's settings changed, or a test)."""
    with _LOCK:
        if ticket_class_id is None:
            _CACHE.clear()
        else:
            _CACHE.pop(ticket_class_id, None)


def _load(servers: list[ToolServer]) -> ClassTools:
    own = {n: t for n, t in REGISTRY.items() if t.local}  # Sundry's lane tools: rules, labels, follow-ups
    tools: dict[str, Tool] = dict(own)
    remote: dict[str, RemoteTool] = {}
    decls, files, problems = [], [], []
    for server in servers:
        try:
            d = declarations(server)
            files.append(d)
        except declfile.DeclarationError as exc:
            problems.append(f"{server.name}: {str(exc).rstrip('.')}; its tools are undeclared")
            log.error("tool server %s: %s", server.name, exc)
            d = Domain(name=server.name)
        decls.append(d)
        spec = server_spec(server)
        for listed in list_server(server, spec):
            if not offered.offers(server, listed.name):
                continue  # the server's allow or deny list leaves it out: never offered, a call is refused
            if listed.name in tools:  # the admin refuses such a save; a row written another way still loads
                problems.append(f"{server.name}: {listed.name} is already a tool of this class; skipped")
                continue
            tool = remote_tool(server, spec, listed, d)
            tools[listed.name] = remote[listed.name] = tool
    return ClassTools(tools=tools, remote=remote, declarations=decls, problems=problems, files=files)


def declared_only(servers: list[ToolServer]) -> ClassTools:
    """The servers' declaration files alone, no server contacted and nothing listed: for what a message
    does at once (the IDs it types, the rules it states) and what the desk shows of a result. Its
    `tools` are Sundry's own lane tools only."""
    files = []
    for server in servers:
        try:
            files.append(declarations(server))
        except declfile.DeclarationError:
            continue
    own = {n: t for n, t in REGISTRY.items() if t.local}
    return ClassTools(tools=own, remote={}, declarations=files, files=files)


def declared_domain(ticket_class) -> Domain | None:
    """The tools the class's declaration files declare, as one domain (None: the class has no servers)."""
    servers = _servers(ticket_class)
    return declared_only(servers).declared if servers else None
