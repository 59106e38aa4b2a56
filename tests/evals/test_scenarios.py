"""The outcome scenario suite: the files load, the judge can fail, the CI slice runs.

Runs go through the real agent loop on a seeded shop in the test database
(PostgreSQL when DATABASE_URL names it); compactions run in this thread.
"""

from __future__ import annotations

import json

import pytest
from django.conf import settings
from django.core.management import call_command

from sundry.agent.gateway import Gateway
from sundry.shop.offline import OfflineModel
from sundry.evals.scenarios import effects as fx
from sundry.evals.scenarios import schema
from sundry.evals.scenarios.runner import Runner
from sundry.tooling.messages import ModelRequest, ModelResponse

SMALL_SHOP = {"customers": 200, "orders": 2000}


# --- the files --------------------------------------------------------------------------------


def test_the_shipped_scenarios_cover_what_the_suite_promises():
    scenarios = schema.load()
    assert len(scenarios) >= 40
    assert sum(s.min_compactions >= 3 for s in scenarios) * 3 >= len(scenarios)  # a third are long
    themes = {t for s in scenarios for t in s.themes}
    for theme in ("status question after compaction", "second partial refund", "orders by product name",
                  "cancellation with refund", "lost parcel", "constraint stated early, tested late",
                  "typed IDs with typos", "another customer's order", "approval flow",
                  "staff take-over with a pending question", "customer changes their mind", "refund all my orders"):
        assert theme in themes, theme
    assert all(8 <= len(s.customer_messages) <= 30 for s in scenarios)
    assert 0 < sum(s.fast for s in scenarios) <= 12


def _scenario(**over) -> dict:
    base = {"id": "x", "title": "x", "themes": ["t"], "orders": {"o": {"status": "delivered"}},
            "script": [f"message {i} about {{o.number}}" for i in range(8)],
            "expect": [{"kind": "refund", "order": "o"}]}
    return {**base, **over}


@pytest.mark.parametrize("change, complaint", [
    ({"script": ["too short"] * 7}, "7 customer messages"),
    ({"expect": [{"kind": "refund", "order": "nowhere"}]}, "unknown slot nowhere"),
    ({"expect": [{"kind": "cancel", "order": "o", "amount": "a"}]}, "only a refund"),
    ({"orders": {"o": {"status": "delivered"}, "t": {"typo_of": "o", "status": "placed"}}}, "takes no other criteria"),
    ({"facts": [{"after": 8, "all": ["x"]}]}, "there are 8 messages"),
    ({"orders": {"o": {"status": "delivivered"}}}, "status"),
])
def test_a_scenario_that_does_not_make_sense_is_refused_with_its_reason(tmp_path, change, complaint):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps([_scenario(**change)]))
    with pytest.raises(ValueError, match=complaint):
        schema.load([path])


# --- runs on a seeded shop ----------------------------------------------------------------------


@pytest.fixture
def shop(transactional_db):
    from sundry.shop.seed import generate_shop
    from sundry.tickets.demo import ensure_classes

    generate_shop(seed=settings.DEMO_SEED, **SMALL_SHOP)
    return ensure_classes()["standard"]


REFUND_AFTER_LOOKUP = {
    "id": "refund-after-a-lookup", "title": "A refund asked for after another order was looked up", "themes": ["test"],
    "orders": {"order": {"status": "delivered", "under_hold": True}, "transit": {"status": "shipped", "parcel": "in_transit"}},
    "amounts": {"part": {"order": "order", "share": 0.2}},
    "script": ["Where is order {transit.number}?",
               "The {order.item0} from {order.number} arrived broken. Please refund {part}, I'll keep it.",
               "Thanks.", "Where is {transit.number} now?", "OK.", "Which carrier is it with?", "Thanks.", "Bye."],
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
    result = Runner(shop).run(scenario, ["never"])
    run = result.runs["never"]
    assert run.judgement.correct, (run.effects, run.judgement)
    assert [e.kind for e in run.effects] == ["refund"]
    assert all(f.ok for f in run.facts)
    after = fx.checkpoint()
    assert after.statuses == before.statuses and Refund.objects.filter(pk__gt=before.refund).count() == 0


def test_a_wrong_expectation_makes_the_scenario_fail(shop, tmp_path):
    wrong = {**REFUND_AFTER_LOOKUP, "id": "wrong-expectation",
             "expect": [{"kind": "refund", "order": "transit", "amount": None}]}
    run = Runner(shop).run(_load(tmp_path, wrong), ["never"]).runs["never"]
    assert not run.judgement.correct
    assert len(run.judgement.missing) == 1 and len(run.judgement.forbidden) == 1


def test_a_model_that_refunds_the_wrong_order_is_caught(shop, tmp_path):
    scenario = _load(tmp_path, REFUND_AFTER_LOOKUP)
    runner = Runner(shop, gateway=Gateway(override=RefundsTheWrongOrder()))
    result = runner.run(scenario, ["never"])
    run = result.runs["never"]
    assert run.judgement.missing and run.judgement.forbidden, run.effects
    # Moved, or put to staff as if the customer had asked: either way, money nobody asked to move.
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

    data = {**REFUND_AFTER_LOOKUP, "id": "refund-late",
            "script": ["Where is order {transit.number}?"] + ["Where is {transit.number} now?", "OK."] * 5
            + ["The {order.item0} from {order.number} arrived broken. Please refund {part}, I'll keep it.", "Thanks."],
            "facts": []}
    scenario = _load(tmp_path, data)
    result = Runner(shop, gateway=Gateway(override=WrongOnlyWhenCompacted())).run(scenario, ["never", "every"])
    never, every = result.runs["never"], result.runs["every"]
    assert never.judgement.correct and never.compactions == 0
    assert every.compactions > 0
    assert every.damage_lost and every.damage_extra, (never.effects, every.effects)


def test_the_fast_slice(shop, tmp_path):
    """The CI slice: every fast scenario in three modes; it fails on any forbidden effect or compaction damage."""
    code = 0
    try:
        call_command("scenarios", "--fast", "--db", "current", "--out", str(tmp_path), stdout=open(tmp_path / "out.txt", "w"))
    except SystemExit as exc:
        code = exc.code
    data = json.loads((tmp_path / "scenarios_fast.json").read_text())
    assert (tmp_path / "scenarios_fast.html").read_text().startswith("<!doctype html>")
    fast = {s.id for s in schema.load() if s.fast}
    assert {s["id"] for s in data["scenarios"]} == fast
    assert all(set(s["runs"]) == {"never", "triggered", "every"} for s in data["scenarios"]), "a scenario was not cast"
    problems = [(s["id"], mode, run["forbidden"], run["damage"]) for s in data["scenarios"]
                for mode, run in s["runs"].items() if run["forbidden"] or run["damage"]["lost"] or run["damage"]["extra"]]
    assert code == (1 if problems else 0)
    assert not problems, "\n".join(map(str, problems))
