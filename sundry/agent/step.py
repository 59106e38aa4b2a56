"""One agent step: assemble the request → call the model → guard and run its calls, or store its reply.

The request is read and the model called outside any transaction (a model call
can take seconds); everything the answer leads to — turns, tools, harvest,
effects, the step record — commits together, so a step is never half-applied
and watchers get one push for it.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Max

from sundry.agent import answer, calibration, claims, failures, handoff, proposals, recordstates
from sundry.agent.calls import StepOutcome, run_calls
from sundry.agent.claims import Claim
from sundry.agent.guards import replycheck, replyclaims, resent
from sundry.agent.models import AgentStep
from sundry.agent.provider.gateway import Gateway
from sundry.agent.streaming import ReplyStream
from sundry.agent.toolbox import Toolbox, domain_specs, toolbox_for
from sundry.context import render
from sundry.context.assembly import Assembled, assemble
from sundry.context.lanes import LaneSnapshot, TurnData
from sundry.context.selectors import lane_snapshot
from sundry.tickets import versions
from sundry.tickets.attention import (
    MODEL_UNAVAILABLE,
    NO_ANSWER,
    NOT_CONFIGURED,
    attention_clear,
    attention_flag,
    has_reason,
    without,
)
from sundry.tickets.models import Ticket, Turn
from sundry.tickets.services import APPENDED, turn_append
from sundry.tickets.versions import ClaimLost, ticket_update
from sundry.tooling.domain import Domain
from sundry.tooling.messages import ModelResponse

# Called with a `Resolved` after a resolution step commits; the compaction
# trigger subscribes here.
resolution_listeners: list = []
# Called as hook(ticket, snapshot, assembled) -> bool before a step sends its request: True if
# the lanes changed (a compaction ran in place because the request was over the budget), so
# the step reads them again. The compaction app registers its own.
before_request_hooks: list = []


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
    # The class's working model: whose token calibration the trigger applies.
    model: str = ""
    # The class's toolbox as the run built it: the trigger assembles with it.
    toolbox: Toolbox | None = None


def tool_specs(domain: Domain | None = None) -> list[dict]:
    """The JSON schemas of the tools a ticket in `domain` (default: the default domain) may call."""
    return domain_specs(domain)


def assemble_request(ticket: Ticket, snapshot: LaneSnapshot, toolbox: Toolbox | None = None) -> Assembled:
    """The request a step of this ticket sends, as it is counted for the budget and compaction: the
    toolbox's tools (the class's deny list left out) and its servers' prompts."""
    tclass = ticket.ticket_class
    toolbox = toolbox or toolbox_for(tclass)
    return assemble(
        toolbox.with_prompts(snapshot),
        model=tclass.working_model,
        tools=toolbox.specs,
        rules_cap_tokens=tclass.pinned_rules_cap,
        own_tools=toolbox.own_tools,
    )


def _over_budget(assembled: Assembled, tclass) -> bool:
    """Over the class's budget, which is in the model's own tokens (Sundry counts with its calibration)."""
    return assembled.accounting.total_tokens > tclass.token_budget / calibration.applied_factor(tclass.working_model)


def next_step_number(ticket_id: int) -> int:
    return (AgentStep.objects.filter(ticket_id=ticket_id).aggregate(n=Max("number"))["n"] or 0) + 1


def _read_through(snapshot: LaneSnapshot, ticket: Ticket) -> int:
    """The last turn the request showed (turns are committed in number order, so all before it too)."""
    if snapshot.turns:
        return snapshot.turns[-1].number
    return snapshot.summary.covers_through_turn if snapshot.summary else ticket.last_turn_number


def _still_ours(ticket: Ticket, held: Claim, seen_through: int) -> bool:
    """Under the ticket's row lock (taken here, first, as the lock order wants): the run
    still holds its claim, and no run was stopped after turn `seen_through`. A step runs
    for seconds outside any transaction; a run stopped meanwhile (its error turn written by
    a time limit landing late, or the claim lapsed and taken over) must not post. For a
    step whose first write is not a turn (its calls went to tool servers and committed one
    by one); the others check with their first turn (`_FirstTurn`)."""
    row = (
        Ticket.objects.select_for_update()
        .filter(pk=ticket.pk)
        .values_list("agent_claimed_at", "last_turn_number")
        .first()
    )
    if row is None or row[0] != held.stamp:
        return False
    return row[1] <= seen_through or not failures.stopped_after(ticket.pk, seen_through)


# What a step's own turn stamps: the turn and the step's record (written in every step's transaction).
STEP_STAMPS = (versions.TURNS, versions.STEPS)


class _Abandoned(Exception):
    """The step found its run stopped or its claim gone: its transaction rolls back, nothing written."""


class _FirstTurn:
    """`turn_append` for a step's writes, the first of which is also `_still_ours`'s check: it
    appends only while the run's claim holds (the bump's own condition, no read of its own),
    and if turns came after `seen_through` that this run did not write, looks (under the row
    lock the bump took) for a stop among them — before anything else the step would do."""

    def __init__(self, ticket: Ticket, held: Claim | None, seen_through: int):
        self.ticket, self.held, self.seen_through = ticket, held, seen_through
        self.checked = held is None
        # The loaded ticket's counters, restored if the step is abandoned after its first turn.
        self.kept = (ticket.last_turn_number, ticket.version, set(ticket.__dict__.get(APPENDED, ())))

    def __call__(self, **fields) -> Turn:
        if self.checked:
            return turn_append(**fields)
        try:
            turn = turn_append(**fields, claimed_at=self.held.stamp)
        except ClaimLost as exc:
            raise _Abandoned from exc
        self.checked = True
        if turn.number - 1 > self.seen_through and failures.stopped_after(self.ticket.pk, self.seen_through):
            raise _Abandoned
        return turn

    def check(self) -> None:
        """For a step about to write something other than a turn first: the lock and check as a read."""
        if not self.checked:
            if not _still_ours(self.ticket, self.held, self.seen_through):
                raise _Abandoned
            self.checked = True

    def restore(self) -> None:
        ticket = self.ticket
        ticket.last_turn_number, ticket.version = self.kept[0], self.kept[1]
        ticket.__dict__[APPENDED] = set(self.kept[2])


def agent_step(
    ticket: Ticket,
    *,
    gateway: Gateway,
    number: int | None = None,
    snapshot: LaneSnapshot | None = None,
    held: Claim | None = None,
    toolbox: Toolbox | None = None,
) -> StepOutcome:
    """One model call and what follows from it (`ticket` with its class and customer loaded;
    `toolbox`: its class's, as the run built it — else built here).

    With the run's claim `held`, the step writes only while the claim is still the run's and
    no stop was recorded since it read the ticket. Where the model streams, its reply reaches
    the ticket's watchers as it is written; once the step has committed (or failed) they are
    told it is done, with the stored reply's turn.
    """
    stream = ReplyStream(ticket.pk) if getattr(settings, "MODEL_STREAM", True) else None
    try:
        return _step(
            ticket,
            gateway=gateway,
            number=number,
            snapshot=snapshot,
            stream=stream,
            held=held,
            toolbox=toolbox or toolbox_for(ticket.ticket_class),
        )
    finally:
        if stream is not None:
            transaction.on_commit(stream.finish)


def _step(
    ticket: Ticket,
    *,
    gateway: Gateway,
    number: int | None,
    snapshot: LaneSnapshot | None,
    stream: ReplyStream | None,
    held: Claim | None,
    toolbox: Toolbox,
) -> StepOutcome:
    tclass = ticket.ticket_class
    if snapshot is None:
        snapshot = lane_snapshot(ticket, also=proposals.LANES)  # the claims check's cards and holds with them
    assembled = assemble_request(ticket, snapshot, toolbox)
    if before_request_hooks and _over_budget(assembled, tclass):
        with claims.heartbeat(held):  # the hook may wait on the summariser: keep the claim
            changed = any([hook(ticket, snapshot, assembled) for hook in before_request_hooks])
        if changed:
            snapshot = lane_snapshot(ticket, also=proposals.LANES)
            assembled = assemble_request(ticket, snapshot, toolbox)
    if number is None:
        number = next_step_number(ticket.pk)
    read_through = _read_through(snapshot, ticket)
    first_turn = ticket.last_turn_number + 1

    # One gateway call (its retries, honouring Retry-After, live inside it; a failure's latency
    # spans every attempt), read for calls written as text where the class opts in; a reply that
    # fails its check is asked for once more, with the reason.
    # While it waits on the model (and on tool servers) the run keeps its claim alive.
    with claims.heartbeat(held):
        got = answer.obtain(
            gateway,
            assembled.request,
            model=tclass.working_model,
            turns=snapshot.turns,
            text_tool_calls=tclass.text_tool_calls,
            stream=stream,
            internal=assembled.internal,
            facts=_claim_facts(ticket, snapshot, toolbox),
            deadline=time.monotonic() + settings.AGENT_STEP_MODEL_SECONDS,
        )
        call, error = got.call, got.error
        # Calls to a class's tool servers run outside any transaction: such a step's calls commit one
        # by one (each guarded on the lanes the previous left), then the step's record.
        stepwise = call is not None and any(toolbox.runs_outside(c.name) for c in call.response.tool_calls)
        if stepwise:
            # Words written with these calls and posted after them answer the message: a stop among
            # the calls tells the customer nothing of its own.
            words = got.verdict is not None and got.verdict.action == replycheck.POST
            outcome = run_calls(ticket, call.response, assembled, snapshot, toolbox, hand_off=not words)
    checks = {"reply": got.checks} if got.checks else {}
    if got.text_calls:
        checks["text_calls"] = got.text_calls
    if stream is not None and stream.started:
        checks["streamed"] = True  # watchers saw the reply as it was written
        if stream.showed_text:
            checks["streamed_text"] = True  # and some of its text, not only "is writing…"
            # What their screens show as the step ends: the scorecard compares it with the stored reply.
            checks["streamed_shown"] = stream.shown_text
        if stream.withdrawn:
            checks["stream_withdrawn"] = True  # a re-ask's "is writing…" took shown text away
    if got.held is not None:
        checks["held_rest"] = True  # posted what the stream had shown; the rest held for staff
    # The step's first write is a turn: it locks the ticket row before any lane row, and (with the
    # run's claim `held`) writes only while the claim holds and no stop came after what was read.
    append = _FirstTurn(ticket, held, first_turn - 1)
    try:
        return _commit(
            ticket,
            append=append,
            call=call,
            error=error,
            got=got,
            stepwise=stepwise,
            outcome=outcome if stepwise else None,
            snapshot=snapshot,
            assembled=assembled,
            number=number,
            first_turn=first_turn,
            read_through=read_through,
            checks=checks,
            stream=stream,
            toolbox=toolbox,
        )
    except _Abandoned:
        append.restore()
        return StepOutcome(stop=True, read_through=read_through, abandoned=True)


def _commit(
    ticket: Ticket,
    *,
    append: _FirstTurn,
    call,
    error,
    got,
    stepwise: bool,
    outcome: StepOutcome | None,
    snapshot: LaneSnapshot,
    assembled: Assembled,
    number: int,
    first_turn: int,
    read_through: int,
    checks: dict,
    stream: ReplyStream | None,
    toolbox: Toolbox,
) -> StepOutcome:
    """What the model's answer leads to, in one transaction (the step's), or one statement (`_reply_at_once`)."""
    posted = _reply_at_once(
        ticket,
        append=append,
        call=call,
        got=got,
        stepwise=stepwise,
        snapshot=snapshot,
        assembled=assembled,
        number=number,
        first_turn=first_turn,
        read_through=read_through,
        checks=checks,
        stream=stream,
        toolbox=toolbox,
    )
    if posted is not None:
        return posted
    with transaction.atomic():
        if stepwise:
            append.check()  # its calls committed already: the step record is its first write
        if call is None:
            if error.unresolved:
                # No silent toy in production: staff take the ticket, with the reason.
                text = f"The agent cannot work this ticket: {error}. It was handed to staff."
                stopped = append(
                    ticket=ticket,
                    author=Turn.Author.SYSTEM,
                    kind=Turn.Kind.ERROR,
                    text=text,
                    payload={"model_error": str(error), "unresolved": True},
                )
                # Told before the ticket moves to staff: no person has taken it, code handed it over.
                handoff.tell_stopped(ticket, append, stopped.number)
                ticket_update(ticket.pk, handler=Ticket.Handler.STAFF)
                attention_flag(ticket.pk, f"{NOT_CONFIGURED}: {error}")
            else:
                stopped = append(
                    ticket=ticket,
                    author=Turn.Author.SYSTEM,
                    kind=Turn.Kind.ERROR,
                    text=f"The model could not be reached ({error}). Staff: please reply by hand or retry.",
                    payload={"model_error": str(error)},
                )
                handoff.tell_stopped(ticket, append, stopped.number)
                attention_flag(ticket.pk, f"{MODEL_UNAVAILABLE}: {error}")
            append.check()
            _record_step(
                ticket,
                number,
                assembled,
                None,
                AgentStep.Outcome.MODEL_ERROR,
                first_turn,
                error=str(error),
                latency_ms=error.latency_ms,
            )
            return StepOutcome(stop=True, read_through=read_through)

        # The model answered: a flag its earlier failure raised no longer holds. (That failure ended
        # its run, so the ticket as this run loaded it shows the flag; no query for every step.)
        # Only its own reason: another cause's (a tripped breaker, a customer's report) stays.
        if has_reason(ticket.attention, MODEL_UNAVAILABLE) and attention_clear(ticket.pk, MODEL_UNAVAILABLE):
            ticket.attention = without(ticket.attention, MODEL_UNAVAILABLE)
        response: ModelResponse = call.response
        next_lanes = None
        verdict = got.verdict
        if response.tool_calls:
            if verdict is not None:
                # The words written with the calls, before them (stepwise: after them, which committed already).
                _said_with_calls(ticket, append, got, response, stream)
            if not stepwise:
                outcome = run_calls(ticket, response, assembled, snapshot, toolbox, append=append)
            kind = AgentStep.Outcome.TOOL_CALLS
        elif verdict is not None and verdict.action == replycheck.POST:
            reply = append(
                ticket=ticket,
                author=Turn.Author.AGENT,
                kind=Turn.Kind.MESSAGE,
                text=verdict.text,
                payload=_reply_payload(response, verdict),
                stamps=STEP_STAMPS,
            )
            if stream is not None:
                stream.posted_turn = reply.number
            if got.held is not None:
                _hold_rest(ticket, append, got)
            next_lanes = _after_reply(snapshot, reply, ticket.version)
            outcome = StepOutcome(stop=True, resolution=True)
            kind = AgentStep.Outcome.REPLY
        elif verdict is not None and (response.text or "").strip():
            # Held: never sent; staff see what was written and why, and the run ends here — so the
            # customer, if this leaves their message unanswered, is told a person will reply (`handoff`).
            _hold_reply(ticket, append, verdict, response.text, hand_off=True)
            outcome = StepOutcome(stop=True)
            kind = AgentStep.Outcome.HELD_REPLY
        else:
            # Asked once more already (`answer.obtain`): looping would only burn the run's steps.
            stopped = append(
                ticket=ticket,
                author=Turn.Author.SYSTEM,
                kind=Turn.Kind.ERROR,
                text="The model returned neither a reply nor a tool call, twice.",
                payload={},
            )
            handoff.tell_stopped(ticket, append, stopped.number)
            attention_flag(ticket.pk, NO_ANSWER)
            outcome = StepOutcome(stop=True)
            kind = AgentStep.Outcome.INVALID_OUTPUT
        outcome.read_through = read_through
        append.check()
        step = _record_step(
            ticket,
            number,
            assembled,
            call,
            kind,
            first_turn,
            resolution=outcome.resolution,
            checks=checks,
            reported=got.request_input_tokens,
        )
        if outcome.resolution:
            _tell_resolved(ticket, step, kind, first_turn, assembled, next_lanes, toolbox)
    return outcome


def _tell_resolved(ticket, step: AgentStep, kind: str, first_turn: int, assembled, next_lanes, toolbox) -> None:
    """The resolution listeners, once the step's writes commit (at once where they were one statement)."""
    tclass = ticket.ticket_class
    resolved = Resolved(
        ticket_id=ticket.pk,
        step_id=step.pk,
        outcome=kind,
        first_turn=first_turn,
        last_turn=ticket.last_turn_number,
        version=ticket.version,
        request_tokens=assembled.accounting.total_tokens,
        next_lanes=next_lanes,
        trigger_tokens=tclass.trigger_tokens,
        ticket=ticket,
        model=tclass.working_model,
        toolbox=toolbox,
    )
    for listener in resolution_listeners:
        transaction.on_commit(lambda listener=listener: listener(resolved))


def _reply_payload(response: ModelResponse, verdict: replycheck.ReplyVerdict) -> dict:
    payload = {"model": response.model, "offline": response.offline}
    if verdict.notes:
        payload["reply_check"] = verdict.as_json()
    return payload


def _reply_at_once(
    ticket: Ticket,
    *,
    append: _FirstTurn,
    call,
    got,
    stepwise: bool,
    snapshot: LaneSnapshot,
    assembled: Assembled,
    number: int,
    first_turn: int,
    read_through: int,
    checks: dict,
    stream: ReplyStream | None,
    toolbox: Toolbox,
) -> StepOutcome | None:
    """The common step — a reply posted whole, nothing else to write — as one statement (PostgreSQL):
    the bump, the reply's turn and the step's record, with no transaction round it (BEGIN and COMMIT
    were two round trips of a step's four after the model). It writes only while the run's claim
    holds and the ticket's last turn is still the one the step read: no turn came meanwhile, so no
    stop can have come either (the row's own columns, which a concurrent writer's lock hands over
    fresh). Anything else — a turn came, the claim is gone, the reply held in part, a flag to
    clear — returns None and nothing written: the step's transaction decides, as for every step."""
    verdict = got.verdict
    if (
        connection.vendor != "postgresql"
        or call is None
        or stepwise
        or call.response.tool_calls
        or verdict is None
        or verdict.action != replycheck.POST
        or got.held is not None
        or has_reason(ticket.attention, MODEL_UNAVAILABLE)
    ):
        return None
    kind = AgentStep.Outcome.REPLY
    step = _step_row(
        ticket,
        number,
        assembled,
        call,
        kind,
        first_turn,
        resolution=True,
        checks=checks,
        reported=got.request_input_tokens,
    )
    checked = {} if append.checked else {"claimed_at": append.held.stamp, "through": append.seen_through}
    reply = turn_append(
        ticket=ticket,
        author=Turn.Author.AGENT,
        kind=Turn.Kind.MESSAGE,
        text=verdict.text,
        payload=_reply_payload(call.response, verdict),
        stamps=STEP_STAMPS,
        also=[(step, "last_turn")],
        **checked,
    )
    if reply is None:
        return None
    append.checked = True
    if stream is not None:
        stream.posted_turn = reply.number
    _tell_resolved(ticket, step, kind, first_turn, assembled, _after_reply(snapshot, reply, ticket.version), toolbox)
    return StepOutcome(stop=True, resolution=True, read_through=read_through)


def _hold_reply(ticket: Ticket, append, verdict: replycheck.ReplyVerdict, text: str, *, hand_off: bool = False) -> None:
    """A reply the check holds: an error turn with what was written and why, and the ticket flagged.
    `hand_off`: the run ends with this hold (not words with calls, whose run goes on and may still
    reply), so the customer may be told their message went to staff — read before the flag is raised."""
    reasons = ", ".join(verdict.reasons)
    notice = append(
        ticket=ticket,
        author=Turn.Author.SYSTEM,
        kind=Turn.Kind.ERROR,
        text=f"A reply was held for staff ({reasons}); it was not sent: {text.strip()}{_held_why(verdict)}",
        payload={"reply_check": verdict.as_json(), "held_reply": text},
    )
    if hand_off:
        handoff.tell(ticket, append, notice.number)
    attention_flag(
        ticket.pk,
        f"Reply held for staff: {reasons}" + (f" ({', '.join(verdict.invented)})" if verdict.invented else ""),
    )


def _said_with_calls(ticket: Ticket, append, got, response: ModelResponse, stream: ReplyStream | None) -> None:
    """The words a model wrote with its calls, checked as a reply (`answer.obtain`): posted to the customer
    (what of it streamed, if the rest would be held), or held for staff. The calls' own turn keeps them for the
    model's next request; the posted turn says so, and is not shown to the model a second time."""
    verdict = got.verdict
    if verdict.action != replycheck.POST:
        _hold_reply(ticket, append, verdict, response.text or "")
        return
    payload = {"model": response.model, "offline": response.offline, "via": render.SAID_WITH_CALLS}
    if verdict.notes:
        payload["reply_check"] = verdict.as_json()
    said = append(ticket=ticket, author=Turn.Author.AGENT, kind=Turn.Kind.MESSAGE, text=verdict.text, payload=payload)
    if stream is not None:
        stream.posted_turn = said.number
    if got.held is not None:
        _hold_rest(ticket, append, got)


def _held_why(verdict: replycheck.ReplyVerdict) -> str:
    """What staff read after a held text: the internal text it quotes, the claims no record supports."""
    out = f" It quotes internal-only text: {verdict.quoted}." if verdict.quoted else ""
    if resent.REASON in verdict.reasons:
        out += (
            f" It is word for word a reply the customer's page already shows {resent.MOST_COPIES} times, each after "
            "another message; no more copies are posted."
        )
    if verdict.unsupported:
        out += (
            " It says what no record of this ticket shows (no tool did it, or no card or hold stands for it): "
            f"{verdict.unsupported}."
        )
    return out


def _hold_rest(ticket: Ticket, append: _FirstTurn, got) -> None:
    """After a reply posted as the part the stream had already shown: the rest, held for staff, and why."""
    reasons = ", ".join(got.held.reasons)
    append(
        ticket=ticket,
        author=Turn.Author.SYSTEM,
        kind=Turn.Kind.ERROR,
        text=(
            f"The rest of a reply was held for staff ({reasons}); it was not sent: {got.rest} "
            f"(The customer has its first part, shown to them as it was written, checked and posted: "
            f"{got.verdict.text}){_held_why(got.held)}"
        ),
        payload={"reply_check": got.held.as_json(), "held_reply": got.rest, "kept": got.verdict.text},
    )
    attention_flag(
        ticket.pk,
        f"Part of a reply held for staff: {reasons}"
        + (f" ({', '.join(got.held.invented)})" if got.held.invented else ""),
    )


def _claim_facts(ticket: Ticket, snapshot: LaneSnapshot, toolbox: Toolbox) -> replyclaims.Records:
    """The records a reply's claims are judged against: the lanes as this step read them, the records'
    statuses, dates and figures now and the tool results the step shows (`recordstates`), the open and
    declined cards and holds (read with the lanes, else here; once: the stream's sentences and the reply share them), the
    rules in force (an offer or promise of what one forbids is false), and which tools do what by the
    toolbox's declarations."""
    return replyclaims.Records.of(
        toolbox.domain,
        actions=snapshot.actions,
        money=snapshot.money,
        ledger=snapshot.ledger,
        proposals=_or_read(proposals.of_snapshot(snapshot), ticket.pk),
        rules=snapshot.rules,
        states=recordstates.reader(
            ticket,
            recordstates.referenced(snapshot.ledger, snapshot.money, snapshot.actions, toolbox.domain.owner_kind),
        ),
        shown=recordstates.shown(snapshot.turns),
        today=recordstates.today,  # the reply's day, when a sentence of it is judged
    )


def _or_read(read: tuple | None, ticket_id: int) -> tuple:
    return read if read is not None else proposals.read(ticket_id)


def _after_reply(snapshot: LaneSnapshot, reply: Turn, version: int) -> LaneSnapshot | None:
    """The step's lanes plus its reply, if the reply's version bump is the only change since they were read."""
    if snapshot.version is None or version != snapshot.version + 1:
        return None  # someone else wrote meanwhile: the next reader must look afresh
    turn = TurnData(
        number=reply.number,
        author=reply.author,
        kind=reply.kind,
        text=reply.text,
        payload=reply.payload,
        tokens=reply.tokens,
    )
    return dataclasses.replace(snapshot, turns=[*snapshot.turns, turn], version=version)


def _record_step(
    ticket: Ticket, number: int, assembled: Assembled, call, outcome: str, first_turn: int, **kw
) -> AgentStep:
    """The step's record, in its transaction; the step's turns were appended through `ticket`, which kept count."""
    row = _step_row(ticket, number, assembled, call, outcome, first_turn, **kw)
    row.save(force_insert=True)
    return row


def _step_row(
    ticket: Ticket,
    number: int,
    assembled: Assembled,
    call,
    outcome: str,
    first_turn: int,
    *,
    error: str = "",
    resolution: bool = False,
    latency_ms: int = 0,
    checks: dict | None = None,
    reported: int = 0,
) -> AgentStep:
    """The step's record, unsaved (its last turn: the ticket's as it stands)."""
    usage = call.response.usage if call else None
    return AgentStep(
        ticket=ticket,
        number=number,
        model=(call.response.model if call else ticket.ticket_class.working_model),
        offline=bool(call and call.response.offline),
        request_tokens=assembled.accounting.total_tokens,
        lane_tokens=assembled.accounting.as_dict(),
        input_tokens=usage.input_tokens if usage else 0,
        output_tokens=usage.output_tokens if usage else 0,
        cost_usd=call.cost_usd if call else 0,
        cached_input_tokens=usage.cached_input_tokens if usage else 0,
        checks=checks or {},
        cache_write_tokens=usage.cache_write_tokens if usage else 0,
        reported_request_tokens=reported,
        latency_ms=call.latency_ms if call else latency_ms,
        outcome=outcome,
        is_resolution=resolution,
        first_turn=first_turn,
        last_turn=ticket.last_turn_number,
        error=error,
    )
