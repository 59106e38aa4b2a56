"""The snapshot's cache of turns already read: it must give exactly what a full read gives."""

from __future__ import annotations

import pytest
from django.test.utils import override_settings

from sundry.agent.gateway import Gateway
from sundry.agent.loop import agent_run
from sundry.agent.services import customer_message_post
from sundry.compaction.models import CompactionRun
from sundry.core.background import wait_idle
from sundry.context import selectors
from sundry.context.lanes import TurnData
from sundry.context.selectors import lane_snapshot, turn_cache
from sundry.evals.benchmarks import InstantModel
from sundry.tickets.models import Ticket
from sundry.tickets.services import ticket_create
from tests.factories import CustomerFactory, TicketClassFactory, paid_order

# Outside a test transaction: the cache only serves reads that see committed turns.
pytestmark = pytest.mark.django_db(transaction=True)


def fresh(ticket_id):
    return Ticket.objects.select_related("ticket_class", "customer").get(pk=ticket_id)


def uncached(ticket_id):
    turn_cache.clear()
    try:
        return lane_snapshot(fresh(ticket_id)).turns
    finally:
        turn_cache.clear()


@override_settings(BACKGROUND_MODE="deferred")  # the compactions a step queues run at wait_idle(), here
def test_cached_reads_equal_full_reads_through_messages_and_compactions():
    customer = CustomerFactory()
    paid_order(customer=customer, number="SU-10480", prices=(6000, 4000, 2500))
    tclass = TicketClassFactory(approval_rules={}, token_budget=2400, trigger_fraction=0.5, recent_turns_kept=4)
    ticket = ticket_create(customer=customer, ticket_class=tclass, subject="Where is it")
    gateway = Gateway(override=InstantModel())
    turn_cache.clear()
    refused = turn_cache.refused
    for i in range(12):
        customer_message_post(ticket=ticket, text=f"Where is my order SU-10480? ({i})", wake=False)
        agent_run(ticket.pk, gateway=gateway)
        wait_idle()
        cached = lane_snapshot(fresh(ticket.pk)).turns  # served partly from the cache
        assert turn_cache.get(turn_cache.key(fresh(ticket.pk)))
        assert cached == uncached(ticket.pk)
        lane_snapshot(fresh(ticket.pk))  # warm the cache again for the next round
    assert CompactionRun.objects.filter(ticket=ticket, status="succeeded").exists()  # the cache crossed a summary
    assert turn_cache.refused == refused  # and was used throughout, never refused


def test_a_cache_that_does_not_run_on_is_dropped_and_the_turns_read_whole():
    customer = CustomerFactory()
    ticket = ticket_create(customer=customer, ticket_class=TicketClassFactory(), subject="Gap")
    for i in range(3):
        customer_message_post(ticket=ticket, text=f"Message {i}", wake=False)
    ticket = fresh(ticket.pk)
    # A cached turn 5 where the ticket has turns 1–3: what the cache holds does not run on
    # from the summary (none here), which the snapshot refuses. (A cached turn's content is
    # trusted: turns never change, and the key holds the ticket's database and creation time.)
    turn_cache.put(turn_cache.key(ticket), [TurnData(number=5, author="customer", kind="message", text="stale")])
    assert selectors.turn_cache.get(turn_cache.key(ticket))  # present before the read
    refused = turn_cache.refused
    turns = lane_snapshot(ticket).turns
    assert turn_cache.refused == refused + 1
    assert [t.text for t in turns] == ["Message 0", "Message 1", "Message 2"]
    assert turns == uncached(ticket.pk)


def test_reads_inside_a_transaction_neither_use_nor_fill_the_cache():
    from django.db import transaction

    customer = CustomerFactory()
    ticket = ticket_create(customer=customer, ticket_class=TicketClassFactory(), subject="Atomic")
    customer_message_post(ticket=ticket, text="Hello", wake=False)
    turn_cache.clear()
    with transaction.atomic():
        lane_snapshot(fresh(ticket.pk))
    assert turn_cache.get(turn_cache.key(fresh(ticket.pk))) == []


def test_a_run_reads_its_first_lanes_with_the_claim_but_never_through_another_tickets_cache():
    from datetime import timedelta

    from sundry.agent import loop

    customer = CustomerFactory()
    ticket = ticket_create(customer=customer, ticket_class=TicketClassFactory(), subject="Reused id")
    customer_message_post(ticket=ticket, text="Hello", wake=False)
    ticket = fresh(ticket.pk)
    turn_cache.clear()
    # What this process cached for a ticket with the same id in the same database, created at
    # another time (a deleted ticket's id reused): the run opening by id must not trust it.
    other = (*turn_cache.key(ticket)[:2], ticket.created_at - timedelta(days=1))
    turn_cache.put(other, [TurnData(number=1, author="customer", kind="message", text="someone else's")])
    _, _, lanes = loop._open(ticket.pk)
    assert lanes is None  # the first step reads its lanes afresh
    loop._release(ticket.pk)
    lanes_now = lane_snapshot(ticket)
    assert [t.text for t in lanes_now.turns] == ["Hello"]
    # With this ticket's own turns cached, the opening's lanes are what a fresh read gives.
    assert turn_cache.key_by_id(ticket.pk) == turn_cache.key(ticket)
    _, _, lanes = loop._open(ticket.pk)
    assert lanes == lanes_now and lanes.turns == uncached(ticket.pk)
