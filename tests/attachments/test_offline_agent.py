"""The demo's offline agent, sent a photo: it cannot see files, so it asks staff to look and says so.

Through the real post (the file sniffed, re-encoded, stored, its notice written) and the real loop;
judged from the ticket's turns and its attention flag."""

from __future__ import annotations

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from sundry.agent.loop import agent_run
from sundry.agent.models import Confirmation
from sundry.agent.provider.gateway import Gateway
from sundry.agent.services import customer_message_post
from sundry.attachments.services import FOLLOW_UP_TOOL
from sundry.desk.lifecycle import ticket_create
from sundry.tickets.models import Ticket, Turn
from tests.attachments import samples
from tests.factories import CustomerFactory, TicketClassFactory, paid_order

pytestmark = pytest.mark.django_db


@pytest.fixture
def ticket(attachment_dir):
    customer = CustomerFactory()
    paid_order(customer=customer, number="SU-51001", prices=(4500,))
    return ticket_create(
        customer=customer.person, ticket_class=TicketClassFactory(approval_rules={}), subject="Crushed"
    )


def ask(ticket, text, *, photo=True):
    uploads = [SimpleUploadedFile("crushed box.jpg", samples.photo_jpeg(), content_type="image/jpeg")] if photo else []
    customer_message_post(ticket=ticket, text=text, uploads=uploads, wake=False)
    agent_run(ticket.pk, gateway=Gateway())
    turns = Turn.objects.filter(ticket=ticket)
    calls = [c for t in turns.filter(kind=Turn.Kind.TOOL_CALL) for c in t.payload.get("calls", [])]
    reply = turns.filter(author=Turn.Author.AGENT, kind=Turn.Kind.MESSAGE).order_by("number").last()
    return calls, reply.text if reply else "", Ticket.objects.get(pk=ticket.pk).attention


def test_a_photo_is_passed_to_staff_and_the_customer_is_told(ticket):
    calls, reply, attention = ask(ticket, "It arrived like this.")
    follow = [c for c in calls if c["name"] == FOLLOW_UP_TOOL]
    assert len(follow) == 1 and "crushed box.jpg" in follow[0]["arguments"]["reason"]
    assert "crushed box.jpg" in attention  # the flag staff see in the queue names the file
    assert "asked a member of our staff to look at it" in reply and "crushed box.jpg" in reply


def test_negative_control_the_same_words_without_a_file_ask_no_one(ticket):
    calls, reply, attention = ask(ticket, "It arrived like this.", photo=False)
    assert not [c for c in calls if c["name"] == FOLLOW_UP_TOOL] and "staff" not in reply and not attention


def test_a_photo_with_a_request_is_passed_on_and_the_request_still_worked(ticket):
    calls, reply, attention = ask(ticket, "SU-51001 arrived crushed. I'd like 10.00 USD back.")
    assert [c["name"] for c in calls].count(FOLLOW_UP_TOOL) == 1 and "crushed box.jpg" in attention
    card = Confirmation.objects.get(ticket=ticket)  # the refund the customer asked for, on a card as ever
    assert card.tool == "issue_refund" and card.arguments["amount"] in ("10.00", "10")
    assert reply.startswith("Thank you for crushed box.jpg.") and "card" in reply
