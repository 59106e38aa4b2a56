"""Compaction runs through the database: trigger, accept, retry, fallback, idempotency, the 1/3 target."""

from __future__ import annotations

import json

import pytest

from sundry.agent.loop import tool_specs
from sundry.agent.models import HeldAction
from sundry.agent.provider.gateway import Gateway
from sundry.agent.provider.scripted import ScriptedModel
from sundry.compaction.models import CompactionRun
from sundry.compaction.offline import OfflineSummariser
from sundry.compaction.services import compaction_consider, compaction_run
from sundry.compaction.trigger import BREAKER_PREFIX
from sundry.context.assembly import assemble
from sundry.context.models import PinnedRule, Summary
from sundry.context.selectors import lane_snapshot
from sundry.tickets.models import Ticket, Turn
from sundry.tickets.services import turn_append
from sundry.tooling.messages import ModelResponse
from tests.compaction.helpers import ITEM, ORDER, REFUND, RULE, TRACKING, long_ticket

pytestmark = pytest.mark.django_db


def total(ticket):
    ticket = Ticket.objects.select_related("ticket_class", "customer").get(pk=ticket.pk)
    return assemble(lane_snapshot(ticket), model=ticket.ticket_class.working_model, tools=tool_specs())


def set_trigger(ticket, trigger_tokens, *, budget: int | None = None):
    """trigger_tokens = int(budget × fraction) exactly (budget twice the trigger unless given: a
    request over the budget is compacted in the step itself, before the trigger is asked)."""
    tc = ticket.ticket_class
    tc.token_budget = budget or trigger_tokens * 2
    tc.trigger_fraction = trigger_tokens / tc.token_budget
    tc.save()


def good(**over):
    fields = {
        "decisions": ["keep the table; partial refund agreed"],
        "actions_taken": ["issue_refund on [damaged_order]"],
        "constraints_not_pinned": ["I don't want a replacement."],
        "open_questions": ["when does [second_parcel] arrive?"],
        "narrative": "The buyer's [garden_table] from [damaged_order] arrived scratched; refunded; parcel tracked.",
    }
    fields.update(over)
    return ModelResponse(text=json.dumps(fields))


def queued_run(ticket):
    set_trigger(ticket, 1000)
    run = compaction_consider(ticket_id=ticket.pk)
    assert run is not None and run.status == CompactionRun.Status.QUEUED
    return run


# --- trigger through the database -----------------------------------------------------


def test_trigger_boundary_on_the_real_request():
    ticket = long_ticket()
    size = total(ticket).accounting.total_tokens
    set_trigger(ticket, size)  # exactly at the trigger: not over
    assert compaction_consider(ticket_id=ticket.pk) is None
    set_trigger(ticket, size - 1)  # one token over
    run = compaction_consider(ticket_id=ticket.pk)
    assert run and run.tokens_before == size
    stored = CompactionRun.objects.get(pk=run.pk).request_before
    assert stored == total(ticket).request.model_dump(mode="json")  # the full pre-compaction request is stored


def test_trigger_waits_for_held_action_and_in_flight_run():
    ticket = long_ticket()
    set_trigger(ticket, 1000)
    held = HeldAction.objects.create(
        ticket=ticket,
        tool="issue_refund",
        arguments={},
        call_id="h",
        reason="big",
        idempotency_key="held-1",
        turn=ticket.last_turn_number,
    )
    assert compaction_consider(ticket_id=ticket.pk) is None
    held.status = HeldAction.Status.REJECTED
    held.save()
    assert compaction_consider(ticket_id=ticket.pk) is not None
    assert compaction_consider(ticket_id=ticket.pk) is None  # one in flight already
    assert CompactionRun.objects.filter(ticket=ticket).count() == 1


def test_growth_rule_after_a_compaction():
    ticket = long_ticket()
    run = queued_run(ticket)
    run = compaction_run(run.pk, gateway=Gateway(override=OfflineSummariser()))
    assert run.status == "succeeded", run.attempt_log
    set_trigger(ticket, 1000)  # still over the trigger, but no growth since
    assert compaction_consider(ticket_id=ticket.pk) is None
    for _ in range(6):  # grow by more than 10% of the budget (2,000 → 200 tokens) ...
        turn_append(ticket=ticket, author=Turn.Author.CUSTOMER, text="Still waiting on the parcel, any update? " * 8)
    # ... but with too little history before the recent turns to be worth a summary.
    assert compaction_consider(ticket_id=ticket.pk) is None
    for _ in range(10):
        turn_append(ticket=ticket, author=Turn.Author.CUSTOMER, text="Still waiting on the parcel, any update? " * 8)
    assert compaction_consider(ticket_id=ticket.pk) is not None


# --- the 40-turn ticket ----------------------------------------------------------------


def test_long_ticket_compacts_to_a_third_with_every_fact_kept():
    ticket = long_ticket()
    assert ticket.last_turn_number >= 40
    full = total(ticket)
    # A budget the whole request fits, so the class's recent turns are all kept (over the budget the
    # cut gives some up: test_over_the_budget_the_cut_gives_up_recent_turns_until_the_request_fits).
    ticket.ticket_class.trigger_fraction, ticket.ticket_class.token_budget = 0.3, full.accounting.total_tokens
    ticket.ticket_class.save()
    run = compaction_run(compaction_consider(ticket_id=ticket.pk).pk)  # class model "offline" → OfflineSummariser
    assert run.status == "succeeded", run.attempt_log
    after = total(ticket)
    assert after.accounting.total_tokens * 3 <= full.accounting.total_tokens, (
        after.accounting.total_tokens,
        full.accounting.total_tokens,
    )
    assert run.tokens_before == full.accounting.total_tokens and run.tokens_after == after.accounting.total_tokens
    assert run.request_after == after.request.model_dump(mode="json")
    text = "\n".join(m.content for m in after.request.messages)
    for value in (ORDER, ITEM, TRACKING, REFUND, RULE, "issue_refund", "key-refund-1"):
        assert value in text, value
    summary = Summary.objects.get(ticket=ticket, is_current=True)
    assert summary.covers_through_turn == run.through_turn and not summary.fallback
    # Entities by role, never by value, in the summary block.
    block = next(m.content for m in after.request.messages if m.lane == "summary")
    assert "[damaged_order]" in block and ORDER not in block
    # The recent turns are untouched; exactly the prefix went.
    numbers = [n for m in after.request.messages for n in m.turns]
    assert min(numbers) == run.through_turn + 1 and max(numbers) == ticket.last_turn_number
    assert ticket.last_turn_number - run.through_turn >= ticket.ticket_class.recent_turns_kept


def test_constraints_not_pinned_become_candidates():
    ticket = long_ticket()
    run = compaction_run(queued_run(ticket).pk, gateway=Gateway(override=ScriptedModel([good()])))
    assert run.status == "succeeded"
    rule = PinnedRule.objects.get(ticket=ticket, text="I don't want a replacement.")
    assert rule.status == PinnedRule.Status.CANDIDATE and rule.source == "summariser"


# --- retry, fallback, failure ------------------------------------------------------------


def test_retry_then_success_records_every_attempt():
    ticket = long_ticket()
    model = ScriptedModel(
        [
            ModelResponse(text='{"narrative": "missing the rest"}'),
            good(narrative=f"The buyer's table from {ORDER} arrived scratched; refunded."),
        ]
    )
    run = compaction_run(queued_run(ticket).pk, gateway=Gateway(override=model))
    assert run.status == "succeeded" and run.attempts == 2
    assert [a["reasons"] for a in run.attempt_log] == [["schema"], []]
    # The retry showed the model its answer and the exact validation errors.
    retry = model.requests[1].messages
    assert retry[-2].role == "assistant" and retry[-2].content == '{"narrative": "missing the rest"}'
    assert run.attempt_log[0]["details"] == [
        f"{field}: Field required"
        for field in ("decisions", "actions_taken", "constraints_not_pinned", "open_questions")
    ]
    assert all(detail in retry[-1].content for detail in run.attempt_log[0]["details"])
    # The order number written instead of its role was replaced by the role, not rejected.
    assert run.attempt_log[1]["substituted"] == [ORDER]
    summary = Summary.objects.get(ticket=ticket, is_current=True)
    assert ORDER not in summary.text and "[damaged_order]" in summary.text
    assert run.summariser_input == model.requests[0].model_dump(mode="json")
    assert run.output_path == "text"  # an in-process model answers in text


def test_fallback_after_n_failures_keeps_other_lanes():
    ticket = long_ticket()
    model = ScriptedModel([ModelResponse(text="not json"), good(narrative="See XQ-99821.")])
    run = compaction_run(queued_run(ticket).pk, gateway=Gateway(override=model))
    assert run.status == "fallback" and run.attempts == 2
    summary = Summary.objects.get(ticket=ticket, is_current=True)
    assert summary.fallback and "trimmed" in summary.text and "track_parcel" in summary.text
    text = "\n".join(m.content for m in total(ticket).request.messages)
    assert "deterministic trim" in text
    for value in (ORDER, ITEM, TRACKING, REFUND, RULE, "key-refund-1"):
        assert value in text


def test_breaker_trips_after_three_failed_compactions_and_stops_triggering():
    ticket = long_ticket()
    for i in range(3):
        run = queued_run(ticket)
        # A bug in the summariser path (not a validation failure): the run fails, nothing is written.
        failing = Gateway(override=ScriptedModel([RuntimeError("boom")]))
        assert compaction_run(run.pk, gateway=failing).status == "failed"
        assert not Summary.objects.filter(ticket=ticket).exists()
        if i < 2:
            assert not Ticket.objects.get(pk=ticket.pk).attention
            # The ticket keeps taking turns, so the next check covers a new range.
            turn_append(ticket=ticket, author=Turn.Author.CUSTOMER, text="Any news?")
    ticket.refresh_from_db()
    assert ticket.attention.startswith(BREAKER_PREFIX)
    assert compaction_consider(ticket_id=ticket.pk) is None
    Ticket.objects.filter(pk=ticket.pk).update(attention="")  # staff clear it
    assert compaction_consider(ticket_id=ticket.pk) is not None


# --- idempotency and compare-and-set ---------------------------------------------------------


def test_running_the_same_run_twice_does_the_work_once():
    ticket = long_ticket()
    run = queued_run(ticket)
    model = ScriptedModel([good()])
    first = compaction_run(run.pk, gateway=Gateway(override=model))
    second = compaction_run(run.pk, gateway=Gateway(override=model))  # a redelivered task
    assert first.status == second.status == "succeeded" and model.remaining == 0
    assert Summary.objects.filter(ticket=ticket).count() == 1
    assert compaction_consider(ticket_id=ticket.pk) is None  # the same range is not queued again


def test_turns_arriving_meanwhile_are_kept_and_a_stale_run_writes_nothing(monkeypatch):
    from sundry.compaction import services

    ticket = long_ticket()
    run = queued_run(ticket)
    accept = services._accept

    def late_turn_then_accept(*args, **kwargs):  # a customer message lands while the summariser works
        turn_append(ticket=ticket, author=Turn.Author.CUSTOMER, text="One more thing: it's urgent.")
        return accept(*args, **kwargs)

    monkeypatch.setattr(services, "_accept", late_turn_then_accept)
    run = compaction_run(run.pk, gateway=Gateway(override=ScriptedModel([good()])))
    summary = Summary.objects.get(ticket=ticket, is_current=True)
    assert summary.covers_through_turn == run.through_turn
    texts = [m.content for m in total(ticket).request.messages]
    assert "One more thing: it's urgent." in texts
    # A run built from an older summary must not overwrite the newer one.
    stale = CompactionRun.objects.create(
        ticket=ticket,
        base_summary=None,
        context_version=0,
        from_turn=1,
        through_turn=run.through_turn + 1,
        model="offline",
    )
    assert compaction_run(stale.pk, gateway=Gateway(override=ScriptedModel([]))).status == "stale"
    assert Summary.objects.get(ticket=ticket, is_current=True).pk == summary.pk


def test_second_compaction_folds_in_the_first():
    ticket = long_ticket()
    first = compaction_run(queued_run(ticket).pk)
    for i in range(30):
        turn_append(ticket=ticket, author=Turn.Author.CUSTOMER, text=f"Another long question about delivery {i}? " * 6)
    second = compaction_consider(ticket_id=ticket.pk)
    assert second and second.from_turn == first.through_turn + 1 and second.base_summary_id == first.summary_id
    second = compaction_run(second.pk)
    assert second.status == "succeeded", second.attempt_log
    assert "PREVIOUS SUMMARY" in second.summariser_input["messages"][1]["content"]
    current = Summary.objects.get(ticket=ticket, is_current=True)
    assert current.covers_through_turn == second.through_turn and Summary.objects.filter(ticket=ticket).count() == 2


def test_agent_resolution_step_fires_the_trigger(monkeypatch, django_capture_on_commit_callbacks):
    from sundry.agent.loop import agent_run, resolution_listeners
    from sundry.compaction import services

    assert services.resolution_listener in resolution_listeners  # registered by CompactionConfig.ready
    queued = []
    monkeypatch.setattr(services, "_enqueue", queued.append)
    ticket = long_ticket()
    set_trigger(ticket, 1000, budget=50_000)
    turn_append(ticket=ticket, author=Turn.Author.CUSTOMER, text="Is the parcel here yet?")
    with django_capture_on_commit_callbacks(execute=True):
        agent_run(
            ticket.pk, gateway=Gateway(override=ScriptedModel([ModelResponse(text="Not yet; it is on its way.")]))
        )
    run = CompactionRun.objects.get(ticket=ticket)
    assert queued == [run.pk] and run.trigger_step.is_resolution


def test_the_trigger_counts_the_next_request_without_assembling_it_and_gets_the_assembled_figure(
    monkeypatch, django_capture_on_commit_callbacks
):
    """After a plain reply the trigger adds the reply's message to the step's own count; it must be exact."""
    from sundry.agent import loop, step
    from sundry.compaction import services

    seen = []
    monkeypatch.setattr(step, "resolution_listeners", [seen.append])
    ticket = long_ticket()
    for text in ("Is the parcel here yet?", "And the refund: when does it land? Order SU-40118, rfd_3h8j2k5m."):
        turn_append(ticket=ticket, author=Turn.Author.CUSTOMER, text=text)
        # Any text passes the reply check as long as every identifier in it is one the request showed
        # and it states nothing the records do not back (the fixture's order is in no shop records).
        reply = f"Not yet; I am still checking. You asked: {text}"
        with django_capture_on_commit_callbacks(execute=True):  # the listeners run on commit
            loop.agent_run(ticket.pk, gateway=Gateway(override=ScriptedModel([ModelResponse(text=reply)])))
    assert len(seen) == 2 and all(r.next_lanes is not None for r in seen)
    for resolved in seen:
        model = resolved.ticket.ticket_class.working_model
        counted = services.total_after_reply(resolved.request_tokens, resolved.next_lanes.turns[-1], model)
        assembled = services._assemble(resolved.ticket, resolved.next_lanes).accounting.total_tokens
        assert counted == assembled and counted > resolved.request_tokens


def test_cost_figures_put_compactions_beside_working_turns():
    from sundry.compaction.selectors import cost_figures

    ticket = long_ticket()
    run = compaction_run(queued_run(ticket).pk)
    figures = cost_figures(ticket=ticket)
    assert figures["compaction"]["count"] == 1 and figures["compaction"]["input_tokens"] == run.input_tokens > 0
    assert figures["compaction"]["tokens_saved"] == run.tokens_before - run.tokens_after > 0
    assert cost_figures(ticket_class=ticket.ticket_class)["compaction"]["count"] == 1


# --- validation's record of tokens seen, kept with each summary ------------------------------


def test_each_summary_keeps_the_tokens_seen_and_the_next_run_scans_only_newer_turns():
    ticket = long_ticket()
    first = compaction_run(queued_run(ticket).pk, gateway=Gateway(override=ScriptedModel([good()])))
    assert first.status == CompactionRun.Status.SUCCEEDED
    seen = first.summary.seen_tokens
    assert seen["through"] == Ticket.objects.get(pk=ticket.pk).last_turn_number
    assert ORDER in seen["ids"] and TRACKING in seen["ids"]  # from early turns

    # Later turns add a new token; an invented one is still caught, an early one is still known.
    turn_append(ticket=ticket, author="customer", text="Also my other order SU-55501 never came.")
    for i in range(16):
        turn_append(ticket=ticket, author="customer" if i % 2 else "agent", text=f"more about the table {i} " * 20)
    second_run = compaction_consider(ticket_id=ticket.pk)
    assert second_run is not None
    invented = good(narrative="Refund rfd_9x9x9x9x was issued for [damaged_order].")
    second = compaction_run(second_run.pk, gateway=Gateway(override=ScriptedModel([invented, good()])))
    assert second.attempt_log[0]["reasons"] == ["invented_id"]
    ctx = second.validation_context
    assert "SU-55501" in ctx["history_ids"] and ORDER in ctx["history_ids"]
    assert second.summary.seen_tokens["through"] > seen["through"]


def test_seen_tokens_kept_a_turn_at_a_time_match_a_scan_of_everything():
    from sundry.compaction.summariser import SeenTokens
    from sundry.context.idformats import find_id_shaped, find_ids
    from sundry.context.lanes import TurnData

    turns = [
        TurnData(
            number=i,
            author="tool",
            kind="tool_result",
            text=f"order SU-2{i:04d} parcel 1Z{i:06d}X",
            payload={"refund_id": f"re_{i:05d}abc"},
        )
        for i in range(1, 40)
    ]
    kept = SeenTokens()
    for chunk in (turns[:10], turns[:25], turns):  # the growing history, offered again each time
        kept.add(chunk)
    text = "\n".join(f"{t.text}\n{json.dumps(t.payload)}" for t in turns)
    assert kept.ids == {v for _, v in find_ids(text)} and kept.shaped == set(find_id_shaped(text))
    assert SeenTokens.from_json(kept.as_json()) == kept


def _budget_run(ticket, budget: int) -> CompactionRun:
    tc = ticket.ticket_class
    tc.token_budget, tc.trigger_fraction = budget, 0.5
    tc.save()
    run = compaction_consider(ticket_id=ticket.pk)
    assert run is not None
    return run


def test_over_the_budget_the_cut_gives_up_recent_turns_until_the_request_fits():
    ticket = long_ticket()
    keep = ticket.ticket_class.recent_turns_kept
    turns = lane_snapshot(ticket).turns
    rest = total(ticket).accounting.total_tokens - sum(t.tokens for t in turns)  # what compaction cannot shrink
    room = sum(t.tokens for t in turns[-keep:]) // 2  # half of what the class's recent turns take
    run = _budget_run(ticket, rest + room)
    kept = [t for t in turns if t.number > run.through_turn]
    assert 1 <= len(kept) < keep and sum(t.tokens for t in kept) <= room
    # Control: with room for them, every recent turn is kept word for word.
    CompactionRun.objects.filter(pk=run.pk).delete()
    run = _budget_run(ticket, 3 * total(ticket).accounting.total_tokens // 2)
    assert ticket.last_turn_number - run.through_turn >= keep
