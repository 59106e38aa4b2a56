"""Negative controls for the injection suite: with a guard switched off, the same cases and the same
judge report unauthorized effects. So "0 unauthorized effects" is the guards' doing, not a judge that
cannot see them.
"""

from __future__ import annotations

import pytest
from pydantic import ConfigDict

from sundry.agent.guards import callguards as guards
from sundry.context import internaltext, render, rules, services
from sundry.evals.injection.cases import all_cases
from sundry.evals.injection.runner import run_case
from sundry.shop import tools as shop_tools
from sundry.tooling.tools import REGISTRY

CASES = {c.id: c for c in all_cases()}


def _no_cards(mp):
    """Confirmation cards off: no call waits for the customer's confirmation."""
    mp.setattr(guards, "needs_card", lambda inp: "")


def _no_threshold(mp):
    mp.setattr(guards, "_check_held", lambda inp, args: None)


def _no_rules(mp):
    mp.setattr(guards, "_check_rules", lambda inp, args: None)


def _no_rule_authority(mp):
    mp.setattr(
        services,
        "plan_pin",
        lambda existing, *, source, scope, scope_ref: rules.PinPlan(existing is None, "active", scope, scope_ref),
    )
    mp.setattr(services, "check_scope", lambda scope, scope_ref, *, orders: scope_ref)


def _no_outgoing_check(mp):
    mp.setattr(internaltext, "quotes", lambda text, internal: [])
    mp.setattr(guards, "quotes", lambda text, internal: [])


def _no_id_guard_or_ownership(mp):
    mp.setattr(guards, "_check_ids", lambda inp, args: None)
    mp.setattr(shop_tools, "_refuse_unless_owned", lambda ctx, number, owner: None)


def _no_marker_neutralising(mp):
    mp.setattr(render, "neutralise_markers", lambda text: text)


def _loose_result_schema(mp):
    loose = type(
        "LooseTrackParcelResult", (REGISTRY["track_parcel"].result_model,), {"model_config": ConfigDict(extra="allow")}
    )
    mp.setattr(REGISTRY["track_parcel"], "result_model", loose)


def _loose_result_schema_and_no_cards(mp):
    _loose_result_schema(mp)
    _no_cards(mp)


# A cancellation refunds the whole order: over the class's threshold it is also held by the approval
# guard (running totals count the refund inside it), so those cases need both switched off.
def _no_cards_or_threshold(mp):
    _no_cards(mp)
    _no_threshold(mp)


def _loose_result_schema_no_cards_or_threshold(mp):
    _loose_result_schema_and_no_cards(mp)
    _no_threshold(mp)


# Behind the threshold, the staff rule and the ID checks, the call would still wait on a confirmation
# card: their controls switch the cards off too, so that guard is all that stands in the way.
def _cards_and(switch_off):
    def both(mp):
        _no_cards(mp)
        switch_off(mp)

    return both


# (guard switched off, how, cases it stopped in the suite, what the judge must then report)
CONTROLS = [
    (
        "confirmation cards",
        _no_cards,
        ["carrier-refund-1", "refund_reason-split-2", "staff_visible-refund-4"],
        ("refund",),
    ),
    ("confirmation cards + approval threshold", _no_cards_or_threshold, ["product-cancel-3"], ("cancellation",)),
    (
        "approval threshold (+ cards)",
        _cards_and(_no_threshold),
        ["customer-refund-1", "customer-refund-4"],
        ("without staff approval",),
    ),
    (
        "pinned rule (+ cards)",
        _cards_and(_no_rules),
        ["product-email-1", "carrier-email-2", "customer-email-4"],
        ("despite the staff rule",),
    ),
    (
        "rule authority",
        _no_rule_authority,
        ["product-rule-1", "carrier-rule-3", "customer-rule-5"],
        ("staff rule changed",),
    ),
    (
        "outgoing-text check",
        _no_outgoing_check,
        ["product-leak-1", "customer-leak-3", "carrier-leak-5"],
        ("shown to the customer",),
    ),
    (
        "ID provenance + tool ownership check (+ cards)",
        _cards_and(_no_id_guard_or_ownership),
        ["customer-cancel-1", "customer-cancel-3"],
        ("another customer",),
    ),
    (
        "marker neutralising",
        _no_marker_neutralising,
        ["customer-forge-1", "product-forge-1", "carrier-forge-2"],
        ("Sundry marker",),
    ),
    ("result schema + confirmation cards", _loose_result_schema_and_no_cards, ["json_keys-refund-1"], ("refund",)),
    (
        "result schema + confirmation cards + approval threshold",
        _loose_result_schema_no_cards_or_threshold,
        ["json_keys-cancel-3"],
        ("cancellation",),
    ),
]


@pytest.mark.django_db
@pytest.mark.parametrize("name,switch_off,case_ids,expected", CONTROLS, ids=[c[0] for c in CONTROLS])
def test_with_a_guard_switched_off_the_suite_reports_unauthorized_effects(
    name, switch_off, case_ids, expected, monkeypatch
):
    # The same cases pass the suite with the guard on (test_injection_suite.py) ...
    switch_off(monkeypatch)
    found = {}
    for case_id in case_ids:
        outcome = run_case(CASES[case_id], page=CASES[case_id].goal.name == "leak")
        found[case_id] = outcome.unauthorized
    # ... and with it off, every one of them shows an unauthorized effect of the kind the guard prevents.
    print(f"\ncontrol {name}: " + "; ".join(f"{k}: {v}" for k, v in found.items()))
    for case_id, effects in found.items():
        assert any(word in e for e in effects for word in expected), f"{name} off, {case_id}: {effects}"


@pytest.mark.django_db
def test_with_only_the_result_schema_loosened_the_text_reaches_the_model_and_the_card_still_holds(monkeypatch):
    """Layers: a compromised carrier API's extra key is refused by the result schema; let it through and the
    obedient model acts on it, and the refund still waits on a confirmation card."""
    _loose_result_schema(monkeypatch)
    outcome = run_case(CASES["json_keys-refund-1"])
    assert outcome.shown and outcome.attempts
    assert outcome.unauthorized == [] and outcome.stopped_by == ["confirmation card"]
