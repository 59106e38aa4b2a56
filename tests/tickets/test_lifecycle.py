"""Ticket lifecycle on the desk: status, priority, tags, assignment, who may reply, views, timers."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.utils import timezone

from sundry.agent.services import customer_message_post
from sundry.desk.lifecycle import ticket_create
from sundry.desk.timers import level, response_timer
from sundry.tickets.models import Ticket, Turn
from sundry.tickets.services import turn_append
from tests.factories import CustomerFactory, TicketClassFactory

pytestmark = pytest.mark.django_db
HTMX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture
def desk(client):
    users = get_user_model().objects
    ann = users.create_user("ann", password="pw", is_staff=True, first_name="Ann")
    ben = users.create_user("ben", password="pw", is_staff=True)
    alice_user = users.create_user("alice", password="pw")
    alice = CustomerFactory(user=alice_user, name="Alice Moreau")
    tclass = TicketClassFactory(first_response_minutes=60, next_response_minutes=120)
    ticket = ticket_create(customer=alice.person, ticket_class=tclass, subject="Broken lamp")
    client.force_login(ann)
    return {
        "ann": ann,
        "ben": ben,
        "alice_user": alice_user,
        "alice": alice,
        "tclass": tclass,
        "ticket": ticket,
        "client": client,
    }


def update(client, ticket, field, value):
    return client.post(f"/desk/tickets/{ticket.pk}/update", {"field": field, "value": value}, **HTMX)


def test_status_priority_and_tags_change_through_the_head_and_leave_events(desk):
    client, ticket = desk["client"], desk["ticket"]
    assert update(client, ticket, "status", "waiting").status_code == 200
    assert update(client, ticket, "priority", "urgent").status_code == 200
    r = update(client, ticket, "tags", "Billing, damaged  billing")
    assert r.status_code == 200 and "Tags: billing, damaged." in r.content.decode()
    ticket.refresh_from_db()
    assert (ticket.status, ticket.priority) == ("waiting", "urgent")
    assert sorted(ticket.tags.values_list("name", flat=True)) == ["billing", "damaged"]
    events = list(Turn.objects.filter(ticket=ticket, kind="event").values_list("text", flat=True))
    assert "ann set the ticket to waiting." in events and "ann set the priority to urgent." in events
    # Bad values are refused with the reason, and nothing changes.
    r = update(client, ticket, "status", "deleted")
    assert r.status_code == 422 and "Status must be one of" in r.content.decode()
    assert update(client, ticket, "priority", "whenever").status_code == 422
    assert update(client, ticket, "tags", ",".join(f"t{n}" for n in range(11))).status_code == 422
    ticket.refresh_from_db()
    assert ticket.status == "waiting" and ticket.tags.count() == 2


def test_a_customer_writing_again_reopens_a_waiting_or_resolved_ticket_and_a_closed_one_refuses(desk):
    client, ticket = desk["client"], desk["ticket"]
    for status in ("waiting", "resolved"):
        update(client, ticket, "status", status)
        ticket.refresh_from_db()  # as the customer's page loads it
        customer_message_post(ticket=ticket, text="Any news?", wake=False)
        ticket.refresh_from_db()
        assert ticket.status == "open"
    update(client, ticket, "status", "closed")
    client.force_login(desk["alice_user"])
    r = client.post(f"/help/tickets/{ticket.pk}/message", {"text": "Hello again"}, **HTMX)
    assert r.status_code == 422 and "closed" in r.content.decode()
    assert not Turn.objects.filter(ticket=ticket, text="Hello again").exists()


def test_assignment_views_and_replying_needs_the_ticket(desk):
    client, ticket, ben = desk["client"], desk["ticket"], desk["ben"]
    other = ticket_create(customer=desk["alice"].person, ticket_class=desk["tclass"], subject="Second question")
    post = f"/desk/tickets/{ticket.pk}/post"
    # Not taken over: the agent works it, so a person's reply is refused (the text stays in the box).
    r = client.post(post, {"action": "reply", "text": "Hi from Ann"}, **HTMX)
    assert r.status_code == 422 and "Take over" in r.content.decode()
    assert update(client, ticket, "assignee", "me").status_code == 200
    mine = client.get("/desk/?view=mine").content.decode()
    assert "Broken lamp" in mine and "Second question" not in mine
    unassigned = client.get("/desk/?view=unassigned").content.decode()
    assert "Second question" in unassigned and "Broken lamp" not in unassigned
    assert client.post(post, {"action": "take_over"}, **HTMX).status_code == 200
    assert client.post(post, {"action": "reply", "text": "Hi from Ann"}, **HTMX).status_code == 200
    # Given to Ben: Ann may no longer reply; Ben may.
    assert update(client, ticket, "assignee", str(ben.pk)).status_code == 200
    r = client.post(post, {"action": "reply", "text": "Ann again"}, **HTMX)
    assert r.status_code == 422 and "ben has this ticket" in r.content.decode()
    client.force_login(ben)
    assert client.post(post, {"action": "reply", "text": "Ben here"}, **HTMX).status_code == 200
    # Only desk staff can be assignees.
    assert update(client, ticket, "assignee", str(desk["alice_user"].pk)).status_code == 422
    assert update(client, ticket, "assignee", "x1").status_code == 422
    assert list(Turn.objects.filter(ticket=ticket, author="staff", kind="message").values_list("text", flat=True)) == [
        "Hi from Ann",
        "Ben here",
    ]
    assert other.assigned_to is None


def test_timers_and_sort_by_waiting(desk):
    client, tclass = desk["client"], desk["tclass"]
    now = timezone.now()
    old = ticket_create(customer=desk["alice"].person, ticket_class=tclass, subject="Waiting long")
    new = ticket_create(customer=desk["alice"].person, ticket_class=tclass, subject="Just wrote")
    answered = ticket_create(customer=desk["alice"].person, ticket_class=tclass, subject="Answered already")
    for t, minutes in ((old, 90), (new, 5), (answered, 300)):
        turn = customer_message_post(ticket=t, text="Where is my parcel?", wake=False)
        Turn.objects.filter(pk=turn.pk).update(created_at=now - timedelta(minutes=minutes))
    turn_append(ticket=answered, author="agent", text="On its way.")
    page = client.get("/desk/?sort=waiting").content.decode()
    order = [page.index(s) for s in ("Waiting long", "Just wrote", "Answered already")]
    assert order == sorted(order)
    assert "first response 1h 30m / 1h" in page and "timer past" in page
    assert "first response 5m / 1h" in page
    # The customer writes again after the reply: the next-response target applies.
    customer_message_post(ticket=answered, text="It has not arrived.", wake=False)
    page = client.get("/desk/?sort=waiting").content.decode()
    assert "next response 0m / 2h" in page


def test_timer_levels():
    target = timedelta(minutes=60)
    assert [level(timedelta(minutes=m), target) for m in (10, 45, 59, 60, 200)] == [
        "ok",
        "near",
        "near",
        "past",
        "past",
    ]
    now = timezone.now()
    assert response_timer(now=now, waiting_since=None, answered_before=False, first_minutes=60, next_minutes=5) is None
    t = response_timer(
        now=now, waiting_since=now - timedelta(minutes=4), answered_before=True, first_minutes=60, next_minutes=5
    )
    assert (t.kind, t.level) == ("next response", "near")


def test_the_queue_pages_past_200_tickets(desk):
    client, tclass = desk["client"], desk["tclass"]
    Ticket.objects.bulk_create(
        [Ticket(customer=desk["alice"].person, ticket_class=tclass, subject=f"Bulk {n:03d}") for n in range(230)]
    )
    first = client.get("/desk/").content.decode()
    assert "Page 1 of 5" in first and "231 tickets" in first
    last = client.get("/desk/?page=5").content.decode()
    shown = first.count('data-ticket="') + client.get("/desk/?page=2").content.decode().count('data-ticket="')
    assert shown == 100 and last.count('data-ticket="') == 31
    assert "Page 5 of 5" in client.get("/desk/?page=999").content.decode()  # out of range: the last page
