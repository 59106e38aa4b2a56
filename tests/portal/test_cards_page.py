"""Confirmation cards and "Your instructions" on the pages: who may press what, and what each press does.

Through Django's test client with real sessions and CSRF checks; effects read from the shop's rows.
"""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from sundry.agent.loop import agent_run
from sundry.agent.models import Confirmation
from sundry.agent.provider.gateway import Gateway
from sundry.agent.provider.scripted import ScriptedModel
from sundry.agent.services import customer_message_post
from sundry.context.models import PinnedRule
from sundry.desk.lifecycle import ticket_create
from sundry.shop.models import Refund
from sundry.tickets.models import Ticket, Turn
from sundry.tooling.messages import ModelResponse, ToolCall
from tests.factories import CustomerFactory, TicketClassFactory, paid_order

pytestmark = pytest.mark.django_db
HX = {"HTTP_HX_REQUEST": "true"}


def call(name, _id, **arguments):
    return ModelResponse(tool_calls=[ToolCall(id=_id, name=name, arguments=arguments)])


@pytest.fixture
def page():
    users = get_user_model().objects
    alice_user, bob_user = users.create_user("alice", password="pw"), users.create_user("bob", password="pw")
    staff = users.create_user("sam", password="pw", is_staff=True)
    alice, bob = CustomerFactory(user=alice_user), CustomerFactory(user=bob_user)
    paid_order(customer=alice, number="SU-61111", prices=(4899,))
    bobs_ticket = ticket_create(customer=bob.person, ticket_class=TicketClassFactory(), subject="Bob's")
    ticket = ticket_create(customer=alice.person, ticket_class=TicketClassFactory(), subject="Lamp")
    customer_message_post(ticket=ticket, text="My lamp arrived broken.", wake=False)
    agent_run(
        ticket.pk,
        gateway=Gateway(
            override=ScriptedModel(
                [
                    call("search_orders", "s1", customer_id=alice.customer_id),
                    call("get_order", "g1", order_number="SU-61111"),
                    call(
                        "issue_refund", "r1", order_number="SU-61111", amount="48.99", currency="USD", reason="damaged"
                    ),
                    ModelResponse(text="Please check the card."),
                ]
            )
        ),
    )
    clients = {}
    for name, user in (("alice", alice_user), ("bob", bob_user), ("staff", staff)):
        clients[name] = Client()
        clients[name].force_login(user)
    card = Confirmation.objects.get(ticket=ticket)
    return {"ticket": ticket, "c": clients, "card": card, "bobs_ticket": bobs_ticket, "alice_user": alice_user}


def url(ticket, card):
    return f"/help/tickets/{ticket.pk}/cards/{card.pk}"


def test_the_customer_sees_the_card_written_from_the_call(page):
    body = page["c"]["alice"].get(f"/help/tickets/{page['ticket'].pk}/").content.decode()
    assert "Refund 48.99 USD on order SU-61111?" in body
    assert 'name="digest" value="%s"' % page["card"].digest in body
    assert ">Confirm</button>" in body and ">Not now</button>" in body


def test_confirm_runs_once_and_a_second_press_is_refused(page):
    alice, ticket, card = page["c"]["alice"], page["ticket"], page["card"]
    r = alice.post(url(ticket, card), {"decision": "confirm", "digest": card.digest}, **HX)
    assert r.status_code == 200 and "Confirmed" in r.content.decode()
    again = alice.post(url(ticket, card), {"decision": "confirm", "digest": card.digest}, **HX)
    assert again.status_code == 409 and "already confirmed" in again.content.decode()
    assert list(Refund.objects.values_list("amount_cents", flat=True)) == [4899]


def test_not_now_runs_nothing(page):
    alice, ticket, card = page["c"]["alice"], page["ticket"], page["card"]
    assert alice.post(url(ticket, card), {"decision": "decline", "digest": card.digest}, **HX).status_code == 200
    assert Confirmation.objects.get(pk=card.pk).status == "declined" and not Refund.objects.exists()


def test_a_stale_digest_another_customer_staff_and_bad_input_run_nothing(page):
    c, ticket, card = page["c"], page["ticket"], page["card"]
    assert c["alice"].post(url(ticket, card), {"decision": "confirm", "digest": "0" * 64}, **HX).status_code == 409
    assert c["alice"].post(url(ticket, card), {"decision": "maybe", "digest": card.digest}, **HX).status_code == 422
    assert c["bob"].post(url(ticket, card), {"decision": "confirm", "digest": card.digest}, **HX).status_code == 404
    # Bob's own ticket with Alice's card number: no such card there.
    assert (
        c["bob"].post(url(page["bobs_ticket"], card), {"decision": "confirm", "digest": card.digest}, **HX).status_code
        == 404
    )
    assert c["staff"].post(url(ticket, card), {"decision": "confirm", "digest": card.digest}, **HX).status_code == 403
    assert not Refund.objects.exists() and Confirmation.objects.get(pk=card.pk).status == "pending"


def test_the_press_needs_a_csrf_token(page):
    client = Client(enforce_csrf_checks=True)
    client.force_login(page["alice_user"])
    r = client.post(url(page["ticket"], page["card"]), {"decision": "confirm", "digest": page["card"].digest}, **HX)
    assert r.status_code == 403 and not Refund.objects.exists()


def test_staff_confirm_for_the_customer_from_the_desk_with_a_reason(page):
    staff, ticket, card = page["c"]["staff"], page["ticket"], page["card"]
    desk = staff.get(f"/desk/tickets/{ticket.pk}/").content.decode()
    assert "Waiting for the customer" in desk and "Confirm for the customer" in desk
    no_reason = staff.post(
        f"/desk/tickets/{ticket.pk}/cards/{card.pk}", {"decision": "confirm", "digest": card.digest}, **HX
    )
    assert no_reason.status_code == 409 and not Refund.objects.exists()
    r = staff.post(
        f"/desk/tickets/{ticket.pk}/cards/{card.pk}",
        {"decision": "confirm", "digest": card.digest, "reason": "Yes on the phone, 14:10"},
        **HX,
    )
    assert r.status_code == 200 and Refund.objects.count() == 1
    card.refresh_from_db()
    assert (card.via, card.decided_by.username, card.staff_reason) == ("staff", "sam", "Yes on the phone, 14:10")
    assert page["c"]["alice"].post(
        f"/desk/tickets/{ticket.pk}/cards/{card.pk}", {"decision": "confirm", "digest": card.digest}, **HX
    ).status_code in (302, 403, 404)


def test_the_customer_reads_and_withdraws_their_own_instructions(page):
    alice, ticket = page["c"]["alice"], page["ticket"]
    customer_message_post(ticket=Ticket.objects.get(pk=ticket.pk), text="Phone only, never email me.", wake=False)
    rule = PinnedRule.objects.get(ticket=ticket, source="customer")
    body = alice.get(f"/help/tickets/{ticket.pk}/").content.decode()
    assert "Your instructions on this case" in body and rule.text in body
    assert page["c"]["bob"].post(f"/help/tickets/{ticket.pk}/instructions/{rule.pk}/withdraw", **HX).status_code == 404
    r = alice.post(f"/help/tickets/{ticket.pk}/instructions/{rule.pk}/withdraw", **HX)
    assert r.status_code == 200
    assert PinnedRule.objects.get(pk=rule.pk).status == "dismissed"
    assert Turn.objects.filter(ticket=ticket, kind="event", payload__withdrawn_by="customer").exists()
    assert alice.post(f"/help/tickets/{ticket.pk}/instructions/{rule.pk}/withdraw", **HX).status_code == 409
    assert alice.post(f"/help/tickets/{ticket.pk}/instructions/987654/withdraw", **HX).status_code == 404
