"""The statements a customer's message post and a desk reply send, counted whole: the request's
session and login, the ticket read with its access check, the lock, the turn, the wake-up and the
panel sent back (docs/benchmarks.md, "A message post, counted"). A statement added anywhere on
the path fails here.

Inside the test's transaction each `atomic()` is a savepoint: two statements of its own
(SAVEPOINT, RELEASE) that a request outside a test does not send as statements (BEGIN and
COMMIT instead, not in Django's query log)."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.test import Client

from sundry.desk.lifecycle import ticket_create
from sundry.tickets.models import Ticket, Turn
from tests.factories import CustomerFactory, TicketClassFactory, paid_order

pytestmark = pytest.mark.django_db
HX = {"HTTP_HX_REQUEST": "true"}
# On SQLite a turn's bump and insert are two statements, and the head's reads differ.
counted_on_postgres = pytest.mark.skipif(connection.vendor != "postgresql", reason="the counts are PostgreSQL's")

# session, login, ticket (own, with its customer, class and whether the class has tool servers),
# SAVEPOINT, row lock (with the wake-up's fields), the key's earlier turn, turn (bump, wake-up mark
# and insert in one), RELEASE, notices seen, the conversation's messages.
CUSTOMER_POST = 10
# … and when the message names an order: the ledger read, its upsert.
CUSTOMER_POST_WITH_ID = CUSTOMER_POST + 2
# … from a page whose live socket is open: the push brings the message, the conversation is not read.
CUSTOMER_POST_LIVE = CUSTOMER_POST - 1
# session, login, ticket (with the customer's notice choice), SAVEPOINT, row lock, the key's earlier
# turn, turn, RELEASE, and for the head rendered from the ticket in hand: its held actions,
# colleagues, tags, timer, rating.
STAFF_REPLY = 13
# … from a page whose live socket is open: every push brings the head, which is not rendered here.
STAFF_REPLY_LIVE = STAFF_REPLY - 5


@pytest.fixture
def desk():
    users = get_user_model().objects
    alice, sam = users.create_user("alice", password="pw"), users.create_user("sam", password="pw", is_staff=True)
    customer = CustomerFactory(user=alice)
    paid_order(customer=customer, number="SU-61111")
    ticket = ticket_create(customer=customer.person, ticket_class=TicketClassFactory(), subject="Where is it")
    Turn.objects.bulk_create(
        Turn(ticket=ticket, number=n, author="customer" if n % 2 else "agent", text=f"Message {n}: any news?")
        for n in range(1, 21)
    )
    Ticket.objects.filter(pk=ticket.pk).update(last_turn_number=20)
    clients = {"alice": Client(), "sam": Client()}
    clients["alice"].force_login(alice)
    clients["sam"].force_login(sam)
    ticket.refresh_from_db()
    return ticket, clients, sam


def _post(client, url, data, limit, django_assert_max_num_queries):
    with django_assert_max_num_queries(limit) as counted:
        response = client.post(url, data, **HX)
    assert response.status_code == 200, response.content[-300:]
    return response, counted


@counted_on_postgres
@pytest.mark.parametrize(
    ("text", "limit"),
    [("Any news on my parcel?", CUSTOMER_POST), ("Where is order SU-61111?", CUSTOMER_POST_WITH_ID)],
    ids=["plain", "naming-an-order"],
)
def test_a_customer_message_post_sends_a_fixed_few_statements(desk, text, limit, django_assert_max_num_queries):
    ticket, clients, _ = desk
    url = f"/help/tickets/{ticket.pk}/message"
    # The ticket's first post also makes its notice row (three statements, once per ticket).
    clients["alice"].post(url, {"text": "Hello", "client_key": "k-first"}, **HX)
    Ticket.objects.filter(pk=ticket.pk).update(agent_wake_turn=None, agent_wake_at=None)  # as a run settles it
    response, counted = _post(
        clients["alice"], url, {"text": text, "client_key": "k-1"}, limit, django_assert_max_num_queries
    )
    assert text in response.content.decode()  # the conversation sent back holds it
    assert len(counted) == limit  # not fewer either: a lower count belongs in the bound
    ticket.refresh_from_db()
    assert ticket.agent_wake_turn == ticket.last_turn_number  # the agent was woken


@counted_on_postgres
def test_a_post_from_a_page_with_its_socket_open_is_answered_with_the_status_line_alone(
    desk, django_assert_max_num_queries
):
    ticket, clients, _ = desk
    url = f"/help/tickets/{ticket.pk}/message"
    clients["alice"].post(url, {"text": "Hello", "client_key": "k-first"}, **HX)  # the notice row, once
    Ticket.objects.filter(pk=ticket.pk).update(agent_wake_turn=None, agent_wake_at=None)
    live = {**HX, "HTTP_X_SUNDRY_LIVE": "1"}
    with django_assert_max_num_queries(CUSTOMER_POST_LIVE) as counted:
        response = clients["alice"].post(url, {"text": "Any news?", "client_key": "k-live"}, **live)
    assert response.status_code == 200
    assert len(counted) == CUSTOMER_POST_LIVE
    html = response.content.decode()
    assert "Sent." in html and "panel-conversation" not in html and "Any news?" not in html
    assert Turn.objects.filter(ticket=ticket, text="Any news?").exists()
    ticket.refresh_from_db()
    assert ticket.agent_wake_turn == ticket.last_turn_number
    # A refusal still says why, next to the composer, whatever the socket.
    refused = clients["alice"].post(url, {"text": "   ", "client_key": "k-blank"}, **live)
    assert refused.status_code == 422 and "bad" in refused.content.decode()


@counted_on_postgres
def test_a_desk_reply_sends_a_fixed_few_statements(desk, django_assert_max_num_queries):
    ticket, clients, sam = desk
    Ticket.objects.filter(pk=ticket.pk).update(handler="staff", assigned_to=sam)
    url = f"/desk/tickets/{ticket.pk}/post"
    for n in range(2):
        _, counted = _post(
            clients["sam"],
            url,
            {"action": "reply", "text": f"On its way ({n}).", "client_key": f"r-{n}"},
            STAFF_REPLY,
            django_assert_max_num_queries,
        )
    assert len(counted) == STAFF_REPLY
    assert Turn.objects.filter(ticket=ticket, author="staff", text="On its way (1).").exists()


@counted_on_postgres
def test_a_desk_reply_from_a_page_with_its_socket_open_is_answered_with_the_status_line_alone(
    desk, django_assert_max_num_queries
):
    ticket, clients, sam = desk
    Ticket.objects.filter(pk=ticket.pk).update(handler="staff", assigned_to=sam)
    url = f"/desk/tickets/{ticket.pk}/post"
    live = {**HX, "HTTP_X_SUNDRY_LIVE": "1"}
    with django_assert_max_num_queries(STAFF_REPLY_LIVE) as counted:
        response = clients["sam"].post(url, {"action": "reply", "text": "On its way.", "client_key": "r-live"}, **live)
    assert response.status_code == 200
    assert len(counted) == STAFF_REPLY_LIVE
    html = response.content.decode()
    assert "Reply sent." in html and "panel-head" not in html
    assert Turn.objects.filter(ticket=ticket, author="staff", text="On its way.").exists()
    # Taking over or handing back writes the head's own fields: it is still sent back.
    handed = clients["sam"].post(url, {"action": "hand_back", "client_key": "h-live"}, **live)
    assert handed.status_code == 200 and "panel-head" in handed.content.decode()


def test_the_counted_post_still_refuses_another_customers_ticket(desk):
    """The one read that finds the ticket is the access check: someone else's ticket is missing, a
    login that is no customer's is refused."""
    ticket, clients, _ = desk
    bob = get_user_model().objects.create_user("bob", password="pw")
    CustomerFactory(user=bob)
    other = Client()
    other.force_login(bob)
    url = f"/help/tickets/{ticket.pk}/message"
    assert other.post(url, {"text": "Mine now?"}, **HX).status_code == 404
    assert clients["sam"].post(url, {"text": "Staff here"}, **HX).status_code == 403
    assert not Turn.objects.filter(ticket=ticket, text__in=["Mine now?", "Staff here"]).exists()
