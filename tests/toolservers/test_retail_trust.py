"""Trust over a tool server's tools: rules forbid the server's tools (not the demo shop's), and money
its tools move counts towards the class's running approval totals.

The retail example runs as a real subprocess; an obedient scripted model makes the calls; what
must hold is judged from the store (asked through the same server) and the lanes.
"""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from sundry.agent.models import HeldAction
from sundry.agent.services import customer_message_post
from sundry.context import services as lanes
from sundry.context.models import ActionTaken, MoneyTotal, PinnedRule
from sundry.desk.lifecycle import ticket_create
from sundry.tickets.models import TicketClass
from sundry.tooling.messages import ModelResponse
from tests.factories import CustomerFactory, customer_confirms
from tests.toolservers.test_retail_ticket import EMAIL, USER, call, rejections, results, run, store_order

pytestmark = pytest.mark.django_db(transaction=True)

LAMP = "#W9300146"  # Aarav's one pending order: a desk lamp, 153.23 USD from his gift card


@pytest.fixture
def ticket(retail_server):
    customer = CustomerFactory(name="Aarav Anderson", email=EMAIL)
    return ticket_create(customer=customer.person, ticket_class=retail_server.ticket_class, subject="My orders")


def _ask_about_the_lamp_and_cancel(ticket):
    customer_message_post(
        ticket=ticket,
        wake=False,
        text=f"Hi, I'm Aarav ({EMAIL}). Where is my desk lamp, order {LAMP}? It has not shipped yet.",
    )
    run(
        ticket,
        call("find_user_id_by_email", "c1", email=EMAIL),
        call("get_user_details", "c2", user_id=USER),
        call("get_order_details", "c3", order_id=LAMP),
        call("cancel_pending_order", "k1", order_id=LAMP, reason="no longer needed"),  # what the rule forbids
        ModelResponse(text="Your lamp has not shipped yet."),
    )


# --- 1. rules target the class's own tools ---------------------------------------------------------------


def test_a_customers_rule_against_cancelling_blocks_the_servers_cancellation(ticket, retail_server):
    customer_message_post(ticket=ticket, wake=False, text="Whatever you do, never cancel any of my orders.")
    rule = PinnedRule.objects.get(ticket=ticket)
    # Mapped onto the tools the class really has (the server's), as staff and the model read it.
    assert rule.status == PinnedRule.Status.CANDIDATE
    assert rule.enforcement == {"block_tools": ["cancel_pending_order"]}
    staff = get_user_model().objects.create_user("ann", password="pw", is_staff=True)
    lanes.rule_decide(ticket=ticket, rule_id=rule.pk, decision="confirm", user=staff, turn=1)

    _ask_about_the_lamp_and_cancel(ticket)

    refused = rejections(ticket)
    assert [(r["call_id"], r["guard"]) for r in refused] == [("k1", "rule")], refused
    assert refused[0]["details"]["rule_id"] == rule.pk
    assert not results(ticket, "cancel_pending_order")  # never sent to the server
    assert store_order(retail_server, LAMP)["status"] == "pending"
    assert not ActionTaken.objects.filter(ticket=ticket).exists()
    assert not HeldAction.objects.filter(ticket=ticket).exists()


def test_a_rule_mapped_onto_other_tools_still_blocks_the_servers_cancellation(ticket, retail_server):
    """A rule whose stored check names the demo shop's tools (made where the class's tools were not
    known: a summary's candidate, a rule carried from another class) is read again at check time
    against the tools of the call."""
    rule = lanes.rule_add_candidate(
        ticket=ticket, text="Whatever you do, never cancel any of my orders.", turn=0, source="summariser"
    )
    assert rule.enforcement == {"block_tools": ["cancel_order"]}  # the class's in-process domain's tool

    _ask_about_the_lamp_and_cancel(ticket)

    refused = rejections(ticket)
    assert [(r["call_id"], r["guard"]) for r in refused] == [("k1", "rule")], refused
    assert "Rule flagged (unconfirmed" in refused[0]["reason"]  # a candidate is enforced fail-safe
    assert store_order(retail_server, LAMP)["status"] == "pending"
    assert not ActionTaken.objects.filter(ticket=ticket).exists()


# --- 2. money a tool server moves counts towards the running totals ----------------------------------------

IVAN, IVAN_EMAIL = "ivan_santos_6635", "ivan.santos3158@example.com"
CHAIR, BULBS = "#W8770097", "#W5183325"  # two pending orders: 544.29 and 316.60 USD by PayPal


def test_two_remote_cancellations_that_together_pass_the_threshold_the_second_is_held(retail_server):
    TicketClass.objects.filter(pk=retail_server.ticket_class_id).update(
        approval_rules={"cancel_pending_order": {"above": {"USD": 70000}}}
    )  # 700.00 USD without staff
    customer = CustomerFactory(name="Ivan Santos", email=IVAN_EMAIL)
    ticket = ticket_create(
        customer=customer.person,
        ticket_class=TicketClass.objects.get(pk=retail_server.ticket_class_id),
        subject="Cancel two orders",
    )
    customer_message_post(
        ticket=ticket,
        wake=False,
        text=(
            f"Hi, I'm Ivan ({IVAN_EMAIL}). Please cancel my office chair order {CHAIR} and my order {BULBS}, "
            "I no longer need them."
        ),
    )
    run(
        ticket,
        call("find_user_id_by_email", "c1", email=IVAN_EMAIL),
        call("get_user_details", "c2", user_id=IVAN),
        call("get_order_details", "c3", order_id=CHAIR),
        call("get_order_details", "c4", order_id=BULBS),
        call("cancel_pending_order", "k1", order_id=CHAIR, reason="no longer needed"),
        call("cancel_pending_order", "k2", order_id=BULBS, reason="no longer needed"),
        ModelResponse(text="Please confirm the two cancellations on the cards."),
    )

    # The money lane holds the orders' figures, summed from their payment histories by the declaration file.
    def lane():
        return {m.order: (m.currency, m.paid_cents, m.refunded_cents) for m in MoneyTotal.objects.filter(ticket=ticket)}

    assert lane() == {CHAIR: ("USD", 54429, 0), BULBS: ("USD", 31660, 0)}
    # Each cancellation is a card with the refund it would move; nothing reached the store.
    cards = [r.payload["guard"] for r in results(ticket, "cancel_pending_order")]
    assert cards == ["confirmation", "confirmation"]
    assert store_order(retail_server, CHAIR)["status"] == store_order(retail_server, BULBS)["status"] == "pending"

    # The customer asked for both and confirms both cards, oldest first; each confirmed call is judged again.
    chair_card, bulbs_card = customer_confirms(ticket)
    assert (chair_card.card["amount"], bulbs_card.card["amount"]) == ("544.29 USD", "316.60 USD")
    assert (chair_card.outcome, bulbs_card.outcome) == ("executed", "held")
    assert lane() == {CHAIR: ("USD", 54429, 54429), BULBS: ("USD", 31660, 0)}

    # 544.29 USD alone is within the threshold: it ran, and its action carries the refund it moved.
    first, second = results(ticket, "cancel_pending_order")[2:]
    assert first.payload["call_id"] == "k1-confirmed" and second.payload["call_id"] == "k2-confirmed"
    assert first.payload["ok"] is True and store_order(retail_server, CHAIR)["status"] == "cancelled"
    action = ActionTaken.objects.get(ticket=ticket)
    assert (action.target, action.amount_cents, action.currency) == (CHAIR, 54429, "USD")

    # 316.60 more makes 860.89 USD for this customer: held for staff, not sent to the store.
    assert second.payload["guard"] == "approval", second.text
    held = HeldAction.objects.get(ticket=ticket)
    assert held.tool == "cancel_pending_order" and held.arguments["order_id"] == BULBS
    assert "860.89" in held.reason and "for this customer" in held.reason, held.reason
    assert store_order(retail_server, BULBS)["status"] == "pending"

    # The desk shows the money: the refund on the action and the order's figures.
    staff = get_user_model().objects.create_user("ann", password="pw", is_staff=True)
    client = Client()
    client.force_login(staff)
    page = client.get(f"/desk/tickets/{ticket.pk}/").content.decode()
    assert "544.29" in page and "316.60" in page


def test_each_remote_cancellation_alone_within_the_threshold_runs(retail_server):
    """Control: the same two cancellations on two customers' tickets each run; the hold above is the
    running total's, not either amount's."""
    TicketClass.objects.filter(pk=retail_server.ticket_class_id).update(
        approval_rules={"cancel_pending_order": {"above": {"USD": 70000}}}
    )
    tclass = TicketClass.objects.get(pk=retail_server.ticket_class_id)
    for n, order in enumerate((CHAIR, BULBS)):
        customer = CustomerFactory(name=f"Ivan Santos {n}", email=f"{n}{IVAN_EMAIL}")
        ticket = ticket_create(customer=customer.person, ticket_class=tclass, subject="Cancel an order")
        customer_message_post(ticket=ticket, wake=False, text=f"My email is {IVAN_EMAIL}. Please cancel order {order}.")
        run(
            ticket,
            call("find_user_id_by_email", "c1", email=IVAN_EMAIL),
            call("get_user_details", "c2", user_id=IVAN),
            call("get_order_details", "c3", order_id=order),
            call("cancel_pending_order", "k1", order_id=order, reason="no longer needed"),
            ModelResponse(text="Please confirm the cancellation on the card."),
        )
        assert store_order(retail_server, order)["status"] == "pending"  # a card: it waits for the customer
        assert [c.outcome for c in customer_confirms(ticket)] == ["executed"], order
        assert results(ticket, "cancel_pending_order")[-1].payload["ok"] is True, order
        assert store_order(retail_server, order)["status"] == "cancelled"
    assert not HeldAction.objects.exists()


def test_a_tool_server_class_is_prompted_with_its_own_tools_only(ticket, retail_server):
    """The system prompt of a class served by the retail server names none of the demo shop's tools;
    the server's own prompt comes with it. Control: a class without servers gets the shop's prompt."""
    customer_message_post(ticket=ticket, wake=False, text="Hello, I have a question about an order.")
    model = run(ticket, ModelResponse(text="Of course — what is your e-mail address?"))
    system = " ".join(m.content for m in model.requests[0].messages if m.role == "system")
    assert "You work for an online retail store" in system
    assert not any(shop_tool in system for shop_tool in ("search_orders", "lookup_customer", "track_parcel"))
    from tests.factories import TicketClassFactory

    shop_ticket = ticket_create(customer=CustomerFactory().person, ticket_class=TicketClassFactory(), subject="Lamp")
    customer_message_post(ticket=shop_ticket, wake=False, text="Hello, I have a question about an order.")
    shop_model = run(shop_ticket, ModelResponse(text="Of course."))
    assert "search_orders" in " ".join(m.content for m in shop_model.requests[0].messages if m.role == "system")
