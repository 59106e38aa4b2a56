"""Timers on tickets waiting on staff: only a person's reply stops them; the agent's reply still
answers an ordinary ticket. Shown in the queue and the desk's head, and sorted by in the queue."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.utils import timezone

from sundry.agent.models import HeldAction
from sundry.agent.services import customer_message_post, staff_reply_post, ticket_set_handler
from sundry.desk.lifecycle import ticket_create
from sundry.desk.selectors import ticket_timer
from sundry.tickets.attention import follow_up_request
from sundry.tickets.models import Turn
from sundry.tickets.services import turn_append
from tests.factories import CustomerFactory, TicketClassFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def desk(client):
    ann = get_user_model().objects.create_user("ann", is_staff=True)
    alice = CustomerFactory(name="Alice Moreau")
    tclass = TicketClassFactory(first_response_minutes=60, next_response_minutes=120)
    client.force_login(ann)
    return {"ann": ann, "alice": alice, "tclass": tclass, "client": client}


def wrote(desk, subject: str, minutes_ago: int):
    """A ticket whose customer wrote `minutes_ago`."""
    ticket = ticket_create(customer=desk["alice"].person, ticket_class=desk["tclass"], subject=subject)
    turn = customer_message_post(ticket=ticket, text="Where is my parcel?", wake=False)
    Turn.objects.filter(pk=turn.pk).update(created_at=timezone.now() - timedelta(minutes=minutes_ago))
    return ticket


def label(ticket) -> str | None:
    ticket.refresh_from_db()
    timer = ticket_timer(ticket)
    return timer.label if timer else None


def test_the_agents_reply_does_not_stop_the_staff_timer_on_a_follow_up_but_a_staff_reply_does(desk):
    promised = wrote(desk, "Needs a person", 90)
    turn = turn_append(ticket=promised, author="agent", text="A colleague will follow up with you.")
    follow_up_request(ticket_id=promised.pk, reason="warranty claim", turn=turn.number)
    # Control: the same conversation without the promise — the agent's reply was the first response.
    ordinary = wrote(desk, "Agent answered", 90)
    turn_append(ticket=ordinary, author="agent", text="It arrives tomorrow.")

    assert label(ordinary) is None
    assert label(promised) == "staff first response 1h 30m / 1h"
    assert ticket_timer(promised).level == "past"

    ticket_set_handler(ticket=promised, handler="staff", user=desk["ann"])
    staff_reply_post(ticket=promised, text="Hello, Ann here about your warranty.", user=desk["ann"])
    assert label(promised) is None  # a person answered, though the follow-up line is still up
    # The customer writes again: the staff next-response target applies; the agent's answer does not stop it.
    customer_message_post(ticket=promised, text="Thanks, what do you need from me?", wake=False)
    turn_append(ticket=promised, author="agent", text="Ann will reply shortly.")
    assert label(promised) == "staff next response 0m / 2h"
    # On the ordinary ticket a second message and the agent's answer leave nobody waiting.
    customer_message_post(ticket=ordinary, text="Thanks!", wake=False)
    assert label(ordinary) == "next response 0m / 2h"
    turn_append(ticket=ordinary, author="agent", text="You're welcome.")
    assert label(ordinary) is None


def test_a_held_approval_or_any_flag_makes_the_ticket_wait_on_staff_until_it_is_gone(desk):
    held = wrote(desk, "Refund held", 30)
    turn_append(ticket=held, author="agent", text="A colleague approves refunds this size.")
    action = HeldAction.objects.create(
        ticket=held,
        tool="issue_refund",
        call_id="c1",
        reason="over threshold",
        turn=2,
        idempotency_key="staff-timer-held",
        arguments={},
    )
    assert label(held) == "staff first response 30m / 1h"
    HeldAction.objects.filter(pk=action.pk).update(status=HeldAction.Status.APPROVED)
    assert label(held) is None  # decided: the agent's reply answers again

    flagged = wrote(desk, "Model down", 50)
    turn_append(ticket=flagged, author="agent", text="One moment.")
    from sundry.tickets.attention import attention_flag

    attention_flag(flagged.pk, "Model unavailable: timed out")
    assert label(flagged) == "staff first response 50m / 1h"
    assert ticket_timer(flagged).level == "near"


def test_the_queue_shows_staff_timers_and_sorts_by_waiting_time(desk):
    client = desk["client"]
    promised = wrote(desk, "Promised follow-up", 90)
    turn = turn_append(ticket=promised, author="agent", text="A colleague will follow up.")
    follow_up_request(ticket_id=promised.pk, reason="a person must check", turn=turn.number)
    wrote(desk, "Just wrote", 5)
    answered = wrote(desk, "Answered by the agent", 300)
    turn_append(ticket=answered, author="agent", text="On its way.")

    page = client.get("/desk/?sort=waiting").content.decode()
    order = [page.index(s) for s in ("Promised follow-up", "Just wrote", "Answered by the agent")]
    assert order == sorted(order), "longest waiting first; the answered ticket (nobody waiting) last"
    assert "staff first response 1h 30m / 1h" in page and "first response 5m / 1h" in page
    # Control: sorted by update instead, the newest ticket comes first.
    page = client.get("/desk/?sort=updated").content.decode()
    assert page.index("Answered by the agent") < page.index("Promised follow-up")
    # The ticket's own head shows the same timer.
    head = client.get(f"/desk/tickets/{promised.pk}/").content.decode()
    assert "staff first response 1h 30m / 1h" in head
