"""The desk's budget panel adds up: every part of the last request — system prompt, tool schemas,
each lane, recent turns and the chat format's framing — is listed, and the lines sum to the request
total shown. Over the compaction trigger, the panel says what keeps the request from compacting."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth import get_user_model

from sundry.agent.loop import agent_run
from sundry.agent.models import AgentStep, HeldAction
from sundry.agent.services import customer_message_post
from sundry.desk.lifecycle import ticket_create
from sundry.desk.panels import STAFF_PANELS
from sundry.live.panels import STAFF, Viewer, render_panel
from sundry.tickets.models import Ticket, TicketClass
from tests.factories import CustomerFactory, TicketClassFactory, customer_confirms, paid_order

pytestmark = pytest.mark.django_db


def _panel(ticket) -> str:
    staff = get_user_model().objects.get_or_create(username="desk", defaults={"is_staff": True})[0]
    ticket = Ticket.objects.select_related("ticket_class", "customer").get(pk=ticket.pk)
    return render_panel(STAFF_PANELS["budget"], ticket, Viewer(staff, STAFF))


def _lines(html: str) -> dict[str, int]:
    """part → tokens, read from the rendered table as a person reads it."""
    return {
        part: int(n)
        for part, n in re.findall(r'<tr data-part="(\w+)"><th scope="row">[^<]*</th><td class="num">(-?\d+)</td>', html)
    }


@pytest.fixture
def refund_ticket():
    alice = CustomerFactory()
    paid_order(customer=alice, number="SU-30100", prices=(5000,))
    ticket = ticket_create(
        customer=alice.person, ticket_class=TicketClassFactory(approval_rules={"issue_refund": {}}), subject="Refund"
    )
    customer_message_post(ticket=ticket, text="Please refund 20.00 USD on SU-30100, it was late.", wake=False)
    agent_run(ticket.pk)  # the offline model asks for the refund: a card the customer must confirm
    assert not HeldAction.objects.filter(ticket=ticket).exists()
    assert [c.tool for c in customer_confirms(ticket)] == ["issue_refund"]  # they confirm; the class holds it
    assert HeldAction.objects.filter(ticket=ticket, status="pending").exists()
    return ticket


def test_the_parts_of_the_last_request_sum_to_its_total(refund_ticket):
    html = _panel(refund_ticket)
    lines = _lines(html)
    step = AgentStep.objects.filter(ticket=refund_ticket).order_by("-number").first()
    total = lines.pop("total")
    assert total == step.request_tokens
    assert set(lines) == {"system", "tools", "rules", "ledger", "state", "summary", "recent", "framing"}
    assert sum(lines.values()) == total
    # Tool schemas are the largest part of a short ticket's request, and shown as such.
    assert lines["tools"] == step.lane_tokens["tools"] > 0 and lines["tools"] == max(lines.values())
    assert lines["system"] > 0 and lines["framing"] >= 0
    # Negative control: the lanes alone (what the panel listed before) do not add up to the request.
    assert sum(step.lane_tokens["lanes"].values()) < total


def test_over_the_trigger_a_held_approval_is_named_as_the_reason(refund_ticket):
    TicketClass.objects.filter(pk=refund_ticket.ticket_class_id).update(token_budget=500, trigger_fraction=0.8)
    html = _panel(refund_ticket)
    assert "Over the budget, not compacted:" in html
    assert "a held approval blocks compaction" in html


def test_over_the_trigger_with_little_history_says_so(refund_ticket):
    TicketClass.objects.filter(pk=refund_ticket.ticket_class_id).update(token_budget=500, trigger_fraction=0.8)
    HeldAction.objects.filter(ticket=refund_ticket).update(status="rejected")
    html = _panel(refund_ticket)
    assert "not enough compactable history" in html
    assert "held approval" not in html


def test_under_the_trigger_nothing_is_said(refund_ticket):
    html = _panel(refund_ticket)
    assert "not compacted" not in html and "over-budget" not in html


def test_over_the_budget_the_panel_says_why_in_numbers(refund_ticket):
    step = AgentStep.objects.filter(ticket=refund_ticket).order_by("-number").first()
    lanes, tools = step.lane_tokens["lanes"], step.lane_tokens["tools"]
    fixed = lanes["system"] + tools + lanes["rules"] + lanes["ledger"] + lanes["state"]
    budget = fixed - 100  # the parts compaction cannot shrink are over by themselves
    TicketClass.objects.filter(pk=refund_ticket.ticket_class_id).update(token_budget=budget, trigger_fraction=0.8)
    html = _panel(refund_ticket)
    assert (
        f"over by {step.request_tokens - budget:,} tokens: system prompt {lanes['system']:,} + tool schemas {tools:,}"
        in html
    )
    assert "over the budget of" in html and "compaction cannot help" in html
    # Room left for the turns: the panel says how much, and that compaction could use it.
    TicketClass.objects.filter(pk=refund_ticket.ticket_class_id).update(token_budget=fixed + 50)
    html = _panel(refund_ticket)
    assert f"leave only 50 of {fixed + 50:,} for the summary" in html and "compaction cannot help" not in html


def test_over_the_trigger_but_within_the_budget_no_numbers_are_given(refund_ticket):
    # Control: the cause is for a request over the budget only.
    step = AgentStep.objects.filter(ticket=refund_ticket).order_by("-number").first()
    TicketClass.objects.filter(pk=refund_ticket.ticket_class_id).update(
        token_budget=step.request_tokens + 10, trigger_fraction=0.8
    )
    html = _panel(refund_ticket)
    assert "Over the compaction trigger, not compacted:" in html and "over by" not in html


def test_a_ledger_near_its_share_is_named_on_the_panel(refund_ticket):
    step = AgentStep.objects.filter(ticket=refund_ticket).order_by("-number").first()
    ledger = step.lane_tokens["lanes"]["ledger"]
    assert ledger > 0 and "near its share" not in _panel(refund_ticket)  # control: the default share is far off
    # A share the ledger fills to 95 %: said, with its figures.
    budget = 2000
    share = ledger / (0.95 * budget)
    TicketClass.objects.filter(pk=refund_ticket.ticket_class_id).update(
        token_budget=budget, ledger_share=share, trigger_fraction=0.95
    )
    html = _panel(refund_ticket)
    assert f"ID ledger near its share:</strong> {ledger} of {int(budget * share)} tokens" in html
