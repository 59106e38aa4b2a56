"""Tool activity on the desk reads as cards and words; the raw record stays available."""

from __future__ import annotations

import json

import pytest
from django.contrib.auth import get_user_model

from sundry.desk.lifecycle import ticket_create
from sundry.tickets.services import turn_append
from tests.factories import CustomerFactory, TicketClassFactory

pytestmark = pytest.mark.django_db


def test_order_results_render_as_cards_and_refusals_in_words(client):
    staff = get_user_model().objects.create_user("ann", password="pw", is_staff=True)
    ticket = ticket_create(customer=CustomerFactory().person, ticket_class=TicketClassFactory(), subject="Cards")
    result = {
        "order_number": "SU-30100",
        "status": "delivered",
        "placed_on": "2026-11-02",
        "currency": "USD",
        "total_cents": 123450,
        "items": [
            {
                "item_id": "itm_00000001",
                "sku": "SKU-00001",
                "product": "Desk lamp",
                "quantity": 2,
                "unit_price_cents": 61725,
            }
        ],
        "paid_cents": 123450,
        "refunded_cents": 2000,
        "refundable_cents": 121450,
        "parcels": [],
    }
    turn_append(
        ticket=ticket,
        author="tool",
        kind="tool_result",
        text=json.dumps(result),
        payload={"call_id": "c1", "name": "get_order", "ok": True, "result": result},
    )
    turn_append(
        ticket=ticket,
        author="system",
        kind="rejection",
        text="order_number 'SU-30109' is one edit away from ledger entry [order] SU-30100 — a probable mutation.",
        payload={"guard": "mutation", "name": "issue_refund", "arguments": {"order_number": "SU-30109"}},
    )
    client.force_login(staff)
    page = client.get(f"/desk/tickets/{ticket.pk}/").content.decode()
    assert "2 × Desk lamp" in page and "1,234.50 USD" in page and "refundable 1,214.50 USD" in page
    assert "<summary>raw</summary>" in page  # the audit view is one click away
    assert "an ID one slip away from a known one" in page
    assert "&quot;order_number&quot;: &quot;SU-30109&quot;" in page and "{&#x27;order_number&#x27;" not in page
