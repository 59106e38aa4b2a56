"""Plain requests through the real loop: an order's status and contents by number, an amount back for an
item named by its description, and the order number of a product.

Judged by what the customer reads and what the shop's records show: the refund is proposed on a card
with the customer's own amount and currency, runs only after their Confirm, and a question moves nothing.
"""

from __future__ import annotations

import re

import pytest

from sundry.agent.models import Confirmation, HeldAction
from sundry.shop import offline
from sundry.shop.models import Order, Refund
from sundry.shop.offline import asks as asks
from tests.agent.test_offline_cases import named, no_open_card, open_ticket, say, shop  # noqa: F401  (fixture)
from tests.agent.test_offline_end_to_end import confirm, last_reply, shop_calls
from tests.factories import CustomerFactory, paid_order

pytestmark = pytest.mark.django_db


def nothing_moved(ticket):
    return (
        not Refund.objects.exists() and no_open_card(ticket) and not HeldAction.objects.filter(ticket=ticket).exists()
    )


def refund_card_problems(ticket, order: str, amount: str, currency: str) -> list[str]:
    """What is wrong with the refund the agent proposed: exactly one open card, on `order`, for the
    customer's stated amount and currency, nothing run yet, and a reply pointing at the card."""
    cards = list(Confirmation.objects.filter(ticket=ticket, status=Confirmation.Status.PENDING))
    problems = [] if len(cards) == 1 else [f"{len(cards)} open cards"]
    for card in cards:
        got = (
            card.tool,
            card.arguments.get("order_number"),
            card.arguments.get("amount"),
            card.arguments.get("currency"),
        )
        if got != ("issue_refund", order, amount, currency):
            problems.append(f"card proposes {got}")
    if Refund.objects.exists():
        problems.append("a refund ran before the customer confirmed")
    if "card" not in last_reply(ticket):
        problems.append(f"reply does not point at a card: {last_reply(ticket)!r}")
    return problems


# --- status and contents by number ------------------------------------------------------------------


def test_the_status_of_an_order_by_its_number_is_read_from_the_shop(shop):
    ticket = open_ticket(shop, "What's the status of SU-25386?")
    reply = last_reply(ticket)
    assert shop_calls(ticket) == ["get_order"]
    assert reply.startswith("Order SU-25386") and "is delivered" in reply and "Air Fryer 5.5L ×1" in reply, reply
    assert "129.99 USD" in reply and "not sure" not in reply
    # An order still on its way: the carrier's word is its status.
    shipped = say(ticket, "Hi, any update on order SU-27531?")
    assert shop_calls(ticket)[-2:] == ["get_order", "track_parcel"]
    assert "SU-27531" in shipped and "in transit" in shipped and "Leeds hub" in shipped, shipped
    assert nothing_moved(ticket)


def test_what_is_in_an_order_by_its_number_and_never_another_customers(shop):
    named(paid_order(customer=CustomerFactory(), number="SU-31111", prices=(2000,)), "Secret Gift Box")
    ticket = open_ticket(shop, "What's in SU-25386?")
    reply = last_reply(ticket)
    assert reply.startswith("Order SU-25386") and "holds Air Fryer 5.5L ×1, 129.99 USD in all" in reply, reply
    other = say(ticket, "What's in SU-31111?")
    assert "couldn't find order SU-31111" in other and "Secret Gift" not in other, other
    assert nothing_moved(ticket)


# --- an amount back -----------------------------------------------------------------------------------


@pytest.fixture
def lamp(shop):
    return named(paid_order(customer=shop["customer"], number="SU-29001", prices=(3999,)), "Desk Lamp")


def test_an_amount_back_for_an_item_named_by_description_is_that_refund_on_its_order(shop, lamp):
    ticket = open_ticket(shop, "I'd like 15.00 USD back for the lamp")
    assert shop_calls(ticket)[0] == "search_orders"  # the order is found from the customer's orders
    assert refund_card_problems(ticket, "SU-29001", "15.00", "USD") == []
    [card] = confirm(ticket)
    assert card.outcome == "executed"
    assert list(Refund.objects.values_list("order__number", "amount_cents", "currency")) == [("SU-29001", 1500, "USD")]
    assert "refunded 15.00 USD on order SU-29001" in last_reply(ticket), last_reply(ticket)


def test_an_amount_in_euros_back_for_a_dented_item_mid_case_is_a_refund_not_tracking(shop):
    fryer = named(
        paid_order(customer=shop["customer"], number="SU-29002", currency="EUR", prices=(8999,)), "Air Fryer 5.5L"
    )
    ticket = open_ticket(shop, "Where is SU-27531?")
    assert "in transit" in last_reply(ticket)
    say(ticket, "The Air Fryer from SU-29002 has a dent. I'd like 20.00 EUR back.")
    assert refund_card_problems(ticket, "SU-29002", "20.00", "EUR") == []
    confirm(ticket)
    assert list(Refund.objects.values_list("order", "amount_cents", "currency")) == [(fryer.pk, 2000, "EUR")]
    assert "refunded 20.00 EUR on order SU-29002" in last_reply(ticket)


def test_an_amount_in_another_currency_than_the_order_is_asked_about_not_converted(shop):
    ticket = open_ticket(shop, "The Air Fryer from SU-25386 has a dent. I'd like 20.00 EUR back.")
    reply = last_reply(ticket)
    assert "paid in USD" in reply and "How much in USD" in reply, reply
    assert not re.search(r"\d+\.\d\d USD", reply)  # no figure of the agent's own
    assert nothing_moved(ticket)


# --- the order number of a product ----------------------------------------------------------------------


def test_the_order_number_of_a_product_is_found_in_the_customers_orders(shop):
    ticket = open_ticket(shop, "What was the order number of the air fryer?")
    reply = last_reply(ticket)
    assert shop_calls(ticket) == ["search_orders"]
    assert "SU-25386" in reply and "Air Fryer 5.5L" in reply and "SU-27531" not in reply, reply
    named(
        paid_order(customer=shop["customer"], number="SU-27932", status=Order.Status.PLACED, prices=(9999,)),
        "Air Fryer 5.5L",
    )
    both = say(ticket, "Which order had my air fryer?")  # bought twice: both, never one picked
    assert "SU-25386" in both and "SU-27932" in both, both
    none = say(ticket, "What's the order number for the toaster?")
    assert "couldn't find an order" in none and not re.search(r"SU-\d{5}", none), none
    assert nothing_moved(ticket)


# --- negative controls: the judge fails a model that misreads --------------------------------------------


def test_negative_control_without_the_amount_back_reading_the_request_is_missed(shop, lamp, monkeypatch):
    monkeypatch.setattr(asks, "amount_back", lambda text: False)
    ticket = open_ticket(shop, "I'd like 15.00 USD back for the lamp")
    assert "not sure" in last_reply(ticket) or "what you need" in last_reply(ticket)  # the reported answer
    assert refund_card_problems(ticket, "SU-29001", "15.00", "USD") != []


def test_negative_control_a_refund_of_the_whole_order_instead_of_the_stated_amount_is_caught(shop, lamp, monkeypatch):
    monkeypatch.setattr(offline, "_explicit_amount", lambda v, latest_only=False: None)
    ticket = open_ticket(shop, "I'd like 15.00 USD back for the lamp")
    problems = refund_card_problems(ticket, "SU-29001", "15.00", "USD")
    assert problems == ["card proposes ('issue_refund', 'SU-29001', '39.99', 'USD')"], problems
