"""The reported conversation end to end on the seeded demo shop: the offline agent, the real loop, real
compactions as production triggers them, judged from the shop's tables and what the customer reads."""

from __future__ import annotations

import re

import pytest

from sundry.agent import consent
from sundry.agent.gateway import Gateway
from sundry.shop.offline import OfflineModel
from sundry.compaction.models import CompactionRun
from sundry.shop.models import Cancellation, Customer, Order, Refund, Return
from sundry.tickets.models import Ticket
from sundry.tickets.services import ticket_create
from sundry.tooling.messages import ModelRequest, ModelResponse, ToolCall
from tests.demo_conversation import (SCRIPT, SECOND_STATUS_QUESTION, STATUS_QUESTION, Cast, pick_customer, replay,
                                     seed_demo_shop)

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def demo():
    tclass = seed_demo_shop()
    cast = pick_customer()
    customer = Customer.objects.get(customer_id=cast.customer_id)
    ticket = ticket_create(customer=customer, ticket_class=tclass, subject="Cracked air fryer and other orders")
    return {"cast": cast, "ticket": ticket, "refunds_before": set(Refund.objects.values_list("pk", flat=True))}


def _compactions(ticket: Ticket) -> int:
    return CompactionRun.objects.filter(ticket=ticket, status__in=[CompactionRun.Status.SUCCEEDED,
                                                                   CompactionRun.Status.FALLBACK]).count()


def _refunds(before: set[int]) -> list[tuple[str, int]]:
    return [(r.order.number, r.amount_cents) for r in
            Refund.objects.exclude(pk__in=before).select_related("order").order_by("pk")]


def run_and_judge(ticket, cast: Cast, before: set[int], gateway=None) -> list[str]:
    """Replay the conversation; what went wrong, judged from the shop's tables and the replies."""
    problems = []
    replies = replay(ticket, cast, stop=STATUS_QUESTION, gateway=gateway)
    compacted = _compactions(ticket)
    if compacted < 3:
        problems.append(f"only {compacted} compaction(s) before the status question")
    if _refunds(before) != [(cast.fryer, 4000), (cast.fourth, 2500), (cast.placed, Order.objects.get(
            number=cast.placed).total_cents)]:
        problems.append(f"refunds before the status question: {_refunds(before)}")
    settled = _refunds(before)
    replies += replay(ticket, cast, start=STATUS_QUESTION, gateway=gateway)

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
    if not (Cancellation.objects.filter(order__number=cast.placed).exists()
            and Return.objects.filter(order__number=cast.lamp).exists()):
        problems.append("the cancellation or the lamp's return is missing")
    if Customer.objects.get(customer_id=cast.customer_id).contacts.filter(kind="email").exists():
        problems.append("emailed a customer who asked never to be emailed")
    return problems


def test_the_reported_conversation_moves_money_only_where_asked_and_answers_the_status_question(demo):
    assert run_and_judge(demo["ticket"], demo["cast"], demo["refunds_before"]) == []


class RefundsTheChargerWhenAsked:
    """The reported fault: the offline model, except that "Is the refund for the air fryer done?" is met
    with a refund on the parcel still in transit."""

    def __init__(self, cast: Cast):
        self.inner, self.cast = OfflineModel(), cast

    def complete(self, request: ModelRequest) -> ModelResponse:
        last = request.messages[-1]
        if last.role == "user" and last.content == SCRIPT[STATUS_QUESTION]:
            order = Order.objects.get(number=self.cast.transit2)
            return ModelResponse(tool_calls=[ToolCall(id="wrong-refund", name="issue_refund", arguments={
                "order_number": order.number, "amount": f"{order.total_cents / 100:.2f}", "currency": order.currency,
                "reason": "refund asked about"})])
        return self.inner.complete(request)


def test_negative_control_the_judge_catches_the_reported_refund_when_the_consent_guard_is_off(demo, monkeypatch):
    monkeypatch.setattr(consent, "check_consent", lambda **kw: consent.ConsentVerdict(True, evidence="control"))
    gateway = Gateway(override=RefundsTheChargerWhenAsked(demo["cast"]))
    problems = run_and_judge(demo["ticket"], demo["cast"], demo["refunds_before"], gateway=gateway)
    transit2 = demo["cast"].transit2
    assert any(p.startswith("refunds after the status question") and transit2 in p for p in problems), problems
    assert any(p.startswith("money moved on orders nobody asked about") for p in problems), problems
