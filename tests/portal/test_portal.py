"""The customer page: only their own, only confirmed; an order picker; a "that's wrong" flag that reaches staff."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from sundry.context import services as lanes
from sundry.context.models import StateValue
from sundry.desk.lifecycle import ticket_create
from sundry.tickets.models import Ticket
from sundry.tickets.services import turn_append
from tests.factories import CustomerFactory, TicketClassFactory, paid_order

pytestmark = pytest.mark.django_db
HX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture
def page():
    users = get_user_model().objects
    alice_user, bob_user = users.create_user("alice", password="pw"), users.create_user("bob", password="pw")
    staff = users.create_user("sam", password="pw", is_staff=True)
    alice, bob = CustomerFactory(user=alice_user), CustomerFactory(user=bob_user)
    mine, also_mine = paid_order(customer=alice, number="SU-61111"), paid_order(customer=alice, number="SU-62222")
    bobs = paid_order(customer=bob, number="SU-69999")
    ticket = ticket_create(customer=alice.person, ticket_class=TicketClassFactory(), subject="Where is it")
    clients = {}
    for name, user in (("alice", alice_user), ("bob", bob_user), ("staff", staff)):
        clients[name] = Client()
        clients[name].force_login(user)
    return {"ticket": ticket, "c": clients, "orders": (mine, also_mine, bobs)}


def test_the_page_holds_confirmed_values_only_and_nothing_internal(page):
    ticket, c = page["ticket"], page["c"]
    lanes.ledger_record_system_id(ticket=ticket, kind="payment", value="pay_ZZSECRET1", role="payment", turn=0)
    lanes.state_set(ticket=ticket, name="item", value="Unconfirmed Blender", turn=1, source="model")
    lanes.state_set(ticket=ticket, name="amount", value="40 USD", turn=1, source="customer", confirmed=True)
    lanes.state_set(ticket=ticket, name="order_number", value="SU-61111", turn=1, source="model")  # inferred
    turn_append(ticket=ticket, author="staff", kind="note", text="Note: do not trust this one")
    turn_append(
        ticket=ticket,
        author="agent",
        kind="tool_call",
        payload={"calls": [{"id": "1", "name": "get_order", "arguments": {"order_number": "SU-61111"}}]},
    )
    body = c["alice"].get(f"/help/tickets/{ticket.pk}/").content.decode()
    assert "40.00 USD" in body
    for internal in ("pay_ZZSECRET1", "Unconfirmed Blender", "do not trust", "get_order", ticket.customer.external_key):
        assert internal not in body, internal
    # The picker lists her orders but does not reveal which one the model inferred.
    assert 'value="SU-61111" checked' not in body and "SU-69999" not in body


def test_another_customers_ticket_is_missing_by_url_for_every_view(page):
    ticket, bob = page["ticket"], page["c"]["bob"]
    assert bob.get(f"/help/tickets/{ticket.pk}/").status_code == 404
    for url, data in (
        (f"/help/tickets/{ticket.pk}/message", {"text": "hi"}),
        (f"/help/tickets/{ticket.pk}/order", {"order_number": "SU-69999"}),
        (f"/help/tickets/{ticket.pk}/flag", {"value_id": "1"}),
    ):
        assert bob.post(url, data, **HX).status_code == 404
    assert page["c"]["staff"].get(f"/help/tickets/{ticket.pk}/").status_code == 403


def test_picking_an_order_enters_state_as_stated_and_confirmed_by_the_customer(page):
    ticket, alice = page["ticket"], page["c"]["alice"]
    refused = alice.post(f"/help/tickets/{ticket.pk}/order", {"order_number": "SU-69999"}, **HX)  # Bob's
    assert refused.status_code == 422
    assert not StateValue.objects.filter(ticket=ticket, name="order_number").exists()
    r = alice.post(f"/help/tickets/{ticket.pk}/order", {"reference": "SU-62222"}, **HX)
    assert r.status_code == 200 and 'id="panel-details"' in r.content.decode()
    value = StateValue.objects.get(ticket=ticket, name="order_number", is_current=True)
    assert (value.value, value.source, value.confirmed) == ("SU-62222", "customer", True)
    assert ticket.turns.filter(kind="event", payload__picked__order_number="SU-62222").exists()
    # A page rendered before the picker's field was called `reference` posts it under the domain's pick
    # field's name: still read.
    before = alice.post(f"/help/tickets/{ticket.pk}/order", {"order_number": "SU-61111"}, **HX)
    assert before.status_code == 200
    assert StateValue.objects.get(ticket=ticket, name="order_number", is_current=True).value == "SU-61111"


def test_flagging_a_detail_reaches_staff_as_a_turn_and_a_queue_flag(page):
    ticket, c = page["ticket"], page["c"]
    value = lanes.state_set(
        ticket=ticket, name="refund_method", value="store_credit", turn=1, source="staff", confirmed=True
    )
    hidden = lanes.state_set(ticket=ticket, name="item", value="Kettle", turn=1, source="model")
    assert c["alice"].post(f"/help/tickets/{ticket.pk}/flag", {"value_id": hidden.pk}, **HX).status_code == 422
    r = c["alice"].post(
        f"/help/tickets/{ticket.pk}/flag", {"value_id": value.pk, "note": "I paid by <b>card</b>"}, **HX
    )
    assert r.status_code == 200
    flag = ticket.turns.get(kind="event", payload__flag__name="refund_method")
    assert "I paid by <b>card</b>" in flag.text
    ticket.refresh_from_db()
    assert ticket.attention.startswith("Customer flagged Refund to")
    assert "Where is it" in c["staff"].get("/desk/?needs=flagged").content.decode()
    desk = c["staff"].get(f"/desk/tickets/{ticket.pk}/").content.decode()
    assert "I paid by &lt;b&gt;card&lt;/b&gt;" in desk and "Mark handled" in desk
    # The customer's chat does not echo the internal event back.
    assert "I paid by" not in c["alice"].get(f"/help/tickets/{ticket.pk}/").content.decode()
    # Staff mark it handled: the flag clears.
    c["staff"].post(f"/desk/tickets/{ticket.pk}/attention/clear", **HX)
    assert Ticket.objects.get(pk=ticket.pk).attention == ""


def test_customer_messages_over_htmx_are_stored_and_refusals_explained(page):
    ticket, alice = page["ticket"], page["c"]["alice"]
    assert alice.post(f"/help/tickets/{ticket.pk}/message", {"text": " "}, **HX).status_code == 422
    r = alice.post(f"/help/tickets/{ticket.pk}/message", {"text": "Any news?"}, **HX)
    assert r.status_code == 200 and "Any news?" in r.content.decode()


def test_the_page_lists_what_the_shop_has_done_without_internal_ids(page):
    ticket, c = page["ticket"], page["c"]

    def done(tool, turn, result, amount=None, currency=""):
        lanes.action_record(
            ticket=ticket,
            tool=tool,
            target="SU-61111",
            arguments={},
            result=result,
            turn=turn,
            idempotency_key=f"key-SECRET-{turn}",
            reversible=False,
            amount_cents=amount,
            currency=currency,
        )

    done(
        "issue_refund",
        3,
        {
            "refund_id": "rfd_SECRET01",
            "order_number": "SU-61111",
            "amount_cents": 4050,
            "currency": "INR",
            "payment_id": "pay_SECRET02",
        },
        4050,
        "INR",
    )
    done("book_return", 5, {"return_id": "ret_SECRET03", "order_number": "SU-62222", "item_ids": ["itm_a", "itm_b"]})
    done(
        "cancel_order",
        7,
        {
            "order_number": "SU-62222",
            "status": "cancelled",
            "refund": {"refund_id": "rfd_SECRET04", "amount_cents": 1999, "currency": "USD"},
        },
    )
    done("log_phone_call", 9, {"logged": True, "customer_id": ticket.customer.external_key})
    body = c["alice"].get(f"/help/tickets/{ticket.pk}/").content.decode()
    text = re.sub(r"<[^>]+>", "", body)
    assert "Done on your case" in text and '<span class="whole">SU-61111</span>' in body
    assert "Refund of 40.50 INR on order SU-61111" in text
    assert "Return booked for order SU-62222 (2 items)" in text
    assert "Order SU-62222 cancelled; 19.99 USD refunded" in text
    # The phone call is not listed as done: the list is the details panel's, not the panels after it (the
    # customer's instructions panel explains "phone only, never e-mail" instructions in its own words).
    details = re.sub(r"<[^>]+>", "", body.split('id="panel-details"')[1].split("</section>")[0])
    done_list = details.lower().split("done on your case")[1]
    assert "refund of 40.50 inr" in done_list and "19.99 usd refunded" in done_list  # the region is the list
    assert "SECRET" not in body and "phone" not in done_list
    # Someone else's page shows none of it.
    assert "Refund of" not in c["bob"].get("/help/").content.decode()
