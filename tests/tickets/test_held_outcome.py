"""Approving a held call tells staff what really happened: it ran, or the re-check refused it."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model

from sundry.agent.loop import agent_run
from sundry.agent.models import HeldAction
from sundry.agent.services import customer_message_post
from sundry.context import services as lanes
from sundry.desk.lifecycle import ticket_create
from sundry.shop.models import Refund
from tests.factories import CustomerFactory, TicketClassFactory, customer_confirms, paid_order

pytestmark = pytest.mark.django_db
HTMX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture
def held_refund():
    staff = get_user_model().objects.create_user("desk", password="pw", is_staff=True)
    alice = CustomerFactory()
    order = paid_order(customer=alice, number="SU-30100", prices=(5000,))
    ticket = ticket_create(
        customer=alice.person, ticket_class=TicketClassFactory(approval_rules={"issue_refund": {}}), subject="Refund"
    )
    customer_message_post(ticket=ticket, text=f"Please refund 20.00 USD on {order.number}, it was late.", wake=False)
    agent_run(ticket.pk)  # the refund becomes a card; the customer confirms it and the class holds it for staff
    assert not HeldAction.objects.filter(ticket=ticket).exists()
    assert [c.tool for c in customer_confirms(ticket)] == ["issue_refund"]
    return staff, ticket, order, HeldAction.objects.get(ticket=ticket, status="pending")


def test_an_approval_the_recheck_refuses_is_shown_as_not_run(client, held_refund):
    staff, ticket, order, held = held_refund
    # Meanwhile most of the order was refunded: the approved 20.00 no longer fits.
    lanes.money_observe(
        ticket=ticket,
        order=order.number,
        currency="USD",
        paid_cents=5000,
        refunded_cents=4000,
        turn=ticket.last_turn_number,
    )
    client.force_login(staff)
    response = client.post(f"/desk/tickets/{ticket.pk}/held/{held.pk}", {"decision": "approve"}, **HTMX)
    body = response.content.decode()
    assert response.status_code == 200
    assert "approved and executed" not in body
    assert "approved but did not run" in body and "still refundable" in body
    assert 'class="flash bad"' in body
    held.refresh_from_db()
    assert held.status == HeldAction.Status.REFUSED and held.result_turn
    assert not Refund.objects.filter(order=order).exclude(idempotency_key__startswith="factory").exists()


def test_an_approval_that_runs_says_so(client, held_refund):
    staff, ticket, order, held = held_refund
    client.force_login(staff)
    body = client.post(f"/desk/tickets/{ticket.pk}/held/{held.pk}", {"decision": "approve"}, **HTMX).content.decode()
    assert "issue_refund approved and executed." in body and 'class="flash ok"' in body
    held.refresh_from_db()
    assert held.status == HeldAction.Status.EXECUTED
    assert Refund.objects.filter(order=order).exclude(idempotency_key__startswith="factory").count() == 1


def test_the_approval_card_warns_of_an_equal_action_and_asks_to_confirm_money(client, held_refund):
    from sundry.agent.models import HeldAction as Held
    from sundry.desk.sidebar import approval_cards

    staff, ticket, order, held = held_refund
    (card,) = approval_cards(ticket, [held])
    assert card["title"] == "Refund 20.00 USD on SU-30100" and card["confirm"] and card["same"] == []
    figures = dict(card["record"].figures)  # the shop's order figures, through its records hook
    assert card["record"].reference == order.number and card["noun"] == "order"
    assert figures["Paid"] == "50.00 USD" and figures["Already refunded"] == "0.00 USD"
    assert card["words"].startswith("Please refund 20.00 USD")
    Held.objects.create(
        ticket=ticket,
        tool="issue_refund",
        arguments={**held.arguments, "amount": "5.00"},
        call_id="c2",
        reason="r",
        idempotency_key="other-key",
        turn=held.turn,
        status="executed",
    )
    (card,) = approval_cards(ticket, [held])
    assert card["same"] == [{"what": "issue_refund executed", "turn": held.turn}]
    client.force_login(staff)
    page = client.get(f"/desk/tickets/{ticket.pk}/").content.decode()
    assert (
        "Careful:" in page
        and "Confirm: refund 20.00 USD on SU-30100" in page
        and "Do not retry" not in page.split('id="panel-held"')[1].split("</section>")[0]
    )
