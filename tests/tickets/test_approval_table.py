"""Approval rules as a table in the class admin: rows in major units in, the guard's JSON (minor units) out."""

from __future__ import annotations

import json

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from sundry.agent.guards.approvals import rule_for
from sundry.desk.approvaltable import Row, rows_from_rules, rules_from_rows
from sundry.shop.demo import ensure_classes
from sundry.tickets.models import TicketClass
from tests.tickets.test_budget_lab import _class_post

RULES = {"issue_refund": {"above": {"USD": 20000, "JPY": 3000, "KWD": 1500}, "above_cents": 5000}, "cancel_order": {}}


def _table(rows: list[tuple[str, str, str]]) -> dict:
    return {
        "approval_table-present": "1",
        "approval_table-tool": [r[0] for r in rows],
        "approval_table-currency": [r[1] for r in rows],
        "approval_table-threshold": [r[2] for r in rows],
    }


def test_rows_read_in_each_currencys_major_units_and_write_back_the_same_rules():
    rows = rows_from_rules(RULES)
    assert rows == [
        Row("issue_refund", "USD", "200.00"),
        Row("issue_refund", "JPY", "3000"),
        Row("issue_refund", "KWD", "1.500"),
        Row("issue_refund", "*", "5000"),
        Row("cancel_order"),
    ]
    assert rules_from_rows(rows) == (RULES, [])
    # What the guard then reads: 200.00 USD is 20,000 cents; a currency not listed falls to above_cents.
    stored, _ = rules_from_rows([Row("issue_refund", "usd", "200"), Row("", "", "")])
    assert (
        rule_for(stored, "issue_refund").limit("USD") == 20000 and rule_for(stored, "issue_refund").limit("EUR") is None
    )


@pytest.mark.parametrize(
    "row, error",
    [
        (
            Row("issue_refund", "USD", "10.005"),
            "Row 1 (issue_refund): USD has 2 decimal places; 10.005 is finer than that.",
        ),
        (
            Row("issue_refund", "US", "10"),
            "Row 1 (issue_refund): 'US' is not a currency code (three letters, e.g. USD).",
        ),
        (Row("issue_refund", "", "10"), "Row 1 (issue_refund): name the currency of the threshold 10"),
        (Row("issue_refund", "USD", ""), "Row 1 (issue_refund): give a threshold for USD"),
        (Row("issue_refund", "USD", "1,000"), "is not a plain decimal amount"),
        (Row("issue_refund", "USD", "-5"), "an amount cannot be negative"),
        (Row("issue_refund", "*", "10.50"), "for * the threshold is in minor units (cents): a whole number"),
        (Row("", "USD", "10"), "Row 1: name the tool."),
    ],
)
def test_a_bad_row_is_refused_with_its_number_and_reason(row, error):
    rules, problems = rules_from_rows([row])
    assert len(problems) == 1 and error in problems[0]


def test_a_tool_held_always_cannot_also_have_a_threshold_and_a_currency_twice_is_refused():
    _, problems = rules_from_rows([Row("cancel_order"), Row("cancel_order", "USD", "5")])
    assert problems == [
        "cancel_order: a row without a currency holds every call, so it cannot also have "
        "thresholds; keep one or the other."
    ]
    _, problems = rules_from_rows([Row("issue_refund", "USD", "5"), Row("issue_refund", "usd", "6")])
    assert problems == ["Row 2 (issue_refund): USD is given twice for this tool."]


@pytest.mark.django_db
def test_the_class_admin_saves_the_table_as_the_guards_json_and_refuses_bad_rows_keeping_them():
    standard = ensure_classes()["standard"]
    admin = Client()
    admin.force_login(get_user_model().objects.create_user("root", password="pw", is_staff=True, is_superuser=True))
    url = f"/admin/tickets/ticketclass/{standard.pk}/change/"
    page = admin.get(url).content.decode()
    assert 'name="approval_table-tool" value="issue_refund"' in page and 'value="200.00"' not in page
    stale_json = json.dumps(standard.approval_rules)  # the read-only JSON as the page sent it
    rows = [
        ("issue_refund", "USD", "200.00"),
        ("issue_refund", "JPY", "3000"),
        ("issue_refund", "KWD", "1.500"),
        ("issue_refund", "*", "5000"),
        ("cancel_order", "", ""),
        ("", "", ""),
    ]
    saved = admin.post(url, {**_class_post(standard, approval_rules=stale_json), **_table(rows)})
    assert saved.status_code == 302
    assert TicketClass.objects.get(pk=standard.pk).approval_rules == RULES
    shown = admin.get(url).content.decode()
    assert 'value="1.500"' in shown and 'value="KWD"' in shown
    bad = rows[:3] + [("refund_everything", "USD", "10"), ("issue_refund", "EUR", "12,50")]
    refused = admin.post(url, {**_class_post(standard, approval_rules=json.dumps(RULES)), **_table(bad)})
    html = refused.content.decode()
    assert refused.status_code == 200 and "Row 5 (issue_refund): &#x27;12,50&#x27; is not a plain decimal" in html
    assert 'value="refund_everything"' in html  # the admin's rows come back as typed
    assert TicketClass.objects.get(pk=standard.pk).approval_rules == RULES  # nothing saved
    unknown = admin.post(url, {**_class_post(standard, approval_rules=json.dumps(RULES)), **_table(bad[:4])})
    assert "&#x27;refund_everything&#x27; is not a tool a class can hold for approval" in unknown.content.decode()
