"""Confirmation cards over a tool server: the retail example as a real subprocess, an obedient scripted
model through the real loop, and the retail store itself as the judge.

A cancellation the customer confirms runs once on the store; two presses on its card cancel once; an
approval of a held cancellation whose equal cancellation already ran sends nothing. The store is read
through the same server before and after: the lamp order is cancelled and refunded exactly once, and no
other record (the customer's other orders, another customer's orders and payment methods) changed.

The store itself refuses a second cancellation of an order, so its data alone cannot show a guard that
let a second call through: `sent` records every write call that reaches the server (the MCP client's
calls), and each guard's negative control shows the call it stops reaching the store.
"""

from __future__ import annotations

import copy
import threading

import pytest
from django.contrib.auth import get_user_model
from django.db import close_old_connections

from sundry.agent.guards import callguards as guards
from sundry.agent.models import Confirmation, HeldAction
from sundry.agent.services import (
    ConfirmationError,
    HeldActionError,
    confirmation_decide,
    customer_message_post,
    held_action_decide,
)
from sundry.context.models import ActionTaken
from sundry.desk.lifecycle import ticket_create
from sundry.shop.people import shop_customer_of
from sundry.tickets.models import Ticket, TicketClass, Turn
from sundry.tooling import mcp_client
from sundry.tooling.messages import ModelResponse
from sundry.toolservers import catalog
from tests.factories import CustomerFactory
from tests.toolservers.test_retail_ticket import EMAIL, USER, call, results, run

pytestmark = pytest.mark.django_db(transaction=True)

BUTTON = Confirmation.Via.BUTTON
LAMP, GIFT_CARD = "#W9300146", "gift_card_7245904"  # Aarav's one pending order: a desk lamp, 153.23 USD by gift card
IVAN = "ivan_santos_6635"  # another customer of the store, with pending orders of his own
WRITES = {
    "cancel_pending_order",
    "exchange_delivered_order_items",
    "return_delivered_order_items",
    "modify_pending_order_items",
    "modify_pending_order_address",
    "modify_pending_order_payment",
    "modify_user_address",
}
NOT_PENDING = "Non-pending order cannot be cancelled"


@pytest.fixture
def sent(monkeypatch):
    """Every write call that reaches a tool server, as (tool, arguments), in the order sent."""
    calls: list[tuple[str, dict]] = []
    real = mcp_client.Connection.call

    def spy(self, name, arguments, timeout, output_schema=None):
        if name in WRITES:
            calls.append((name, dict(arguments)))
        return real(self, name, arguments, timeout, output_schema)

    monkeypatch.setattr(mcp_client.Connection, "call", spy)
    return calls


def ask(server, tool: str, arguments: dict):
    remote = catalog.class_tools(server.ticket_class).remote[tool]
    return mcp_client.connection(remote.connect).call(tool, arguments, 20).data


def store(server) -> dict:
    """The store's records for both customers: their users (payment methods, balances) and every order."""
    users = {u: ask(server, "get_user_details", {"user_id": u}) for u in (USER, IVAN)}
    orders = {o: ask(server, "get_order_details", {"order_id": o}) for u in users.values() for o in u["orders"]}
    return copy.deepcopy({"users": users, "orders": orders})


def assert_lamp_cancelled_once(server, before: dict) -> None:
    """The store's own data: the lamp order cancelled with one refund of its one payment to the gift card
    (whose balance rose by it once); every other record as it was."""
    after, before = store(server), copy.deepcopy(before)
    lamp, was = after["orders"].pop(LAMP), before["orders"].pop(LAMP)
    assert lamp["status"] == "cancelled" and was["status"] == "pending"
    assert lamp["payment_history"] == [
        *was["payment_history"],
        {"transaction_type": "refund", "amount": 153.23, "payment_method_id": GIFT_CARD},
    ]
    for field in ("status", "cancel_reason", "payment_history"):
        lamp.pop(field), was.pop(field)
    assert lamp == was
    assert after["orders"] == before["orders"]  # the customer's other orders, and another customer's
    card_after = after["users"][USER]["payment_methods"].pop(GIFT_CARD)
    card_before = before["users"][USER]["payment_methods"].pop(GIFT_CARD)
    assert round(card_after.pop("balance") - card_before.pop("balance"), 2) == 153.23 and card_after == card_before
    assert after["users"] == before["users"]


def fresh(ticket) -> Ticket:
    return Ticket.objects.select_related("ticket_class", "customer").get(pk=ticket.pk)


def new_ticket(server, customer=None) -> Ticket:
    customer = customer or CustomerFactory(name="Aarav Anderson", email=EMAIL)
    return ticket_create(
        customer=customer.person, ticket_class=TicketClass.objects.get(pk=server.ticket_class_id), subject="Desk lamp"
    )


def propose_cancel(
    ticket, text=f"Hi, I'm Aarav ({EMAIL}). Please cancel my desk lamp order {LAMP}, I no longer need it."
) -> Confirmation:
    """The customer writes; the scripted model looks the order up and cancels it: a card, nothing run."""
    customer_message_post(ticket=ticket, wake=False, text=text)
    run(
        ticket,
        call("find_user_id_by_email", "c1", email=EMAIL),
        call("get_user_details", "c2", user_id=USER),
        call("get_order_details", "c3", order_id=LAMP),
        call("cancel_pending_order", "k1", order_id=LAMP, reason="no longer needed"),
        ModelResponse(text="Please confirm the cancellation on the card."),
    )
    return Confirmation.objects.get(ticket=ticket, call_id="k1")


def press(card: Confirmation, ticket) -> Confirmation:
    return confirmation_decide(
        card_id=card.pk, ticket=fresh(ticket), confirm=True, digest=card.digest, via=BUTTON, wake=False
    )


# --- 1. a card: the customer confirms, it runs exactly once ------------------------------------------------


def test_the_customer_confirms_a_remote_cancellation_and_it_runs_once_on_the_store(retail_server, sent):
    before = store(retail_server)
    ticket = new_ticket(retail_server)
    card = propose_cancel(ticket)
    # A card written from the server's declarations and the lanes; nothing reached the store.
    assert card.status == Confirmation.Status.PENDING
    assert (card.card["title"], card.card["amount"]) == (f"Cancel order {LAMP}", "153.23 USD")
    assert sent == [] and store(retail_server) == before

    done = press(card, ticket)
    assert (done.status, done.outcome, done.via) == (Confirmation.Status.CONFIRMED, "executed", BUTTON)
    assert sent == [("cancel_pending_order", {"order_id": LAMP, "reason": "no longer needed"})]
    assert_lamp_cancelled_once(retail_server, before)
    action = ActionTaken.objects.get(ticket=ticket)
    assert (action.tool, action.target, action.amount_cents, action.currency) == (
        "cancel_pending_order",
        LAMP,
        15323,
        "USD",
    )
    # The agent wakes to the confirmed call's result: the store's cancelled order.
    model = run(ticket, ModelResponse(text="Your lamp order is cancelled and 153.23 USD is back on your gift card."))
    shown = [m.content for m in model.requests[0].messages if m.role == "tool"]
    assert any('"cancelled"' in c and LAMP in c for c in shown)


def test_negative_control_without_the_card_the_models_cancellation_reaches_the_store(retail_server, sent, monkeypatch):
    """The card is what keeps the store untouched above: without it, a customer's question is enough."""
    monkeypatch.setattr(guards, "needs_card", lambda inp: "")
    ticket = new_ticket(retail_server)
    customer_message_post(ticket=ticket, wake=False, text=f"Hi, I'm Aarav ({EMAIL}). Has my lamp {LAMP} shipped?")
    run(
        ticket,
        call("find_user_id_by_email", "c1", email=EMAIL),
        call("get_user_details", "c2", user_id=USER),
        call("get_order_details", "c3", order_id=LAMP),
        call("cancel_pending_order", "k1", order_id=LAMP, reason="no longer needed"),
        ModelResponse(text="It has not shipped."),
    )
    assert not Confirmation.objects.exists()
    assert sent == [("cancel_pending_order", {"order_id": LAMP, "reason": "no longer needed"})]
    assert ask(retail_server, "get_order_details", {"order_id": LAMP})["status"] == "cancelled"


# --- 2. a double confirm: two presses, one cancellation ----------------------------------------------------


def test_two_presses_at_once_on_a_remote_card_cancel_once(retail_server, sent):
    before = store(retail_server)
    ticket = new_ticket(retail_server)
    card = propose_cancel(ticket)
    barrier, outcomes = threading.Barrier(2), []

    def click():
        try:
            barrier.wait()
            outcomes.append(press(card, ticket).outcome)
        except ConfirmationError as exc:
            outcomes.append(str(exc))
        finally:
            close_old_connections()

    threads = [threading.Thread(target=click) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert sorted(outcomes)[1] == "executed" and "already confirmed" in sorted(outcomes)[0], outcomes
    with pytest.raises(ConfirmationError, match="already confirmed"):  # a third press, later
        press(card, ticket)
    assert sent == [("cancel_pending_order", {"order_id": LAMP, "reason": "no longer needed"})]
    assert_lamp_cancelled_once(retail_server, before)
    assert ActionTaken.objects.filter(ticket=ticket).count() == 1
    assert [t.payload["ok"] for t in results(ticket, "cancel_pending_order") if t.payload.get("server")] == [True]


def test_negative_control_a_second_press_past_the_single_use_mark(retail_server, sent, monkeypatch):
    """The card's single-use mark stops a second press above. Without it (the card pending again), the
    confirmed call is judged again and held as a repeat of the done action; without that too, it
    reaches the store, which answers with its own refusal."""
    ticket = new_ticket(retail_server)
    card = propose_cancel(ticket)
    assert press(card, ticket).outcome == "executed"
    Confirmation.objects.filter(pk=card.pk).update(status=Confirmation.Status.PENDING)
    assert press(card, ticket).outcome == "held"
    assert HeldAction.objects.get(ticket=ticket).status == HeldAction.Status.PENDING
    assert len(sent) == 1

    monkeypatch.setattr(guards, "_check_repeat", lambda inp, args: None)
    Confirmation.objects.filter(pk=card.pk).update(status=Confirmation.Status.PENDING)
    assert press(card, ticket).outcome == "refused"
    assert [name for name, _ in sent] == ["cancel_pending_order", "cancel_pending_order"]
    last = results(ticket, "cancel_pending_order")[-1]
    assert last.payload["server"] == "retail" and NOT_PENDING in last.text


# --- 3. a double approval of a held cancellation whose equal cancellation already ran ---------------------


def held_then_run_elsewhere(server, sent) -> tuple[Ticket, Ticket, HeldAction]:
    """Ticket A: the customer confirms the cancellation and the class's threshold (100 USD) holds it for
    staff. Staff raise the threshold; on the customer's ticket B the same cancellation is confirmed and runs."""
    TicketClass.objects.filter(pk=server.ticket_class_id).update(
        approval_rules={"cancel_pending_order": {"above": {"USD": 10000}}}
    )
    first = new_ticket(server)
    assert press(propose_cancel(first), first).outcome == "held"
    held = HeldAction.objects.get(ticket=first)
    assert held.status == HeldAction.Status.PENDING and sent == []

    TicketClass.objects.filter(pk=server.ticket_class_id).update(
        approval_rules={"cancel_pending_order": {"above": {"USD": 100000}}}
    )
    second = new_ticket(server, customer=shop_customer_of(first.customer))
    assert (
        press(propose_cancel(second, text=f"Please cancel my lamp order {LAMP}, I no longer need it."), second).outcome
        == "executed"
    )
    assert len(sent) == 1 and ActionTaken.objects.get(ticket=second).target == LAMP
    return first, second, held


def test_approving_twice_a_held_cancellation_whose_equal_cancellation_ran_sends_nothing(retail_server, sent):
    before = store(retail_server)
    first, second, held = held_then_run_elsewhere(retail_server, sent)
    staff = get_user_model().objects.create_user("ann", password="pw", is_staff=True)

    held_action_decide(held_id=held.pk, ticket=fresh(first), approve=True, user=staff, wake=False)
    held.refresh_from_db()
    assert held.status == HeldAction.Status.REFUSED
    event = Turn.objects.get(ticket=first, kind=Turn.Kind.EVENT, payload__held=held.pk)
    assert event.payload["decision"] == "refused"
    assert "already ran" in event.text and f"on ticket #{second.pk}" in event.text and "not run" in event.text
    assert not Turn.objects.filter(ticket=first, payload__call_id=f"{held.call_id}-approved").exists()
    with pytest.raises(HeldActionError, match="already refused"):  # a second approval, by a colleague
        held_action_decide(held_id=held.pk, ticket=fresh(first), approve=True, user=staff, wake=False)

    assert sent == [("cancel_pending_order", {"order_id": LAMP, "reason": "no longer needed"})]
    assert_lamp_cancelled_once(retail_server, before)
    assert ActionTaken.objects.filter(ticket__customer=first.customer).count() == 1


def test_negative_control_without_the_already_done_check_the_approval_reaches_the_store(
    retail_server, sent, monkeypatch
):
    monkeypatch.setattr("sundry.agent.holds.already_done", lambda *a, **k: "")
    first, _second, held = held_then_run_elsewhere(retail_server, sent)
    staff = get_user_model().objects.create_user("ann", password="pw", is_staff=True)
    held_action_decide(held_id=held.pk, ticket=fresh(first), approve=True, user=staff, wake=False)
    assert [name for name, _ in sent] == ["cancel_pending_order", "cancel_pending_order"]
    answer = Turn.objects.get(ticket=first, kind=Turn.Kind.TOOL_RESULT, payload__call_id=f"{held.call_id}-approved")
    assert answer.payload["server"] == "retail" and NOT_PENDING in answer.text  # the store's own refusal


# --- a typed "yes" ------------------------------------------------------------------------------------------


def test_a_typed_yes_confirms_a_remote_card_and_it_runs_once(retail_server, sent):
    before = store(retail_server)
    ticket = new_ticket(retail_server)
    card = propose_cancel(ticket)
    customer_message_post(ticket=fresh(ticket), text="Yes please", wake=False)
    card.refresh_from_db()
    assert (card.status, card.via, card.outcome) == (Confirmation.Status.CONFIRMED, Confirmation.Via.TYPED, "executed")
    assert len(sent) == 1
    assert_lamp_cancelled_once(retail_server, before)
