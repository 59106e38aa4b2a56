"""Tool calls to a ticket class's tool servers: what the guards learn from them, and the call itself.

A remote call runs outside any database transaction and row lock: the guards
decide (and a hold or refusal commits) first, then the server is called with
the tool's timeout, then its result, harvest and effects commit together. A
server that fails or does not answer in time gives the model an error result
and the ticket an attention flag; the step goes on.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from dataclasses import dataclass

from django.conf import settings
from django.db import transaction

from sundry.agent.effects import apply_effects
from sundry.agent.guards.callguards import ids_in_arguments, write_targets
from sundry.context import services as lanes
from sundry.context.assembly import Assembled
from sundry.tickets.attention import attention_clear, attention_flag
from sundry.tickets.models import Ticket, Turn
from sundry.tickets.services import turn_append
from sundry.tooling import mcp_client
from sundry.tooling.domain import Domain, domain_for
from sundry.tooling.messages import ToolCall
from sundry.tooling.tools import REGISTRY, Tool
from sundry.toolservers import catalog
from sundry.toolservers.catalog import ClassTools, RemoteTool
from sundry.toolservers.models import ToolServer

log = logging.getLogger("sundry.toolservers")

FLAG_PREFIX = "Tool server"


class InTransaction(RuntimeError):
    """A remote call was about to run inside a database transaction."""


_UNREAD = object()


def class_tools(ticket: Ticket) -> ClassTools | None:
    """The ticket's class's tools, read once per loaded ticket (a run's): a step asks several times."""
    tools = ticket.__dict__.get("_sundry_class_tools", _UNREAD)
    if tools is _UNREAD:
        tools = ticket.__dict__["_sundry_class_tools"] = catalog.class_tools(ticket.ticket_class)
    return tools


def known_without_servers(ticket: Ticket) -> None:
    """The loader read that the ticket's class has no enabled tool server (`loop._load`): no
    read per run for servers that are not there."""
    ticket.__dict__["_sundry_class_tools"] = None


def tool_specs(ticket: Ticket) -> list[dict] | None:
    """The tools a class with servers offers the model; None for a class without (the registry's)."""
    tools = class_tools(ticket)
    return tools.spec_list if tools is not None else None


def with_server_prompts(snapshot, ticket: Ticket):
    """The lanes with the servers' declaration prompts (how to work their tools) before the class's policy."""
    tools = class_tools(ticket)
    prompts = [d.prompt.strip() for d in (tools.declarations if tools is not None else []) if d.prompt.strip()]
    if not prompts:
        return snapshot
    return dataclasses.replace(snapshot, class_policy="\n\n".join([*prompts, snapshot.class_policy or ""]).strip())


def tool_named(ticket: Ticket, name: str) -> Tool | None:
    tools = class_tools(ticket)
    return tools.tools.get(name) if tools is not None else REGISTRY.get(name)


def tool_names(ticket: Ticket) -> list[str]:
    tools = class_tools(ticket)
    return sorted(tools.tools if tools is not None else REGISTRY)


def has_remote_calls(ticket: Ticket, calls: list[ToolCall]) -> bool:
    tools = class_tools(ticket)
    return tools is not None and any(c.name in tools.remote for c in calls)


def is_remote(tool: Tool | None) -> bool:
    return isinstance(tool, RemoteTool)


# --- what the guards learn from the class's declarations --------------------------------------


@dataclass(frozen=True)
class GuardExtras:
    lookup_tools: frozenset[str] = frozenset()
    recent_ids: frozenset[str] = frozenset()
    typed_ids: frozenset[str] = frozenset()
    approval_rules: dict | None = None
    # The declarations of the class's tools (done actions' included), for the guards.
    domain: Domain | None = None


def guard_extras(ticket: Ticket, assembled: Assembled) -> GuardExtras | None:
    """For a class with servers: its lookups, the IDs its tools' results in this request hold (read by
    the declaration files), the IDs the customer typed in its formats, the holds for undeclared writes,
    and its tools' declarations."""
    tools = class_tools(ticket)
    if tools is None:
        return None
    results = set()
    for m in assembled.request.messages:
        if m.role == "tool" and m.tool_name in tools.remote and not m.content.startswith("ERROR"):
            try:
                data = json.loads(m.content)
            except ValueError:
                data = m.content
            results.update(v for _k, v in tools.result_ids(m.tool_name, data))
    typed = {v for _author, _turn, text in assembled.said for _k, v in tools.typed_ids(text)}
    holds = tools.approval_holds(
        {
            s.pk: s.hold_undeclared_writes
            for s in ToolServer.objects.filter(pk__in={t.server_id for t in tools.remote.values()})
        }
    )
    rules = {**holds, **(ticket.ticket_class.approval_rules or {})}
    return GuardExtras(
        lookup_tools=tools.lookup_tools,
        recent_ids=frozenset(results),
        typed_ids=frozenset(typed),
        approval_rules=rules,
        domain=tools.domain,
    )


def typed_ids(ticket: Ticket, text: str) -> list[tuple[str, str]]:
    """(value, kind) of IDs a person typed in the formats of the class's declaration files."""
    return [(v, k) for k, v in catalog.typed_ids(ticket.ticket_class, text)]


def tools_domain(ticket: Ticket) -> Domain:
    """What each of the class's tools is: its servers' declarations as loaded for this run (no file is
    read again), else the class's own domain."""
    tools = class_tools(ticket)
    return tools.domain if tools is not None else domain_for(ticket.ticket_class)


def rules_domain(ticket: Ticket) -> Domain | None:
    """For a class with servers: the tools its declaration files declare, which a rule stated in a
    message is mapped onto (None: the class's own domain)."""
    return catalog.declared_domain(ticket.ticket_class)


# --- the call ----------------------------------------------------------------------------------


def bounded(result: mcp_client.CallResult, limit: int) -> tuple[mcp_client.CallResult, dict | None]:
    """The result as kept: whole when its text fits in `limit` bytes; otherwise its first `limit` bytes
    and a notice saying so (and its data no longer the parsed whole: a cut result is not harvested)."""
    raw = (result.text or "").encode()
    if len(raw) <= limit:
        return result, None
    shown = raw[:limit].decode("utf-8", "ignore")
    text = (
        f"{shown}\n[Sundry: this result was cut at {limit:,} of {len(raw):,} bytes (about {len(raw) // 4:,} "
        "tokens). The rest was not shown, and nothing in this result counts as looked up: ask for less — "
        "a narrower lookup, one record at a time.]"
    )
    return mcp_client.CallResult(ok=result.ok, text=text, data=text), {"shown_bytes": limit, "total_bytes": len(raw)}


def run_remote(ticket: Ticket, tool: RemoteTool, call_id: str, args, key: str) -> bool:
    """Call the server, then store the result, harvest and effects in one transaction. Returns whether
    the call resolved something (a write that succeeded)."""
    if transaction.get_connection().in_atomic_block:
        raise InTransaction(f"{tool.name} is a remote tool: it must be called outside database transactions")
    arguments = args.model_dump(mode="json")
    base = {"call_id": call_id, "name": tool.name, "server": tool.server_name}
    if not tool.declared:
        base["undeclared"] = True
    try:
        result = mcp_client.connection(tool.connect).call(tool.name, arguments, tool.timeout, tool.output_schema)
    except mcp_client.ToolServerError as exc:
        log.warning("tool server %s: %s failed: %s", tool.server_name, tool.name, exc)
        with transaction.atomic():
            turn_append(
                ticket=ticket,
                author=Turn.Author.TOOL,
                kind=Turn.Kind.TOOL_RESULT,
                text=f"ERROR: the {tool.server_name} tool server failed ({exc}). The call may not have run; "
                "do not assume it did. Tell the customer it is being looked into.",
                payload={**base, "ok": False, "error": str(exc), "server_failed": True},
            )
            attention_flag(ticket.pk, f"{FLAG_PREFIX} {tool.server_name} failed on {tool.name}: {exc}")
        return False
    result, cut = bounded(result, settings.TOOL_RESULT_MAX_BYTES)
    if cut:
        base["truncated"] = cut
    with transaction.atomic():
        if not result.ok:  # the tool refused (an order that is not pending …): the model reads why
            turn_append(
                ticket=ticket,
                author=Turn.Author.TOOL,
                kind=Turn.Kind.TOOL_RESULT,
                text=f"ERROR: {result.text}",
                payload={**base, "ok": False, "error": result.text},
            )
            return False
        turn = turn_append(
            ticket=ticket,
            author=Turn.Author.TOOL,
            kind=Turn.Kind.TOOL_RESULT,
            text=result.text,
            payload={**base, "ok": True, "idempotency_key": key if tool.side_effect else ""},
        )
        used = [v for _, _, v in ids_in_arguments(tool, args)]
        if tool.declared and not cut:  # an undeclared tool's result, or a cut one, is shown, never harvested
            decls, decl = tool.declarations, tool.decl
            found = [(v, k) for _p, k, v in decl.ids(result.data, kind_of=decls.kind_of)]
            found += decls.looked_up(tool.name, arguments, result.data)  # what it answered about
            lanes.ledger_harvest_found(
                ticket=ticket,
                turn=turn.number,
                tool_name=tool.name,
                found=list(dict.fromkeys(found)),
                used=used,
                owners=decl.owners(result.data, owner_kind=decls.owner_kind),
                descriptions=decl.descriptions(result.data, owner_kind=decls.owner_kind),
            )
            owner, owned, identified = decls.ownership(tool.name, result.data, found)  # whose records these are
            if owned or identified:
                lanes.ledger_mark_customer(ticket=ticket, values=owned, customer=owner, identifies=identified)
            # The order figures it reports go to the money lane; a write's action carries the money it
            # moved (a cancellation's refund), read by the declaration file as for in-process tools.
            apply_effects(
                ticket=ticket, tool=tool, args=args, result=result.data, turn=turn.number, key=key, domain=decls
            )
        else:
            lanes.ledger_touch(ticket=ticket, values=used, turn=turn.number)
            if tool.side_effect:
                lanes.action_record(
                    ticket=ticket,
                    tool=tool.name,
                    target=",".join(sorted(write_targets(tool, args, arguments))),
                    arguments=arguments,
                    result=result.data if isinstance(result.data, dict) else {"result": result.data},
                    turn=turn.number,
                    idempotency_key=key,
                    reversible=tool.reversible,
                )
        attention_clear(ticket.pk, f"{FLAG_PREFIX} {tool.server_name} ")  # the server answers again
    return bool(tool.resolves)
