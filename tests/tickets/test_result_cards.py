"""Every tool result on the desk's timeline reads as a card, written from the tool's declaration: its
title, its plain fields, and the IDs it holds with what they are. The raw result stays one click away;
a result no declaration describes shows as readable JSON instead of a card.

The shop's tools run for real (`agent.calls.execute`: the tool, its stored turn, the ledger harvest),
then the desk page is read as staff see it.
"""

from __future__ import annotations

import json
import re

import pytest
from django.contrib.auth import get_user_model

from sundry.agent.calls import execute
from sundry.desk.lifecycle import ticket_create
from sundry.shop.domain import TOOL_NAMES
from sundry.shop.models import Order
from sundry.tickets.models import Ticket, Turn
from sundry.tickets.services import turn_append
from sundry.tooling.tools import REGISTRY
from tests.factories import CustomerFactory, ParcelFactory, TicketClassFactory, TrackingEventFactory, paid_order

pytestmark = pytest.mark.django_db

# The shop's three specialised cards stay; every other tool gets the generic card.
SPECIALISED = {"get_order": "order-card", "issue_refund": "refund-card", "track_parcel": "parcel-card"}
LANE_TOOLS = ("record_fact", "pin_constraint", "label_entity", "request_staff_follow_up")


def articles(html: str) -> dict[int, str]:
    """Each timeline turn's HTML by its number."""
    parts = re.split(r'<div class="turn-item" id="turn-(\d+)">', html)
    return {int(parts[i]): parts[i + 1] for i in range(1, len(parts), 2)}


def outside_raw(article: str) -> str:
    """What shows without a click: the turn without its "raw" disclosure."""
    return re.sub(r'<details class="raw">.*?</details>', "", article, flags=re.S)


def desk(client, ticket) -> dict[int, str]:
    staff = get_user_model().objects.filter(username="ann").first() or get_user_model().objects.create_user(
        "ann", password="pw", is_staff=True
    )
    client.force_login(staff)
    response = client.get(f"/desk/tickets/{ticket.pk}/")
    assert response.status_code == 200
    return articles(response.content.decode())


@pytest.fixture
def worked():
    """A ticket on which every shop tool and every lane tool ran once, for real."""
    customer = CustomerFactory(name="Maya Rivera")
    delivered = paid_order(customer=customer, number="SU-30100", prices=(6000, 4000))
    first, second = delivered.items.order_by("pk")
    first.product.name, second.product.name = "Desk Lamp Arc", "Linen Throw"
    first.product.save(), second.product.save()
    placed = paid_order(customer=customer, number="SU-30200", prices=(2500,), status=Order.Status.PLACED)
    parcel = ParcelFactory(order=delivered, tracking_number="1Z999AA10123456784", carrier="UPS", status="delivered")
    TrackingEventFactory(parcel=parcel, description="Delivered to the front door")
    ticket = ticket_create(customer=customer.person, ticket_class=TicketClassFactory(approval_rules={}), subject="Lamp")
    turn_append(ticket=ticket, author="customer", kind="message", text="My lamp arrived broken, please refund it.")
    cid = customer.customer_id
    calls = [
        ("lookup_customer", {"customer_id": cid}),
        ("search_orders", {"customer_id": cid}),
        ("get_order", {"order_number": delivered.number}),
        ("track_parcel", {"tracking_number": parcel.tracking_number}),
        ("issue_refund", {"order_number": delivered.number, "amount": "15.00", "currency": "USD", "reason": "damaged"}),
        ("book_return", {"order_number": delivered.number, "item_ids": [first.item_id], "reason": "damaged"}),
        ("cancel_order", {"order_number": placed.number, "reason": "no longer needed"}),
        (
            "offer_replacement",
            {"order_number": delivered.number, "item_id": second.item_id, "note": "A new throw, sent this week."},
        ),
        ("send_email", {"customer_id": cid, "subject": "Your refund", "body": "Refunded 15.00 USD."}),
        ("log_phone_call", {"customer_id": cid, "summary": "Talked through the refund."}),
        ("reply_to_customer", {"message": "Done."}),
        ("record_fact", {"name": "issue", "value": "arrived broken", "stated_by_customer": True}),
        ("pin_constraint", {"text": "phone only, never email"}),
        ("label_entity", {"value": delivered.number, "role": "damaged_order"}),
        ("request_staff_follow_up", {"reason": "check the lamp's carrier claim"}),
    ]
    turns = {}
    for n, (name, arguments) in enumerate(calls):
        tool = REGISTRY[name]
        fresh = Ticket.objects.select_related("customer", "ticket_class").get(pk=ticket.pk)
        execute(fresh, tool, f"c{n}", tool.args_model.model_validate(arguments), f"key-{n}")
        turn = Turn.objects.filter(ticket=ticket, kind=Turn.Kind.TOOL_RESULT).order_by("-number").first()
        assert turn.payload["name"] == name and turn.payload["ok"] is True, turn.text
        turns[name] = turn.number
    return {
        "ticket": ticket,
        "turns": turns,
        "delivered": delivered,
        "placed": placed,
        "first": first,
        "second": second,
        "customer": customer,
    }


def test_every_shop_and_lane_tool_result_is_a_card_with_its_fields_and_ids(client, worked):
    assert set(worked["turns"]) == set(TOOL_NAMES) | set(LANE_TOOLS)  # every tool of the shop ran
    page = desk(client, worked["ticket"])
    shown = {name: outside_raw(page[number]) for name, number in worked["turns"].items()}
    for name, html in shown.items():
        card = SPECIALISED.get(name, "result-card")
        assert f'class="tool-card {card}"' in html, name
        assert '<pre class="result">' not in html, f"{name}: raw JSON shown outside the raw disclosure"
        assert "<summary>raw</summary>" in page[worked["turns"][name]], name  # the audit view, one click away
        assert "&quot;" not in html, f"{name}: JSON on the card"
    for name in SPECIALISED:  # the specialised cards, not the generic one
        assert "result-card" not in shown[name]

    lamp, throw = worked["first"], worked["second"]
    # search_orders: each order with its description (items · status); no JSON.
    search = shown["search_orders"]
    assert "<b>Search orders</b>" in search and "List the customer&#x27;s orders, newest first" in search
    assert re.search(r'<code class="id">SU-30100</code> · Desk Lamp Arc, Linen Throw · delivered', search), search
    assert re.search(r'<code class="id">SU-30200</code> · \S.* · placed', search)
    assert "<dt>Total matches</dt><dd>2</dd>" in search
    # cancel_order: status, the refund it moved, the order's figures after, and its IDs described.
    cancel = shown["cancel_order"]
    assert "<dt>Status</dt><dd>cancelled</dd>" in cancel
    assert "Refund 25.00 USD on SU-30200" in cancel
    assert "SU-30200: paid 25.00 USD · refunded 25.00 USD · refundable 0.00 USD" in cancel
    assert re.search(
        r'<span class="muted">Refund</span> <code class="id">rf\w*[^<]*</code> · refund 25.00 USD on '
        r"SU-30200, with its cancellation",
        cancel,
    ), cancel
    # record_fact: what was recorded, in words.
    fact = shown["record_fact"]
    assert "<b>Record fact</b>" in fact
    assert "<dt>Name</dt><dd>issue</dd>" in fact and "<dt>Value</dt><dd>arrived broken</dd>" in fact
    assert "<dt>Source</dt><dd>customer</dd>" in fact
    # Others: key fields and described IDs.
    assert f'<code class="id">{lamp.item_id}</code> · Desk Lamp Arc' in shown["book_return"]
    assert f'<code class="id">{throw.item_id}</code> · Linen Throw, replacement offered' in shown["offer_replacement"]
    assert "<dt>Sent</dt><dd>yes</dd>" in shown["send_email"] and "<dt>To</dt>" in shown["send_email"]
    assert "<dt>Logged</dt><dd>yes</dd>" in shown["log_phone_call"]
    assert "Maya Rivera" in shown["lookup_customer"]  # the customer ID, described by the result's template
    assert "<dt>Pinned</dt><dd>phone only, never email</dd>" in shown["pin_constraint"]
    assert "<dt>Role</dt><dd>damaged_order</dd>" in shown["label_entity"]
    assert "<dt>Flagged</dt><dd>yes</dd>" in shown["request_staff_follow_up"]


def test_an_id_the_result_does_not_describe_takes_the_ledgers_description(client, worked):
    page = desk(client, worked["ticket"])
    cid = worked["customer"].customer_id
    # search_orders names the customer without describing them; lookup_customer's result did, in the ledger.
    search = outside_raw(page[worked["turns"]["search_orders"]])
    assert f'<span class="muted">Customer</span> <code class="id">{cid}</code> · Maya Rivera' in search, search
    # The label's result holds the order number as a plain value: the ledger says what it is.
    label = outside_raw(page[worked["turns"]["label_entity"]])
    assert re.search(
        r'<span class="muted">Order</span> <code class="id">SU-30100</code> · '
        r"Desk Lamp Arc, Linen Throw · delivered",
        label,
    ), label
    assert "Give a ledger entry a role that says what it is in this case (e.g. damaged_order)." in label


def test_a_result_no_declaration_describes_shows_as_readable_json(client, worked):
    ticket = worked["ticket"]
    data = {"widget": "W-1", "state": "odd", "nested": {"a": 1}}
    unknown = turn_append(
        ticket=ticket,
        author="tool",
        kind="tool_result",
        text=json.dumps(data),
        payload={"call_id": "u1", "name": "mystery_tool", "ok": True, "result": data},
    )
    failed = turn_append(
        ticket=ticket,
        author="tool",
        kind="tool_result",
        text="ERROR: no order SU-99999 exists",
        payload={"call_id": "u2", "name": "get_order", "ok": False, "error": "no order"},
    )
    page = desk(client, ticket)
    html = outside_raw(page[unknown.number])
    assert "tool-card" not in html
    # Indented, keys sorted: one key a line, as people read JSON (not the stored one-line text).
    assert '<pre class="result">{\n &quot;nested&quot;: {\n  &quot;a&quot;: 1\n }' in html, html
    assert json.dumps(data) not in html.replace("&quot;", '"')
    errored = outside_raw(page[failed.number])
    assert "tool-card" not in errored and '<pre class="result">ERROR: no order SU-99999 exists</pre>' in errored
