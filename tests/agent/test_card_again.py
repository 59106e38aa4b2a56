"""The same call again after its card was answered: no second card, and the model reads what became of it.

Through the real loop with the scripted model: the customer (by the button, a typed "yes", or staff on
their behalf) confirms a refund card; then the call is held for staff, run, declined by staff or refused
on its re-check; then the model makes the very same call again. The customer's page and the desk must
show no card asking for a go-ahead already given, nothing may run twice, and the result the model reads
says what the records say. A card answered "Not now" stands until the customer writes again; a
different call still makes a new card.
"""

from __future__ import annotations

import json

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from sundry.agent import cardanswers, cardstore
from sundry.agent.loop import agent_run
from sundry.agent.models import Confirmation, HeldAction
from sundry.agent.provider.gateway import Gateway
from sundry.agent.provider.scripted import ScriptedModel
from sundry.agent.services import confirmation_decide, customer_message_post, held_action_decide
from sundry.desk.lifecycle import ticket_create
from sundry.shop.models import Order, Refund
from sundry.tickets.models import Ticket, Turn
from sundry.tooling.messages import ModelResponse, ToolCall
from tests.factories import CustomerFactory, TicketClassFactory, paid_order

pytestmark = pytest.mark.django_db

BUTTON, TYPED, STAFF = Confirmation.Via.BUTTON, Confirmation.Via.TYPED, Confirmation.Via.STAFF
THRESHOLD = {"issue_refund": {"above_cents": 1000}}

# How the customer says yes (the grammar of a confirmation): each way, and each typed form.
WAYS = [(BUTTON, ""), (STAFF, "")] + [(TYPED, t) for t in ("yes", "Yes please!", "go ahead, thanks")]
# What became of the confirmed call before the model repeats it: (its rules, what happens after, state read).
PATHS = {
    "held": (THRESHOLD, None, cardanswers.WAITING),
    "held then approved": (THRESHOLD, "approve", cardanswers.DONE),
    "held then declined by staff": (THRESHOLD, "reject", cardanswers.STAFF_DECLINED),
    "run at once": ({}, None, cardanswers.DONE),
    "refused on its re-check": ({}, "cancel first", cardanswers.REFUSED),
}
# What the result the model reads must say, per state (words of the note), and what it must not.
SAYS = {
    cardanswers.WAITING: ("already confirmed", "awaiting staff approval"),
    cardanswers.DONE: ("already confirmed", "it ran", "Refund 15.00 USD on order SU-10480 is done", "not run again"),
    cardanswers.STAFF_DECLINED: ("already confirmed", "staff declined it", "nothing was done"),
    cardanswers.REFUSED: ("already confirmed", "not carried out", "order SU-10480 is cancelled"),
}


def call(name, _id, **arguments):
    return ModelResponse(tool_calls=[ToolCall(id=_id, name=name, arguments=arguments)])


def refund(_id, amount="15.00", order="SU-10480"):
    return call("issue_refund", _id, order_number=order, amount=amount, currency="USD", reason="damaged")


def reply(text="Thanks, I have looked into that."):
    return ModelResponse(text=text)


@pytest.fixture
def shop():
    users = get_user_model().objects
    customer = CustomerFactory(user=users.create_user("alice", password="pw"))
    paid_order(customer=customer, number="SU-10480", prices=(6000, 4000))
    tclass = TicketClassFactory(approval_rules={})
    ticket = ticket_create(customer=customer.person, ticket_class=tclass, subject="Lamp")
    staff = users.create_user("agent-kim", password="pw", is_staff=True)
    return {"customer": customer, "ticket": ticket, "tclass": tclass, "staff": staff}


def run(ticket, *steps) -> ScriptedModel:
    model = ScriptedModel(list(steps))
    agent_run(ticket.pk, gateway=Gateway(override=model))
    return model


def fresh(ticket):
    return Ticket.objects.select_related("ticket_class", "customer").get(pk=ticket.pk)


def proposed(shop, rules=None) -> Confirmation:
    """The customer asks for a refund; the model looks the order up and proposes it: one card."""
    if rules is not None:
        shop["tclass"].approval_rules = rules
        shop["tclass"].save()
    ticket = shop["ticket"]
    customer_message_post(ticket=ticket, text="My lamp arrived broken, please refund 15.00.", wake=False)
    run(
        ticket,
        call("search_orders", "s1", customer_id=shop["customer"].customer_id),
        call("get_order", "g1", order_number="SU-10480"),
        refund("r1"),
        reply("Please check the card."),
    )
    return Confirmation.objects.get(ticket=ticket, status=Confirmation.Status.PENDING)


def confirm(shop, card, via, typed="") -> Confirmation:
    ticket = fresh(shop["ticket"])
    if via == TYPED:
        customer_message_post(ticket=ticket, text=typed, wake=False)
    else:
        confirmation_decide(
            card_id=card.pk,
            ticket=ticket,
            confirm=True,
            digest=card.digest,
            via=via,
            user=shop["staff"] if via == STAFF else None,
            reason="Said yes on the phone at 14:10" if via == STAFF else "",
            wake=False,
        )
    card.refresh_from_db()
    assert card.status == Confirmation.Status.CONFIRMED and card.via == via
    return card


def model_read(model: ScriptedModel, call_id: str) -> str:
    """The result of `call_id` as the model read it in its next request."""
    last = model.requests[-1]
    return next(m.content for m in last.messages if m.role == "tool" and m.tool_call_id == call_id)


def repeat(shop, _id="r2", **refund_args):
    """The model makes the call again (as a real model did after a confirmation), then replies."""
    return run(fresh(shop["ticket"]), refund(_id, **refund_args), reply())


def assert_no_card_asks(shop):
    """Neither the customer's page nor the desk shows a card waiting for a go-ahead."""
    ticket = shop["ticket"]
    assert cardstore.open_cards(ticket) == []
    customer = Client()
    customer.force_login(shop["customer"].person.user)
    page = customer.get(f"/help/tickets/{ticket.pk}/").content.decode()
    assert 'class="confirm-card"' not in page and ">Not now</button>" not in page
    desk = Client()
    desk.force_login(shop["staff"])
    body = desk.get(f"/desk/tickets/{ticket.pk}/").content.decode()
    assert f"/desk/tickets/{ticket.pk}/cards/" not in body


@pytest.mark.parametrize("path", list(PATHS))
@pytest.mark.parametrize("via,typed", WAYS, ids=lambda v: v or "-")
def test_the_same_call_after_a_confirmation_makes_no_new_card_and_reads_the_truth(shop, path, via, typed):
    rules, after, state = PATHS[path]
    card = proposed(shop, rules)
    if after == "cancel first":  # the order changes before the customer answers: the tool refuses on the re-check
        Order.objects.filter(number="SU-10480").update(status=Order.Status.CANCELLED)
    card = confirm(shop, card, via, typed)
    holds = HeldAction.objects.filter(ticket=shop["ticket"])
    if rules:
        assert card.outcome == "held" and holds.get().status == HeldAction.Status.PENDING
    if after in ("approve", "reject"):
        held_action_decide(
            held_id=holds.get().pk, ticket=fresh(shop["ticket"]), approve=after == "approve", user=shop["staff"]
        )
    refunds, n_holds = Refund.objects.count(), holds.count()
    assert refunds == (1 if state == cardanswers.DONE else 0)

    model = repeat(shop)

    assert Confirmation.objects.filter(ticket=shop["ticket"]).count() == 1  # no second card
    assert_no_card_asks(shop)
    assert Refund.objects.count() == refunds and holds.count() == n_holds  # nothing ran or was held twice
    result = Turn.objects.get(ticket=shop["ticket"], kind=Turn.Kind.TOOL_RESULT, payload__call_id="r2")
    assert result.payload["answered"] == state and result.payload["confirmation"] == card.pk
    read = model_read(model, "r2")
    assert all(words.lower() in read.lower() for words in SAYS[state]), read
    assert "awaiting_customer_confirmation" not in read and not read.startswith("ERROR")
    assert ("on the customer's behalf" in read) is (via == STAFF)


def test_the_same_call_again_and_again_stays_one_card_and_one_hold(shop):
    card = confirm(shop, proposed(shop, THRESHOLD), BUTTON)
    run(fresh(shop["ticket"]), refund("r2"), refund("r3", amount="15.0"), reply())
    assert Confirmation.objects.filter(ticket=shop["ticket"]).count() == 1
    assert HeldAction.objects.filter(ticket=shop["ticket"]).count() == 1
    assert {t.payload.get("answered") for t in Turn.objects.filter(payload__call_id__in=["r2", "r3"])} == {
        cardanswers.WAITING
    }
    assert card.pk == Turn.objects.get(payload__call_id="r3").payload["confirmation"]


@pytest.mark.parametrize("change", [{"amount": "20.00"}, {"amount": "9.00"}, {"order": "SU-10490"}])
def test_a_different_call_after_a_confirmation_is_a_new_card(shop, change):
    """Look-alike: another amount or order is another call, proposed as before."""
    paid_order(customer=shop["customer"], number="SU-10490", prices=(5000,))
    confirm(shop, proposed(shop, THRESHOLD), BUTTON)
    ticket = fresh(shop["ticket"])
    if "order" in change:
        run(ticket, call("get_order", "g2", order_number=change["order"]), refund("r2", **change), reply())
    else:
        repeat(shop, **change)
    new = Confirmation.objects.get(ticket=shop["ticket"], status=Confirmation.Status.PENDING)
    assert new.call_id == "r2" and cardstore.open_cards(shop["ticket"]) == [new]
    result = Turn.objects.get(ticket=shop["ticket"], kind=Turn.Kind.TOOL_RESULT, payload__call_id="r2")
    assert json.loads(result.text)["awaiting_customer_confirmation"] is True and "answered" not in result.payload


@pytest.mark.parametrize("who", ["customer", "staff"])
def test_a_declined_card_stands_until_the_customer_asks_again(shop, who):
    card = proposed(shop)
    confirmation_decide(
        card_id=card.pk,
        ticket=fresh(shop["ticket"]),
        confirm=False,
        digest=card.digest,
        via=STAFF if who == "staff" else BUTTON,
        user=shop["staff"] if who == "staff" else None,
        wake=False,
    )
    model = repeat(shop)  # the model proposes it again in the same breath: the "Not now" stands
    assert Confirmation.objects.filter(ticket=shop["ticket"]).count() == 1
    assert_no_card_asks(shop)
    read = model_read(model, "r2")
    said = ("The customer declined", "Not now") if who == "customer" else ("Staff withdrew", "customer's behalf")
    assert all(words in read for words in said) and "nothing was done" in read
    # The customer writes again (asking for it after all): now the same call is a card again.
    customer_message_post(ticket=fresh(shop["ticket"]), text="Actually, yes, please refund it.", wake=False)
    repeat(shop, _id="r3")
    again = Confirmation.objects.get(ticket=shop["ticket"], status=Confirmation.Status.PENDING)
    assert again.call_id == "r3" and again.digest == card.digest and not Refund.objects.exists()


def test_a_refusal_on_re_check_is_proposed_again_once_the_customer_writes(shop):
    card = proposed(shop)
    Order.objects.filter(number="SU-10480").update(status=Order.Status.CANCELLED)
    assert confirm(shop, card, BUTTON).outcome == "refused"
    Order.objects.filter(number="SU-10480").update(status=Order.Status.DELIVERED)  # put right by hand
    assert "is cancelled" in model_read(repeat(shop), "r2")  # the answer stands: it says why
    assert not Confirmation.objects.filter(ticket=shop["ticket"], status=Confirmation.Status.PENDING).exists()
    customer_message_post(ticket=fresh(shop["ticket"]), text="It should work now, can you try again?", wake=False)
    repeat(shop, _id="r3")
    assert Confirmation.objects.get(ticket=shop["ticket"], status=Confirmation.Status.PENDING).call_id == "r3"


@pytest.mark.parametrize("decision", ["declined", "approved, then refused on its re-check"])
def test_staff_decisions_stand_even_after_the_customer_writes(shop, decision):
    """A hold staff decided is not put back on a card by a new message: staff said no, or said yes and
    the re-check refused it (the same call is never held twice on a ticket)."""
    confirm(shop, proposed(shop, THRESHOLD), BUTTON)
    approve = decision != "declined"
    if approve:
        Order.objects.filter(number="SU-10480").update(status=Order.Status.CANCELLED)
    held_action_decide(
        held_id=HeldAction.objects.get().pk, ticket=fresh(shop["ticket"]), approve=approve, user=shop["staff"]
    )
    assert HeldAction.objects.get().status == (HeldAction.Status.REFUSED if approve else HeldAction.Status.REJECTED)
    customer_message_post(ticket=fresh(shop["ticket"]), text="Why not? Please refund it.", wake=False)
    model = repeat(shop)
    assert Confirmation.objects.filter(ticket=shop["ticket"]).count() == 1 and not Refund.objects.exists()
    assert HeldAction.objects.count() == 1
    read = model_read(model, "r2")
    if approve:
        assert "staff approved it" in read and "order SU-10480 is cancelled" in read and "Do not call it again" in read
    else:
        assert "staff declined it" in read


@pytest.mark.parametrize("closed", [Confirmation.Status.EXPIRED, Confirmation.Status.SUPERSEDED])
def test_a_card_nobody_answered_is_proposed_again(shop, closed):
    """Look-alike: an expired or replaced card was never answered; the same call is a new card as before."""
    card = proposed(shop)
    Confirmation.objects.filter(pk=card.pk).update(status=closed)
    customer_message_post(ticket=fresh(shop["ticket"]), text="Hello? Is anyone there?", wake=False)
    repeat(shop)
    assert Confirmation.objects.get(ticket=shop["ticket"], status=Confirmation.Status.PENDING).call_id == "r2"


def test_a_confirmed_call_still_running_reads_as_running(shop):
    """A tool server's confirmed call runs after its decision commits: until its result is in, the same
    call again reads that it is being carried out (the row as the decision leaves it)."""
    card = proposed(shop)
    Confirmation.objects.filter(pk=card.pk).update(status=Confirmation.Status.CONFIRMED, outcome="")
    earlier = cardanswers.answered(shop["ticket"], card.digest)
    assert earlier.state == cardanswers.RUNNING and not earlier.until_asked
    assert "being carried out now" in earlier.result()["note"]
