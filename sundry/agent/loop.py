"""The agent's step loop: assemble → model → guards → tools → harvest → repeat.

Runs off the request path (a Celery task, or the in-process executor in the
embedded default). One run per ticket at a time; every outcome — reply, tool
result, guard rejection, model failure — is a turn staff can see.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import logging
import time
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from sundry.agent import answer, guards, replycheck, runlimits
from sundry.agent.gateway import Gateway
from sundry.agent.models import AgentStep, HeldAction
from sundry.agent.schemas import ModelRequest, ModelResponse, ToolCall
from sundry.agent.tools.base import REGISTRY
import sundry.agent.tools  # noqa: F401  (registers the shop tools)
from sundry.context import tools as _lane_tools  # noqa: F401  (registers pin_constraint, label_entity)
from sundry.agent.tools.base import Tool, ToolContext, ToolError
from sundry.context.assembly import Assembled, assemble
from sundry.context.lanes import LaneSnapshot, TurnData
from sundry.context.selectors import lane_snapshot, snapshot_from, snapshot_read_by_id
from sundry.context import services as lanes
from sundry.core import sql
from sundry.live import events
from sundry.shop.models import Customer
from sundry.tickets.models import Ticket, TicketClass, Turn
from sundry.tickets.services import TurnAppend, turn_append
from sundry.tickets.versions import version_statement

log = logging.getLogger("sundry.agent")

MAX_STEPS_PER_RUN = settings.AGENT_MAX_STEPS_PER_RUN
# See settings.AGENT_CLAIM_TTL_SECONDS: renewed at every step, so it bounds one step, not a run.
CLAIM_TTL = timedelta(seconds=settings.AGENT_CLAIM_TTL_SECONDS)
# Called with a `Resolved` after a resolution step commits; the compaction
# trigger subscribes here.
resolution_listeners: list = []


@dataclass(frozen=True)
class Resolved:
    """What a resolution step tells its listeners, so they need not read it back."""

    ticket_id: int
    step_id: int
    outcome: str
    request_tokens: int  # the step's own request
    trigger_tokens: int  # the ticket class's compaction trigger
    first_turn: int  # the turns the step appended
    last_turn: int
    version: int  # the ticket's version once the step committed
    # The lanes exactly as the next step would read them, when the step knows them:
    # a plain reply on lanes nobody else changed meanwhile (the version says so).
    next_lanes: LaneSnapshot | None = None
    # The ticket as the run loaded it: listeners read only its class and customer from
    # it (what moves — version, attention — they read afresh).
    ticket: Ticket | None = None


_SPECS: tuple[int, list[dict]] = (0, [])


def tool_specs() -> list[dict]:
    """The tools' JSON schemas, built once: the registry only grows at import."""
    global _SPECS
    if _SPECS[0] != len(REGISTRY):
        _SPECS = (len(REGISTRY), [tool.spec() for tool in REGISTRY.values()])
    return _SPECS[1]


# --- one run per ticket ----------------------------------------------------------------
# A run's bookkeeping runs around every message, so it is plain SQL (`sundry.core.sql`)
# in as few round trips as it can: claim + load + "is there input to answer?" in one
# (`_open`), each step's claim renewal with its record, the release with the look for
# input that came meanwhile.


@functools.lru_cache(maxsize=4)
def _statements(vendor: str) -> dict[str, str]:
    t, c = sql.table(Ticket), functools.partial(sql.column, Ticket)
    tn = functools.partial(sql.column, Turn)
    replies = (f"SELECT MAX({tn('number')}) FROM {sql.table(Turn)} WHERE {tn('ticket')} = %s"
               f" AND {tn('kind')} = %s AND {tn('author')} IN (%s, %s)")
    # Input a run must answer: a customer message, a staff note, or an event (a staff
    # decision) whose payload says to resume; the payload test is made in Python.
    inputs = (f"{sql.table(Turn)} WHERE {tn('ticket')} = %s AND {tn('number')} > {{after}}"
              f" AND (({tn('author')} = %s AND {tn('kind')} = %s) OR {tn('kind')} IN (%s, %s))")
    unanswered = (sql.columns(Turn, ("kind", "payload")), inputs.format(after=f"COALESCE(({replies}), 0)"))
    # What a run opens with besides the ticket: each read as (plain SELECT, JSON expression).
    last_kind = (Turn, ("kind",), f"{tn('ticket')} = %s", ("-number",), "LIMIT 1")
    last_step = (AgentStep, ("number",), f"{sql.column(AgentStep, 'ticket')} = %s", ("-number",), "LIMIT 1")
    pg = vendor == "postgresql"
    start = [(sql.plain_select(*unanswered), sql.json_select(*unanswered) if pg else ""),
             (sql.select(*last_kind), sql.json_rows(*last_kind) if pg else ""),
             (sql.select(*last_step), sql.json_rows(*last_step) if pg else "")]
    return {
        "start": start,
        "claim": f"UPDATE {t} SET {c('agent_claimed_at')} = %s WHERE {c('id')} = %s"
                 f" AND ({c('agent_claimed_at')} IS NULL OR {c('agent_claimed_at')} < %s) RETURNING {c('id')}",
        "renew": f"UPDATE {t} SET {c('agent_claimed_at')} = %s WHERE {c('id')} = %s"
                 f" RETURNING {sql.columns(Ticket, ('handler', 'status', 'last_turn_number', 'version'))}",
        "release": f"UPDATE {t} SET {c('agent_claimed_at')} = NULL WHERE {c('id')} = %s",
        "inputs_after": sql.plain_select(sql.columns(Turn, ("kind", "payload")), inputs.format(after="%s")),
        "load": f"SELECT {sql.all_columns('t', Ticket)}, {sql.all_columns('k', TicketClass)}, {sql.all_columns('c', Customer)}"
                f" FROM {t} t JOIN {sql.table(TicketClass)} k ON k.{sql.column(TicketClass, 'id')} = t.{c('ticket_class')}"
                f" JOIN {sql.table(Customer)} c ON c.{sql.column(Customer, 'id')} = t.{c('customer')} WHERE t.{c('id')} = %s",
    }


def _sql(name: str):
    return _statements(sql.vendor())[name]


_INPUT = [Turn.Author.CUSTOMER, Turn.Kind.MESSAGE, Turn.Kind.NOTE, Turn.Kind.EVENT]


def _is_input(rows) -> bool:
    return any(kind != Turn.Kind.EVENT or (sql.json_value(payload) or {}).get("resume") is True for kind, payload in rows)


def _claim(ticket_id: int) -> bool:
    """Claim the ticket for a run (see `_open`, which also loads it)."""
    return _open(ticket_id) is not None


def claimed_elsewhere(ticket_id: int) -> bool:
    """Another run holds a live claim on the ticket (or held it when its worker died)."""
    return Ticket.objects.filter(pk=ticket_id, agent_claimed_at__gte=timezone.now() - CLAIM_TTL).exists()


def _release(ticket_id: int, *, look_after: int | None = None) -> bool:
    """Let go of the ticket; with `look_after`, also say whether input came after that turn (same round trip)."""
    results = sql.run(_release_statements(ticket_id, look_after), durable=False)  # a lost release only lets the claim lapse
    return _released(results, look_after)


def _release_statements(ticket_id: int, look_after: int | None) -> list[tuple[str, list]]:
    statements = [(_sql("release"), [ticket_id])]
    if look_after is not None:
        statements.append((_sql("inputs_after"), [ticket_id, look_after, *_INPUT]))
    return statements


def _released(results, look_after: int | None) -> bool:
    return look_after is not None and _is_input(results[1])


def needs_response(ticket: Ticket) -> bool:
    """True when a customer message (or staff note, or staff decision) came after the last reply."""
    return _start(ticket)[0]


def _start_reads(pk: int) -> list[tuple[str, str, list]]:
    """For `sql.read_together`: input after the last reply, the last turn's kind, the last step's number."""
    (inputs, inputs_json), (kind, kind_json), (step, step_json) = _sql("start")
    return [(inputs, inputs_json, [pk, pk, Turn.Kind.MESSAGE, Turn.Author.AGENT, Turn.Author.STAFF, *_INPUT]),
            (kind, kind_json, [pk]), (step, step_json, [pk])]


def _start_facts(inputs, last, step) -> tuple[bool, bool, int]:
    """(input after the last reply, the last turn asks the model to go on, the next step's number)."""
    # The last turn is a tool result, rejection or error: the model must read it before replying.
    mid_task = bool(last) and last[0][0] in (Turn.Kind.TOOL_RESULT, Turn.Kind.REJECTION, Turn.Kind.ERROR)
    return _is_input(inputs), mid_task, (step[0][0] if step else 0) + 1


def _start(ticket: Ticket) -> tuple[bool, bool, int]:
    return _start_facts(*sql.read_together(_start_reads(ticket.pk)))


def _open(ticket_id: int) -> tuple[Ticket, tuple[bool, bool, int], LaneSnapshot | None] | None:
    """Claim the ticket, load it, read what awaits it and the lanes its first step will read:
    one round trip on PostgreSQL. None if claimed elsewhere. The lanes are None when they
    must be read again (the turn cache held another ticket under this id)."""
    now = timezone.now()
    lanes_read = snapshot_read_by_id(ticket_id)
    starts = _start_reads(ticket_id)
    # A claim is a lease: one lost to a database crash lapses like any other.
    (claimed, loaded), sets = sql.run_then_read([(_sql("claim"), [now, ticket_id, now - CLAIM_TTL]),
                                                 (_sql("load"), [ticket_id])], starts + lanes_read.reads, durable=False)
    if not claimed:
        return None
    ticket = _ticket_from_row(loaded[0])
    return ticket, _start_facts(*sets[:len(starts)]), snapshot_from(ticket, lanes_read, sets[len(starts):])


def _ticket_from_row(row) -> Ticket:
    """The ticket with its class and customer, as `select_related` would load them, without compiling a queryset."""
    n, k = len(Ticket._meta.concrete_fields), len(TicketClass._meta.concrete_fields)
    ticket = sql.instance(Ticket, row[:n])
    ticket.ticket_class, ticket.customer = sql.instance(TicketClass, row[n:n + k]), sql.instance(Customer, row[n + k:])
    return ticket


def flag_attention(ticket_id: int, text: str) -> bool:
    """Flag the ticket for staff unless another cause already holds the flag (one never overwrites another)."""
    return bool(Ticket.objects.filter(pk=ticket_id, attention="").update(attention=text[:200]))


def _may_act(ticket: Ticket) -> bool:
    return ticket.handler == Ticket.Handler.AGENT and ticket.status != Ticket.Status.CLOSED


def agent_run(ticket_id: int, *, gateway: Gateway | None = None, max_steps: int = MAX_STEPS_PER_RUN) -> int:
    """Step the agent on a ticket until it replies, waits on staff, or hits the step limit. Returns steps taken.

    Input that arrives while a run holds the ticket finds it claimed and goes
    unanswered by its own wake-up, so before it stops a run looks for input
    newer than what its last step read, and if there is some, goes round again.
    """
    gateway = gateway or Gateway()
    steps, unread = 0, False
    while steps < max_steps:
        opened = _open(ticket_id)
        if opened is None:
            return steps  # another run holds the ticket and will look for this input before it stops
        taken, read_through, release = 0, None, Release(ticket_id)
        try:
            taken, read_through = _run_claimed(*opened, gateway, max_steps - steps, release, unread=unread)
        finally:
            # Input the last step never saw may sit before that step's own reply, so
            # `needs_response` would call it answered: the next pass goes by this instead.
            # A final reply lets go of the claim in its own round trip (then `release.unread` is set).
            unread = release.unread if release.unread is not None else _release(
                ticket_id, look_after=read_through if taken else None)
        steps += taken
        if not unread:
            break
    return steps


def _run_claimed(ticket: Ticket, start: tuple[bool, bool, int], lanes: LaneSnapshot | None, gateway: Gateway,
                 budget: int, release: Release | None = None, *, unread: bool = False) -> tuple[int, int]:
    """Steps while the claim is held; returns (steps, last turn the final step could read).
    `lanes`: what the first step reads, read with the claim. `release`: a final reply may let go
    of the claim with its commit (see `Release`)."""
    waiting, mid_task, number = start
    if not _may_act(ticket) or not (unread or waiting or mid_task):
        return 0, ticket.last_turn_number
    steps, deadline = 0, time.monotonic() + settings.AGENT_RUN_DEADLINE_SECONDS
    while True:
        read_through = ticket.last_turn_number
        if release is not None:
            release.look_after = read_through
        outcome = agent_step(ticket, gateway=gateway, number=number, snapshot=lanes, release=release)
        lanes = None  # later steps read the lanes their predecessor left
        steps, number = steps + 1, number + 1
        # A step that did not stop left a tool result, rejection or error for the model to read next.
        if outcome.stop:
            return steps, read_through
        if steps >= budget or time.monotonic() >= deadline:
            # Mid-task with nothing for the customer: staff must know.
            why = (f"the run's {budget}-step cap" if steps >= budget
                   else f"the run's {settings.AGENT_RUN_DEADLINE_SECONDS} s deadline")
            _stop_run(ticket, f"The agent stopped at {why} without replying to the customer.",
                      f"Run stopped at {why}")
            return steps, read_through
        # The step renewed the claim as it committed and read whether staff took over
        # or closed the ticket meanwhile (the rest of the row it kept current itself).
        if outcome.renewed is None:
            return steps, read_through
        ticket.handler, ticket.status, ticket.last_turn_number, ticket.version = outcome.renewed
        if not _may_act(ticket):
            return steps, read_through


def _stop_run(ticket: Ticket, text: str, attention: str) -> None:
    with transaction.atomic():
        turn_append(ticket=ticket, author=Turn.Author.SYSTEM, kind=Turn.Kind.ERROR, text=text,
                    payload={"run_stopped": True})
        flag_attention(ticket.pk, attention)


# --- one step -----------------------------------------------------------------------------


@dataclass
class StepOutcome:
    stop: bool
    resolution: bool = False
    # A step that goes on renews its run's claim in its own transaction (no commit of its
    # own): the row's (handler, status, last_turn_number, version) then; None if gone.
    renewed: tuple | None = None


@dataclass
class Release:
    """A run's claim, which its final reply lets go of in the reply's own round trip, right after
    the commit. `unread` is set the moment that happens (before any after-commit hook runs, so a
    hook that fails cannot make the run let go twice, perhaps of a claim another run took since)."""

    ticket_id: int
    look_after: int | None = None  # the last turn the step could read
    unread: bool | None = None  # once let go: whether input came after look_after


def agent_step(ticket: Ticket, *, gateway: Gateway, number: int | None = None,
               snapshot: LaneSnapshot | None = None, release: Release | None = None) -> StepOutcome:
    """One model call and what follows from it.

    The request is read and the model called outside any transaction (a model
    call can take seconds); everything the answer leads to — turns, tools,
    harvest, effects, the step record — commits together, so a step is never
    half-applied and watchers get one push for it.
    """
    tclass = ticket.ticket_class
    if snapshot is None:
        snapshot = lane_snapshot(ticket)
    assembled = assemble(snapshot, model=tclass.working_model, tools=tool_specs(),
                         rules_cap_tokens=tclass.pinned_rules_cap)
    if number is None:
        number = _start(ticket)[2]
    first_turn = ticket.last_turn_number + 1

    got = answer.obtain(gateway, assembled.request, model=tclass.working_model, turns=snapshot.turns,
                        text_tool_calls=tclass.text_tool_calls)
    call, error = got.call, got.error
    checks = {"reply": got.checks} if got.checks else {}
    if got.text_calls:
        checks["text_calls"] = got.text_calls

    with transaction.atomic():
        if call is None:
            if error.unresolved:
                # No silent toy in production: staff take the ticket, with the reason.
                text = f"The agent cannot work this ticket: {error}. It was handed to staff."
                Ticket.objects.filter(pk=ticket.pk).update(handler=Ticket.Handler.STAFF)
                flag_attention(ticket.pk, f"Model not configured: {error}")
            else:
                text = f"The model could not be reached ({error}). Staff: please reply by hand or retry."
                flag_attention(ticket.pk, f"Model unavailable: {error}")
            turn_append(ticket=ticket, author=Turn.Author.SYSTEM, kind=Turn.Kind.ERROR, text=text,
                        payload={"model_error": str(error), "unresolved": error.unresolved})
            _record_step(ticket, number, assembled, None, AgentStep.Outcome.MODEL_ERROR, first_turn, error=str(error),
                         latency_ms=error.latency_ms)
            return StepOutcome(stop=True)

        response: ModelResponse = call.response
        next_lanes, reply = None, None
        verdict = got.verdict
        if response.tool_calls:
            outcome = _run_calls(ticket, response, assembled, snapshot)
            kind = AgentStep.Outcome.TOOL_CALLS
        elif verdict is not None and verdict.action == replycheck.POST:
            # The reply goes in the same round trip as the step's record (and its commit).
            payload = {"model": response.model, "offline": response.offline}
            if verdict.notes:
                payload["reply_check"] = verdict.as_json()
            reply = TurnAppend(ticket=ticket, author=Turn.Author.AGENT, kind=Turn.Kind.MESSAGE,
                               text=verdict.text, payload=payload)
            outcome = StepOutcome(stop=True, resolution=True)
            kind = AgentStep.Outcome.REPLY
        elif verdict is not None and (response.text or "").strip():
            # Held: never sent; staff see what was written and why.
            reasons = ", ".join(verdict.reasons)
            turn_append(ticket=ticket, author=Turn.Author.SYSTEM, kind=Turn.Kind.ERROR,
                        text=f"A reply was held for staff ({reasons}); it was not sent: {response.text.strip()}",
                        payload={"reply_check": verdict.as_json(), "held_reply": response.text})
            flag_attention(ticket.pk, f"Reply held for staff: {reasons}"
                           + (f" ({', '.join(verdict.invented)})" if verdict.invented else ""))
            outcome = StepOutcome(stop=True)
            kind = AgentStep.Outcome.HELD_REPLY
        else:
            turn_append(ticket=ticket, author=Turn.Author.SYSTEM, kind=Turn.Kind.ERROR,
                        text="The model returned neither a reply nor a tool call, twice.", payload={})
            flag_attention(ticket.pk, "The model gave no answer")
            outcome = StepOutcome(stop=True)
            kind = AgentStep.Outcome.INVALID_OUTPUT
        # A step that goes on renews the claim with its record: one round trip for both.
        # A run's final reply also lets go of the claim in that round trip, after the commit.
        step, outcome.renewed = _record_step(ticket, number, assembled, call, kind, first_turn,
                                             resolution=outcome.resolution, renew=not outcome.stop, reply=reply,
                                             release=release if reply is not None else None, checks=checks)
        if reply is not None:
            next_lanes = _after_reply(snapshot, reply.turn, ticket.version)
        if outcome.resolution:
            resolved = Resolved(ticket_id=ticket.pk, step_id=step.pk, outcome=kind, first_turn=first_turn,
                                last_turn=ticket.last_turn_number, version=ticket.version,
                                request_tokens=assembled.accounting.total_tokens, next_lanes=next_lanes,
                                trigger_tokens=tclass.trigger_tokens, ticket=ticket)
            for listener in resolution_listeners:
                transaction.on_commit(lambda listener=listener: listener(resolved))
    return outcome


def _after_reply(snapshot: LaneSnapshot, reply: Turn, version: int) -> LaneSnapshot | None:
    """The step's lanes plus its reply, if the reply's version bump is the only change since they were read."""
    if snapshot.version is None or version != snapshot.version + 1:
        return None  # someone else wrote meanwhile: the next reader must look afresh
    turn = TurnData(number=reply.number, author=reply.author, kind=reply.kind, text=reply.text,
                    payload=reply.payload, tokens=reply.tokens)
    return dataclasses.replace(snapshot, turns=[*snapshot.turns, turn], version=version)


def _record_step(ticket, number, assembled: Assembled, call, outcome, first_turn, *, error="", resolution=False,
                 renew: bool = False, reply: TurnAppend | None = None,
                 release: Release | None = None, checks: dict | None = None,
                 latency_ms: int = 0) -> tuple[AgentStep, tuple | None]:
    """Insert the step's record and commit; with `renew`, also renew the run's claim and read the ticket's
    (handler, status, last_turn_number, version) — None if the ticket is gone. Returns (step, that row).

    With `reply`, the reply turn's statements lead the same group, and the record
    takes its last turn from the counter they moved. With `release`, the claim is
    let go right after the commit where the group carries it (`release.unread`
    says whether input came after its turn); elsewhere the run lets go itself."""
    # The step's turns were appended through this ticket object, which kept count.
    usage = call.response.usage if call else None
    step = AgentStep(
        ticket=ticket, number=number, model=(call.response.model if call else ticket.ticket_class.working_model),
        offline=bool(call and call.response.offline), request_tokens=assembled.accounting.total_tokens,
        lane_tokens=assembled.accounting.as_dict(), input_tokens=usage.input_tokens if usage else 0,
        output_tokens=usage.output_tokens if usage else 0, cost_usd=call.cost_usd if call else 0,
        cached_input_tokens=usage.cached_input_tokens if usage else 0, checks=checks or {},
        latency_ms=call.latency_ms if call else latency_ms, outcome=outcome, is_resolution=resolution,
        first_turn=first_turn, last_turn=ticket.last_turn_number, error=error,
    )
    ahead = reply.statements if reply else []
    record = (sql.insert_statement(step, last_turn=TurnAppend.counter(ticket.pk)) if reply
              else sql.insert_statement(step))
    # The record is the step's last write: the version read with it is the one the step
    # commits, so the step's push need not read it back after the commit; and the
    # step's COMMIT goes in the same round trip.
    last = (_sql("renew"), [timezone.now(), ticket.pk]) if renew else version_statement(ticket.pk)
    group = [*ahead, record, last]
    if release is None:
        results, after = sql.run(group, commit=True), None
    else:
        results, after = sql.run_commit_then(group, _release_statements(release.ticket_id, release.look_after))
        if after is not None:
            release.unread = _released(after, release.look_after)
    *led, inserted, read = results
    if reply:
        reply.done(led)
        step.last_turn = ticket.last_turn_number
    sql.saved(step, inserted[0][0])
    if read:
        events.ticket_version_known(ticket.pk, read[0][-1])
    return step, (read[0] if renew and read else None)


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
        base = call.id or "call"
        new, n = base, 2
        while new in taken or not new:
            new, n = f"{base}-{n}", n + 1
        taken.add(new)
        out.append(call if new == call.id else call.model_copy(update={"id": new}))
    return out


def _run_calls(ticket: Ticket, response: ModelResponse, assembled: Assembled, snapshot) -> StepOutcome:
    tool_calls = unique_call_ids(response.tool_calls, assembled.request)
    calls = [c.model_dump() for c in tool_calls]
    turn_append(ticket=ticket, author=Turn.Author.AGENT, kind=Turn.Kind.TOOL_CALL, text=response.text or "",
                payload={"calls": calls, "model": response.model, "offline": response.offline})
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
            reason = (f"The same {call.name} call failed {failures} times before with these arguments; "
                      "the run stopped so staff can look.")
            turn_append(ticket=ticket, author=Turn.Author.SYSTEM, kind=Turn.Kind.REJECTION, text=reason,
                        payload={"call_id": call.id, "name": call.name, "guard": "repeat_failure", "reason": reason,
                                 "arguments": call.arguments, "details": {"earlier": failures}})
            flag_attention(ticket.pk, f"Repeated failing call: {call.name} ×{failures + 1}")
            outcome.stop = True
            break
        result = process_call(ticket, call, assembled, snapshot=snapshot)
        outcome.resolution |= result.resolution
        outcome.stop |= result.stop
        snapshot = None  # a call may move state (money, actions, ledger): judge the next one on fresh lanes
    return outcome


def _reject_duplicate(ticket: Ticket, call: ToolCall, original: str) -> None:
    reason = (f"This {call.name} call repeats call {original} of the same response, with the same arguments; "
              f"it was not run again. Call {original}'s result answers it.")
    turn_append(ticket=ticket, author=Turn.Author.SYSTEM, kind=Turn.Kind.REJECTION, text=reason,
                payload={"call_id": call.id, "name": call.name, "guard": "duplicate", "reason": reason,
                         "arguments": call.arguments, "details": {"duplicate_of": original}})


def _guard_input(ticket, tool: Tool, arguments, assembled: Assembled, approved: bool,
                 snapshot=None) -> guards.GuardInput:
    # Guards judge against what *this* request showed the model, plus the
    # structured truths in state (actions, money) which are always in it. The
    # step's own snapshot serves until a call in the step changes state.
    snap = snapshot if snapshot is not None else lane_snapshot(ticket, with_turns=False)
    return guards.GuardInput(
        tool=tool, arguments=arguments, ledger=snap.ledger, recent_ids=assembled.recent_result_ids,
        recent_text_ids=assembled.recent_text_ids, rules=snap.rules, actions=snap.actions, money=snap.money,
        approval_rules=ticket.ticket_class.approval_rules or {}, approved=approved,
    )


def process_call(ticket: Ticket, call: ToolCall, assembled: Assembled, *, approved_hold: HeldAction | None = None,
                 snapshot=None) -> StepOutcome:
    tool = REGISTRY.get(call.name)
    if tool is None:
        turn_append(ticket=ticket, author=Turn.Author.SYSTEM, kind=Turn.Kind.ERROR,
                    text=f"Unknown tool '{call.name}'. Available tools: {', '.join(sorted(REGISTRY))}.",
                    payload={"call_id": call.id, "name": call.name, "error": "unknown_tool", "arguments": call.arguments})
        return StepOutcome(stop=False)
    verdict = guards.check_call(_guard_input(ticket, tool, call.arguments, assembled,
                                             approved=approved_hold is not None, snapshot=snapshot))
    if verdict.decision == "reject":
        turn_append(ticket=ticket, author=Turn.Author.SYSTEM, kind=Turn.Kind.REJECTION, text=verdict.reason,
                    payload={"call_id": call.id, "name": call.name, "guard": verdict.guard, "reason": verdict.reason,
                             "arguments": call.arguments, "details": verdict.details})
        return StepOutcome(stop=False)
    args = verdict.args
    arguments = args.model_dump(mode="json")
    if verdict.decision == "hold":
        # The same held call proposed again maps to the same held row.
        key = idempotency_key(ticket.pk, tool.name, arguments, salt="held")
        held, _ = HeldAction.objects.get_or_create(
            idempotency_key=key,
            defaults=dict(ticket=ticket, tool=tool.name, arguments=arguments, call_id=call.id,
                          reason=verdict.reason, turn=ticket.last_turn_number),
        )
        turn_append(ticket=ticket, author=Turn.Author.TOOL, kind=Turn.Kind.TOOL_RESULT,
                    text=json.dumps({"held_for_staff_approval": True, "reason": verdict.reason}),
                    payload={"call_id": call.id, "name": tool.name, "ok": False, "held": held.pk, "guard": verdict.guard})
        # The agent goes on (it tells the customer); staff decide in the desk.
        return StepOutcome(stop=False)
    key = approved_hold.idempotency_key if approved_hold else idempotency_key(ticket.pk, tool.name, arguments)
    return execute(ticket, tool, call.id, args, key)


def execute(ticket: Ticket, tool: Tool, call_id: str, args, key: str) -> StepOutcome:
    """Run an allowed tool; store its result; harvest IDs and state. Nothing half-applied."""
    turn_no = ticket.last_turn_number + 1
    ctx = ToolContext(ticket_id=ticket.pk, customer_id=ticket.customer.customer_id, turn=turn_no, idempotency_key=key)
    try:
        with transaction.atomic():
            raw = tool.run(ctx, args)
            result = tool.result_model.model_validate(raw.model_dump() if hasattr(raw, "model_dump") else raw)
    except ToolError as exc:
        turn_append(ticket=ticket, author=Turn.Author.TOOL, kind=Turn.Kind.TOOL_RESULT, text=f"ERROR: {exc}",
                    payload={"call_id": call_id, "name": tool.name, "ok": False, "error": str(exc)})
        return StepOutcome(stop=False)
    except Exception as exc:  # a result that fails its schema, or a tool bug: quarantined, never harvested
        log.exception("tool %s failed", tool.name)
        turn_append(ticket=ticket, author=Turn.Author.SYSTEM, kind=Turn.Kind.ERROR,
                    text=f"The {tool.name} tool failed ({type(exc).__name__}); its result was not used.",
                    payload={"call_id": call_id, "name": tool.name, "error": str(exc)[:500], "quarantined": True})
        return StepOutcome(stop=False)

    payload_result = result.model_dump(mode="json")
    with transaction.atomic(savepoint=False):  # the step's transaction, when there is one
        turn = turn_append(ticket=ticket, author=Turn.Author.TOOL, kind=Turn.Kind.TOOL_RESULT,
                           text=json.dumps(payload_result, ensure_ascii=False),
                           payload={"call_id": call_id, "name": tool.name, "ok": True, "result": payload_result,
                                    "idempotency_key": key if tool.side_effect else ""})
        # The IDs this call used count as used when the harvest's eviction picks what
        # leaves the window (the harness replays the same order).
        lanes.ledger_harvest(ticket=ticket, turn=turn.number, tool_name=tool.name, result=result,
                             used=[v for _, _, v in guards.ids_in_arguments(tool, args)])
        from sundry.agent.effects import apply_effects

        apply_effects(ticket=ticket, tool=tool, args=args, result=result, turn=turn.number, key=key)
    if tool.name == "reply_to_customer":
        turn_append(ticket=ticket, author=Turn.Author.AGENT, kind=Turn.Kind.MESSAGE, text=args.message,
                    payload={"via": "reply_to_customer"})
        return StepOutcome(stop=True, resolution=True)
    return StepOutcome(stop=False, resolution=tool.resolves)
