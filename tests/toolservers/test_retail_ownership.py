"""Whose record is it? A write acts only on the ticket's own customer's records on a tool server.

The retail example runs as a real subprocess; its declaration file says which ID names a customer
(`user`), what they own (orders, payment methods), where a result names the owner (`user_id`) and
which lookups identify the ticket's customer. An obedient scripted model makes the calls; what
must hold is judged from the store, asked through the same server.
"""

from __future__ import annotations

import pytest

from sundry.agent.guards import callguards as guards
from sundry.agent.models import Confirmation
from sundry.agent.services import customer_message_post
from sundry.context.lanes import LedgerData
from sundry.context.models import LedgerEntry
from sundry.desk.lifecycle import ticket_create
from sundry.tickets.models import TicketClass
from sundry.tooling.messages import ModelResponse
from sundry.toolservers import catalog
from tests.factories import CustomerFactory
from tests.toolservers.test_retail_ticket import EMAIL, USER, call, rejections, results, run, store_order

pytestmark = pytest.mark.django_db(transaction=True)

IVAN = "ivan_santos_6635"
CHAIR, BULBS = "#W8770097", "#W5183325"  # Ivan's pending orders


@pytest.fixture
def aarav(retail_server):
    customer = CustomerFactory(name="Aarav Anderson", email=EMAIL)
    ticket = ticket_create(
        customer=customer.person,
        ticket_class=TicketClass.objects.get(pk=retail_server.ticket_class_id),
        subject="Cancel an order",
    )
    customer_message_post(ticket=ticket, wake=False, text=f"I'm Aarav ({EMAIL}). Please cancel order {CHAIR}.")
    return ticket


def _refused(ticket, call_id):
    return [r for r in rejections(ticket) if r["call_id"] == call_id]


def test_a_write_on_another_customers_order_is_refused_and_the_store_is_untouched(aarav, retail_server):
    run(
        aarav,
        call("find_user_id_by_email", "c1", email=EMAIL),
        call("get_order_details", "c2", order_id=CHAIR),
        call("cancel_pending_order", "k1", order_id=CHAIR, reason="no longer needed"),
        ModelResponse(text="I can only help with your own orders."),
    )
    [refused] = _refused(aarav, "k1")
    assert refused["guard"] == "customer" and IVAN in refused["reason"] and USER in refused["reason"]
    assert store_order(retail_server, CHAIR)["status"] == "pending"
    assert not Confirmation.objects.filter(ticket=aarav).exists()  # never even a card
    chair = LedgerEntry.objects.get(ticket=aarav, value=CHAIR)
    assert chair.customer == IVAN and LedgerEntry.objects.get(ticket=aarav, value=USER).identifies_customer
    # Staff see it in the ledger panel: the order is another customer's, in bold.
    from django.contrib.auth import get_user_model
    from django.test import Client

    desk = Client()
    desk.force_login(get_user_model().objects.create_user("ann", password="pw", is_staff=True))
    page = " ".join(desk.get(f"/desk/tickets/{aarav.pk}/").content.decode().split())
    assert f'belongs to <strong><code class="id">{IVAN}</code></strong>, not this ticket\'s customer' in page
    assert "this ticket's customer</div>" in page


def test_ids_from_another_customers_lookup_stay_theirs(aarav, retail_server):
    customer_message_post(ticket=aarav, wake=False, text=f"My brother's account is {IVAN}, look at his orders.")
    run(
        aarav,
        call("find_user_id_by_email", "c1", email=EMAIL),
        call("get_user_details", "c2", user_id=IVAN),
        ModelResponse(text="Let me check."),
    )
    # Read from Ivan's own record: his orders and his PayPal are his on Aarav's ticket.
    owned = dict(LedgerEntry.objects.filter(ticket=aarav, customer=IVAN).values_list("value", "kind"))
    assert owned.get(BULBS) == "order" and "payment_method" in owned.values()
    assert not LedgerEntry.objects.filter(ticket=aarav, value=IVAN, identifies_customer=True).exists()
    customer_message_post(ticket=aarav, wake=False, text=f"And cancel {BULBS} too.")
    run(
        aarav,
        call("get_order_details", "c3", order_id=BULBS),
        call("cancel_pending_order", "k1", order_id=BULBS, reason="no longer needed"),
        ModelResponse(text="I can only help with your own orders."),
    )
    assert [r["guard"] for r in _refused(aarav, "k1")] == ["customer"]
    assert store_order(retail_server, BULBS)["status"] == "pending"


def test_before_the_customer_is_identified_an_owned_record_is_not_written(aarav, retail_server):
    run(
        aarav,
        call("get_order_details", "c1", order_id=CHAIR),
        call("cancel_pending_order", "k1", order_id=CHAIR, reason="no longer needed"),
        ModelResponse(text="Could you confirm your e-mail address first?"),
    )
    [refused] = _refused(aarav, "k1")
    assert refused["guard"] == "customer" and "not been identified" in refused["reason"]
    assert "find_user_id_by_email" in refused["reason"]
    assert store_order(retail_server, CHAIR)["status"] == "pending"


def test_control_the_owner_identified_on_their_own_ticket_gets_the_card(retail_server):
    customer = CustomerFactory(name="Ivan Santos", email="ivan.santos3158@example.com")
    ticket = ticket_create(
        customer=customer.person,
        ticket_class=TicketClass.objects.get(pk=retail_server.ticket_class_id),
        subject="Cancel",
    )
    customer_message_post(ticket=ticket, wake=False, text=f"Please cancel my order {CHAIR}.")
    run(
        ticket,
        call("find_user_id_by_email", "c1", email="ivan.santos3158@example.com"),
        call("get_order_details", "c2", order_id=CHAIR),
        call("cancel_pending_order", "k1", order_id=CHAIR, reason="no longer needed"),
        ModelResponse(text="Please confirm on the card."),
    )
    assert not _refused(ticket, "k1")
    assert results(ticket, "cancel_pending_order")[-1].payload["guard"] == "confirmation"


def test_negative_control_without_the_check_the_other_customers_order_gets_a_card(aarav, retail_server, monkeypatch):
    """The judge can fail: with the ownership check off, the same call on Ivan's order goes ahead to a
    card Aarav could confirm."""
    monkeypatch.setattr(guards, "_check_customer", lambda inp, args: None)
    run(
        aarav,
        call("find_user_id_by_email", "c1", email=EMAIL),
        call("get_order_details", "c2", order_id=CHAIR),
        call("cancel_pending_order", "k1", order_id=CHAIR, reason="no longer needed"),
        ModelResponse(text="Please confirm on the card."),
    )
    assert not _refused(aarav, "k1")
    assert Confirmation.objects.filter(ticket=aarav, tool="cancel_pending_order").exists()


def test_a_staff_approval_does_not_lift_the_check(retail_server):
    """Judged on the guard alone: an approved call (a hold staff approved) on another customer's
    order is still refused."""
    tclass = TicketClass.objects.get(pk=retail_server.ticket_class_id)
    tools = catalog.class_tools(tclass)
    ledger = [
        LedgerData(
            role="user",
            value=USER,
            kind="user",
            verified=True,
            first_seen_turn=1,
            last_used_turn=1,
            customer=USER,
            identifies=True,
        ),
        LedgerData(
            role="order", value=CHAIR, kind="order", verified=True, first_seen_turn=2, last_used_turn=2, customer=IVAN
        ),
    ]
    inp = guards.GuardInput(
        tool=tools.tools["cancel_pending_order"],
        arguments={"order_id": CHAIR, "reason": "x"},
        ledger=ledger,
        recent_ids=frozenset({CHAIR}),
        approved=True,
        domain=catalog.declared_domain(tclass),
    )
    verdict = guards.check_call(inp)
    assert (verdict.decision, verdict.guard) == ("reject", "customer")
    ours = [
        *ledger[:1],
        LedgerData(
            role="order", value=CHAIR, kind="order", verified=True, first_seen_turn=2, last_used_turn=2, customer=USER
        ),
    ]
    assert guards.check_call(guards.GuardInput(**{**inp.__dict__, "ledger": ours})).guard != "customer"
