"""The render cache is bounded by the bytes it holds, not by its number of entries."""

from __future__ import annotations

import sys

import pytest

from sundry.live.rendercache import ByteBoundedCache


def test_the_least_recently_used_go_first_once_past_the_byte_limit():
    cache = ByteBoundedCache(lambda: 100)
    cache.put("a", "A", 40)
    cache.put("b", "B", 40)
    assert cache.get("a") == "A"  # now "b" is the least recently used
    cache.put("c", "C", 40)
    assert cache.get("b") is None and cache.get("a") == "A" and cache.get("c") == "C"
    assert cache.nbytes == 80


def test_an_entry_larger_than_the_limit_is_not_kept_and_a_replaced_one_is_not_counted_twice():
    cache = ByteBoundedCache(lambda: 100)
    cache.put("big", "x", 101)
    assert cache.get("big") is None and cache.nbytes == 0
    cache.put("a", "1", 60)
    cache.put("a", "2", 70)
    assert cache.get("a") == "2" and cache.nbytes == 70


def test_an_entry_that_grows_is_charged_and_can_push_others_out():
    cache = ByteBoundedCache(lambda: 100)
    value = object()
    cache.put("old", "o", 30)
    cache.put("grows", value, 30)
    cache.charge("grows", value, 50)
    assert cache.get("old") is None and cache.nbytes == 80
    cache.charge("grows", object(), 500)  # not the value held: ignored
    assert cache.nbytes == 80


@pytest.mark.django_db
def test_renderings_of_many_tickets_stay_within_the_configured_bytes(settings):
    from django.contrib.auth import get_user_model

    from sundry.desk.lifecycle import ticket_create
    from sundry.live import panels
    from sundry.tickets.services import turn_append
    from tests.factories import CustomerFactory, TicketClassFactory

    settings.LIVE_RENDER_CACHE_BYTES = 300_000
    staff = get_user_model().objects.create_user("sam", password="x", is_staff=True)
    ticket_class, customer = TicketClassFactory(), CustomerFactory()
    sizes = []
    for n in range(8):
        ticket = ticket_create(customer=customer.person, ticket_class=ticket_class, subject=f"Ticket {n}")
        for i in range(30):
            turn_append(ticket=ticket, author="customer", text=f"Message {i}: " + "where is my parcel? " * 20)
        rendering = panels.render_current(panels.viewer_for(staff, panels.STAFF, ticket.pk))
        sizes.append(rendering.nbytes())
        assert panels.CACHE.nbytes <= settings.LIVE_RENDER_CACHE_BYTES
    assert sum(sizes) > settings.LIVE_RENDER_CACHE_BYTES  # the bound was reached, so eviction is what held it
    assert all(size > sys.getsizeof("") * 30 for size in sizes)
