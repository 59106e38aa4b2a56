"""Reads for the running-total approval threshold: what a customer's tickets moved or hold.

Executed money is read from the actions lane's stored results by their `moves_money`
declarations (a cancellation's refund counts as a refund); pending money from the
held calls still waiting for staff. The customer's row lock serialises the money
calls of one customer's tickets, so two tickets cannot each see the other's refund
as not yet made.
"""

from __future__ import annotations

from datetime import timedelta

from django.db.models import Q
from django.utils import timezone
from pydantic import ValidationError

from sundry.agent.guards.spending import EXECUTED, PENDING, Spent, Window, call_money, moves_money
from sundry.agent.models import HeldAction
from sundry.context.lanes import MoneyData
from sundry.context.models import ActionTaken, MoneyTotal
from sundry.tickets.models import Ticket
from sundry.tooling.declarations import money_moved
from sundry.tooling.tools import REGISTRY, Tool


def customer_lock(customer_pk: int) -> None:
    """Hold the customer's row until the caller's transaction ends (taken after the ticket's row).
    The customer model is whatever a ticket's customer is: read through the relation, not imported."""
    customers = Ticket._meta.get_field("customer").related_model
    list(customers.objects.select_for_update().filter(pk=customer_pk).values_list("pk", flat=True))


def _money_tools(tools: dict[str, Tool]) -> list[str]:
    return [name for name, tool in tools.items() if moves_money(tool) or "amount" in tool.args_model.model_fields]


def window_for(ticket, tools: dict[str, Tool] | None = None) -> Window:
    """What the ticket's customer refunded over the class's window, and what is held to be refunded.

    Executed money is every action that recorded an amount, wherever its tool lives (a tool
    server's cancellation included); an in-process tool's result is read again by its model, which
    places each movement on its order. `tools`: the class's tools when they are not only the
    registry's (a class with tool servers), for its held calls."""
    hours = ticket.ticket_class.approval_window_hours
    since = timezone.now() - timedelta(hours=hours)
    tools = {**REGISTRY, **(tools or {})}
    names = _money_tools(tools)
    spent: list[Spent] = []
    actions = ActionTaken.objects.filter(
        Q(tool__in=names) | Q(amount_cents__gt=0),
        ticket__customer_id=ticket.customer_id,
        created_at__gte=since,
    ).values_list("ticket_id", "tool", "result", "turn", "target", "amount_cents", "currency")
    for ticket_id, name, result, turn, target, amount, currency in actions:
        moved = None
        if name in REGISTRY and moves_money(REGISTRY[name]):
            try:
                moved = money_moved(REGISTRY[name].result_model.model_validate(result))
            except ValidationError:  # a result stored by an older schema: the amount the action recorded
                moved = None
        if moved is None:  # the amount the action recorded (a tool server's, read by its declaration file)
            if amount:
                spent.append(Spent(target, currency, amount, EXECUTED, ticket_id, f"turn {turn}"))
            continue
        spent += [Spent(m.order, m.currency, m.amount_cents, EXECUTED, ticket_id, f"turn {turn}") for m in moved]
    held = HeldAction.objects.filter(
        ticket__customer_id=ticket.customer_id,
        tool__in=names,
        status__in=(HeldAction.Status.PENDING, HeldAction.Status.APPROVED),
    )
    lanes: dict[int, list[MoneyData]] = {}
    for pk, ticket_id, name, arguments in held.values_list("pk", "ticket_id", "tool", "arguments"):
        try:
            args = tools[name].args_model.model_validate(arguments)
        except ValidationError:
            continue
        if ticket_id not in lanes:
            lanes[ticket_id] = [
                MoneyData(*row)
                for row in MoneyTotal.objects.filter(ticket_id=ticket_id).values_list(
                    "order", "currency", "paid_cents", "refunded_cents"
                )
            ]
        money = call_money(tools[name], args, lanes[ticket_id])
        if money is not None and money.cents:
            spent.append(Spent(money.order, money.currency, money.cents, PENDING, ticket_id, f"hold #{pk}"))
    return Window(hours=hours, spent=tuple(spent))
