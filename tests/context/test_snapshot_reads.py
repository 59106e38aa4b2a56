"""The lane snapshot reads every lane as stored."""

from __future__ import annotations

import pytest

from bench.benchmarks import InstantModel
from sundry.agent.loop import agent_run
from sundry.agent.provider.gateway import Gateway
from sundry.agent.services import customer_message_post
from sundry.context import services as lanes
from sundry.context.models import LedgerEntry, Summary
from sundry.context.selectors import lane_snapshot
from sundry.desk.lifecycle import ticket_create
from sundry.tickets.models import Ticket
from tests.factories import CustomerFactory, TicketClassFactory, paid_order

pytestmark = pytest.mark.django_db


@pytest.fixture
def busy_ticket():
    """A ticket with something in every lane, JSON payloads, booleans, nulls and unicode included."""
    customer = CustomerFactory()
    paid_order(customer=customer, number="SU-10480", prices=(6000, 4000))
    ticket = ticket_create(customer=customer.person, ticket_class=TicketClassFactory(approval_rules={}), subject="Busy")
    customer_message_post(ticket=ticket, text="Where is my order SU-10480? — “soon” please", wake=False)
    agent_run(ticket.pk, gateway=Gateway(override=InstantModel()))
    ticket = Ticket.objects.select_related("ticket_class", "customer").get(pk=ticket.pk)
    turn = ticket.last_turn_number
    lanes.rule_pin(ticket=ticket, text="Phone only, never email.", turn=turn, source="customer")
    lanes.state_set(ticket=ticket, name="issue", value="too small — “wrong size”", turn=turn, source="customer")
    lanes.action_record(
        ticket=ticket,
        tool="issue_refund",
        target="SU-10480",
        arguments={},
        result={},
        turn=turn,
        idempotency_key="k1",
        reversible=False,
        amount_cents=1500,
        currency="EUR",
    )
    lanes.action_record(
        ticket=ticket,
        tool="add_note",
        target="",
        arguments={},
        result={},
        turn=turn,
        idempotency_key="k2",
        reversible=True,
    )
    Summary.objects.create(
        ticket=ticket, covers_through_turn=1, text="The customer asked about SU-10480.", fields={}, is_current=True
    )
    return ticket


def test_the_snapshot_holds_what_each_lane_stores(busy_ticket):
    snap = lane_snapshot(busy_ticket)
    assert snap.version == Ticket.objects.get(pk=busy_ticket.pk).version
    assert [r.text for r in snap.rules] == ["Phone only, never email."]
    assert [(s.name, s.value) for s in snap.state] == [("issue", "too small — “wrong size”")]
    assert [(a.tool, a.amount_cents, a.summary != "") for a in snap.actions] == [
        ("issue_refund", 1500, True),
        ("add_note", None, False),
    ]
    assert [(m.order, m.paid_cents) for m in snap.money] == [("SU-10480", 10000)]
    assert {e.value for e in snap.ledger} == set(
        LedgerEntry.objects.filter(ticket=busy_ticket, status="active").values_list("value", flat=True)
    )
    assert all(isinstance(e.verified, bool) and isinstance(e.used, bool) for e in snap.ledger)
    # The turns after the summary, in order, with their JSON payloads decoded.
    assert snap.summary.covers_through_turn == 1
    assert [t.number for t in snap.turns] == list(range(2, busy_ticket.last_turn_number + 1))
    assert any(t.payload.get("calls") for t in snap.turns)
    assert lane_snapshot(busy_ticket, with_turns=False).turns == []
