"""The cards people decide on speak to people: the approval card (staff) and the confirmation card
(the customer, and staff watching it) say why, never what the guards told the model to do next.

Through the real loop with an obedient scripted model on the database: refunds the customer confirms,
then holds of three kinds (a repeat, a running total, an approval rule). The model's own record of
each — the hold's stored reason, the card's result — still carries its instructions: the control.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model

import sundry.agent.guards.callguards as guards_module
from sundry.agent import cardstore
from sundry.agent.guards import heldreason
from sundry.agent.models import Confirmation, HeldAction
from sundry.agent.services import customer_message_post
from sundry.desk.lifecycle import ticket_create
from sundry.tickets.models import Turn
from tests.agent.test_running_totals import call, run
from tests.factories import CustomerFactory, TicketClassFactory, customer_confirms, paid_order
from tests.tickets.test_result_cards import outside_raw

pytestmark = pytest.mark.django_db

# Refunds above 20.00 USD (running totals over 24 h) and every return wait for staff.
RULES = {"issue_refund": {"above": {"USD": 2000}}, "book_return": {}}
# Words addressed to the model: what to do next, what to tell the customer, what not to call.
TO_THE_MODEL = re.compile(
    r"do not|don't|retry|split it|tell the customer|tell them|call it again|never quote", re.IGNORECASE
)


def model_words(html: str) -> list[str]:
    return TO_THE_MODEL.findall(re.sub(r"<[^>]+>", " ", html))


def section(html: str, panel: str) -> str:
    found = re.search(rf'<section id="panel-{panel}".*?</section>', html, re.S)
    assert found, panel
    return found.group(0)


@pytest.fixture
def worked():
    customer = CustomerFactory(user=get_user_model().objects.create_user("maya", password="pw"))
    lamp = paid_order(customer=customer, number="SU-40100", prices=(6000,))
    chair = paid_order(customer=customer, number="SU-40200", prices=(8000,))
    tclass = TicketClassFactory(approval_rules=RULES, approval_window_hours=24)
    ticket = ticket_create(customer=customer.person, ticket_class=tclass, subject="Refunds")
    staff = get_user_model().objects.create_user("ann", password="pw", is_staff=True)
    return {"customer": customer, "ticket": ticket, "lamp": lamp, "chair": chair, "staff": staff}


def refund(order, amount, _id):
    return call("issue_refund", _id, order_number=order.number, amount=amount, currency="USD", reason="damaged")


def test_the_confirmation_card_says_why_not_what_the_model_was_told(client, worked):
    ticket, lamp = worked["ticket"], worked["lamp"]
    customer_message_post(ticket=ticket, text=f"Please refund 15 USD on {lamp.number}, the lamp is broken.", wake=False)
    run(ticket, call("get_order", "g1", order_number=lamp.number), refund(lamp, "15.00", "r1"))
    card = Confirmation.objects.get(ticket=ticket, status=Confirmation.Status.PENDING)
    # Control: what the model read for this call tells it what to do and what not to.
    told = Turn.objects.get(ticket=ticket, kind=Turn.Kind.TOOL_RESULT, payload__confirmation=card.pk)
    assert "Do not call it again" in told.text and cardstore.model_result(card)["note"] in told.text.replace("\\", "")

    client.force_login(worked["customer"].user)
    mine = section(client.get(f"/help/tickets/{ticket.pk}/").content.decode(), "cards")
    assert "Refund 15.00 USD on order SU-40100?" in mine and "We need your go-ahead because it moves money" in mine
    assert model_words(mine) == []
    client.force_login(worked["staff"])
    desk = client.get(f"/desk/tickets/{ticket.pk}/").content.decode()
    waiting = section(desk, "held")
    assert "Waiting for the customer" in waiting and "Refund 15.00 USD on order SU-40100" in waiting
    assert model_words(outside_raw(waiting)) == []
    # On the timeline the card's result shows in words; what the model read is behind "raw".
    [result] = [a for a in desk.split('<div class="turn-item"') if "waiting for the customer</span>" in a]
    assert model_words(outside_raw(result)) == [] and "Do not call it again" in result


def test_approval_cards_say_why_a_call_is_held_not_what_the_model_was_told(client, worked):
    ticket, lamp, chair = worked["ticket"], worked["lamp"], worked["chair"]
    customer_message_post(
        ticket=ticket,
        text=f"Please refund 15 USD on the lamp ({lamp.number}), 10 on the chair "
        f"({chair.number}), and return the chair.",
        wake=False,
    )
    run(
        ticket,
        call("get_order", "g1", order_number=lamp.number),
        call("get_order", "g2", order_number=chair.number),
        refund(lamp, "15.00", "r1"),
    )
    customer_confirms(ticket)  # 15.00 USD: under the threshold, it runs
    customer_message_post(ticket=ticket, text="And 5 more on the lamp, please.", wake=False)
    run(ticket, refund(lamp, "5.00", "r2"), refund(chair, "10.00", "r3"))  # a repeat is held at once
    customer_confirms(ticket)  # the chair's refund, confirmed, makes 25.00 USD: held
    customer_message_post(ticket=ticket, text="And the chair's return?", wake=False)
    run(
        ticket,
        call("book_return", "b1", order_number=chair.number, item_ids=[chair.items.get().item_id], reason="broken"),
    )
    customer_confirms(ticket)  # every return waits for staff
    held = {h.call_id.removesuffix("-confirmed"): h for h in HeldAction.objects.filter(ticket=ticket)}
    assert set(held) == {"r2", "r3", "b1"}
    # Control: each stored reason, which the model reads, carries its instructions.
    assert held["r2"].reason.endswith("Do not retry it; tell the customer it is with staff.")
    assert held["r3"].reason.endswith("Do not retry it or split it; tell the customer it is awaiting approval.")
    assert held["b1"].reason.endswith("Do not retry it; tell the customer it is awaiting approval.")

    client.force_login(worked["staff"])
    cards = outside_raw(section(client.get(f"/desk/tickets/{ticket.pk}/").content.decode(), "held"))
    assert cards.count('class="held approval-card"') == 3
    assert model_words(cards) == [], model_words(cards)
    # What staff read instead: why, in the guard's own words up to its instructions.
    assert (
        "issue_refund was already done for SU-40100 at turn" in cards and "Repeating it needs staff approval." in cards
    )
    assert (
        "issue_refund needs staff approval: 10.00 USD more makes 30.00 USD for this customer in 24 h "
        "(15.00 USD refunded and 5.00 USD held already, ticket #"
    ) in cards
    assert "book_return needs staff approval. Held at turn" in cards
    assert "the call is held" not in cards.lower()


def test_every_hold_the_guards_make_puts_its_instructions_after_the_marker():
    """The card cuts each hold's reason at `heldreason.TO_MODEL`: a hold written without it would show
    its instructions to staff, so each one in guards.py is read here."""
    source = Path(guards_module.__file__).read_text()
    holds = [
        node
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Call)
        and getattr(node.func, "id", "") == "GuardVerdict"
        and node.args
        and isinstance(node.args[0], ast.Constant)
        and node.args[0].value == "hold"
    ]
    assert len(holds) >= 5  # approval (twice), running total, repeat, internal text, opaque
    for node in holds:
        reason = ast.get_source_segment(source, node.args[2])
        assert heldreason.TO_MODEL in reason.replace('"\n', "").replace('" "', "").replace('"\n', ""), reason
    # The cut itself: the reason up to the marker, without "the call is held".
    assert (
        heldreason.for_people(
            "x needs staff approval: over. The call is held. Do not retry it or split it; "
            "tell the customer it is awaiting approval."
        )
        == "x needs staff approval: over."
    )
    assert heldreason.for_people("A; the call is held. Do not retry it; tell the customer.") == "A."
    assert heldreason.for_people("Held for a reason of its own") == "Held for a reason of its own."
