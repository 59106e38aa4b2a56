"""A run's open: its claim and its one load of the ticket (`loop._open`).

The load's SQL is compiled once per process (`core.compiledread`) and, on PostgreSQL, travels with
the claim's UPDATE in one round trip (`claims.claim_and_read`). These tests hold the compiled load
to what the queryset it was compiled from reads, and the open to one round trip.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from sundry.agent import claims, loop
from sundry.agent.models import AgentStep
from sundry.agent.services import customer_message_post
from sundry.core.compiledread import CompiledRead
from sundry.desk.lifecycle import ticket_create
from sundry.portal import notices
from sundry.tickets.models import Ticket, Turn
from sundry.tickets.services import turn_append
from sundry.toolservers.models import ToolServer
from tests.factories import CustomerFactory, TicketClassFactory
from tests.querystages import count_queries

POSTGRES = connection.vendor == "postgresql"

pytestmark = pytest.mark.django_db


def _fields(obj) -> dict:
    return {f.attname: getattr(obj, f.attname) for f in type(obj)._meta.concrete_fields}


def _annotations(ticket) -> dict:
    return {name: getattr(ticket, name) for name in vars(ticket) if name.startswith("run_") or name in loop.LOAD_ALSO}


def _as_loaded(ticket) -> tuple:
    """Everything a run reads off its loaded ticket: its fields, its class's and customer's (cached: no
    query to reach them), the annotations, the instance's state."""
    assert Ticket.ticket_class.is_cached(ticket) and Ticket.customer.is_cached(ticket)
    return (
        _fields(ticket),
        _fields(ticket.ticket_class),
        _fields(ticket.customer),
        _annotations(ticket),
        ticket._state.adding,
        ticket._state.db,
    )


@pytest.fixture
def tickets():
    """Tickets in the states a run opens on: input waiting, a tool result to read (its JSON payload),
    steps taken, a class with an enabled tool server, the customer choosing e-mail notices, none of these."""
    customer = CustomerFactory()
    plain = ticket_create(customer=customer.person, ticket_class=TicketClassFactory(), subject="Nothing yet")
    waiting = ticket_create(customer=customer.person, ticket_class=TicketClassFactory(), subject="Where is it")
    customer_message_post(ticket=waiting, text="Where is order SU-10480?", wake=False)
    mid = ticket_create(customer=customer.person, ticket_class=TicketClassFactory(), subject="Looking")
    customer_message_post(ticket=mid, text="Where?", wake=False)
    turn_append(ticket=mid, author=Turn.Author.SYSTEM, kind=Turn.Kind.TOOL_RESULT, text="{}", payload={"ok": 1})
    AgentStep.objects.create(ticket=mid, number=3, model="m", request_tokens=1, outcome=AgentStep.Outcome.TOOL_CALLS)
    ToolServer.objects.create(ticket_class=mid.ticket_class, name="s", command="true", enabled=True)
    notices.preference_set(customer=plain.customer, email=True)
    return [plain, waiting, mid]


def test_the_compiled_load_reads_what_its_queryset_reads(tickets):
    for ticket in tickets:
        assert _as_loaded(loop._load(ticket.pk)) == _as_loaded(loop._load_query(ticket.pk).first())
    mid = loop._load(tickets[2].pk)
    assert mid.run_has_servers and mid.run_next_step == 4 and loop._start(mid) == (True, True, 4)
    assert loop._load(-1) is None


def test_the_comparison_sees_a_column_read_raw(tickets):
    """Negative control for the test above: the same read without Django's converters (a JSON
    column left as the driver's text) differs from the queryset's."""
    raw = CompiledRead(loop._load_query, (loop._ANY_TICKET,))
    raw._converters = {}
    ticket = Ticket.objects.get(pk=tickets[2].pk)
    Ticket.objects.filter(pk=ticket.pk).update(stamps={"turns": 3})
    assert _as_loaded(raw.get(ticket.pk)) != _as_loaded(loop._load_query(ticket.pk).first())


def test_the_load_is_compiled_once(tickets):
    loop._load(tickets[0].pk)
    read = loop._read()
    loop._load(tickets[1].pk)
    assert loop._read() is read
    with count_queries() as counted:
        loop._load(tickets[1].pk)
    assert len(counted.statements) == 1


@pytest.mark.skipif(not POSTGRES, reason="one round trip is PostgreSQL's")
def test_the_open_claims_and_loads_in_one_round_trip(tickets):
    """Negative control: with the statements sent apart (`_one_trip` false, as on SQLite) the same
    open takes two, and is otherwise the same."""
    ticket = tickets[1]
    with count_queries() as counted:
        ticket_loaded, start, held = loop._open(ticket.pk, "run-a")
    assert counted.round_trips == 1, counted.report()
    assert held.owner == "run-a" and not held.took_over and start == (True, False, 1)
    row = Ticket.objects.values_list("agent_claimed_by", "agent_claimed_at").get(pk=ticket.pk)
    assert row == ("run-a", held.stamp)
    assert _as_loaded(ticket_loaded) == _as_loaded(loop._load_query(ticket.pk).first())  # the claim seen
    claims.release(held)

    claims_one_trip = claims._one_trip
    claims._one_trip = lambda: False
    try:
        with count_queries() as apart:
            again, start_apart, held_apart = loop._open(ticket.pk, "run-b")
    finally:
        claims._one_trip = claims_one_trip
    assert apart.round_trips == 2, apart.report()
    assert start_apart == start and _as_loaded(again)[1:] == _as_loaded(ticket_loaded)[1:]
    claims.release(held_apart)


@pytest.mark.skipif(not POSTGRES, reason="one round trip is PostgreSQL's")
def test_a_held_ticket_is_neither_claimed_nor_loaded_and_a_lapsed_claim_is_taken_over(tickets):
    ticket = tickets[1]
    _, _, held = loop._open(ticket.pk, "run-a")
    with count_queries() as counted:
        assert loop._open(ticket.pk, "run-b") is None
    assert Ticket.objects.values_list("agent_claimed_by", flat=True).get(pk=ticket.pk) == "run-a"
    assert counted.round_trips == 2, counted.report()  # the pair, and the look for a lapsed claim
    # An earlier attempt of the same task takes its claim back at once.
    _, _, again = loop._open(ticket.pk, "run-a2", earlier=("run-a",))
    assert again.owner == "run-a2" and not again.took_over
    # A lapsed claim is taken over; the ticket then loaded apart.
    Ticket.objects.filter(pk=ticket.pk).update(agent_claimed_at=timezone.now() - claims.CLAIM_TTL - timedelta(1))
    loaded, start, taken = loop._open(ticket.pk, "run-c")
    assert taken.took_over and taken.previous == "run-a2" and loaded.pk == ticket.pk and start[0]
    assert held.stamp != taken.stamp
