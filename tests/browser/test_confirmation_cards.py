"""Confirmation cards in a real browser: the card reaches the customer's phone live, Confirm runs the
call once, and the desk sees what waits for the customer. Effects read from the shop's rows."""

from __future__ import annotations

import pytest

from sundry.agent.loop import agent_run
from sundry.agent.models import Confirmation
from sundry.agent.provider.gateway import Gateway
from sundry.agent.provider.scripted import ScriptedModel
from sundry.agent.services import customer_message_post
from sundry.desk.lifecycle import ticket_create
from sundry.shop.models import Product, Refund
from sundry.tooling.messages import ModelResponse, ToolCall
from tests.browser.test_desk_pages import axe_violations
from tests.browser.test_live_desk import LIVE, PHONE, off_loop, open_as, people  # noqa: F401  (people: fixture)
from tests.factories import paid_order

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def _call(name, _id, **arguments):
    return ModelResponse(tool_calls=[ToolCall(id=_id, name=name, arguments=arguments)])


def _propose(ticket, customer_id):
    agent_run(
        ticket.pk,
        gateway=Gateway(
            override=ScriptedModel(
                [
                    _call("search_orders", "s1", customer_id=customer_id),
                    _call("get_order", "g1", order_number="SU-52001"),
                    _call(
                        "issue_refund",
                        "r1",
                        order_number="SU-52001",
                        amount="48.99",
                        currency="USD",
                        reason="arrived broken",
                    ),
                    ModelResponse(text="I've put the refund on a card for you: please check it and press Confirm."),
                ]
            )
        ),
    )


def test_the_card_on_a_phone_confirm_runs_once_and_the_desk_sees_it(browser, live_server_url, people, screenshots):
    from playwright.sync_api import expect

    alice = people["alice"]
    people["tclass"].approval_rules = {}  # no threshold: the customer's click alone runs it
    people["tclass"].save()
    order = paid_order(customer=alice, number="SU-52001", prices=(4899,))
    Product.objects.filter(pk=order.items.first().product_id).update(name="Arc Floor Lamp")
    ticket = ticket_create(customer=alice.person, ticket_class=people["tclass"], subject="Broken lamp")
    off_loop(
        customer_message_post, ticket=ticket, text="My lamp arrived broken. Never email me, phone only.", wake=False
    )
    phone = open_as(browser, live_server_url, people["alice_user"], f"/help/tickets/{ticket.pk}/", viewport=PHONE)
    cards = phone.locator("#panel-cards")
    expect(cards).to_be_hidden()

    off_loop(_propose, ticket, alice.customer_id)  # pushed to the open page: no reload
    card = cards.locator(".confirm-card")
    expect(card).to_have_count(1, timeout=LIVE)
    expect(card.locator("h2")).to_have_text("Refund 48.99 USD on order SU-52001?")
    expect(card).to_contain_text("Arc Floor Lamp")
    expect(card).to_contain_text("Money that is refunded cannot be taken back.")
    # Nothing sideways on a phone, the buttons big enough to press.
    assert phone.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    assert card.locator("button", has_text="Confirm").bounding_box()["height"] >= 44
    card.scroll_into_view_if_needed()
    card.screenshot(path=str(screenshots / "customer-card-phone.png"))
    instructions = phone.locator("#panel-instructions")
    expect(instructions).to_contain_text("Never email me")
    instructions.screenshot(path=str(screenshots / "customer-instructions.png"))

    staff = open_as(browser, live_server_url, people["ann"], f"/desk/tickets/{ticket.pk}/")
    waiting = staff.locator("#panel-held")
    expect(waiting).to_contain_text("Waiting for the customer")
    expect(waiting).to_contain_text("Refund 48.99 USD on order SU-52001")
    waiting.screenshot(path=str(screenshots / "desk-card-waiting.png"))
    assert [v["id"] for v in axe_violations(phone)] == []

    card.locator("button", has_text="Confirm").click()
    expect(phone.locator("#flash")).to_contain_text("Confirmed", timeout=LIVE)
    expect(cards.locator(".confirm-card")).to_have_count(0, timeout=LIVE)
    expect(waiting).not_to_contain_text("Waiting for the customer", timeout=LIVE)  # pushed to the desk too
    assert list(Refund.objects.filter(order=order).values_list("amount_cents", flat=True)) == [4899]
    assert Confirmation.objects.get(ticket=ticket).via == Confirmation.Via.BUTTON
