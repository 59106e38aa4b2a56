"""Processing one tool call: guards, holds, running the tool, harvest and effects.

Runs inside the step's transaction (or a staff approval's), so a call's turns,
ledger harvest and effects commit or roll back with it.
"""

from __future__ import annotations

import hashlib
import json
import logging
from contextlib import contextmanager
from dataclasses import dataclass

from celery.exceptions import SoftTimeLimitExceeded
from django.db import DatabaseError, connection, transaction

import sundry.agent.tools  # noqa: F401  (registers Sundry's own tools; the domains' register at startup)
from sundry.agent import cardanswers, cardstore, handoff, holds, proposals, recordstates, remote, spending_reads
from sundry.agent.answer import known_identifiers
from sundry.agent.effects import apply_effects, plan_effects
from sundry.agent.guards import callguards as guards
from sundry.agent.guards import cards, consent, replycheck, runlimits
from sundry.agent.models import Confirmation, HeldAction
from sundry.agent.provider import callids
from sundry.agent.toolbox import Toolbox, toolbox_for
from sundry.context import services as lanes
from sundry.context.assembly import Assembled
from sundry.context.selectors import lane_snapshot
from sundry.tickets import versions
from sundry.tickets.attention import REPEATED_CALL, attention_flag
from sundry.tickets.models import Ticket, Turn
from sundry.tickets.services import turn_append
from sundry.tooling.domain import Domain, domain_for
from sundry.tooling.messages import ModelRequest, ModelResponse, ToolCall
from sundry.tooling.tools import REPLY_TOOL, Tool, ToolContext, ToolError

log = logging.getLogger("sundry.agent")


@dataclass
class StepOutcome:
    """What a step (or one call in it) leads to: stop the run, and whether it resolved the customer's ask."""

    stop: bool
    resolution: bool = False
    read_through: int | None = None  # a step's: the last turn its request showed the model
    abandoned: bool = False  # a step's: it found its run stopped or its claim gone, and wrote nothing


def idempotency_key(ticket_id: int, tool: str, arguments: dict, salt: str = "") -> str:
    """Same ticket, tool and arguments → same key, so a retried call is safe."""
    canonical = json.dumps(arguments, sort_keys=True, default=str)
    return hashlib.sha256(f"{ticket_id}|{tool}|{canonical}|{salt}".encode()).hexdigest()[:40]


def unique_call_ids(calls: list[ToolCall], request: ModelRequest) -> list[ToolCall]:
    """The calls, each with an ID no other call or result in the request (or this response) has.

    Some servers number calls per response ("call_0" every time) or send none.
    The next request pairs results to calls by ID, so a repeated one would show
    the model an older call's result as this call's. The stored turns are what
    every later request is rendered from, so renaming here is safe.
    """
    taken = {c.id for m in request.messages for c in m.tool_calls}
    taken |= {m.tool_call_id for m in request.messages if m.tool_call_id}
    out = []
    for call in calls:
        base = call.id or callids.UNNAMED
        new, n = base, 2
        while new in taken or not new:
            new, n = f"{base}{callids.UNIQUE_SEPARATOR}{n}", n + 1
        taken.add(new)
        out.append(call if new == call.id else call.model_copy(update={"id": new}))
    return out


def run_calls(
    ticket: Ticket,
    response: ModelResponse,
    assembled: Assembled,
    snapshot,
    toolbox: Toolbox | None = None,
    *,
    append=turn_append,
    hand_off: bool = True,
) -> StepOutcome:
    """The calls of one model response, in order: each guarded, then held, refused or run.
    `append`: what writes the calls' own turn, the first of the step (the step's claim check).
    `hand_off`: a stop here may tell the customer their message went to staff (`handoff`) — not when
    words written with the calls are posted after them (a step whose calls ran outside its transaction)."""
    toolbox = toolbox or toolbox_for(ticket.ticket_class)
    tool_calls = unique_call_ids(response.tool_calls, assembled.request)
    calls = [c.model_dump() for c in tool_calls]
    with transaction.atomic(savepoint=False):
        append(
            ticket=ticket,
            author=Turn.Author.AGENT,
            kind=Turn.Kind.TOOL_CALL,
            text=response.text or "",
            payload={"calls": calls, "model": response.model, "offline": response.offline},
            # The calls' turn and the step's record; each call's own result turn stamps what it writes.
            stamps=(versions.TURNS, versions.STEPS),
        )
    outcome = StepOutcome(stop=False)
    turns = snapshot.turns if snapshot is not None else []
    first: dict[str, str] = {}  # a call's tool and arguments → the first such call's ID in this response
    for call in tool_calls:
        same = json.dumps([call.name, call.arguments], sort_keys=True, default=str)
        if same in first:
            # Models sometimes emit one call twice in parallel. Running it again could only be
            # refused (a side effect is held as a repeat) or wasted, so it is answered here.
            _reject_duplicate(ticket, call, first[same])
            continue
        first[same] = call.id
        failures = runlimits.earlier_failures(turns, call.name, call.arguments)
        if failures >= runlimits.REPEAT_LIMIT - 1:
            _stop_repeat(ticket, call, failures, hand_off=hand_off)
            outcome.stop = True
            break
        if toolbox.runs_outside(call.name):
            result = process_call(ticket, call, assembled, snapshot=snapshot, toolbox=toolbox)  # its own transactions
        else:
            with transaction.atomic(savepoint=False):  # the step's transaction, or the call's own
                result = process_call(ticket, call, assembled, snapshot=snapshot, toolbox=toolbox)
        outcome.resolution |= result.resolution
        outcome.stop |= result.stop
        snapshot = None  # a call may move state (money, actions, ledger): judge the next one on fresh lanes
    return outcome


def _refusal(ticket: Ticket, call: ToolCall, guard: str, reason: str, details) -> Turn:
    """The turn the model reads for a call that was not run: which guard, why, and the call as made."""
    return turn_append(
        ticket=ticket,
        author=Turn.Author.SYSTEM,
        kind=Turn.Kind.REJECTION,
        text=reason,
        payload={
            "call_id": call.id,
            "name": call.name,
            "guard": guard,
            "reason": reason,
            "arguments": call.arguments,
            "details": details,
        },
    )


def _stop_repeat(ticket: Ticket, call: ToolCall, failures: int, *, hand_off: bool = True) -> None:
    """The same call failed before and would again: the run ends here and staff look — and the
    customer, if this leaves their message unanswered, is told a person will reply (`handoff`). In one
    transaction (the step's, or its own for calls run outside it): the line is read under the row lock
    the refusal's turn took, before the flag."""
    reason = (
        f"The same {call.name} call failed {failures} times before with these arguments; "
        "the run stopped so staff can look."
    )
    with transaction.atomic(savepoint=False):
        refused = _refusal(ticket, call, "repeat_failure", reason, {"earlier": failures})
        if hand_off:
            handoff.tell_stopped(ticket, turn_append, refused.number)
        attention_flag(ticket.pk, f"{REPEATED_CALL}: {call.name} ×{failures + 1}")


def _reject_duplicate(ticket: Ticket, call: ToolCall, original: str) -> None:
    # The earlier call is described, not named: a call's ID is Sundry's own, and a model that reads one
    # in prose copies it to the customer ("call the text-call-0-2's result"). Staff find it in details.
    reason = (
        f"This {call.name} call repeats an earlier {call.name} call of the same response, with the same "
        "arguments; it was not run again. That call's result answers it."
    )
    _refusal(ticket, call, "duplicate", reason, {"duplicate_of": original})


def _guard_input(
    ticket,
    tool: Tool,
    arguments,
    assembled: Assembled,
    approved: bool,
    toolbox: Toolbox,
    snapshot=None,
    confirmation: Confirmation | None = None,
) -> guards.GuardInput:
    # Guards judge against what *this* request showed the model, plus the
    # structured truths in state (actions, money) which are always in it. The
    # step's own snapshot serves until a call in the step changes state.
    # A class with tool servers: the IDs its tools' results and the customer's messages hold in
    # the formats its declaration files give, beside the ones assembly found.
    results, typed = toolbox.request_ids(assembled)
    snap = snapshot if snapshot is not None else lane_snapshot(ticket, with_turns=False)
    return guards.GuardInput(
        tool=tool,
        arguments=arguments,
        ledger=snap.ledger,
        recent_ids=assembled.recent_result_ids | results,
        recent_text_ids=assembled.recent_text_ids | typed,
        rules=snap.rules,
        actions=snap.actions,
        money=snap.money,
        approval_rules=toolbox.approval_rules,
        approved=approved,
        said=consent.said_from(assembled.said),
        state=consent.state_from(snap.state, toolbox.domain),
        domain=toolbox.domain,
        lookup_tools=toolbox.lookup_tools,
        internal=assembled.internal,
        # Its held calls may be of a tool server's tools.
        window=spending_reads.window_for(ticket, dict(toolbox.tools))
        if tool.side_effect and not tool.local and not approved
        else None,
        confirmed=confirmation is not None,
        overridden_rules=frozenset(
            r["id"] for r in (confirmation.card.get("rules") or []) if isinstance(r.get("id"), int)
        )
        if confirmation is not None
        else frozenset(),
        proposals=proposals.read(ticket.pk) if tool.customer_text else (),
        states=recordstates.reader(
            ticket, recordstates.referenced(snap.ledger, snap.money, snap.actions, toolbox.domain.owner_kind)
        )
        if tool.customer_text
        else None,
        today=recordstates.today,
        declared=replycheck.declared_texts(toolbox.specs) if tool.customer_text or tool.side_effect else (),
        known=frozenset(known_identifiers(assembled.request)) if tool.customer_text else None,
    )


def process_call(
    ticket: Ticket,
    call: ToolCall,
    assembled: Assembled,
    *,
    approved_hold: HeldAction | None = None,
    snapshot=None,
    confirmation: Confirmation | None = None,
    toolbox: Toolbox | None = None,
) -> StepOutcome:
    """Guard one call, then hold it, ask the customer to confirm it, refuse it or run it.
    `approved_hold`: staff approved it; `confirmation`: the customer confirmed its card;
    `toolbox`: the class's (the run's), else built here."""
    toolbox = toolbox or toolbox_for(ticket.ticket_class)
    denied = toolbox.denied
    tool = None if call.name in denied else toolbox.tool(call.name)
    if tool is None:
        names = toolbox.offered()
        # A tool the class denies is named as such: staff reading the timeline (and the model)
        # should see a configured refusal, not a tool that does not exist.
        why = (
            f"The tool '{call.name}' is not allowed on tickets of this class"
            if call.name in denied
            else f"Unknown tool '{call.name}'"
        )
        turn_append(
            ticket=ticket,
            author=Turn.Author.SYSTEM,
            kind=Turn.Kind.ERROR,
            text=f"{why}. Available tools: {', '.join(names)}.",
            payload={
                "call_id": call.id,
                "name": call.name,
                "error": "denied_tool" if call.name in denied else "unknown_tool",
                "arguments": call.arguments,
            },
        )
        return StepOutcome(stop=False)
    if toolbox.runs_outside(tool.name):
        # Guards and a hold or refusal commit first; the server is called outside any transaction.
        with transaction.atomic():
            verdict = _judge(ticket, tool, call, assembled, approved_hold, snapshot, toolbox, confirmation)
        if isinstance(verdict, StepOutcome):
            return verdict
        key = (
            approved_hold.idempotency_key
            if approved_hold
            else idempotency_key(ticket.pk, tool.name, verdict.args.model_dump(mode="json"))
        )
        return StepOutcome(stop=False, resolution=remote.run_remote(ticket, tool, call.id, verdict.args, key))
    verdict = _judge(ticket, tool, call, assembled, approved_hold, snapshot, toolbox, confirmation)
    if isinstance(verdict, StepOutcome):
        return verdict
    args = verdict.args
    key = (
        approved_hold.idempotency_key
        if approved_hold
        else idempotency_key(ticket.pk, tool.name, args.model_dump(mode="json"))
    )
    return execute(ticket, tool, call.id, args, key, domain=toolbox.class_domain)


def _judge(
    ticket: Ticket,
    tool: Tool,
    call: ToolCall,
    assembled: Assembled,
    approved_hold: HeldAction | None,
    snapshot,
    toolbox: Toolbox,
    confirmation: Confirmation | None = None,
) -> guards.GuardVerdict | StepOutcome:
    """The guards' verdict on a call; a refusal, a hold or a card is stored here and answered with its outcome."""
    if tool.side_effect and not tool.local:
        # One customer's writes one at a time across tickets: running totals and equal holds
        # are read and acted on before another ticket of theirs can move money.
        spending_reads.customer_lock(ticket.customer_id)
    inp = _guard_input(
        ticket,
        tool,
        call.arguments,
        assembled,
        approved=approved_hold is not None,
        toolbox=toolbox,
        snapshot=snapshot,
        confirmation=confirmation,
    )
    verdict = guards.check_call(inp)
    if (
        confirmation is not None
        and verdict.args is not None
        and cards.digest(tool.name, verdict.args.model_dump(mode="json")) != confirmation.digest
    ):
        # A confirmation stands for one exact call; what the guards parsed must be that call.
        verdict = guards.GuardVerdict(
            "reject",
            "confirmation",
            f"This {tool.name} call is not the one the customer confirmed; it was not run.",
            verdict.args,
        )
    if confirmation is None and approved_hold is None and verdict.decision in ("confirm", "hold"):
        # The same call as a card already answered on this ticket is no second card (nor a second hold):
        # the model reads what became of it, from the records.
        earlier = cardanswers.answered(ticket, cards.digest(tool.name, verdict.args.model_dump(mode="json")))
        if earlier is not None:
            return _answered_before(ticket, call, tool, earlier)
    if verdict.decision == "confirm":
        # A card never stands for a call staff already approved and ran (on any of the customer's tickets).
        same = holds.equal_hold(ticket.customer_id, tool, verdict.args, statuses=(HeldAction.Status.EXECUTED,))
        if same is not None:
            return _already_executed(ticket, call, tool, same, "it is not proposed again")
        card = cardstore.propose(ticket, tool, call.id, verdict, inp)
        turn_append(
            ticket=ticket,
            author=Turn.Author.TOOL,
            kind=Turn.Kind.TOOL_RESULT,
            text=json.dumps(cardstore.model_result(card), ensure_ascii=False),
            payload={
                "call_id": call.id,
                "name": tool.name,
                "ok": False,
                "confirmation": card.pk,
                "guard": verdict.guard,
            },
        )
        return StepOutcome(stop=False)
    if verdict.decision == "reject":
        _refusal(ticket, call, verdict.guard, verdict.reason, verdict.details)
        return StepOutcome(stop=False)
    args = verdict.args
    arguments = args.model_dump(mode="json")
    if verdict.decision == "hold":
        # The same call held before (on any of the customer's tickets) is not held twice: one
        # already run is refused, one still waiting is the hold this call joins.
        same = holds.equal_hold(ticket.customer_id, tool, args, statuses=holds.LIVE)
        if same is not None and same.status == HeldAction.Status.EXECUTED:
            return _already_executed(ticket, call, tool, same, "it is not held or run again")
        reason = verdict.reason
        if same is not None:
            held = same
            reason = (
                f"The same {tool.name} call is already awaiting staff approval (hold #{same.pk}"
                f"{'' if same.ticket_id == ticket.pk else f' on ticket #{same.ticket_id}'}); "
                "it was not held a second time. Do not retry it; tell the customer it is with staff."
            )
        else:
            # The same held call proposed again maps to the same held row.
            key = idempotency_key(ticket.pk, tool.name, arguments, salt="held")
            held, _ = HeldAction.objects.get_or_create(
                idempotency_key=key,
                defaults=dict(
                    ticket=ticket,
                    tool=tool.name,
                    arguments=arguments,
                    call_id=call.id,
                    reason=_fit(verdict.reason, HeldAction._meta.get_field("reason").max_length),
                    turn=ticket.last_turn_number,
                ),
            )
        turn_append(
            ticket=ticket,
            author=Turn.Author.TOOL,
            kind=Turn.Kind.TOOL_RESULT,
            text=json.dumps({"held_for_staff_approval": True, "reason": reason}),
            payload={"call_id": call.id, "name": tool.name, "ok": False, "held": held.pk, "guard": verdict.guard},
        )
        if verdict.guard == "internal_text":
            attention_flag(ticket.pk, f"Reply held for staff: internal_text ({tool.name})")
        # The agent goes on (it tells the customer); staff decide in the desk.
        return StepOutcome(stop=False)
    return verdict


def _fit(reason: str, limit: int) -> str:
    """The reason staff read on the hold, cut after a whole sentence when it is longer than the column."""
    if len(reason) <= limit:
        return reason
    cut = reason.rfind(". ", 0, limit)
    return reason[: cut + 1] if cut > 0 else reason[: limit - 1] + "…"


@contextmanager
def _undone_if_it_fails():
    """The tool's writes, rolled back to a savepoint if it fails (or leaves its transaction to roll back).

    Inside a transaction (the step's, a staff decision's) the savepoint is not released when the
    tool succeeds: the transaction's COMMIT releases it, one round trip fewer a call than
    `atomic()`'s RELEASE. Outside one, the tool gets a transaction of its own."""
    if not connection.in_atomic_block:
        with transaction.atomic():
            yield
        return
    sid = transaction.savepoint()
    try:
        yield
    except BaseException:
        _back_to(sid)
        raise
    if transaction.get_rollback():  # a failure inside it was caught there: its writes go, as atomic() does
        _back_to(sid)


def _back_to(sid) -> None:
    transaction.set_rollback(False)
    try:
        transaction.savepoint_rollback(sid)
    except DatabaseError:  # the connection failed: the whole transaction rolls back (as atomic() leaves it)
        transaction.set_rollback(True)


def execute(ticket: Ticket, tool: Tool, call_id: str, args, key: str, domain: Domain | None = None) -> StepOutcome:
    """Run an allowed in-process tool; store its result; harvest IDs and state (by `domain`, else the
    class's). Nothing half-applied."""
    domain = domain or domain_for(ticket.ticket_class)
    turn_no = ticket.last_turn_number + 1
    ctx = ToolContext(ticket_id=ticket.pk, customer_id=ticket.customer.external_key, turn=turn_no, idempotency_key=key)
    try:
        with _undone_if_it_fails():
            raw = tool.run(ctx, args)
            result = tool.result_model.model_validate(raw.model_dump() if hasattr(raw, "model_dump") else raw)
    except ToolError as exc:
        turn_append(
            ticket=ticket,
            author=Turn.Author.TOOL,
            kind=Turn.Kind.TOOL_RESULT,
            text=f"ERROR: {exc}",
            payload={"call_id": call_id, "name": tool.name, "ok": False, "error": str(exc)},
        )
        return StepOutcome(stop=False)
    except SoftTimeLimitExceeded:
        raise  # the task's time is up: the run ends and the task records it, not the tool
    except Exception as exc:  # a result that fails its schema, or a tool bug: quarantined, never harvested
        log.exception("tool %s failed", tool.name)
        turn_append(
            ticket=ticket,
            author=Turn.Author.SYSTEM,
            kind=Turn.Kind.ERROR,
            text=f"The {tool.name} tool failed ({type(exc).__name__}); its result was not used.",
            payload={"call_id": call_id, "name": tool.name, "error": str(exc)[:500], "quarantined": True},
        )
        return StepOutcome(stop=False)

    payload_result = result.model_dump(mode="json")
    # The result's turn stamps what rides on it: the harvest's ledger rows and the money lane when
    # the result reports figures or moves money (the action recorded bumps on its own).
    plan = plan_effects(tool, args, result, domain)
    stamps = (versions.TURNS, versions.STEPS, versions.LEDGER)
    if plan.totals or plan.unreported:
        stamps += (versions.MONEY,)
    with transaction.atomic(savepoint=False):  # the step's transaction, when there is one
        turn = turn_append(
            stamps=stamps,
            ticket=ticket,
            author=Turn.Author.TOOL,
            kind=Turn.Kind.TOOL_RESULT,
            text=json.dumps(payload_result, ensure_ascii=False),
            payload={
                "call_id": call_id,
                "name": tool.name,
                "ok": True,
                "result": payload_result,
                "idempotency_key": key if tool.side_effect else "",
            },
        )
        # The IDs this call used count as used when the harvest's eviction picks what
        # leaves the window (the harness replays the same order).
        lanes.ledger_harvest(
            ticket=ticket,
            turn=turn.number,
            tool_name=tool.name,
            result=result,
            used=[v for _, _, v in guards.ids_in_arguments(tool, args)],
            domain=domain,
            arguments=args.model_dump(mode="json"),
            bumped=True,  # the result's turn just above moved the version for both
        )
        apply_effects(ticket=ticket, tool=tool, args=args, result=result, turn=turn.number, key=key, domain=domain)
    if tool.name == REPLY_TOOL:
        turn_append(
            ticket=ticket,
            author=Turn.Author.AGENT,
            kind=Turn.Kind.MESSAGE,
            text=args.message,
            payload={"via": REPLY_TOOL},
        )
        return StepOutcome(stop=True, resolution=True)
    return StepOutcome(stop=False, resolution=tool.resolves)


def _already_executed(ticket: Ticket, call: ToolCall, tool, same: HeldAction, what: str) -> StepOutcome:
    """Refuse a call staff already approved and ran (hold `same`, on any of the customer's tickets)."""
    reason = (
        f"The same {tool.name} call was already approved and executed (hold #{same.pk} on ticket "
        f"#{same.ticket_id}); {what}. Tell the customer it was done."
    )
    _refusal(ticket, call, "repeat", reason, {"held": same.pk, "ticket": same.ticket_id})
    return StepOutcome(stop=False)


def _answered_before(ticket: Ticket, call: ToolCall, tool: Tool, earlier: cardanswers.Answered) -> StepOutcome:
    """The result of a call equal to a card already answered: not run, not proposed again, and why."""
    turn_append(
        ticket=ticket,
        author=Turn.Author.TOOL,
        kind=Turn.Kind.TOOL_RESULT,
        text=json.dumps(earlier.result(), ensure_ascii=False),
        payload={
            "call_id": call.id,
            "name": tool.name,
            "ok": False,
            "confirmation": earlier.card.pk,  # the card whose answer this is (read as neither failed nor ran)
            "answered": earlier.state,
            "hold": earlier.hold.pk if earlier.hold is not None else None,
            "guard": "answered",
        },
    )
    return StepOutcome(stop=False)
