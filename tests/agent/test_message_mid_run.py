"""A customer message that arrives while a run works is answered, and so is the one before it.

The second message is posted by the gateway just before a later model call of the same run: the
step making that call assembled its request before the message existed, exactly as when a
customer types while the agent is looking something up. Judged by the cards proposed, the shop's
rows after the customer confirms, and the reply the customer reads."""

from __future__ import annotations

import pytest

from sundry.agent.loop import agent_run
from sundry.agent.models import Confirmation
from sundry.agent.provider.gateway import Gateway
from sundry.agent.services import customer_message_post
from sundry.desk.lifecycle import ticket_create
from sundry.shop import offline
from sundry.shop.models import Order, Refund
from sundry.tickets.models import Ticket
from tests.factories import (
    CustomerFactory,
    ParcelFactory,
    TicketClassFactory,
    TrackingEventFactory,
    customer_confirms,
    paid_order,
)

pytestmark = pytest.mark.django_db


class PostsDuringRun:
    """The real gateway; before its `at`-th model call the customer sends `text`."""

    def __init__(self, ticket_id, texts, at=2):
        self.inner, self.ticket_id, self.texts, self.at, self.calls = Gateway(), ticket_id, list(texts), at, 0

    def call(self, request, **kw):
        self.calls += 1
        if self.calls >= self.at and self.texts:
            customer_message_post(ticket=Ticket.objects.get(pk=self.ticket_id), text=self.texts.pop(0), wake=False)
        return self.inner.call(request, **kw)

    def complete(self, request, **kw):
        return self.call(request, **kw).response

    def __getattr__(self, name):
        return getattr(self.inner, name)


@pytest.fixture
def shop():
    customer = CustomerFactory()
    placed = paid_order(customer=customer, number="SU-40112", status=Order.Status.PLACED, prices=(1500,))
    delivered = paid_order(customer=customer, number="SU-40110", prices=(3000, 2000))
    shipped = paid_order(customer=customer, number="SU-40111", status=Order.Status.SHIPPED, prices=(4500,))
    TrackingEventFactory(
        parcel=ParcelFactory(order=shipped, status="in_transit"), location="Leeds hub", description="In transit"
    )
    ticket = ticket_create(customer=customer.person, ticket_class=TicketClassFactory(approval_rules={}), subject="Help")
    return {"ticket": ticket, "placed": placed, "delivered": delivered}


def run_with(ticket, first, *later, at=2):
    customer_message_post(ticket=ticket, text=first, wake=False)
    gateway = PostsDuringRun(ticket.pk, later, at=at)
    agent_run(ticket.pk, gateway=gateway)
    assert not gateway.texts, "the run ended before every message was sent"
    return ticket.turns.filter(author="agent", kind="message").order_by("-number").first().text


def cards(ticket):
    return sorted(Confirmation.objects.filter(ticket=ticket).values_list("tool", "status"))


def test_a_request_sent_while_the_agent_works_on_another_leaves_both_answered(shop):
    ticket = shop["ticket"]
    reply = run_with(
        ticket, "Please cancel order SU-40112.", "I'd also like a refund of 10.00 USD on SU-40110, the box was dented."
    )
    assert ticket.turns.filter(author="customer", kind="message").count() == 2
    assert cards(ticket) == [("cancel_order", "pending"), ("issue_refund", "pending")]
    assert "SU-40112" in reply and "SU-40110" in reply, reply
    customer_confirms(ticket)
    agent_run(ticket.pk)
    assert Order.objects.get(pk=shop["placed"].pk).status == Order.Status.CANCELLED
    assert Refund.objects.filter(order=shop["delivered"], amount_cents=1000).count() == 1


def test_a_question_sent_mid_run_is_answered_with_the_request(shop):
    ticket = shop["ticket"]
    reply = run_with(ticket, "Please refund 10.00 USD on SU-40110, the box was dented.", "Where is SU-40111?")
    assert cards(ticket) == [("issue_refund", "pending")]
    assert "card" in reply and "SU-40111" in reply and "transit" in reply.lower(), reply


def test_three_messages_each_answered_once(shop):
    ticket = shop["ticket"]
    reply = run_with(
        ticket,
        "Please cancel order SU-40112.",
        "Where is SU-40111?",
        "I'd also like a refund of 10.00 USD on SU-40110, the box was dented.",
    )
    assert cards(ticket) == [("cancel_order", "pending"), ("issue_refund", "pending")]
    for said in ("SU-40112", "SU-40111", "SU-40110"):
        assert said in reply, (said, reply)
    assert reply.lower().count("cancel order su-40112") == 1, reply


def test_control_reading_only_the_newest_message_drops_the_first_request(shop, monkeypatch):
    """Negative control: the offline model as it was, answering the newest message alone."""
    monkeypatch.setattr(offline, "answer_request", lambda request: offline.answer(offline.RequestView(request)))
    ticket = shop["ticket"]
    reply = run_with(
        ticket, "Please cancel order SU-40112.", "I'd also like a refund of 10.00 USD on SU-40110, the box was dented."
    )
    assert ("cancel_order", "pending") not in cards(ticket)
    assert "SU-40112" not in reply
