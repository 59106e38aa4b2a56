"""Canned replies on the desk: the demo seeds some, and their placeholders are filled from the ticket;
one the ticket has no value for, or one nobody knows, stays in the text as a note (never dropped)."""

from __future__ import annotations

import html
import re

import pytest
from django.contrib.auth import get_user_model

from sundry.context import services as lanes
from sundry.desk.admin import CannedReplyForm
from sundry.desk.lifecycle import ticket_create
from sundry.shop.demo import CANNED_REPLIES, ensure_canned_replies
from sundry.tickets.models import CannedReply
from tests.factories import CustomerFactory, TicketClassFactory, paid_order

pytestmark = pytest.mark.django_db


def offered(client, ticket) -> dict[str, str]:
    """The canned replies the desk's ticket page offers: title -> the text it inserts."""
    page = client.get(f"/desk/tickets/{ticket.pk}/").content.decode()
    select = re.search(r'<select data-macro-into="composer-text">(.*?)</select>', page, re.S)
    assert select, "the ticket page offers no canned replies"
    return {
        html.unescape(title): html.unescape(text)
        for text, title in re.findall(r'<option value="([^"]+)">([^<]+)</option>', select.group(1))
    }


@pytest.fixture
def desk(client):
    staff = get_user_model().objects.create_user("sam", password="pw", is_staff=True, first_name="Sam")
    client.force_login(staff)
    return client


@pytest.fixture
def alice():
    return CustomerFactory(name="Alice Moreau")


def test_the_demo_seeds_canned_replies_once_and_each_passes_the_admins_check():
    assert ensure_canned_replies() == len(CANNED_REPLIES) >= 4
    for title, body in CANNED_REPLIES:
        form = CannedReplyForm(data={"title": title + " (copy)", "body": body})
        assert form.is_valid(), (title, form.errors)
    assert any("{order_number}" in body for _, body in CANNED_REPLIES)
    # A second seeding leaves the desk's replies alone, edits and removals included.
    CannedReply.objects.filter(title=CANNED_REPLIES[0][0]).delete()
    assert ensure_canned_replies() == 0
    assert CannedReply.objects.count() == len(CANNED_REPLIES) - 1


def test_the_desk_fills_the_customers_name_the_order_and_the_person(desk, alice):
    ensure_canned_replies()
    order = paid_order(customer=alice, number="SU-30100")
    ticket = ticket_create(customer=alice.person, ticket_class=TicketClassFactory(), subject="Refund")
    lanes.state_set(ticket=ticket, name="order_number", value=order.number, turn=0, source="customer", confirmed=True)
    replies = offered(desk, ticket)
    assert set(replies) == {title for title, _ in CANNED_REPLIES}
    assert replies["Refund on its way"].startswith("Hi Alice, the refund on order SU-30100 has been issued.")
    assert replies["Taking over from the assistant"].startswith("Hi Alice, I'm Sam from the support team.")
    assert f"ticket #{ticket.pk} as resolved" in replies["Resolving the ticket"]
    assert not any("{" in text or "[" in text for text in replies.values())


def test_a_placeholder_without_a_value_or_unknown_is_shown_not_dropped(desk, alice):
    # Written straight to the table, as a data migration or an import could: the admin form would refuse it.
    CannedReply.objects.create(title="Odd one", body="Hi {customer_nickname}, about {order_number}: done.")
    ticket = ticket_create(customer=alice.person, ticket_class=TicketClassFactory(), subject="No order named yet")
    text = offered(desk, ticket)["Odd one"]
    assert text == "Hi [unknown placeholder: {customer_nickname}], about [fill in: order number]: done."
    # Control: the same reply on a ticket that knows the order reads clean.
    order = paid_order(customer=alice, number="SU-30101")
    lanes.state_set(ticket=ticket, name="order_number", value=order.number, turn=0, source="customer", confirmed=True)
    assert offered(desk, ticket)["Odd one"] == "Hi [unknown placeholder: {customer_nickname}], about SU-30101: done."


def test_a_stray_brace_offers_the_text_as_written(desk, alice):
    CannedReply.objects.create(title="Braces", body="Use {curly braces like {this.")
    ticket = ticket_create(customer=alice.person, ticket_class=TicketClassFactory(), subject="Braces")
    assert offered(desk, ticket)["Braces"] == "Use {curly braces like {this."
