"""The safety harness: Sundry's lanes keep IDs, rules and side effects through forced compaction;
the baselines are measured with the same checks at the same budget."""

from __future__ import annotations

from pathlib import Path

import pytest

from sundry.context.assembly import assemble
from sundry.context.lanes import TurnData
from sundry.evals import checks, importers, strategies
from sundry.evals.domains import DOMAINS
from sundry.evals.harness import HarnessConfig, run_all, run_ticket
from sundry.evals.replay import LaneReplay

FIXTURES = Path(__file__).parent / "fixtures"
# Small enough that the fixture's early results leave a sliding window.
TIGHT = HarnessConfig(budget=1800, keep_recent=4)


@pytest.fixture(scope="module")
def retail():
    return importers.tau2_results(FIXTURES / "tau2_retail_small.json")[0]


@pytest.fixture(scope="module")
def retail_result(retail):
    return run_ticket(retail, TIGHT)


def test_sundry_keeps_every_id_the_later_calls_need(retail_result):
    s = retail_result.stats["sundry"]
    assert retail_result.compactions > 0
    assert s["id_checks"] >= 8 and s["id_ok"] == s["id_checks"]
    assert not [f for f in retail_result.failures if f.strategy == "sundry"]


def test_the_baselines_lose_ids_that_only_a_tool_result_carried(retail_result):
    # The return needs the order's item ids, seen only in a result far back.
    for name in ("window", "prose"):
        s = retail_result.stats[name]
        assert s["id_checks"] == retail_result.stats["sundry"]["id_checks"]
        assert s["id_ok"] < s["id_checks"], name
    lost = [f for f in retail_result.failures if f.strategy == "prose" and f.check == "id_lost"]
    assert any("7000000001" in f.detail for f in lost)


def test_a_made_up_id_is_caught_and_not_counted_as_a_compaction_loss(retail_result):
    [made_up] = retail_result.made_up
    assert made_up["value"] == "gift_card_0000000" and made_up["class"] == "made_up" and made_up["caught"]
    assert retail_result.stats["sundry"]["refused_made_up"] == 1
    assert retail_result.stats["sundry"]["refused_unrecognised"] == 0


def test_labelled_constraints_are_scored_anywhere_in_the_request_not_in_a_pinned_block(retail):
    # The labels, not the classifier, are the reference; candidate rules count where production renders them.
    labelled = ["Please don't refund to my gift card, only to the credit card.", "OK, no exchange."]
    result = run_ticket(retail, TIGHT, labelled=labelled)
    s = result.stats["sundry"]
    assert s["constraint_checks"] > 0 and s["constraint_ok"] == s["constraint_checks"]
    assert result.stats["window"]["constraint_ok"] < result.stats["window"]["constraint_checks"]
    # Enforce threshold (candidate rules) and the wider quote threshold a summary quotes.
    assert result.enforced == ["Please don't refund to my gift card, only to the credit card.", "OK, no exchange."]
    # "Just return both items please." is a request: "just" before a verb is emphasis, not a limit
    # (docs/how-it-works.md, "What counts as a customer constraint").
    assert result.flagged == ["Please don't refund to my gift card, only to the credit card.", "OK, no exchange."]
    assert run_ticket(retail, TIGHT).stats["sundry"]["constraint_checks"] == 0  # an unlabelled source is not scored


def test_planted_rule_is_verbatim_and_enforced_after_padding_and_compaction(retail_result):
    s = retail_result.stats["sundry"]
    assert s["planted_checks"] == 1 and s["planted_verbatim"] == 1 and s["planted_respected"] == 1
    # Padding pushes it out of a sliding window at the same budget.
    assert retail_result.stats["window"]["planted_verbatim"] == 0


def test_completed_side_effects_stay_in_state_and_nothing_is_orphaned(retail_result):
    s = retail_result.stats["sundry"]
    assert s["action_checks"] > 0 and s["action_ok"] == s["action_checks"]
    for name in ("sundry", "window", "prose"):
        assert retail_result.stats[name]["orphans"] == 0
        assert retail_result.stats[name]["requests"] == retail_result.boundaries


def test_sliding_window_keeps_whole_units_only():
    turns = [
        TurnData(1, "customer", "message", "hello there, one two three"),
        TurnData(
            2,
            "agent",
            "tool_call",
            "",
            {
                "calls": [
                    {"id": "a", "name": "get_user_details", "arguments": {}},
                    {"id": "b", "name": "get_order_details", "arguments": {}},
                ]
            },
        ),
        TurnData(3, "tool", "tool_result", "x" * 400, {"call_id": "a", "ok": True}),
        TurnData(4, "tool", "tool_result", "y" * 400, {"call_id": "b", "ok": True}),
        TurnData(5, "agent", "message", "done"),
    ]
    cache = strategies.TokenCache()
    for allowance in range(0, 400, 7):
        kept = strategies.window(turns, allowance, cache)
        numbers = [t.number for t in kept]
        assert numbers == sorted(numbers) and (not numbers or numbers[-1] == 5)
        assert ({2, 3, 4} <= set(numbers)) or not ({2, 3, 4} & set(numbers))


def test_prose_digest_keeps_sentences_not_tool_traffic():
    turns = [
        TurnData(1, "customer", "message", "My order #W1000001 broke. I want a refund please."),
        TurnData(2, "tool", "tool_result", '{"order_id": "#W1000002", "items": []}', {"call_id": "a"}),
        TurnData(3, "agent", "message", "ok"),
    ]
    state = strategies.prose_compact(strategies.ProseState(), turns, 3, cap_tokens=500)
    assert "#W1000001" in state.text and "#W1000002" not in state.text
    small = strategies.prose_compact(strategies.ProseState(), turns, 3, cap_tokens=8)
    assert small.text.count("\n") < state.text.count("\n") or len(small.text) < len(state.text)


@pytest.mark.django_db
def test_demo_shop_ticket_worked_by_the_offline_model(tmp_path):
    """A real ticket from the loop, exported, replayed: the offline model's next calls are diffed."""
    from sundry.agent.loop import agent_run
    from sundry.agent.services import customer_message_post
    from sundry.desk.lifecycle import ticket_create
    from sundry.evals.records import export_ticket
    from sundry.shop.models import Order
    from sundry.shop.offline import OfflineModel
    from tests.factories import CustomerFactory, ParcelFactory, TicketClassFactory, TrackingEventFactory, paid_order

    customer = CustomerFactory()
    paid_order(customer=customer, number="SU-40110", prices=(3000, 2000))
    shipped = paid_order(customer=customer, number="SU-40111", status=Order.Status.SHIPPED, prices=(4500,))
    TrackingEventFactory(
        parcel=ParcelFactory(order=shipped, status="in_transit"), location="Leeds", description="Moving"
    )
    ticket = ticket_create(customer=customer.person, ticket_class=TicketClassFactory(approval_rules={}), subject="Help")
    for text in (
        "Where is my order SU-40111?",
        "Please refund SU-40110, it arrived broken. Never email me.",
        "Thanks. Where is SU-40111 now?",
        "The SU-40110 item is still broken, refund it.",
    ):
        customer_message_post(ticket=ticket, text=text)
        agent_run(ticket.pk)
    recorded = export_ticket(ticket)
    result = run_ticket(recorded, HarnessConfig(keep_recent=4), agent=OfflineModel())
    s = result.stats["sundry"]
    assert s["model_steps"] == result.boundaries > 0
    assert s["id_ok"] == s["id_checks"] > 0
    assert s["model_repeats"] == 0  # the refund already issued is not proposed again
    assert s["planted_model_checks"] == 1 and s["planted_model_sees_rule"] == 1 and s["planted_respected"] == 1
    assert result.stats["window"]["model_steps"] == result.boundaries


def test_real_traces_slice_keeps_ids_and_constraints():
    """A few real τ²-bench conversations (not ours): Sundry at 100%, baselines measured beside it."""
    from sundry.evals.sources import tau2_traces_dir

    traces = tau2_traces_dir()
    if traces is None:
        pytest.skip(
            "../shared/corpora/tau2/traces is absent (a fresh clone has no shared corpora); "
            "the harness slice over real traces needs it"
        )
    tickets = []
    for path in sorted(traces.glob("*.json")):
        tickets += importers.tau2_results(path)[:2]
    report = run_all(tickets)
    totals = report.totals()
    s = totals["sundry"]
    assert s["id_checks"] > 10 and s["id_ok"] == s["id_checks"], [f for f in report.failures("sundry")]
    assert s["constraint_ok"] == s["constraint_checks"]
    # The planted rule stays verbatim in the rules block everywhere. It is enforced where the
    # product infers a structured check from its words (retail's and airline's); telecom's
    # "never turn on roaming" gets none today, so its guard cannot refuse the call — a gap
    # the figures report (sundry/evals/README.md), not one this test hides.
    assert s["planted_verbatim"] == s["planted_checks"] == len(tickets)
    enforceable = [t for t in tickets if t.domain != "telecom"]
    assert s["planted_respected"] == len(enforceable)
    assert s["action_ok"] == s["action_checks"]
    assert s["orphans"] == 0
    # The baseline is measured, not required to be perfect.
    w = totals["window"]
    assert w["id_checks"] == s["id_checks"] and 0 <= w["id_ok"] <= w["id_checks"]


def test_a_recorded_repeat_of_a_completed_side_effect_is_held(retail):
    from sundry.evals.records import RecordedTurn

    ret = next(
        t
        for t in retail.turns
        if t.kind == "tool_call" and t.payload["calls"][0]["name"] == "return_delivered_order_items"
    )
    again = RecordedTurn(
        number=len(retail.turns) + 1,
        author="agent",
        kind="tool_call",
        payload={"calls": [{**ret.payload["calls"][0], "id": "again"}]},
    )
    ticket = retail.model_copy(update={"turns": retail.turns + [again]})
    result = run_ticket(ticket, HarnessConfig(budget=1800, keep_recent=4, plant=False))
    s = result.stats["sundry"]
    assert s["repeats_proposed"] == 1 and s["repeats_held"] == 1


@pytest.mark.django_db
def test_the_replay_keeps_the_same_ledger_as_the_services(tmp_path):
    """The harness rebuilds the ledger from turns; the loop writes it through the services.
    On a real ticket with a small window (so eviction and restores happen) the two agree:
    the same values, roles, verification, use and archive, entry for entry."""
    from sundry.agent.loop import agent_run
    from sundry.agent.services import customer_message_post
    from sundry.context.models import LedgerEntry
    from sundry.desk.lifecycle import ticket_create
    from sundry.evals.domains import DOMAINS
    from sundry.evals.records import export_ticket
    from sundry.evals.replay import LaneReplay
    from sundry.shop.models import Order
    from tests.factories import CustomerFactory, ParcelFactory, TicketClassFactory, TrackingEventFactory, paid_order

    customer = CustomerFactory()
    paid_order(customer=customer, number="SU-40110", prices=(3000, 2000, 1500))
    shipped = paid_order(customer=customer, number="SU-40111", status=Order.Status.SHIPPED, prices=(4500, 900))
    TrackingEventFactory(
        parcel=ParcelFactory(order=shipped, status="in_transit"), location="Leeds", description="Moving"
    )
    ticket = ticket_create(
        customer=customer.person, ticket_class=TicketClassFactory(approval_rules={}, ledger_share=0.02), subject="Help"
    )
    for text in (
        "Where is my order SU-40111?",
        "Please refund SU-40110, it arrived broken.",
        "Thanks. Where is SU-40111 now?",
        "What else did I order recently?",
        "The SU-40110 item is still broken, refund it.",
    ):
        customer_message_post(ticket=ticket, text=text)
        agent_run(ticket.pk)
    recorded = export_ticket(ticket)
    replay = LaneReplay(DOMAINS["demo_shop"], customer_id=customer.customer_id, ledger_tokens=160)
    for turn in recorded.turn_data():
        replay.feed(turn)

    stored = {
        e.value: (e.role, e.verified, e.status == "archived", e.used_in_call, e.last_used_turn, e.first_seen_turn)
        for e in LedgerEntry.objects.filter(ticket=ticket)
    }
    replayed = {
        e.value: (e.role, e.verified, e.archived, e.used, e.last_used_turn, e.first_seen_turn)
        for e in replay.ledger.values()
    }
    assert LedgerEntry.objects.filter(ticket=ticket, status="archived").exists()  # the window did overflow
    assert replayed == stored


def test_control_with_the_product_id_guard_off_the_made_up_id_is_no_longer_refused(retail, monkeypatch):
    """The harness's ID figures come from the product's guard (`guards.id_usable`), not a copy:
    switched off, the made-up payment method passes both, and the figures say so."""
    from sundry.agent.guards import callguards as guards

    monkeypatch.setattr(guards, "id_usable", lambda value, **kw: True)
    result = run_ticket(retail, TIGHT)
    assert result.made_up == [] and result.stats["sundry"]["refused_made_up"] == 0
    assert result.stats["sundry"]["id_ok"] == result.stats["sundry"]["id_checks"]


def _with_a_run_of_lookups(ticket, lookups: int = 8):
    """The ticket with `lookups` product lookups in a row (no reply between) before its return
    request: the request grows between two resolution steps, where the trigger is not asked."""
    from sundry.evals.records import RecordedTurn

    product = next(t for t in ticket.turns if (t.payload or {}).get("name") == "get_product_details")
    at = next(
        i
        for i, t in enumerate(ticket.turns)
        if t.kind == "tool_call" and t.payload["calls"][0]["name"] == "return_delivered_order_items"
    )
    extra = []
    for i in range(lookups):
        extra += [
            RecordedTurn(
                number=0,
                author="agent",
                kind="tool_call",
                text="",
                payload={
                    "calls": [{"id": f"d{i}", "name": "get_product_details", "arguments": {"product_id": "5550001111"}}]
                },
            ),
            RecordedTurn(
                number=0,
                author="tool",
                kind="tool_result",
                text=product.text,
                payload={"call_id": f"d{i}", "name": "get_product_details", "ok": True},
            ),
        ]
    turns = ticket.turns[:at] + extra + ticket.turns[at:]
    return ticket.model_copy(
        update={
            "id": ticket.id + "-lookups",
            "turns": [t.model_copy(update={"number": n}) for n, t in enumerate(turns, 1)],
        }
    )


def test_a_step_over_the_budget_compacts_first_as_production_does(retail):
    """Production compacts in place before a step whose request is over the budget; the
    harness's "as production does it" series does the same (control: the trigger alone)."""
    ticket, budget = _with_a_run_of_lookups(retail), 4000
    over = {}
    for before_step in (True, False):
        cfg = HarnessConfig(budget=budget, keep_recent=4, compact_before_step=before_step)
        result = run_ticket(ticket, cfg)
        over[before_step] = sum(n > budget for n in result.series["triggered"])
        assert result.stats["sundry"]["id_ok"] == result.stats["sundry"]["id_checks"]
    assert over == {True: 0, False: over[False]} and over[False] >= 3, over


def test_flagged_sentences_are_replayed_as_candidate_rules_as_production_renders_them(retail):
    def rules_block(**kw):
        replay = LaneReplay(DOMAINS[retail.domain], **kw)
        for t in retail.turn_data():
            replay.feed(t)
        return checks.block(assemble(replay.snapshot(), model="offline", tools=[]).request, "rules")

    block = rules_block()
    assert '"OK, no exchange." — turn' in block and "stated by customer; unconfirmed" in block
    assert "blocks tools: exchange_delivered_order_items" in block
    assert "no exchange" not in rules_block(classifier=lambda text: [])  # control: classifier off
