"""Every check can fail: take away what a check credits Sundry for, and the check must fail.

Each control runs the small retail fixture under the shipped settings with one part of
production switched off; the same checks that pass as shipped must then report losses.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from sundry.evals import importers
from sundry.evals.harness import HarnessConfig, run_ticket

FIXTURES = Path(__file__).parent / "fixtures"
TIGHT = HarnessConfig(budget=1800, keep_recent=4)
# The fixture's constraints, labelled by reading it (not by the classifier).
LABELLED = ["Please don't refund to my gift card, only to the credit card.", "OK, no exchange."]
CHECKS = {
    "ids": ("id_ok", "id_checks"),
    "constraints": ("constraint_ok", "constraint_checks"),
    "side_effects": ("action_ok", "action_checks"),
    "planted": ("planted_respected", "planted_checks"),
}


@pytest.fixture(scope="module")
def ticket():
    return importers.tau2_results(FIXTURES / "tau2_retail_small.json")[0]


def rate(ticket, cfg, check):
    s = run_ticket(ticket, cfg, labelled=LABELLED).stats["sundry"]
    ok, total = CHECKS[check]
    assert s[total] > 0, f"{check} was never checked"
    return s[ok] / s[total]


@pytest.mark.parametrize("check", sorted(CHECKS))
def test_every_check_passes_as_shipped(ticket, check):
    assert rate(ticket, TIGHT, check) == 1.0


@pytest.mark.parametrize(
    "control, cfg, check",
    [
        ("ledger off", replace(TIGHT, ledger_share=0), "ids"),
        ("ledger off, recent turns 0", replace(TIGHT, ledger_share=0, keep_recent=0), "ids"),
        ("summary only, recent turns 0", replace(TIGHT, lanes=(), keep_recent=0), "side_effects"),
        ("summary only", replace(TIGHT, lanes=()), "planted"),
        ("classifier off", replace(TIGHT, classifier=False), "constraints"),
        ("rule lane off", replace(TIGHT, lanes=("ledger", "state")), "planted"),
    ],
)
def test_each_control_makes_its_check_fail(ticket, control, cfg, check):
    assert rate(ticket, cfg, check) < 1.0, control


def test_recent_turns_zero_loses_no_id_while_the_lanes_carry_them(ticket):
    # The lanes, not the raw turns, are what keep IDs: with no recent turns the
    # ledger still holds them; take the ledger away too and every one is lost.
    assert rate(ticket, replace(TIGHT, keep_recent=0), "ids") == 1.0
    assert rate(ticket, replace(TIGHT, keep_recent=0, ledger_share=0, lanes=()), "ids") == 0.0
