"""The pages' cache of turns already shown: a push reads only new turns, and shows exactly what a full read shows."""

from __future__ import annotations

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from sundry.core.rowcache import AppendOnlyRows
from sundry.tickets import selectors
from sundry.tickets.models import Ticket, Turn
from sundry.tickets.services import ticket_create, turn_append
from tests.factories import CustomerFactory, TicketClassFactory

# Outside a test transaction: the cache serves only reads that see committed turns.
pytestmark = pytest.mark.django_db(transaction=True)


def fresh(ticket_id):
    return Ticket.objects.select_related("ticket_class", "customer").get(pk=ticket_id)


def full_read(ticket):
    return [(t.pk, t.number, t.author, t.kind, t.text, t.payload) for t in
            Turn.objects.filter(ticket=ticket).order_by("number")]


def shown(ticket):
    return [(t.pk, t.number, t.author, t.kind, t.text, t.payload) for t in selectors.turns(ticket)]


@pytest.fixture
def ticket():
    selectors._shown_turns.clear()
    return ticket_create(customer=CustomerFactory(), ticket_class=TicketClassFactory(), subject="Long one")


def test_each_read_after_new_turns_equals_a_full_read_and_reads_only_the_new_ones(ticket):
    for i in range(6):
        turn_append(ticket=fresh(ticket.pk), author="customer" if i % 2 == 0 else "agent", text=f"Message {i}",
                    payload={"i": i})
        assert shown(ticket) == full_read(ticket)
    # Cached through turn 6: the next read asks only for what came after it.
    turn_append(ticket=fresh(ticket.pk), author="customer", text="And now?")
    with CaptureQueriesContext(connection) as queries:
        assert [t.text for t in selectors.turns(ticket)][-2:] == ["Message 5", "And now?"]
    [query] = queries.captured_queries
    assert '"number" > 6' in query["sql"]


def test_a_cache_that_does_not_run_on_is_refused_and_the_turns_read_whole(ticket):
    for i in range(3):
        turn_append(ticket=fresh(ticket.pk), author="customer", text=f"Message {i}")
    stale = Turn(ticket_id=ticket.pk, number=5, author="customer", kind="message", text="never written")
    selectors._shown_turns.put(selectors._shown_turns.key(ticket), [stale])
    refused = selectors._shown_turns.refused
    assert [t.text for t in selectors.turns(ticket)] == ["Message 0", "Message 1", "Message 2"]
    assert selectors._shown_turns.refused == refused + 1


def test_reads_inside_a_transaction_neither_use_nor_fill_the_cache(ticket):
    turn_append(ticket=fresh(ticket.pk), author="customer", text="Hello")
    with transaction.atomic():
        turn_append(ticket=fresh(ticket.pk), author="agent", text="Maybe rolled back")
        assert len(selectors.turns(ticket)) == 2
    assert selectors._shown_turns.get(selectors._shown_turns.key(ticket)) == []


def test_the_cache_is_bounded_in_rows_across_tickets():
    cache = AppendOnlyRows(what="rows", tickets=10, rows_per_ticket=5, rows=8)
    cache.put("a", [1, 2, 3, 4])
    cache.put("b", [1, 2, 3, 4])
    assert cache.get("a") and cache.get("b")
    cache.put("c", [1, 2, 3])  # 11 rows held: the least recently used ticket goes
    assert cache.get("a") == [] and cache.get("b") and cache.get("c")
    cache.put("d", [1, 2, 3, 4, 5, 6])  # over the per-ticket bound: never held
    assert cache.get("d") == []
    cache.put("b", [1])  # replacing a ticket's rows counts only the new ones
    assert cache._held == 4
