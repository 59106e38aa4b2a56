"""Approval rules: one pydantic definition for the admin form and the guard."""

import pytest

from sundry.agent.guards import approvals
from sundry.agent.guards.approvals import ApprovalRules, ToolApproval


def test_valid_rules_parse_and_give_per_currency_limits():
    rules = ApprovalRules.model_validate(
        {"issue_refund": {"above": {"USD": 20000, "INR": 1500000}, "above_cents": 5000}, "cancel_order": {}}
    )
    refund, cancel = rules.root["issue_refund"], rules.root["cancel_order"]
    assert (refund.limit("USD"), refund.limit("inr"), refund.limit("GBP")) == (20000, 1500000, 5000)
    assert cancel.limit("USD") is None  # always held
    per_currency = ToolApproval(above={"USD": 20000})
    assert per_currency.limit("GBP") is None and per_currency.per_currency_only
    assert approvals.problems({"issue_refund": {"above_cents": 0}}) == []


@pytest.mark.parametrize(
    "rules, fragment",
    [
        (["issue_refund"], "must be an object of tool name"),
        ({"launch_rockets": {}}, "'launch_rockets' is not a tool"),
        ({"issue_refund": {"over_cents": 5000}}, "unknown option 'over_cents'"),
        ({"issue_refund": {"above_cents": -1}}, "above_cents: must be a whole number of minor units"),
        ({"issue_refund": {"above_cents": 100.5}}, "above_cents: must be a whole number"),
        ({"issue_refund": {"above_cents": True}}, "above_cents: must be a whole number"),
        ({"issue_refund": {"above": {"usd": 100}}}, "'usd' is not a currency code"),
        ({"issue_refund": {"above": {"USD": "100"}}}, "above.USD: must be a whole number"),
        ({"issue_refund": {"above": {}}}, "must name at least one currency"),
        ({"issue_refund": {"above": [20000]}}, "above must be an object of currency"),
        ({"issue_refund": 10000}, "options must be an object"),
    ],
)
def test_bad_rules_get_one_plain_sentence_each(rules, fragment):
    found = approvals.problems(rules)
    assert len(found) == 1 and fragment in found[0], found
    assert "Value error" not in found[0] and "pydantic" not in found[0]


def test_the_guard_reads_stored_rules_and_holds_on_one_it_cannot_read():
    assert approvals.rule_for({}, "issue_refund") is None
    assert approvals.rule_for({"cancel_order": {}}, "issue_refund") is None
    assert approvals.rule_for({"issue_refund": {"above_cents": 100}}, "issue_refund") == ToolApproval(above_cents=100)
    # Saved before validation or edited in the database: the threshold is unreadable, so every call is held.
    assert approvals.rule_for({"issue_refund": {"over_cents": 5000}}, "issue_refund") == ToolApproval()
    assert approvals.rule_for(["issue_refund"], "issue_refund") == ToolApproval()


def test_a_tool_servers_money_tool_lends_its_threshold_to_a_call_that_moves_money_without_one():
    """A class served by a tool server: its refund tool is not in the in-process registry, yet its
    threshold must hold a cancellation that refunds (the guard passes the declared money tools)."""
    rules = {"refund_order": {"above": {"USD": 10000}}}
    found = approvals.money_rules(rules, moving=["refund_order", "cancel_pending_order"])
    assert [r.limit("USD") for r in found] == [10000]
    # Control: read from the in-process registry alone, the server's tool lends nothing.
    assert approvals.money_rules(rules) == []
    # A tool the declarations say moves no money lends nothing either.
    assert approvals.money_rules(rules, moving=["cancel_pending_order"]) == []
