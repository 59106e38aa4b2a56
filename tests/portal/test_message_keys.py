"""A message post carries a key the page generated: a resend with the same key (after an
answer that never arrived) is answered as sent and stored once — on the customer page and
in the desk's composer, one after another and at the same moment."""

from __future__ import annotations

import re
import threading

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.test import Client

from sundry.desk.lifecycle import ticket_create
from sundry.tickets.models import Ticket, Turn
from tests.factories import CustomerFactory, TicketClassFactory

HX = {"HTTP_HX_REQUEST": "true"}
KEY = re.compile(r'name="client_key" value="([0-9a-f]{32})"')


@pytest.fixture
def setup():
    users = get_user_model().objects
    alice = users.create_user("alice", password="pw")
    staff = users.create_user("sam", password="pw", is_staff=True)
    customer = CustomerFactory(user=alice)
    tclass = TicketClassFactory(approval_rules={})
    ticket = ticket_create(customer=customer.person, ticket_class=tclass, subject="Where is it")
    Ticket.objects.filter(pk=ticket.pk).update(handler="staff")  # no agent runs: posts only
    clients = {"alice": Client(), "staff": Client()}
    clients["alice"].force_login(alice)
    clients["staff"].force_login(staff)
    return ticket, clients


def texts(ticket, **filters):
    return list(Turn.objects.filter(ticket=ticket, **filters).values_list("text", flat=True))


@pytest.mark.django_db
def test_each_render_of_a_composer_carries_a_fresh_key(setup):
    ticket, c = setup
    page = [KEY.findall(c["alice"].get(f"/help/tickets/{ticket.pk}/").content.decode()) for _ in range(2)]
    desk = [KEY.findall(c["staff"].get(f"/desk/tickets/{ticket.pk}/").content.decode()) for _ in range(2)]
    for keys in (page, desk):
        assert all(len(k) == 1 for k in keys), keys
        assert keys[0] != keys[1]


@pytest.mark.django_db
def test_a_customer_resend_with_the_same_key_is_sent_and_stored_once(setup):
    ticket, c = setup
    url = f"/help/tickets/{ticket.pk}/message"
    for _ in range(3):
        response = c["alice"].post(url, {"text": "Where is my parcel?", "client_key": "k-1"}, **HX)
        assert response.status_code == 200 and b"Sent." in response.content
    c["alice"].post(url, {"text": "Where is my parcel?", "client_key": "k-2"}, **HX)  # a new message
    c["alice"].post(url, {"text": "Where is my parcel?"}, **HX)  # no key (no script): stored as sent
    assert texts(ticket, author="customer") == ["Where is my parcel?"] * 3


@pytest.mark.django_db
def test_a_desk_reply_or_note_resent_with_its_key_is_stored_once(setup):
    ticket, c = setup
    url = f"/desk/tickets/{ticket.pk}/post"
    # A person replies only on a ticket they hold: taken over and assigned to them.
    staff = get_user_model().objects.get(pk=c["staff"].session["_auth_user_id"])
    Ticket.objects.filter(pk=ticket.pk).update(handler="staff", assigned_to=staff)
    for _ in range(2):
        assert (
            c["staff"].post(url, {"action": "reply", "text": "On its way.", "client_key": "r-1"}, **HX).status_code
            == 200
        )
        assert (
            c["staff"]
            .post(url, {"action": "note", "text": "Check the carrier.", "client_key": "n-1"}, **HX)
            .status_code
            == 200
        )
    assert texts(ticket, author="staff") == ["On its way.", "Check the carrier."]


@pytest.mark.django_db
def test_a_key_of_another_ticket_is_its_own(setup):
    ticket, c = setup
    other = ticket_create(customer=ticket.customer, ticket_class=ticket.ticket_class, subject="Another")
    Ticket.objects.filter(pk=other.pk).update(handler="staff")
    for t in (ticket, other):
        c["alice"].post(f"/help/tickets/{t.pk}/message", {"text": "Hello", "client_key": "same"}, **HX)
    assert texts(ticket, author="customer") == texts(other, author="customer") == ["Hello"]


@pytest.mark.django_db(transaction=True)
def test_the_same_key_posted_at_the_same_moment_is_stored_once(setup):
    if connection.vendor != "postgresql":
        pytest.skip("concurrent writers need PostgreSQL")
    ticket, c = setup
    barrier, codes = threading.Barrier(8), []

    def post():
        client = Client()
        client.force_login(ticket.customer.user)
        barrier.wait()
        try:
            codes.append(
                client.post(
                    f"/help/tickets/{ticket.pk}/message", {"text": "Twice at once", "client_key": "k-same"}, **HX
                ).status_code
            )
        finally:
            connection.close()

    threads = [threading.Thread(target=post) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert codes == [200] * 8
    assert texts(ticket, author="customer") == ["Twice at once"]
