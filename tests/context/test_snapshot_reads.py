"""The lane snapshot read as one statement of JSON sets (PostgreSQL) gives exactly what the plain reads give."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from sundry.agent.gateway import Gateway
from sundry.agent.loop import agent_run
from sundry.agent.services import customer_message_post
from sundry.context import services as lanes
from sundry.context.models import Summary
from sundry.context.selectors import lane_snapshot, turn_cache
from sundry.core import sql
from sundry.evals.benchmarks import InstantModel
from sundry.tickets.models import Ticket
from sundry.tickets.services import ticket_create
from tests.factories import CustomerFactory, TicketClassFactory, paid_order

pytestmark = pytest.mark.django_db


def plain(reads):
    """What `read_together` does on any database but PostgreSQL: each SELECT on its own."""
    return sql.run([(select, params) for select, _, params in reads])


@pytest.fixture
def busy_ticket():
    """A ticket with something in every lane, JSON payloads, booleans, nulls and unicode included."""
    customer = CustomerFactory()
    paid_order(customer=customer, number="SU-10480", prices=(6000, 4000))
    ticket = ticket_create(customer=customer, ticket_class=TicketClassFactory(approval_rules={}), subject="Busy")
    customer_message_post(ticket=ticket, text="Where is my order SU-10480? — “soon” please", wake=False)
    agent_run(ticket.pk, gateway=Gateway(override=InstantModel()))
    ticket = Ticket.objects.select_related("ticket_class", "customer").get(pk=ticket.pk)
    turn = ticket.last_turn_number
    lanes.rule_pin(ticket=ticket, text="Phone only, never email.", turn=turn, source="customer")
    lanes.state_set(ticket=ticket, name="issue", value="too small — “wrong size”", turn=turn, source="customer")
    lanes.question_open(ticket=ticket, text="Which size instead?", turn=turn)
    lanes.action_record(ticket=ticket, tool="issue_refund", target="SU-10480", arguments={}, result={}, turn=turn,
                        idempotency_key="k1", reversible=False, amount_cents=1500, currency="EUR")
    lanes.action_record(ticket=ticket, tool="add_note", target="", arguments={}, result={}, turn=turn,
                        idempotency_key="k2", reversible=True)
    Summary.objects.create(ticket=ticket, covers_through_turn=1, text="The customer asked about SU-10480.",
                           fields={}, is_current=True)
    return ticket


def test_one_statement_reads_what_the_plain_reads_read(busy_ticket, monkeypatch):
    turn_cache.clear()
    with CaptureQueriesContext(connection) as queries:
        together = lane_snapshot(busy_ticket)
    if connection.vendor == "postgresql":
        assert len(queries) == 1
    turn_cache.clear()
    monkeypatch.setattr(sql, "read_together", plain)
    apart = lane_snapshot(busy_ticket)
    assert together == apart
    # Every lane had something to compare.
    assert all([apart.rules, apart.ledger, apart.state, apart.actions, apart.money, apart.questions, apart.summary,
                apart.turns, apart.version])
    assert any(t.payload for t in apart.turns) and any(a.amount_cents is None for a in apart.actions)
