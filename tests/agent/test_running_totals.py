"""Approval thresholds apply to running totals, and a held call runs at most once.

Through the real loop on the database with an obedient scripted model (it makes
whatever calls it is given, as an injected model would); judged from the shop's
refunds table. The class holds refunds above 8,000.00 INR; its window is 24 h.
Every refund here is one the customer asked for, so they confirm its card
(`customer_confirms`): a confirmed call goes through the thresholds again, and
that second judgement is what is under test.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.utils import timezone

from sundry.agent import holds, spending_reads
from sundry.agent.guards import spending
from sundry.agent.loop import agent_run
from sundry.agent.models import Confirmation, HeldAction
from sundry.agent.provider.gateway import Gateway
from sundry.agent.provider.scripted import ScriptedModel
from sundry.agent.services import customer_message_post, held_action_decide
from sundry.context.models import ActionTaken
from sundry.desk.lifecycle import ticket_create
from sundry.shop.models import Order, Product, Refund
from sundry.tickets.models import Turn
from sundry.tooling.messages import ModelResponse, ToolCall
from tests.factories import CustomerFactory, TicketClassFactory, customer_confirms, paid_order

pytestmark = pytest.mark.django_db

RULES = {"issue_refund": {"above": {"INR": 800000, "USD": 10000}}}


def call(name, _id="c1", **arguments):
    return ModelResponse(tool_calls=[ToolCall(id=_id, name=name, arguments=arguments)])


def run(ticket, *steps):
    model = ScriptedModel([*steps, ModelResponse(text="Thank you for your patience.")])
    agent_run(ticket.pk, gateway=Gateway(override=model))
    assert model.remaining == 0, "the run stopped before the script ended"
    return model


def run_and_confirm(ticket, *steps, cards=1):
    """The run proposes `cards` cards (nothing moves yet); the customer, who asked for them, presses
    Confirm on each, oldest first. Returns the decided cards."""
    before = Refund.objects.count()
    run(ticket, *steps)
    assert Refund.objects.count() == before, "a money call ran before the customer confirmed it"
    decided = customer_confirms(ticket)
    assert len(decided) == cards, decided
    return decided


def _named(order: Order, name: str) -> Order:
    Product.objects.filter(pk=order.items.order_by("pk").first().product_id).update(name=name)
    return order


@pytest.fixture
def shop():
    customer = CustomerFactory()
    tclass = TicketClassFactory(approval_rules=RULES, approval_window_hours=24)
    return {"customer": customer, "class": tclass}


def _ticket(shop, subject="Refund"):
    return ticket_create(customer=shop["customer"].person, ticket_class=shop["class"], subject=subject)


def _refund_7999_on(shop, order: Order, n: int):
    ticket = _ticket(shop, f"Blender refund {n}")
    customer_message_post(
        ticket=ticket, text=f"Please refund 7999 INR on {order.number}, the blender is damaged.", wake=False
    )
    run_and_confirm(
        ticket,
        call("get_order", f"g{n}", order_number=order.number),
        call(
            "issue_refund",
            f"r{n}",
            order_number=order.number,
            amount="7999.00",
            currency="INR",
            reason="damaged blender",
        ),
    )
    return ticket


def _refunded(order: Order) -> list[int]:
    return sorted(Refund.objects.filter(order=order).values_list("amount_cents", flat=True))


def test_three_tickets_refunding_7999_inr_on_one_order_run_one_and_hold_the_rest(shop):
    order = _named(paid_order(customer=shop["customer"], currency="INR", prices=(2500000,)), "Countertop Blender")
    tickets = [_refund_7999_on(shop, order, n) for n in range(3)]
    # Each call alone is under 8,000.00 INR; together they are 23,997.00 INR.
    assert _refunded(order) == [799900]
    held = HeldAction.objects.get(tool="issue_refund")
    assert held.ticket_id == tickets[1].pk and held.status == HeldAction.Status.PENDING
    assert f"makes 15,998.00 INR on {order.number} in 24 h" in held.reason, held.reason
    # The third asks for the very refund the second holds: it joins that hold instead of a second one.
    result = Turn.objects.get(ticket=tickets[2], kind=Turn.Kind.TOOL_RESULT, payload__held=held.pk)
    assert f"already awaiting staff approval (hold #{held.pk} on ticket #{tickets[1].pk})" in result.text


def test_a_different_amount_counts_the_pending_hold_too(shop):
    order = _named(paid_order(customer=shop["customer"], currency="INR", prices=(2500000,)), "Countertop Blender")
    for n in range(2):
        _refund_7999_on(shop, order, n)
    ticket = _ticket(shop, "A little more")
    customer_message_post(
        ticket=ticket, text=f"Please refund 100 INR on {order.number}, the blender lid is loose.", wake=False
    )
    run_and_confirm(
        ticket,
        call("get_order", "g", order_number=order.number),
        call("issue_refund", "r", order_number=order.number, amount="100.00", currency="INR", reason="lid"),
    )
    assert _refunded(order) == [799900]
    reason = HeldAction.objects.get(ticket=ticket).reason
    assert "16,098.00" in reason and "7,999.00 INR refunded and 7,999.00 INR held already" in reason, reason


def test_negative_control_without_the_running_total_all_three_refunds_run(shop, monkeypatch):
    # The check can fail: judged call by call (the old behaviour), 23,997.00 INR leaves with no approval.
    monkeypatch.setattr(spending_reads, "window_for", lambda ticket, tools=None: spending.Window(hours=24))
    order = _named(paid_order(customer=shop["customer"], currency="INR", prices=(2500000,)), "Countertop Blender")
    for n in range(3):
        _refund_7999_on(shop, order, n)
    assert _refunded(order) == [799900] * 3
    assert not HeldAction.objects.exists()


def test_refunds_older_than_the_window_do_not_count(shop):
    order = _named(paid_order(customer=shop["customer"], currency="INR", prices=(2500000,)), "Countertop Blender")
    _refund_7999_on(shop, order, 0)
    ActionTaken.objects.update(created_at=timezone.now() - timedelta(hours=25))
    _refund_7999_on(shop, order, 1)
    assert _refunded(order) == [799900, 799900] and not HeldAction.objects.exists()


def test_full_refunds_of_every_delivered_order_run_until_the_customer_total_passes_the_threshold(shop):
    # Asked for one by one, each refund is confirmed by the customer on its card; what is under test is
    # the amount the confirmed calls add up to.
    names = ["Air Fryer", "Coffee Grinder", "Desk Lamp"]
    orders = [_named(paid_order(customer=shop["customer"], currency="INR", prices=(300000,)), name) for name in names]
    ticket = _ticket(shop, "Refund everything")
    for i, (order, name) in enumerate(zip(orders, names)):
        customer_message_post(ticket=ticket, text=f"Please refund the {name.lower()} in full too.", wake=False)
        steps = [call("search_orders", f"s{i}", customer_id=shop["customer"].customer_id)] if i == 0 else []
        run_and_confirm(
            ticket,
            *steps,
            call("get_order", f"g{i}", order_number=order.number),
            call("issue_refund", f"r{i}", order_number=order.number, amount="3000.00", currency="INR", reason="asked"),
        )
    # Two full refunds (6,000.00 INR) stay within 8,000.00; the third would make 9,000.00 for the customer.
    assert [len(_refunded(o)) for o in orders] == [1, 1, 0]
    held = HeldAction.objects.get()
    assert held.arguments["order_number"] == orders[2].number
    assert "makes 9,000.00 INR for this customer in 24 h" in held.reason, held.reason


def test_a_cancellation_refund_counts_and_is_held_by_the_refund_threshold(shop):
    # cancel_order has no rule of its own; the refund inside its result is money all the same.
    placed = _named(
        paid_order(customer=shop["customer"], currency="INR", prices=(1659600,), status=Order.Status.PLACED),
        "Espresso Machine",
    )
    small = _named(
        paid_order(customer=shop["customer"], currency="INR", prices=(613800,), status=Order.Status.PLACED), "Kettle"
    )
    ticket = _ticket(shop, "Cancel")
    customer_message_post(
        ticket=ticket,
        text=f"Cancel {placed.number} and {small.number} please, the espresso machine and the kettle.",
        wake=False,
    )
    run_and_confirm(
        ticket,
        call("get_order", "g1", order_number=placed.number),
        call("get_order", "g2", order_number=small.number),
        call("cancel_order", "x2", order_number=small.number, reason="asked"),
        call("cancel_order", "x1", order_number=placed.number, reason="asked"),
        cards=2,
    )
    # 16,596.00 INR is above the refund threshold by itself; 6,138.00 INR is not, and runs.
    assert _refunded(placed) == [] and _refunded(small) == [613800]
    held = HeldAction.objects.get()
    assert held.tool == "cancel_order" and "16,596.00" in held.reason
    # Executed cancellation money counts later: a 2,000.00 INR refund now makes 8,138.00 for the customer.
    third = _named(paid_order(customer=shop["customer"], currency="INR", prices=(500000,)), "Toaster")
    ticket2 = _ticket(shop, "Toaster")
    customer_message_post(
        ticket=ticket2, text=f"Please refund 2000 INR on {third.number}, the toaster is dented.", wake=False
    )
    run_and_confirm(
        ticket2,
        call("get_order", "g3", order_number=third.number),
        call("issue_refund", "r3", order_number=third.number, amount="2000.00", currency="INR", reason="dented"),
    )
    assert _refunded(third) == []
    # The pending cancellation (16,596.00) counts too.
    reason = HeldAction.objects.get(tool="issue_refund").reason
    assert "6,138.00 INR refunded and 16,596.00 INR held already" in reason, reason


def test_each_currency_has_its_own_running_total(shop):
    inr = _named(paid_order(customer=shop["customer"], currency="INR", prices=(1000000,)), "Blender")
    usd = _named(paid_order(customer=shop["customer"], currency="USD", prices=(20000,)), "Mixer")
    ticket = _ticket(shop, "Two refunds")
    customer_message_post(
        ticket=ticket,
        text=f"Refund 7000 INR on {inr.number} for the blender and 90 USD on {usd.number} for the mixer.",
        wake=False,
    )
    run_and_confirm(
        ticket,
        call("get_order", "g1", order_number=inr.number),
        call("get_order", "g2", order_number=usd.number),
        call("issue_refund", "r1", order_number=inr.number, amount="7000.00", currency="INR", reason="asked"),
        call("issue_refund", "r2", order_number=usd.number, amount="90.00", currency="USD", reason="asked"),
        cards=2,
    )
    # 7,000 INR and 90 USD are each under their own currency's threshold: no sum across currencies.
    assert _refunded(inr) == [700000] and _refunded(usd) == [9000]
    assert not HeldAction.objects.exists()


# --- approvals run once ----------------------------------------------------------------------


@pytest.fixture
def staff():
    return get_user_model().objects.create_user("boss", password="x", is_staff=True)


def _two_holds_of_one_refund(shop):
    """One 9,000.00 INR refund held twice: the model words its reason differently the second time,
    and a second ticket asks for the same refund."""
    order = _named(paid_order(customer=shop["customer"], currency="INR", prices=(2500000,)), "Countertop Blender")
    tickets = []
    for n, reason in enumerate(["damaged blender", "arrived broken"]):
        ticket = _ticket(shop, f"Blender {n}")
        customer_message_post(
            ticket=ticket, text=f"Please refund 9000 INR on {order.number}, the blender is broken.", wake=False
        )
        run_and_confirm(
            ticket,
            call("get_order", f"g{n}", order_number=order.number),
            call("issue_refund", f"r{n}", order_number=order.number, amount="9000.00", currency="INR", reason=reason),
        )
        tickets.append(ticket)
    return order, tickets


def test_a_second_hold_of_the_same_refund_joins_the_pending_one(shop):
    order, tickets = _two_holds_of_one_refund(shop)
    held = HeldAction.objects.get()  # one row, not two
    assert held.ticket_id == tickets[0].pk
    second = Turn.objects.get(ticket=tickets[1], kind=Turn.Kind.TOOL_RESULT, payload__held=held.pk)
    assert "already awaiting staff approval" in second.text and f"hold #{held.pk}" in second.text


def test_two_equal_holds_approved_run_once(shop, staff):
    order, tickets = _two_holds_of_one_refund(shop)
    first = HeldAction.objects.get()
    # A second equal hold as it could exist from before the merge (or made by hand): both approved.
    twin = HeldAction.objects.create(
        ticket=tickets[1],
        tool="issue_refund",
        arguments=dict(first.arguments, reason="arrived broken"),
        call_id="r1",
        reason="held",
        turn=1,
        idempotency_key="twin-of-first",
    )
    one = held_action_decide(held_id=first.pk, ticket=tickets[0], approve=True, user=staff, wake=False)
    two = held_action_decide(held_id=twin.pk, ticket=tickets[1], approve=True, user=staff, wake=False)
    assert (one.status, two.status) == (HeldAction.Status.EXECUTED, HeldAction.Status.REFUSED)
    assert f"hold #{first.pk}" in two.outcome and "not run" in two.outcome
    assert _refunded(order) == [900000]
    event = Turn.objects.get(ticket=tickets[1], number=two.result_turn)
    assert "already approved and executed" in event.text


def test_a_hold_equal_to_an_executed_one_is_refused_with_the_reason(shop, staff):
    order, tickets = _two_holds_of_one_refund(shop)
    held = HeldAction.objects.get()
    held_action_decide(held_id=held.pk, ticket=tickets[0], approve=True, user=staff, wake=False)
    ticket = _ticket(shop, "Again")
    customer_message_post(
        ticket=ticket, text=f"Please refund 9000 INR on {order.number}, the blender is broken.", wake=False
    )
    run(
        ticket,
        call("get_order", "g9", order_number=order.number),
        call("issue_refund", "r9", order_number=order.number, amount="9000.00", currency="INR", reason="again"),
    )
    # No card is put before the customer for a call that already ran: it could only be refused.
    assert not Confirmation.objects.filter(ticket=ticket).exists()
    assert HeldAction.objects.count() == 1 and _refunded(order) == [900000]
    refusal = Turn.objects.get(ticket=ticket, kind=Turn.Kind.REJECTION)
    assert "already approved and executed" in refusal.text and f"hold #{held.pk}" in refusal.text


def test_negative_control_without_the_equal_hold_check_both_approvals_run(shop, staff, monkeypatch):
    monkeypatch.setattr(holds, "already_done", lambda held, customer_pk, lookup=None: "")
    order, tickets = _two_holds_of_one_refund(shop)
    first = HeldAction.objects.get()
    twin = HeldAction.objects.create(
        ticket=tickets[1],
        tool="issue_refund",
        arguments=dict(first.arguments),
        call_id="r1",
        reason="held",
        turn=1,
        idempotency_key="twin-of-first",
    )
    held_action_decide(held_id=first.pk, ticket=tickets[0], approve=True, user=staff, wake=False)
    held_action_decide(held_id=twin.pk, ticket=tickets[1], approve=True, user=staff, wake=False)
    assert _refunded(order) == [900000, 900000]


# --- the arithmetic, without the database ------------------------------------------------------


def test_window_totals_are_per_order_per_customer_and_per_currency():
    window = spending.Window(
        hours=24,
        spent=(
            spending.Spent("SU-1", "INR", 799900, spending.EXECUTED, 1),
            spending.Spent("SU-1", "INR", 100, spending.PENDING, 2),
            spending.Spent("SU-2", "INR", 50000, spending.EXECUTED, 3),
            spending.Spent("SU-3", "USD", 9000, spending.EXECUTED, 3),
        ),
    )
    assert window.before("SU-1", "INR")[:2] == (800000, 850000)
    assert window.before("SU-3", "usd")[:2] == (9000, 9000)
    # Exactly at the threshold passes; one paisa over is held, and the reason names the scope.
    assert spending.over_limit(window, spending.CallMoney("SU-9", "INR", 0), 850000) == ""
    assert spending.over_limit(window, spending.CallMoney("SU-9", "INR", 1), 850001) == ""
    why = spending.over_limit(window, spending.CallMoney("SU-1", "INR", 1), 800000)
    assert why.startswith("0.01 INR more makes 8,000.01 INR on SU-1 in 24 h") and "100.00" not in why, why
    assert "for this customer" in spending.over_limit(window, spending.CallMoney("SU-9", "INR", 1), 850000)
    # Unknown amounts are not judged here: the guard holds them.
    assert spending.over_limit(window, spending.CallMoney("SU-1", "INR", None), 1) == ""


def test_a_tool_without_a_rule_that_moves_money_is_judged_by_the_money_tools_rules():
    from sundry.agent.guards import approvals

    rules = approvals.money_rules({"issue_refund": {"above_cents": 500}, "send_email": {}})
    assert [r.limit("USD") for r in rules] == [500]  # send_email moves no money
    assert approvals.money_rules({}) == [] and approvals.money_rules({"cancel_order": {}})[0].limit("USD") is None
