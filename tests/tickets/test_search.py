"""Desk search: tickets, customers, order numbers and message text, on PostgreSQL or SQLite."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.db import connection

from sundry.agent.services import customer_message_post
from sundry.desk.lifecycle import ticket_create
from tests.factories import CustomerFactory, TicketClassFactory, paid_order

pytestmark = pytest.mark.django_db


@pytest.fixture
def searchable(client):
    staff = get_user_model().objects.create_user("ann", password="pw", is_staff=True)
    tclass = TicketClassFactory()
    alice = CustomerFactory(name="Alice Moreau", email="alice@example.com")
    bob = CustomerFactory(name="Bob Stone")
    paid_order(customer=bob, number="SU-55501")
    lamp = ticket_create(customer=alice.person, ticket_class=tclass, subject="Broken lamp")
    customer_message_post(ticket=lamp, text="The lampshade arrived cracked and the bulbs were missing.", wake=False)
    parcel = ticket_create(customer=bob.person, ticket_class=tclass, subject="Where is it")
    customer_message_post(ticket=parcel, text="Nothing came yet <script>x</script>", wake=False)
    client.force_login(staff)
    return {"lamp": lamp, "parcel": parcel, "client": client}


def found(client, q):
    return client.get("/desk/search/", {"q": q}).content.decode()


def test_search_finds_by_subject_customer_order_and_message(searchable):
    client = searchable["client"]
    assert "Broken lamp" in found(client, "lamp") and "Where is it" not in found(client, "lamp")
    assert "Broken lamp" in found(client, "moreau")
    assert "Broken lamp" in found(client, "alice@example")
    by_order = found(client, "SU-55501")
    assert "Where is it" in by_order and "matched order" in by_order and "Broken lamp" not in by_order
    by_text = found(client, "cracked")
    assert "Broken lamp" in by_text and "matched message" in by_text and "<mark>" in by_text
    assert "Broken lamp" in found(client, str(searchable["lamp"].pk))
    assert "Nothing matches" in found(client, "zebra")


def test_full_text_search_stems_words_on_postgresql(searchable):
    if connection.vendor != "postgresql":
        pytest.skip("stemming is PostgreSQL full-text search; SQLite matches substrings")
    page = found(searchable["client"], "bulb missing")  # "bulbs were missing": words, not a substring
    assert "Broken lamp" in page and "<mark>bulbs</mark>" in page


def test_search_escapes_what_it_shows_and_refuses_overlong_queries(searchable):
    client = searchable["client"]
    for q in ("nothing came", "script>x", "<script>"):
        page = found(client, q)
        assert "Where is it" in page and "<script>x" not in page, q
    assert "&lt;<mark>script&gt;x</mark>&lt;/script&gt;" in found(client, "script>x")  # a substring match, escaped
    assert "at most 200 characters" in found(client, "x" * 201)
    client.logout()
    assert client.get("/desk/search/", {"q": "lamp"}).status_code == 302
