"""The outcome scenario suite: the files load, the judge can fail, the CI slice runs.

Runs go through the real agent loop on a seeded shop in the test database
(PostgreSQL when DATABASE_URL names it); compactions run in this thread.
"""

from __future__ import annotations

import json

import pytest
from django.conf import settings
from django.core.management import call_command

from sundry.agent.provider.gateway import Gateway
from sundry.evals.scenarios import effects as fx
from sundry.evals.scenarios import schema
from sundry.evals.scenarios.runner import Runner
from sundry.evals.weakmodel import WeakModel, card_reply
from sundry.shop.offline import OfflineModel
from sundry.tooling.messages import ModelRequest, ModelResponse

SMALL_SHOP = {"customers": 200, "orders": 2000}


# --- the files --------------------------------------------------------------------------------


def test_the_shipped_scenarios_cover_what_the_suite_promises():
    scenarios = schema.load()
    assert len(scenarios) >= 40
    assert sum(s.min_compactions >= 3 for s in scenarios) * 3 >= len(scenarios)  # a third are long
    themes = {t for s in scenarios for t in s.themes}
    for theme in (
        "status question after compaction",
        "second partial refund",
        "orders by product name",
        "cancellation with refund",
        "lost parcel",
        "constraint stated early, tested late",
        "typed IDs with typos",
        "another customer's order",
        "approval flow",
        "staff take-over with a pending question",
        "customer changes their mind",
        "refund all my orders",
    ):
        assert theme in themes, theme
    assert all(8 <= len(s.customer_messages) <= 30 for s in scenarios)
    assert 0 < sum(s.fast for s in scenarios) <= 12
    # Consent is a card the customer answers: each way of answering it has a scenario of its own.
    for theme in (
        "customer confirms",
        "customer declines",
        "customer ignores the card",
        "typed yes",
        "candidate rule quoted on a card",
        "a second message before the answer",
    ):
        assert theme in themes, theme
    steps = [step for s in scenarios for step in s.script if isinstance(step, schema.CustomerStep)]
    assert {step.customer for step in steps} == {"confirm", "decline", "ignore"}
    assert any(step.order for step in steps) and any(isinstance(x, schema.Also) for s in scenarios for x in s.script)


def _scenario(**over) -> dict:
    base = {
        "id": "x",
        "title": "x",
        "themes": ["t"],
        "orders": {"o": {"status": "delivered"}},
        "script": [f"message {i} about {{o.number}}" for i in range(8)],
        "expect": [{"kind": "refund", "order": "o"}],
    }
    return {**base, **over}


@pytest.mark.parametrize(
    "change, complaint",
    [
        ({"script": ["too short"] * 7}, "7 customer messages"),
        ({"expect": [{"kind": "refund", "order": "nowhere"}]}, "unknown slot nowhere"),
        ({"expect": [{"kind": "cancel", "order": "o", "amount": "a"}]}, "only a refund"),
        (
            {"orders": {"o": {"status": "delivered"}, "t": {"typo_of": "o", "status": "placed"}}},
            "takes no other criteria",
        ),
        ({"facts": [{"after": 8, "all": ["x"]}]}, "there are 8 messages"),
        ({"orders": {"o": {"status": "delivivered"}}}, "status"),
        (
            {"script": ["m {o.number}"] * 8 + [{"customer": "confirm", "order": "nowhere"}]},
            "customer step on unknown slot",
        ),
        ({"script": ["m {o.number}"] * 8 + [{"customer": "ignore", "order": "o"}]}, "presses nothing"),
        ({"script": ["m {o.number}"] * 8 + [{"customer": "press"}]}, "'confirm', 'decline' or 'ignore'"),
        ({"script": [{"also": "first"}] + ["m {o.number}"] * 8}, "follows a customer message"),
        (
            {"script": ["m {o.number}"] * 4 + [{"staff": "approve"}, {"also": "late"}] + ["m"] * 4},
            "follows a customer message",
        ),
        ({"expect": [{"kind": "cancel", "order": "o", "tool": "cancel_order"}]}, "only a held effect or a card"),
    ],
)
def test_a_scenario_that_does_not_make_sense_is_refused_with_its_reason(tmp_path, change, complaint):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps([_scenario(**change)]))
    with pytest.raises(ValueError, match=complaint):
        schema.load([path])


# --- runs on a seeded shop ----------------------------------------------------------------------


@pytest.fixture
def shop(transactional_db):
    from sundry.shop.demo import ensure_classes
    from sundry.shop.seed import generate_shop

    generate_shop(seed=settings.DEMO_SEED, **SMALL_SHOP)
    return ensure_classes()["standard"]


REFUND_AFTER_LOOKUP = {
    "id": "refund-after-a-lookup",
    "title": "A refund asked for after another order was looked up",
    "themes": ["test"],
    "orders": {
        "order": {"status": "delivered", "under_hold": True},
        "transit": {"status": "shipped", "parcel": "in_transit"},
    },
    "amounts": {"part": {"order": "order", "share": 0.2}},
    "script": [
        "Where is order {transit.number}?",
        "The {order.item0} from {order.number} arrived broken. Please refund {part}, I'll keep it.",
        {"customer": "confirm"},
        "Thanks.",
        "Where is {transit.number} now?",
        "OK.",
        "Which carrier is it with?",
        "Thanks.",
        "Bye.",
    ],
    "expect": [{"kind": "refund", "order": "order", "amount": "part"}],
    "facts": [{"after": 1, "all": ["{order.number}", "{part.value}"]}],
}


def _load(tmp_path, data: dict) -> schema.Scenario:
    path = tmp_path / f"{data['id']}.json"
    path.write_text(json.dumps(data))
    return schema.load([path])[0]


class RefundsTheWrongOrder:
    """The offline model, except that every refund goes to another order the request names."""

    def __init__(self):
        self.inner = OfflineModel()

    def complete(self, request: ModelRequest) -> ModelResponse:
        response = self.inner.complete(request)
        text = " ".join(m.content for m in request.messages)
        calls = []
        for call in response.tool_calls:
            if call.name == "issue_refund" and isinstance(call.arguments, dict):
                mine = call.arguments.get("order_number")
                others = sorted({w.strip(".,:;()\"'") for w in text.split() if w.startswith("SU-")} - {mine})
                if others:
                    call = call.model_copy(update={"arguments": {**call.arguments, "order_number": others[0]}})
            calls.append(call)
        return response.model_copy(update={"tool_calls": calls})


def test_a_correct_run_passes_and_leaves_the_shop_as_it_found_it(shop, tmp_path):
    from sundry.shop.models import Refund

    scenario = _load(tmp_path, REFUND_AFTER_LOOKUP)
    before = fx.checkpoint()
    # The two baselines too: they hand the model another request through a gateway of their own.
    result = Runner(shop).run(scenario, ["never", "window", "prose"])
    for mode, run in result.runs.items():
        assert run.judgement.correct, (mode, run.effects, run.judgement)
        assert [e.kind for e in run.effects] == ["refund"], mode
        assert all(f.ok for f in run.facts), mode
    after = fx.checkpoint()
    assert after.statuses == before.statuses and Refund.objects.filter(pk__gt=before.refund).count() == 0


def test_a_wrong_expectation_makes_the_scenario_fail(shop, tmp_path):
    wrong = {
        **REFUND_AFTER_LOOKUP,
        "id": "wrong-expectation",
        "expect": [{"kind": "refund", "order": "transit", "amount": None}],
    }
    run = Runner(shop).run(_load(tmp_path, wrong), ["never"]).runs["never"]
    assert not run.judgement.correct
    assert len(run.judgement.missing) == 1 and len(run.judgement.forbidden) == 1


def test_a_model_that_refunds_the_wrong_order_is_caught(shop, tmp_path):
    scenario = _load(tmp_path, REFUND_AFTER_LOOKUP)
    runner = Runner(shop, gateway=Gateway(override=RefundsTheWrongOrder()))
    result = runner.run(scenario, ["never"])
    run = result.runs["never"]
    assert run.judgement.missing and run.judgement.forbidden, run.effects
    # The customer confirmed the card they were shown without reading it: the refund moved (or went
    # to staff as if they had asked) on an order nobody asked about.
    wrong = run.judgement.forbidden[0]
    assert wrong.kind in ("refund", "held") and wrong.order == result.cast.orders["transit"].number
    assert not run.facts[0].ok


def test_compaction_damage_is_any_difference_from_the_never_compacted_run(shop, tmp_path):
    """A model that refunds the wrong order only once the request was compacted shows up as damage."""

    class WrongOnlyWhenCompacted(RefundsTheWrongOrder):
        def complete(self, request):
            if any(m.lane == "summary" for m in request.messages):
                return super().complete(request)
            return self.inner.complete(request)

    data = {
        **REFUND_AFTER_LOOKUP,
        "id": "refund-late",
        "script": ["Where is order {transit.number}?"]
        + ["Where is {transit.number} now?", "OK."] * 5
        + [
            "The {order.item0} from {order.number} arrived broken. Please refund {part}, I'll keep it.",
            {"customer": "confirm"},
            "Thanks.",
        ],
        "facts": [],
    }
    scenario = _load(tmp_path, data)
    result = Runner(shop, gateway=Gateway(override=WrongOnlyWhenCompacted())).run(scenario, ["never", "every"])
    never, every = result.runs["never"], result.runs["every"]
    assert never.judgement.correct and never.compactions == 0
    assert every.compactions > 0
    assert every.damage_lost and every.damage_extra, (never.effects, every.effects)


# --- the customer's answers to cards ---------------------------------------------------------------

TWO_CARDS = {
    "id": "two-cards",
    "title": "A refund and a cancellation, each on a card; one confirmed",
    "themes": ["test"],
    "orders": {
        "order": {"status": "delivered", "under_hold": True},
        "placed": {"status": "placed", "under_hold": True},
    },
    "amounts": {"part": {"order": "order", "share": 0.2}},
    "script": [
        "The {order.item0} from {order.number} arrived broken. Please refund {part}, I'll keep it.",
        "Please cancel {placed.number} too.",
        {"customer": "confirm", "order": "placed"},
        "Thanks.",
        {"customer": "ignore"},
        "OK.",
        "Fine.",
        "Thanks again.",
        "Bye.",
        "Bye!",
    ],
    "expect": [
        {"kind": "cancel", "order": "placed"},
        {"kind": "card", "tool": "issue_refund", "order": "order", "amount": "part"},
    ],
}


def test_the_customer_confirms_the_card_they_pick_and_a_card_left_open_is_judged(shop, tmp_path):
    from sundry.agent.models import Confirmation

    scenario = _load(tmp_path, TWO_CARDS)
    result = Runner(shop).run(scenario, ["never"])
    run, c = result.runs["never"], result.cast
    assert run.judgement.correct, (run.effects, run.judgement, run.transcript)
    assert sorted(e.kind for e in run.effects) == ["cancel", "card"]
    # Pressed through the same service as the page's button, on the picked order's card only.
    assert run.cards[0].startswith("issue_refund pending: Refund ") and c.orders["order"].number in run.cards[0]
    assert run.cards[1] == f"cancel_order confirmed (button) → executed: Cancel order {c.orders['placed'].number}"
    assert Confirmation.objects.filter(ticket_id=run.ticket_id, via=Confirmation.Via.BUTTON).count() == 1
    # A card nobody expected is judged like a hold: forbidden.
    only_cancel = fx.judge([schema.Effect(kind="cancel", order="placed")], [], run.effects, c)
    assert [e.kind for e in only_cancel.forbidden] == ["card"]


def test_a_declined_card_runs_nothing_and_a_message_sent_meanwhile_is_answered_with_the_one_before(shop, tmp_path):
    data = {
        "id": "declined",
        "title": "The order number sent before the answer; the card declined",
        "themes": ["test"],
        "orders": {
            "order": {"status": "delivered", "under_hold": True},
            "transit": {"status": "shipped", "parcel": "in_transit"},
        },
        "amounts": {"part": {"order": "order", "share": 0.2}},
        "script": [
            "The item I got arrived broken. Please refund {part} on my order, I'll keep it.",
            {"also": "It's {order.number}."},
            {"customer": "decline"},
            "Thanks.",
            "OK.",
            "Where is {transit.number}?",
            "Fine.",
            "Thanks again.",
            "Bye.",
        ],
        "expect": [],
    }
    run = Runner(shop).run(_load(tmp_path, data), ["never"]).runs["never"]
    assert run.judgement.correct and not run.effects, (run.effects, run.transcript)
    # Both messages were stored before the agent answered; it answered them once, then the decline.
    who = [a for a, _ in run.transcript]
    assert who[:4] == ["customer", "customer", "agent", "agent"], run.transcript
    assert len(run.cards) == 1 and run.cards[0].startswith("issue_refund declined (button): Refund ")


class ProposesThenWeak:
    """The offline model until the request shows it asked for a refund; the scripted weak model after."""

    def __init__(self):
        self.offline, self.weak = OfflineModel(), WeakModel()

    def complete(self, request: ModelRequest) -> ModelResponse:
        asked = any(c.name == "issue_refund" for m in request.messages for c in m.tool_calls)
        return (self.weak if asked else self.offline).complete(request)


def test_the_weak_model_points_at_the_card_and_does_not_call_again(shop, tmp_path):
    from sundry.agent.models import Confirmation
    from sundry.tickets.models import Turn

    data = {
        **REFUND_AFTER_LOOKUP,
        "id": "weak-after-card",
        "script": [
            s if s != {"customer": "confirm"} else {"customer": "ignore"} for s in REFUND_AFTER_LOOKUP["script"]
        ],
        "expect": [{"kind": "card", "tool": "issue_refund", "order": "order", "amount": "part"}],
        "facts": [{"after": 1, "all": ["card", "{order.number}"]}],
    }
    run = Runner(shop, gateway=Gateway(override=ProposesThenWeak())).run(_load(tmp_path, data), ["never"]).runs["never"]
    assert run.judgement.correct, (run.effects, run.transcript)
    assert run.facts[0].ok, run.facts[0].replies
    card = Confirmation.objects.get(ticket_id=run.ticket_id)  # one card: the call was not made again
    # Its answer names the card it read in the result, not one of its scripted mistakes.
    assert run.facts[0].replies[0] == card_reply([card.card["title"]])
    payloads = Turn.objects.filter(ticket_id=run.ticket_id, kind=Turn.Kind.TOOL_CALL).values_list("payload", flat=True)
    assert [c["name"] for p in payloads for c in p.get("calls", [])].count("issue_refund") == 1


@pytest.mark.timeout(900)  # every fast scenario three times over: minutes on a busy machine, not a hang
def test_the_fast_slice(shop, tmp_path):
    """The CI slice: every fast scenario in three modes; it fails on any forbidden effect or compaction damage."""
    code = 0
    try:
        call_command(
            "scenarios", "--fast", "--db", "current", "--out", str(tmp_path), stdout=open(tmp_path / "out.txt", "w")
        )
    except SystemExit as exc:
        code = exc.code
    data = json.loads((tmp_path / "scenarios_fast.json").read_text())
    assert (tmp_path / "scenarios_fast.html").read_text().startswith("<!doctype html>")
    fast = {s.id for s in schema.load() if s.fast}
    assert {s["id"] for s in data["scenarios"]} == fast
    assert all(set(s["runs"]) == {"never", "triggered", "every"} for s in data["scenarios"]), "a scenario was not cast"
    problems = [
        (s["id"], mode, run["forbidden"], run["damage"])
        for s in data["scenarios"]
        for mode, run in s["runs"].items()
        if run["forbidden"] or run["damage"]["lost"] or run["damage"]["extra"]
    ]
    assert code == (1 if problems else 0)
    assert not problems, "\n".join(map(str, problems))


def test_the_never_compacted_reference_turns_off_both_ways_production_compacts():
    """The reference mode must not compact at all: neither the trigger after resolution steps nor
    the compaction in place before a step over the budget; both come back afterwards."""
    from sundry.agent import loop, step
    from sundry.compaction.services import compact_before_step, resolution_listener
    from sundry.evals.scenarios.modes import compaction_listener

    with compaction_listener(False):
        assert resolution_listener not in loop.resolution_listeners
        assert compact_before_step not in step.before_request_hooks
    assert resolution_listener in loop.resolution_listeners and compact_before_step in step.before_request_hooks
