"""A call to a ticket class's tool server, outside any transaction, and what its result commits.

A remote call runs outside any database transaction and row lock: the guards
decide (and a hold or refusal commits) first, then the server is called with
the tool's timeout, then its result, harvest and effects commit together. A
server that fails or does not answer in time gives the model an error result
and the ticket an attention flag; the step goes on.
"""

from __future__ import annotations

import logging

from django.conf import settings
from django.db import transaction

from sundry.agent.effects import apply_effects
from sundry.agent.guards.callguards import ids_in_arguments, write_targets
from sundry.context import services as lanes
from sundry.tickets.attention import attention_clear, attention_flag
from sundry.tickets.models import Ticket, Turn
from sundry.tickets.services import turn_append
from sundry.tooling import mcp_client
from sundry.toolservers.catalog import RemoteTool

log = logging.getLogger("sundry.toolservers")

FLAG_PREFIX = "Tool server"


class InTransaction(RuntimeError):
    """A remote call was about to run inside a database transaction."""


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
                bumped=True,  # the result's turn just above moved the version for both
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
