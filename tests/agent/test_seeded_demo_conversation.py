"""The reported conversation end to end on the seeded demo shop: the offline agent, the real loop, real
compactions as production triggers them, judged from the shop's tables and what the customer reads.

Each refund, return and cancellation the customer asks for is proposed on a card; right after asking,
they press Confirm on the card for exactly that (tool and order) and on no other, and the agent goes on.
A card for an order action nobody asked for stays unconfirmed, and the judge lists it."""

from __future__ import annotations

import re

import pytest
from django.test.utils import override_settings

from sundry.agent.guards import callguards as guards
from sundry.agent.models import Confirmation
from sundry.agent.provider.gateway import Gateway
from sundry.compaction.models import CompactionRun
from sundry.desk.lifecycle import ticket_create
from sundry.shop.models import Cancellation, Customer, Order, Refund, Return
from sundry.shop.offline import OfflineModel
from sundry.tickets.models import Ticket
from sundry.tooling.messages import ModelRequest, ModelResponse, ToolCall
from tests.demo_conversation import (
    SCRIPT,
    SECOND_STATUS_QUESTION,
    STATUS_QUESTION,
    Cast,
    pick_customer,
    replay,
    seed_demo_shop,
)

pytestmark = pytest.mark.django_db(transaction=True)

CONTACT_TOOLS = ("send_email", "log_phone_call")

# The messages that ask for something to be done, and what: the card the customer confirms after each.
ASKS = {
    SCRIPT.index("I'd like a refund of 40.00 {fryer_currency} for the damage, I'll keep it."): (
        "issue_refund",
        "fryer",
    ),
    SCRIPT.index("I want to return the {lamp_item} from {lamp}, it's too dim."): ("book_return", "lamp"),
    SCRIPT.index("Please refund 25.00 {fourth_currency} on {fourth}, the {fourth_item} was scratched."): (
        "issue_refund",
        "fourth",
    ),
    SCRIPT.index("Please cancel {placed}, I ordered it by mistake."): ("cancel_order", "placed"),
}


@pytest.fixture
def demo():
    tclass = seed_demo_shop()
    cast = pick_customer()
    customer = Customer.objects.get(customer_id=cast.customer_id)
    ticket = ticket_create(customer=customer.person, ticket_class=tclass, subject="Cracked air fryer and other orders")
    return {"cast": cast, "ticket": ticket, "refunds_before": set(Refund.objects.values_list("pk", flat=True))}


def _compactions(ticket: Ticket) -> int:
    return CompactionRun.objects.filter(
        ticket=ticket, status__in=[CompactionRun.Status.SUCCEEDED, CompactionRun.Status.FALLBACK]
    ).count()


def _refunds(before: set[int]) -> list[tuple[str, int]]:
    return [
        (r.order.number, r.amount_cents)
        for r in Refund.objects.exclude(pk__in=before).select_related("order").order_by("pk")
    ]


def _card_order(card: Confirmation) -> str:
    return str(card.arguments.get("order_number") or "")


def _press_confirm(ticket, cast: Cast, at: int, gateway=None) -> list[str]:
    """After message `at`: the customer presses Confirm on the open card for what that message asked
    (its tool, on its order), as the page's button does; the agent goes on, and a call the confirmation
    leaves held for staff is approved as `replay` approves one. The agent's replies to it."""
    from django.contrib.auth import get_user_model

    from sundry.agent.loop import agent_run
    from sundry.agent.models import HeldAction
    from sundry.agent.services import confirmation_decide, held_action_decide
    from sundry.core.background import wait_idle
    from sundry.tickets.models import Turn

    if at not in ASKS:
        return []
    tool, role = ASKS[at]
    order = getattr(cast, role)
    fresh = Ticket.objects.select_related("ticket_class", "customer").get(pk=ticket.pk)
    mark = fresh.last_turn_number
    cards = [
        c
        for c in Confirmation.objects.filter(ticket=ticket, status=Confirmation.Status.PENDING).order_by("pk")
        if (c.tool, _card_order(c)) == (tool, order)
    ]
    with override_settings(BACKGROUND_MODE="deferred"):
        for card in cards:
            confirmation_decide(
                card_id=card.pk,
                ticket=Ticket.objects.select_related("ticket_class", "customer").get(pk=ticket.pk),
                confirm=True,
                digest=card.digest,
                via=Confirmation.Via.BUTTON,
                wake=False,
            )
            agent_run(ticket.pk, gateway=gateway)
            wait_idle()
        for held in HeldAction.objects.filter(ticket=ticket, status=HeldAction.Status.PENDING).order_by("pk"):
            staff, _ = get_user_model().objects.get_or_create(username="staff-approver", defaults={"is_staff": True})
            held_action_decide(
                held_id=held.pk,
                ticket=Ticket.objects.select_related("ticket_class", "customer").get(pk=ticket.pk),
                approve=True,
                user=staff,
                wake=False,
            )
            agent_run(ticket.pk, gateway=gateway)
            wait_idle()
    return list(
        Turn.objects.filter(ticket=ticket, kind=Turn.Kind.MESSAGE, author=Turn.Author.AGENT, number__gt=mark)
        .order_by("number")
        .values_list("text", flat=True)
    )


def replay_confirming(ticket, cast: Cast, *, start: int = 0, stop: int | None = None, gateway=None) -> list[list[str]]:
    """`replay`, message by message, with the customer confirming what they asked for right after asking."""
    replies = []
    for at in range(start, len(SCRIPT) if stop is None else stop):
        [answer] = replay(ticket, cast, start=at, stop=at + 1, gateway=gateway)
        replies.append(answer + _press_confirm(ticket, cast, at, gateway))
    return replies


def run_and_judge(ticket, cast: Cast, before: set[int], gateway=None) -> list[str]:
    """Replay the conversation; what went wrong, judged from the shop's tables and the replies."""
    problems = []
    replies = replay_confirming(ticket, cast, stop=STATUS_QUESTION, gateway=gateway)
    compacted = _compactions(ticket)
    if compacted < 3:
        problems.append(f"only {compacted} compaction(s) before the status question")
    if _refunds(before) != [
        (cast.fryer, 4000),
        (cast.fourth, 2500),
        (cast.placed, Order.objects.get(number=cast.placed).total_cents),
    ]:
        problems.append(f"refunds before the status question: {_refunds(before)}")
    settled = _refunds(before)
    replies += replay_confirming(ticket, cast, start=STATUS_QUESTION, gateway=gateway)

    new = [r for r in _refunds(before) if r not in settled]
    if new:
        problems.append(f"refunds after the status question: {new}")
    stray = [r for r in _refunds(before) if r[0] not in cast.asked_about]
    if stray:
        problems.append(f"money moved on orders nobody asked about: {stray}")
    for at in (STATUS_QUESTION, SECOND_STATUS_QUESTION):
        answer = " ".join(replies[at])
        if not (cast.fryer in answer and "40.00" in answer) or re.search(r"\bI've refunded\b", answer):
            problems.append(f"{SCRIPT[at]!r} was answered {answer!r}")
    if not (
        Cancellation.objects.filter(order__number=cast.placed).exists()
        and Return.objects.filter(order__number=cast.lamp).exists()
    ):
        problems.append("the cancellation or the lamp's return is missing")
    if Customer.objects.get(customer_id=cast.customer_id).contacts.filter(kind="email").exists():
        problems.append("emailed a customer who asked never to be emailed")
    # Cards to contact the customer are left out: the offline agent offers to log the outcome as a phone
    # call (they wrote "never email me, phone only"); unconfirmed, nothing is logged, and what this judge
    # is about is money and orders (an e-mail that went out is caught above).
    unasked = [
        (c.tool, _card_order(c))
        for c in Confirmation.objects.filter(ticket=ticket)
        .exclude(status=Confirmation.Status.CONFIRMED)
        .exclude(tool__in=CONTACT_TOOLS)
        .order_by("pk")
    ]
    if unasked:
        problems.append(f"cards proposed that the customer did not ask for: {unasked}")
    return problems


def test_the_reported_conversation_moves_money_only_where_asked_and_answers_the_status_question(demo):
    cast = demo["cast"]
    assert run_and_judge(demo["ticket"], cast, demo["refunds_before"]) == []
    # Every action ran on the customer's own confirmation of its card, and on nothing else.
    confirmed = [
        (c.tool, _card_order(c), c.via)
        for c in Confirmation.objects.filter(ticket=demo["ticket"], status=Confirmation.Status.CONFIRMED).order_by("pk")
    ]
    assert confirmed == [(tool, getattr(cast, role), Confirmation.Via.BUTTON) for tool, role in ASKS.values()]


class RefundsTheChargerWhenAsked:
    """The reported fault: the offline model, except that "Is the refund for the air fryer done?" is met
    with a refund on the parcel still in transit."""

    def __init__(self, cast: Cast):
        self.inner, self.cast = OfflineModel(), cast

    def complete(self, request: ModelRequest) -> ModelResponse:
        last = request.messages[-1]
        if last.role == "user" and last.content == SCRIPT[STATUS_QUESTION]:
            order = Order.objects.get(number=self.cast.transit2)
            return ModelResponse(
                tool_calls=[
                    ToolCall(
                        id="wrong-refund",
                        name="issue_refund",
                        arguments={
                            "order_number": order.number,
                            "amount": f"{order.total_cents / 100:.2f}",
                            "currency": order.currency,
                            "reason": "refund asked about",
                        },
                    )
                ]
            )
        return self.inner.complete(request)


def test_the_reported_refund_on_a_status_question_only_waits_on_a_card_nobody_confirms(demo):
    """The faulty model with cards on: its refund on the parcel in transit is proposed, never confirmed, and
    no money moves; the judge still reports the bad answer and the card nobody asked for."""
    cast = demo["cast"]
    problems = run_and_judge(
        demo["ticket"], cast, demo["refunds_before"], gateway=Gateway(override=RefundsTheChargerWhenAsked(cast))
    )
    assert not any(p.startswith(("refunds after", "money moved")) for p in problems), problems
    assert f"cards proposed that the customer did not ask for: [('issue_refund', '{cast.transit2}')]" in problems
    card = Confirmation.objects.get(ticket=demo["ticket"], call_id="wrong-refund")
    assert (
        card.status == Confirmation.Status.PENDING
        and not Refund.objects.filter(order__number=cast.transit2).exclude(pk__in=demo["refunds_before"]).exists()
    )


def test_negative_control_the_judge_catches_the_reported_refund_when_the_consent_guard_is_off(demo, monkeypatch):
    # What stands between the status question and the money now is the card: with confirmations
    # switched off, the faulty model's refund runs and the judge must catch it.
    monkeypatch.setattr(guards, "needs_card", lambda inp: "")
    gateway = Gateway(override=RefundsTheChargerWhenAsked(demo["cast"]))
    problems = run_and_judge(demo["ticket"], demo["cast"], demo["refunds_before"], gateway=gateway)
    transit2 = demo["cast"].transit2
    assert any(p.startswith("refunds after the status question") and transit2 in p for p in problems), problems
    assert any(p.startswith("money moved on orders nobody asked about") for p in problems), problems
