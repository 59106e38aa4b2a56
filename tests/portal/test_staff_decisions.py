"""What became of a call held for staff reaches the customer's page in code-rendered words.

The path is the real one: the model proposes a refund, the customer confirms its
card, the class's threshold holds it for staff, and staff decide. Judged from the
customer page's HTML and the shop's own refund rows.
"""

from __future__ import annotations

import pytest
from django.test import Client

from sundry.agent.loop import agent_run
from sundry.agent.models import Confirmation, HeldAction
from sundry.agent.provider.gateway import Gateway
from sundry.agent.provider.scripted import ScriptedModel
from sundry.agent.services import confirmation_decide, customer_message_post, held_action_decide
from sundry.desk.lifecycle import ticket_create
from sundry.shop.models import Refund
from sundry.tickets.models import Ticket
from sundry.tooling.messages import ModelResponse, ToolCall
from tests.factories import CustomerFactory, TicketClassFactory, paid_order

pytestmark = pytest.mark.django_db
ORDER = "SU-10480"
TITLE = f"Refund 15.00 USD on order {ORDER}"


def call(name, _id, **arguments):
    return ModelResponse(tool_calls=[ToolCall(id=_id, name=name, arguments=arguments)])


@pytest.fixture
def held(django_user_model):
    user = django_user_model.objects.create_user("carol", password="pw")
    staff = django_user_model.objects.create_user("sam", password="pw", is_staff=True)
    customer = CustomerFactory(user=user)
    paid_order(customer=customer, number=ORDER, prices=(6000, 4000))
    tclass = TicketClassFactory(approval_rules={"issue_refund": {"above_cents": 1000}})
    ticket = ticket_create(customer=customer.person, ticket_class=tclass, subject="Lamp")
    customer_message_post(ticket=ticket, text=f"Please refund 15.00 USD on {ORDER}, the lamp is broken.", wake=False)
    agent_run(
        ticket.pk,
        gateway=Gateway(
            override=ScriptedModel(
                [
                    call("get_order", "g1", order_number=ORDER),
                    call("issue_refund", "r1", order_number=ORDER, amount="15.00", currency="USD", reason="damaged"),
                    ModelResponse(text="Please check the card."),
                ]
            )
        ),
    )
    card = Confirmation.objects.get(ticket=ticket)
    confirmation_decide(
        card_id=card.pk,
        ticket=_fresh(ticket),
        confirm=True,
        digest=card.digest,
        via=Confirmation.Via.BUTTON,
        wake=False,
    )
    page = Client()
    page.force_login(user)
    return {"ticket": ticket, "staff": staff, "page": page, "held": HeldAction.objects.get(ticket=ticket)}


def _fresh(ticket):
    return Ticket.objects.select_related("ticket_class", "customer").get(pk=ticket.pk)


def _page(case) -> str:
    html = case["page"].get(f"/help/tickets/{case['ticket'].pk}/").content.decode()
    return " ".join(html.split())


def _decide(case, approve):
    held_action_decide(
        held_id=case["held"].pk, ticket=_fresh(case["ticket"]), approve=approve, user=case["staff"], wake=False
    )


def test_a_held_refund_shows_as_waiting_with_its_amount_and_order(held):
    html = _page(held)
    assert "With our team" in html and TITLE in html and "Waiting for our team" in html
    assert "Approved by our team and done" not in html  # control: nothing claims it ran


def test_an_approved_refund_that_ran_is_shown_done(held):
    _decide(held, approve=True)
    assert Refund.objects.filter(order__number=ORDER).count() == 1
    html = _page(held)
    assert f"{TITLE}</strong> — Approved by our team and done." in html and "Waiting for our team" not in html


def test_a_declined_refund_is_shown_declined_and_nothing_ran(held):
    _decide(held, approve=False)
    assert not Refund.objects.exists()
    html = _page(held)
    assert "Our team decided not to do this; nothing was done." in html and "and done." not in html


def test_an_approval_the_recheck_refuses_says_why_in_plain_words(held):
    # Meanwhile the order was refunded in full elsewhere: the re-check refuses the held 15.00.
    from sundry.shop.models import Order
    from sundry.shop.services import refund_issue

    order = Order.objects.get(number=ORDER)
    refund_issue(
        order_number=ORDER,
        amount_cents=order.total_cents,
        currency="USD",
        reason="refunded by phone",
        idempotency_key="phone-refund-1",
    )
    _decide(held, approve=True)
    assert HeldAction.objects.get(pk=held["held"].pk).status == HeldAction.Status.REFUSED
    html = _page(held)
    assert "Approved, but not carried out:" in html and "Nothing was done." in html
    assert "guard" not in html.lower() and "ERROR" not in html  # the agent's wording never reaches the page
