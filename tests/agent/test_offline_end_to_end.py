"""The offline model works the demo shop's common cases through the real loop.

A refund, cancellation, return or replacement the customer asks for is proposed on a card; the
customer presses Confirm (`confirm`), and the agent runs again to tell them what became of it."""

from __future__ import annotations

import pytest

from sundry.agent.loop import agent_run
from sundry.agent.models import Confirmation, HeldAction
from sundry.agent.services import customer_message_post
from sundry.context.models import LedgerEntry, Summary
from sundry.desk.lifecycle import ticket_create
from sundry.shop.models import Order, Refund, Return
from sundry.shop.offline import LANE_TOOLS
from sundry.tickets.models import Turn
from tests.factories import (
    CustomerFactory,
    ParcelFactory,
    TicketClassFactory,
    TrackingEventFactory,
    customer_confirms,
    paid_order,
)

pytestmark = pytest.mark.django_db


@pytest.fixture
def setup():
    customer = CustomerFactory()
    delivered = paid_order(customer=customer, number="SU-40110", prices=(3000, 2000))
    shipped = paid_order(customer=customer, number="SU-40111", status=Order.Status.SHIPPED, prices=(4500,))
    placed = paid_order(customer=customer, number="SU-40112", status=Order.Status.PLACED, prices=(1500,))
    parcel = ParcelFactory(order=shipped, status="in_transit")
    TrackingEventFactory(parcel=parcel, location="Leeds hub", description="In transit")
    tclass = TicketClassFactory(approval_rules={})
    return {"customer": customer, "delivered": delivered, "shipped": shipped, "placed": placed, "tclass": tclass}


def new_ticket(setup, text):
    ticket = ticket_create(customer=setup["customer"].person, ticket_class=setup["tclass"], subject="Help")
    customer_message_post(ticket=ticket, text=text)
    agent_run(ticket.pk)
    return ticket


def tools_called(ticket):
    return [c["name"] for t in ticket.turns.filter(kind="tool_call").order_by("number") for c in t.payload["calls"]]


def shop_calls(ticket):
    """The calls on the shop, without the agent's own lane bookkeeping (facts, rules, follow-up flags)."""
    return [n for n in tools_called(ticket) if n not in LANE_TOOLS]


def last_reply(ticket):
    return ticket.turns.filter(author="agent", kind="message").order_by("-number").first().text


def confirm(ticket, *, decline=False):
    """The customer presses Confirm (or Not now) on the card(s) the agent just proposed, as the page's
    button does, and the agent goes on. Returns the decided cards (at least one: a card was expected)."""
    assert "card" in last_reply(ticket), last_reply(ticket)  # the agent told them to check the card
    decided = customer_confirms(ticket, decline=decline)
    assert decided, "no open card to confirm"
    agent_run(ticket.pk)
    return decided


def test_track(setup):
    ticket = new_ticket(setup, "Where is my order SU-40111?")
    assert tools_called(ticket) == ["get_order", "track_parcel"]
    assert "in transit" in last_reply(ticket).lower() or "in_transit" in last_reply(ticket)


def test_refund_then_no_second_refund(setup):
    ticket = new_ticket(setup, "Please refund 10.00 USD on SU-40110, the box was dented.")
    assert "issue_refund" in tools_called(ticket)
    assert not Refund.objects.exists()  # proposed on a card, not run
    [card] = confirm(ticket)
    assert card.outcome == "executed"
    assert Refund.objects.filter(order=setup["delivered"], amount_cents=1000).count() == 1
    customer_message_post(ticket=ticket, text="Can I have a refund on SU-40110?")
    agent_run(ticket.pk)
    assert Refund.objects.filter(order=setup["delivered"]).count() == 1
    # Not even offered again: no card waits that a click could turn into a second refund.
    assert not Confirmation.objects.filter(ticket=ticket, status=Confirmation.Status.PENDING).exists()


def test_return_and_cancel(setup):
    ticket = new_ticket(setup, "I want to return the items from SU-40110.")
    assert tools_called(ticket)[-1] == "book_return" and not Return.objects.exists()
    assert confirm(ticket)[0].outcome == "executed"
    assert Return.objects.filter(order=setup["delivered"]).exists()
    ticket = new_ticket(setup, "Please cancel order SU-40112.")
    assert tools_called(ticket)[-1] == "cancel_order"
    setup["placed"].refresh_from_db()
    assert setup["placed"].status == "placed"
    assert confirm(ticket)[0].outcome == "executed"
    setup["placed"].refresh_from_db()
    assert setup["placed"].status == "cancelled"


def test_without_an_order_number_it_searches_instead_of_guessing(setup):
    ticket = new_ticket(setup, "Where is my parcel?")
    assert tools_called(ticket)[0] == "search_orders"


def test_when_the_order_id_leaves_the_request_it_looks_it_up_again(setup):
    ticket = new_ticket(setup, "Where is my order SU-40111?")
    ticket.refresh_from_db()
    # Take the order out of the request, as a lossy compaction would: its turns
    # go behind a summary that names no ID, and its ledger entries are archived.
    Summary.objects.create(
        ticket=ticket,
        covers_through_turn=ticket.last_turn_number,
        fields={},
        text="The customer asked about a parcel; it was in transit.",
    )
    LedgerEntry.objects.filter(ticket=ticket).exclude(kind="customer").update(status="archived")
    customer_message_post(ticket=ticket, text="Is my parcel still on its way?")
    before = ticket.turns.filter(kind="tool_call").count()
    agent_run(ticket.pk)
    new_calls = [
        c for t in ticket.turns.filter(kind="tool_call").order_by("number")[before:] for c in t.payload["calls"]
    ]
    assert new_calls[0]["name"] == "search_orders"
    # It never typed an order number that the request did not contain.
    assert not Turn.objects.filter(ticket=ticket, kind="rejection").exists()


def test_after_compaction_the_ledger_links_a_parcel_to_its_order(setup):
    ticket = new_ticket(setup, "Where is my order SU-40111?")
    ticket.refresh_from_db()
    tracking = LedgerEntry.objects.get(ticket=ticket, kind="tracking")
    assert tracking.note == "of SU-40111"
    # The get_order and track_parcel results leave the request; the ledger stays.
    Summary.objects.create(
        ticket=ticket,
        covers_through_turn=ticket.last_turn_number,
        fields={},
        text="The customer asked where [order] is; it was in transit.",
    )
    before = ticket.turns.filter(kind="tool_call").count()
    customer_message_post(ticket=ticket, text="Where is SU-40111 now?")
    agent_run(ticket.pk)
    new_calls = [
        c for t in ticket.turns.filter(kind="tool_call").order_by("number")[before:] for c in t.payload["calls"]
    ]
    assert new_calls[0] == {**new_calls[0], "name": "track_parcel", "arguments": {"tracking_number": tracking.value}}


def test_after_staff_approve_a_held_refund_the_agent_tells_the_customer_it_is_done(setup):
    from django.contrib.auth import get_user_model

    from sundry.agent.models import HeldAction
    from sundry.agent.services import held_action_decide

    setup["tclass"].approval_rules = {"issue_refund": {"above": {"USD": 1000}}}
    setup["tclass"].save()
    ticket = new_ticket(setup, "The SU-40110 parcel arrived broken. Please refund 25.00 USD, I'll keep it.")
    # The customer confirms the card; the threshold still holds the confirmed refund for staff.
    assert confirm(ticket)[0].outcome == "held"
    held = HeldAction.objects.get(ticket=ticket, status=HeldAction.Status.PENDING)
    assert "check by our staff" in last_reply(ticket)
    staff = get_user_model().objects.create_user("approver", is_staff=True)
    held_action_decide(held_id=held.pk, ticket=ticket, approve=True, user=staff, wake=False)
    agent_run(ticket.pk)
    assert Refund.objects.filter(order=setup["delivered"], amount_cents=2500).count() == 1
    reply = last_reply(ticket)
    assert "refunded 25.00 USD on order SU-40110" in reply, reply
    assert "wasn't able" not in reply


def test_a_cancellation_the_shop_cannot_do_is_explained_from_the_orders_status_and_never_tried(setup):
    ticket = new_ticket(setup, "Please cancel order SU-40110, I ordered it by mistake.")  # already delivered
    # The order's figures and status come first; a delivered order is not sent to cancel_order
    # (where the threshold would hold it for staff, only for the shop to refuse it).
    assert shop_calls(ticket) == ["get_order"]
    reply = last_reply(ticket)
    assert reply.startswith("Order SU-40110 is delivered already, so it can't be cancelled"), reply
    assert "return" in reply and not HeldAction.objects.filter(ticket=ticket).exists()
    assert Order.objects.get(number="SU-40110").status == Order.Status.DELIVERED
