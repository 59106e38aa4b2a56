"""Compaction: decide after a resolution step, then replace exactly the snapshotted prefix.

`compaction_consider` runs after a resolution step commits (via the agent
loop's resolution listeners) and queues a run; `compaction_run` is the work
the Celery task does. The run row is the idempotency key: a redelivered or
duplicated task finds it done, and the accept is a compare-and-set on the
ticket's current summary, so nothing is ever committed twice.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal

from django.db import IntegrityError, transaction
from django.db.models import Sum
from django.utils import timezone

from sundry.agent import calibration
from sundry.agent.models import AgentStep, HeldAction
from sundry.agent.provider.gateway import Gateway, ModelCallError, provider_counting
from sundry.agent.step import Resolved, assemble_request
from sundry.agent.toolbox import Toolbox, toolbox_for
from sundry.compaction import faithful
from sundry.compaction import summariser as sm
from sundry.compaction.models import CompactionRun
from sundry.compaction.offline import OfflineSummariser
from sundry.compaction.trigger import (
    BREAKER_FAILURES,
    BREAKER_PREFIX,
    GROWTH_FRACTION,
    TriggerInput,
    breaker_should_trip,
    clearly_under,
    cut_point,
    cut_within_budget,
    decide,
    over_budget_cause,
    pays,
)
from sundry.context.assembly import total_after_reply
from sundry.context.lanes import SummaryData, TurnData
from sundry.context.models import ActionTaken, LedgerEntry, Source, Summary
from sundry.context.rules import forbidden_capabilities
from sundry.context.selectors import lane_snapshot
from sundry.context.services import rule_add_candidate
from sundry.core.background import enqueue_on_commit
from sundry.tickets.attention import attention_flag, has_reason
from sundry.tickets.models import Ticket, Turn
from sundry.tickets.versions import ticket_lock, ticket_touch
from sundry.tooling.messages import ModelRequest

log = logging.getLogger("sundry.compaction")
Status = CompactionRun.Status
IN_FLIGHT = (Status.QUEUED, Status.RUNNING)
# A queued/running run older than this lost its task (Redis dropped it, a worker died
# before redelivery): the next check re-enqueues it rather than wedging the ticket.
STALE_AFTER = timedelta(minutes=15)
SUMMARISER_SOURCE = Source.SUMMARISER


def default_gateway() -> Gateway:
    # "offline" as the class's summariser model means the offline *summariser*.
    return Gateway(offline=OfflineSummariser())


def _assemble(ticket, snapshot=None, toolbox: Toolbox | None = None):
    # Counted as the next step sends it, with the class's toolbox (the run's, when it passed one).
    return assemble_request(ticket, snapshot or lane_snapshot(ticket), toolbox)


def _enqueue(run_id: int) -> None:
    from sundry.compaction.tasks import compaction_task  # the task module imports this one

    enqueue_on_commit(compaction_task, run_id)


# --- the trigger ---------------------------------------------------------------------------


def compaction_consider(
    *, ticket_id: int, step_id: int | None = None, resolved=None, force: bool = False
) -> CompactionRun | None:
    """After a resolution step: queue a compaction if the latest request is over the trigger.

    `resolved` (the loop's `Resolved`) carries what the step knows, so the common
    case — far under the trigger — reads nothing at all; `step_id` alone reads it back.
    `force`: compact whatever the request's size (the scenario suite's every-step mode);
    a pending hold, a tripped breaker or a run in flight still make it wait.
    """
    if resolved is None and step_id is not None:
        resolved = _resolved_from_row(step_id)
        if resolved is None:
            return None  # only at a resolution boundary
    if resolved is not None:
        step_id = resolved.step_id
        if not force and _clearly_under(resolved):
            return None  # far from the trigger: no need to read the lanes and assemble
    toolbox = None
    if resolved is not None and resolved.ticket is not None:
        ticket = resolved.ticket  # for its class and customer; what moves is in `state`
        toolbox = resolved.toolbox
    else:
        ticket = Ticket.objects.select_related("ticket_class", "customer").get(pk=ticket_id)
    state = _trigger_state(ticket_id)
    if state.in_flight_id and state.in_flight_created < timezone.now() - STALE_AFTER:
        with transaction.atomic():
            _enqueue(state.in_flight_id)
        return CompactionRun.objects.get(pk=state.in_flight_id)
    tclass = ticket.ticket_class
    known = resolved.next_lanes if resolved is not None else None
    # The step's own lanes plus its reply serve while the ticket is at the version it left;
    # then the next request's size is the step's plus the reply's, with nothing to assemble.
    if known is not None and known.version == state.version:
        snapshot, assembled = known, None
        total = total_after_reply(resolved.request_tokens, known.turns[-1], tclass.working_model)
    else:
        snapshot = lane_snapshot(ticket)
        assembled = _assemble(ticket, snapshot, toolbox)
        total = assembled.accounting.total_tokens
    # The class's budget is in the model's own tokens; Sundry counts an approximate model's
    # requests with cl100k_base, so the trigger is put in Sundry's tokens by the model's calibration,
    # or, where the provider counts tokens and that is on, by its count of this very request.
    factor = calibration.applied_factor(tclass.working_model)
    if not force and provider_counting(tclass.working_model):
        if assembled is None:
            assembled = _assemble(ticket, snapshot, toolbox)
        total = assembled.accounting.total_tokens
        counted = Gateway().count_tokens(assembled.request, model=tclass.working_model)
        if counted and total:
            log.info(
                "ticket %s: the provider counts %d tokens, Sundry %d (calibrated factor %.3f)",
                ticket_id,
                counted,
                total,
                factor,
            )
            factor = counted / total
    decision = decide(
        TriggerInput(
            total_tokens=total,
            trigger_tokens=-1 if force else int(tclass.trigger_tokens / factor),
            budget=int(tclass.token_budget / factor),
            held_pending=state.held_pending,
            breaker_tripped=has_reason(state.attention, BREAKER_PREFIX),
            run_in_flight=state.in_flight_id is not None,
            last_tokens_after=None if force else state.last_tokens_after,
        )
    )
    log.debug("ticket %s compaction check: %s", ticket_id, decision.reason)
    if not decision.compact:
        return None
    covered = state.summary_covers
    if (snapshot.summary.covers_through_turn if snapshot.summary else 0) != covered:
        return None  # a compaction landed since the snapshot; the next step decides afresh
    cut = _cut(snapshot, covered, tclass, budget=int(tclass.token_budget / factor), total=total, force=force)
    if cut is None:
        return None
    if assembled is None:  # the run records the request it shrinks
        assembled = _assemble(ticket, snapshot, toolbox)
    return _queue_run(ticket, state, covered, cut, assembled, step_id=step_id)


def _cut(snapshot, covered: int, tclass, *, budget: int, total: int, force: bool = False) -> int | None:
    """Where a compaction of a request of `total` tokens cuts, or None if it should not run. The
    class's recent turns stay word for word unless the request would stay over the budget with
    them: then fewer (`cut_within_budget`), as far as the parts compaction keeps allow. Unless
    forced, the range must be large enough to pay for its summary (`pays`)."""
    kept = [t for t in snapshot.turns if t.number > covered]
    cut = cut_within_budget(
        snapshot.turns,
        covered=covered,
        keep_recent=tclass.recent_turns_kept,
        room=budget - (total - sum(t.tokens for t in kept)),
        tokens_after=lambda c: sum(t.tokens for t in kept if t.number > c),
    )
    if cut is None or force:
        return cut
    worth = pays(sum(t.tokens for t in snapshot.turns if covered < t.number <= cut))
    log.debug("compaction worth: %s", worth.reason)
    return cut if worth.compact else None


def _queue_run(
    ticket, state: _TriggerState, covered: int, cut: int, assembled, *, step_id: int | None = None, enqueue: bool = True
) -> CompactionRun | None:
    """The run for turns covered+1..cut, queued for the worker (or, `enqueue` off, left for the
    caller to do in place). None if that range is done or in flight already."""
    ticket_id = ticket.pk
    run = CompactionRun(
        ticket_id=ticket_id,
        from_turn=covered + 1,
        through_turn=cut,
        base_summary_id=state.summary_id,
        context_version=covered,
        model=ticket.ticket_class.summariser_model,
        trigger_step_id=step_id,
        tokens_before=assembled.accounting.total_tokens,
    )
    run.request_before = assembled.request.model_dump(mode="json")
    try:
        with transaction.atomic():
            ticket_touch(ticket_id)  # the queued run shows in the desk; the ticket row first (lock order)
            # The range's unique constraint makes this the idempotency check.
            run.save(force_insert=True)
            if enqueue:
                _enqueue(run.pk)
        return run
    except IntegrityError:
        pass
    with transaction.atomic():
        ticket_lock(ticket_id)
        run = CompactionRun.objects.select_for_update().get(
            ticket_id=ticket_id, from_turn=covered + 1, through_turn=cut
        )
        if run.status != Status.FAILED:
            return None  # done (or in flight): the same range is never compacted twice
        CompactionRun.objects.filter(pk=run.pk).update(status=Status.QUEUED)
        ticket_touch(ticket_id)
        if enqueue:
            _enqueue(run.pk)
    return run


def compact_before_step(ticket, snapshot, assembled) -> bool:
    """The request a step is about to send is over the class's budget: compact now, in the
    step's own task, and say whether the lanes changed (the step then reads them again).

    The trigger runs after resolution steps and its run is queued, so a run of lookups can
    grow the request past the budget before any summary lands. Over the trigger the queued
    way is right (the customer waits for nothing); over the budget the step would send a
    request the class does not allow, so it waits for the summariser instead. A run already
    queued is done here (the worker's copy then finds it done); one running elsewhere, a held
    approval or a tripped breaker leave the request as it is, and the budget panel says why."""
    tclass = ticket.ticket_class
    factor = calibration.applied_factor(tclass.working_model)
    budget = int(tclass.token_budget / factor)
    total = assembled.accounting.total_tokens
    if total <= budget:
        return False
    state = _trigger_state(ticket.pk)
    if state.held_pending or has_reason(state.attention, BREAKER_PREFIX):
        return False
    if state.in_flight_id is not None:
        if CompactionRun.objects.filter(pk=state.in_flight_id, status=Status.QUEUED).exists():
            return _compacted(compaction_run(state.in_flight_id))
        return False
    covered = state.summary_covers
    if (snapshot.summary.covers_through_turn if snapshot.summary else 0) != covered:
        return True  # a compaction landed since the snapshot: read the lanes again
    cut = _cut(snapshot, covered, tclass, budget=budget, total=total)
    if cut is None:
        return False
    run = _queue_run(ticket, state, covered, cut, assembled, enqueue=False)
    if run is None:
        return False
    log.info(
        "ticket %s: request of %d tokens over the budget %d; compacting turns %d-%d before the step",
        ticket.pk,
        total,
        budget,
        covered + 1,
        cut,
    )
    return _compacted(compaction_run(run.pk))


def _compacted(run: CompactionRun) -> bool:
    return run.status in (Status.SUCCEEDED, Status.FALLBACK)


@dataclass(frozen=True)
class _TriggerState:
    version: int
    attention: str
    in_flight_id: int | None
    in_flight_created: datetime | None
    last_tokens_after: int | None  # the last finished compaction's request size after it
    held_pending: bool
    summary_id: int | None
    summary_covers: int


def _trigger_state(ticket_id: int) -> _TriggerState:
    """Everything the decision reads besides the request."""
    ticket = Ticket.objects.filter(pk=ticket_id).values_list("version", "attention").first()
    if ticket is None:
        raise Ticket.DoesNotExist(f"ticket {ticket_id} does not exist")
    runs = CompactionRun.objects.filter(ticket_id=ticket_id).order_by("-id")
    in_flight = runs.filter(status__in=IN_FLIGHT).values_list("id", "created_at").first()
    summary = (
        Summary.objects.filter(ticket_id=ticket_id, is_current=True).values_list("id", "covers_through_turn").first()
    )
    return _TriggerState(
        version=ticket[0],
        attention=ticket[1],
        in_flight_id=in_flight[0] if in_flight else None,
        in_flight_created=in_flight[1] if in_flight else None,
        last_tokens_after=runs.filter(status__in=(Status.SUCCEEDED, Status.FALLBACK))
        .values_list("tokens_after", flat=True)
        .first(),
        held_pending=HeldAction.objects.filter(ticket_id=ticket_id, status=HeldAction.Status.PENDING).exists(),
        summary_id=summary[0] if summary else None,
        summary_covers=summary[1] if summary else 0,
    )


def _resolved_from_row(step_id: int) -> Resolved | None:
    """What the loop would have passed, read back from a stored resolution step."""
    step = AgentStep.objects.select_related("ticket__ticket_class").filter(pk=step_id, is_resolution=True).first()
    if step is None:
        return None
    return Resolved(
        ticket_id=step.ticket_id,
        step_id=step.pk,
        outcome=step.outcome,
        request_tokens=step.request_tokens,
        trigger_tokens=step.ticket.ticket_class.trigger_tokens,
        first_turn=step.first_turn,
        last_turn=step.last_turn,
        version=step.ticket.version,
        model=step.ticket.ticket_class.working_model,
    )


def _clearly_under(resolved: Resolved) -> bool:
    """Far from the trigger by what the step knows; with its next lanes in hand, without a query."""
    if resolved.next_lanes is not None:
        appended = sum(t.tokens for t in resolved.next_lanes.turns if t.number >= resolved.first_turn)
    else:
        appended = (
            Turn.objects.filter(
                ticket_id=resolved.ticket_id, number__gte=resolved.first_turn, number__lte=resolved.last_turn
            ).aggregate(t=Sum("tokens"))["t"]
            or 0
        )
    factor = calibration.applied_factor(resolved.model) if resolved.model else 1.0
    return clearly_under(
        request_tokens=resolved.request_tokens,
        appended_tokens=appended,
        appended_turns=max(0, resolved.last_turn - resolved.first_turn + 1),
        trigger_tokens=int(resolved.trigger_tokens / factor),
        lanes_may_grow=resolved.outcome != AgentStep.Outcome.REPLY,
    )


def resolution_listener(resolved) -> None:
    """Registered in sundry.agent.loop.resolution_listeners; must never break the agent."""
    try:
        compaction_consider(ticket_id=resolved.ticket_id, resolved=resolved)
    except Exception:
        log.exception("compaction check failed for ticket %s", resolved.ticket_id)


# --- the work ------------------------------------------------------------------------------


def _turn_data(t: Turn) -> TurnData:
    return TurnData(number=t.number, author=t.author, kind=t.kind, text=t.text, payload=t.payload, tokens=t.tokens)


def _inputs(run: CompactionRun, toolbox: Toolbox | None = None):
    """The summariser request and the facts its output is validated against, from the run's range
    (`toolbox`: the ticket class's, else built here)."""
    ticket = run.ticket
    toolbox = toolbox or toolbox_for(ticket.ticket_class)
    working = ticket.ticket_class.working_model
    # Internal notes are staff-only: no summary is written from one.
    turns = [
        _turn_data(t)
        for t in Turn.objects.filter(ticket=ticket, number__gte=run.from_turn, number__lte=run.through_turn)
        .exclude(kind=Turn.Kind.INTERNAL)
        .order_by("number")
    ]
    base = run.base_summary
    previous = SummaryData(base.covers_through_turn, base.text, base.fallback) if base else None
    snap = lane_snapshot(ticket, with_turns=False)
    request = sm.build_request(model=run.model, turns=turns, ledger=snap.ledger, rules=snap.rules, previous=previous)
    quotes = sm.required_quotes(
        turns, rules=snap.rules, previous=previous, roles={e.value: e.role for e in snap.ledger}
    )
    # Tokens met anywhere in the ticket: the base summary's record, plus the turns after it.
    seen = sm.SeenTokens.from_json(base.seen_tokens if base else None)
    seen.add(
        _turn_data(t)
        for t in Turn.objects.filter(ticket=ticket, number__gt=seen.through)
        .exclude(kind=Turn.Kind.INTERNAL)
        .order_by("number")
    )
    ledger_all = list(LedgerEntry.objects.filter(ticket=ticket).values_list("value", "role", "kind"))
    done_on = list(ActionTaken.objects.filter(ticket=ticket).values_list("tool", "target"))
    actions = {tool for tool, _ in done_on}
    if HeldAction.objects.filter(
        ticket=ticket, status__in=(HeldAction.Status.APPROVED, HeldAction.Status.EXECUTED)
    ).exists():
        actions.add("*approval")
    # A class with tool servers: its done actions are declared there.
    capabilities = (
        None
        if not toolbox.own_tools
        else {
            name: list(decl.capabilities) for name in sorted(actions) if (decl := toolbox.domain.tool(name)) is not None
        }
    )
    domain = toolbox.domain
    tools = {name: list(decl.capabilities) for name, decl in domain.tools.items()}
    ctx = sm.ValidationContext(
        ledger_values=sorted({v for v, _, _ in ledger_all}),
        roles=sorted({r for _, r, _ in ledger_all}),
        history_ids=sorted(seen.ids),
        history_shaped=sorted(seen.shaped),
        replaced_tokens=sm.replaced_tokens(turns, previous, working),
        covers_through_turn=run.through_turn,
        model=working,
        ledger_roles={v: r for v, r, _ in ledger_all},
        actions=sorted(actions),
        domain=snap.domain,
        capabilities=capabilities,
        tools=tools,
        lanes=_faithful_lanes(snap.rules, turns, previous, done_on, ledger_all, tools).as_json(),
        quotes=quotes,
        vocabulary=sm.ticket_vocabulary(turns, ledger=snap.ledger, rules=snap.rules, previous=previous),
    )
    return turns, request, ctx, seen


def _faithful_lanes(rules, turns, previous, done_on, ledger_all, tools) -> faithful.Lanes:
    """What a summary's decisions, actions and constraints are judged against (`faithful`)."""
    role_of = {v: r for v, r, _ in ledger_all}
    refusals = []
    for rule in rules:  # pinned and candidate: the customer's stated constraints, enforced either way
        caps = set(forbidden_capabilities(rule.text))
        caps |= {c for name in (rule.enforcement or {}).get("block_tools", ()) for c in tools.get(name, ())}
        if caps:
            only = [role_of[v] for v in (rule.enforcement or {}).get("only_on", ()) if v in role_of]
            refusals.append(faithful.Refusal(rule.text, sorted(caps), only))
    # Raised by a call the model made (whatever became of it) or by someone's words; results say what
    # exists, not what anyone offered, and are left out.
    called = {
        c
        for t in turns
        if t.kind == Turn.Kind.TOOL_CALL
        for call in (t.payload or {}).get("calls") or []
        if isinstance(call, dict)
        for c in tools.get(str(call.get("name")), ())
    }
    texts = [t.text for t in turns if t.kind in (Turn.Kind.MESSAGE, Turn.Kind.NOTE)]
    raised = faithful.raised_in(texts + ([previous.text] if previous else []), called)
    done: dict[str, set[str]] = {}
    for tool, target in done_on:
        for c in tools.get(tool, ()):
            done.setdefault(c, set()).add(role_of.get(target, ""))
    return faithful.Lanes(refusals, raised, done, {r: k for _, r, k in ledger_all})


def compaction_run(run_id: int, *, gateway: Gateway | None = None) -> CompactionRun:
    """Do one compaction run; safe to call any number of times for the same run."""
    ticket_id = CompactionRun.objects.values_list("ticket_id", flat=True).get(pk=run_id)
    with transaction.atomic():
        ticket_lock(ticket_id)  # lock order: the ticket row first, then the run
        run = CompactionRun.objects.select_for_update().select_related("ticket__ticket_class").get(pk=run_id)
        if run.status in CompactionRun.DONE:
            return run
        if not _base_is_current(run):
            return _finish_stale(run)
        CompactionRun.objects.filter(pk=run.pk).update(status=Status.RUNNING, started_at=timezone.now())
        ticket_touch(ticket_id)
    try:
        return _work(run, gateway or default_gateway())
    except Exception as exc:
        log.exception("compaction run %s failed", run_id)
        return _finish_failed(run_id, f"{type(exc).__name__}: {exc}")


def _base_is_current(run: CompactionRun) -> bool:
    current = Summary.objects.filter(ticket_id=run.ticket_id, is_current=True).values_list("pk", flat=True).first()
    return current == run.base_summary_id


def _work(run: CompactionRun, gateway: Gateway) -> CompactionRun:
    toolbox = toolbox_for(run.ticket.ticket_class)  # what the summary is checked against, and the request after
    turns, request, ctx, seen = _inputs(run, toolbox)
    CompactionRun.objects.filter(pk=run.pk).update(
        summariser_input=request.model_dump(mode="json"),
        validation_context=ctx.as_dict(),
        replaced_tokens=ctx.replaced_tokens,
    )
    log_entries, accepted, raw_accepted, model_used, path = [], None, "", "", ""
    cost, latency, tin, tout = Decimal(0), 0, 0, 0
    asked = request
    for attempt in range(1, sm.MAX_ATTEMPTS + 1):
        entry: dict = {"attempt": attempt}
        try:
            call = gateway.call(asked, model=run.model)
        except ModelCallError as exc:
            entry.update(ok=False, reasons=["model_error"], details=[str(exc)])
        else:
            raw = call.response.text or ""
            verdict = sm.validate(raw, ctx)
            cost += call.cost_usd
            latency += call.latency_ms
            tin += call.response.usage.input_tokens
            tout += call.response.usage.output_tokens
            model_used = call.response.model or run.model
            path = call.response.output_path or "text"
            entry.update(
                ok=verdict.ok,
                reasons=verdict.reasons,
                details=verdict.details,
                output=raw,
                latency_ms=call.latency_ms,
                cost_usd=str(call.cost_usd),
                tokens=verdict.tokens,
                output_path=path,
                substituted=verdict.substituted,
            )
            if verdict.ok:
                accepted, raw_accepted = verdict, raw
            else:
                asked = sm.retry_request(request, raw, verdict)  # the retry sees the exact errors
        log_entries.append(entry)
        # Saved as it goes, so a worker killed mid-run still leaves its evidence (and the desk counts attempts).
        with transaction.atomic():
            ticket_touch(run.ticket_id)
            CompactionRun.objects.filter(pk=run.pk).update(attempt_log=log_entries, attempts=attempt)
        if accepted:
            break
    return _accept(
        run,
        turns,
        accepted,
        raw_accepted,
        log_entries,
        dict(
            model_used=model_used,
            cost_usd=cost,
            latency_ms=latency,
            input_tokens=tin,
            output_tokens=tout,
            output_path=path,
        ),
        seen,
        toolbox,
    )


def _accept(
    run, turns, verdict, raw, log_entries, figures, seen: sm.SeenTokens, toolbox: Toolbox | None = None
) -> CompactionRun:
    with transaction.atomic():
        # Lock order: the ticket row first (as turn_append and lane edits), then the run.
        ticket_lock(run.ticket_id)
        run = CompactionRun.objects.select_for_update().select_related("ticket__ticket_class").get(pk=run.pk)
        if run.status in CompactionRun.DONE:
            return run  # another delivery of this task finished first
        current = Summary.objects.select_for_update().filter(ticket_id=run.ticket_id, is_current=True).first()
        if (current.pk if current else None) != run.base_summary_id:
            return _finish_stale(run)
        fallback = verdict is None
        quotes = (run.validation_context or {}).get("quotes")  # what the summary had to quote
        fields = (
            verdict.fields
            if verdict
            else sm.fallback_fields(
                turns, from_turn=run.from_turn, through_turn=run.through_turn, failures=len(log_entries), quotes=quotes
            )
        )
        text = verdict.text if verdict else sm.render_fields(fields)
        if fallback and current:
            text = f"{current.text.strip()}\n{text}"  # trimming never drops the earlier summary
        if current:
            Summary.objects.filter(pk=current.pk).update(is_current=False)
        summary = Summary.objects.create(
            ticket_id=run.ticket_id,
            covers_through_turn=run.through_turn,
            fields=fields.model_dump(),
            text=text,
            is_current=True,
            fallback=fallback,
            seen_tokens=seen.as_json(),
        )
        if not fallback:
            _rule_candidates(run, sm.rule_candidate_texts(fields.constraints_not_pinned, quotes))
        for key, value in figures.items():
            setattr(run, key, value)
        run.status = Status.FALLBACK if fallback else Status.SUCCEEDED
        run.summary, run.summariser_output = summary, raw
        run.attempt_log, run.attempts = log_entries, len(log_entries)
        after = _assemble(run.ticket, None, toolbox)
        run.request_after = after.request.model_dump(mode="json")
        run.tokens_after = after.accounting.total_tokens
        run.finished_at = timezone.now()
        run.error = "" if not fallback else "summariser failed validation; deterministic trim used"
        run.save()
        if fallback:
            _breaker_check(run.ticket_id)
        ticket_touch(run.ticket_id)
    return run


def _rule_candidates(run: CompactionRun, constraints: list[str]) -> None:
    for text in constraints:
        rule_add_candidate(ticket=run.ticket, text=text, turn=run.through_turn, source=SUMMARISER_SOURCE)


def _finish_stale(run: CompactionRun) -> CompactionRun:
    """In the caller's transaction, which holds the ticket row's lock."""
    CompactionRun.objects.filter(pk=run.pk).update(
        status=Status.STALE, finished_at=timezone.now(), error="the ticket's summary changed under this run"
    )
    ticket_touch(run.ticket_id)
    run.refresh_from_db()
    return run


def _finish_failed(run_id: int, error: str) -> CompactionRun:
    ticket_id = CompactionRun.objects.values_list("ticket_id", flat=True).get(pk=run_id)
    with transaction.atomic():
        ticket_lock(ticket_id)  # the breaker may write the ticket: its row first, then the run
        run = CompactionRun.objects.select_for_update().get(pk=run_id)
        if run.status in CompactionRun.DONE:
            return run
        run.status, run.error, run.finished_at = Status.FAILED, error[:2000], timezone.now()
        run.save(update_fields=["status", "error", "finished_at"])
        _breaker_check(run.ticket_id)
        ticket_touch(run.ticket_id)
    return run


def _breaker_check(ticket_id: int) -> None:
    outcomes = list(
        CompactionRun.objects.filter(ticket_id=ticket_id, status__in=(Status.SUCCEEDED, Status.FALLBACK, Status.FAILED))
        .order_by("-id")
        .values_list("status", flat=True)[:BREAKER_FAILURES]
    )
    if breaker_should_trip(outcomes):
        # Beside any other reason (a model out of reach, a customer's report), never over it.
        attention_flag(
            ticket_id,
            f"{BREAKER_PREFIX}: {BREAKER_FAILURES} compactions in a row failed or "
            "fell back; compaction is paused until staff clear this.",
            cause=BREAKER_PREFIX,
        )


# --- replay --------------------------------------------------------------------------------


def compaction_replay(run_id: int, *, gateway: Gateway | None = None, model: str | None = None) -> sm.Verdict:
    """Send a stored run's exact summariser input again and validate the output. Runs no tool, writes nothing."""
    run = CompactionRun.objects.get(pk=run_id)
    if not run.summariser_input:
        raise ValueError(f"compaction run {run_id} has no stored summariser input")
    request = ModelRequest.model_validate(run.summariser_input)
    call = (gateway or default_gateway()).call(request, model=model or run.model)
    verdict = sm.validate(call.response.text or "", sm.ValidationContext.from_dict(run.validation_context))
    verdict.details.insert(0, f"output: {call.response.text}")
    return verdict


# --- why a request over the trigger is not compacted (for the desk's budget panel) -----------


def compaction_blocked_reason(ticket, total_tokens: int, *, accounting: dict | None = None) -> str:
    """In words, what keeps a request of `total_tokens` (over the class's trigger) from being
    compacted now, by the same checks `compaction_consider` makes, in the same order. Over the
    budget, with the step's `accounting`, first why in numbers (`trigger.over_budget_cause`)."""
    reason = _blocked_reason(ticket, total_tokens)
    tclass = ticket.ticket_class
    if accounting and total_tokens > tclass.token_budget:
        cause = over_budget_cause(
            accounting, total=total_tokens, budget=tclass.token_budget, recent_kept=tclass.recent_turns_kept
        )
        return f"{cause}; {reason}"
    return reason


def _blocked_reason(ticket, total_tokens: int) -> str:
    tclass = ticket.ticket_class
    state = _trigger_state(ticket.pk)
    decision = decide(
        TriggerInput(
            total_tokens=total_tokens,
            trigger_tokens=tclass.trigger_tokens,
            budget=tclass.token_budget,
            held_pending=state.held_pending,
            breaker_tripped=has_reason(state.attention, BREAKER_PREFIX),
            run_in_flight=state.in_flight_id is not None,
            last_tokens_after=state.last_tokens_after,
        )
    )
    if state.held_pending:
        return "a held approval blocks compaction: decide it and the next step may compact"
    if has_reason(state.attention, BREAKER_PREFIX):
        return "the compaction breaker tripped after repeated failures: clear the flag to allow it again"
    if state.in_flight_id is not None:
        return "a compaction is queued or running"
    if not decision.compact:
        if state.last_tokens_after is not None and total_tokens > tclass.trigger_tokens:
            needed = state.last_tokens_after + int(tclass.token_budget * GROWTH_FRACTION)
            return (
                f"too little growth since the last compaction (it left {state.last_tokens_after:,} tokens; "
                f"the next waits for {needed:,})"
            )
        return decision.reason
    turns = lane_snapshot(ticket).turns
    cut = cut_point(turns, covered=state.summary_covers, keep_recent=tclass.recent_turns_kept)
    if cut is None:
        return (
            f"not enough compactable history: every turn is among the {tclass.recent_turns_kept} "
            "most recent, which are kept word for word"
        )
    worth = pays(sum(t.tokens for t in turns if state.summary_covers < t.number <= cut))
    if not worth.compact:
        return f"not enough compactable history: {worth.reason}"
    return "a compaction runs after the next resolution step"
