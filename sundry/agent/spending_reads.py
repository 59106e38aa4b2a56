"""Reads for the running-total approval threshold: what a customer's tickets moved or hold.

Executed money is read from the actions lane's stored results by their `moves_money`
declarations (a cancellation's refund counts as a refund); pending money from the
held calls still waiting for staff. The customer's row lock serialises the money
calls of one customer's tickets, so two tickets cannot each see the other's refund
as not yet made.
"""

from __future__ import annotations

from datetime import timedelta

from django.utils import timezone
from pydantic import ValidationError

from sundry.agent.models import HeldAction
from sundry.agent.spending import EXECUTED, PENDING, Spent, Window, call_money, moves_money
from sundry.context.lanes import MoneyData
from sundry.context.models import ActionTaken, MoneyTotal
from sundry.tickets.models import Ticket
from sundry.tooling.declarations import money_moved
from sundry.tooling.tools import REGISTRY


def customer_lock(customer_pk: int) -> None:
    """Hold the customer's row until the caller's transaction ends (taken after the ticket's row).
    The customer model is whatever a ticket's customer is: read through the relation, not imported."""
    customers = Ticket._meta.get_field("customer").related_model
    list(customers.objects.select_for_update().filter(pk=customer_pk).values_list("pk", flat=True))


def _money_tools() -> list[str]:
    return [name for name, tool in REGISTRY.items() if moves_money(tool) or "amount" in tool.args_model.model_fields]


def window_for(ticket) -> Window:
    """What the ticket's customer refunded over the class's window, and what is held to be refunded."""
    hours = ticket.ticket_class.approval_window_hours
    since = timezone.now() - timedelta(hours=hours)
    names = _money_tools()
    spent: list[Spent] = []
    actions = ActionTaken.objects.filter(ticket__customer_id=ticket.customer_id, created_at__gte=since,
                                         tool__in=names).values_list("ticket_id", "tool", "result", "turn",
                                                                     "target", "amount_cents", "currency")
    for ticket_id, name, result, turn, target, amount, currency in actions:
        try:
            moved = money_moved(REGISTRY[name].result_model.model_validate(result))
        except ValidationError:  # a result stored by an older schema: the amount the action recorded
            moved = []
            if amount:
                spent.append(Spent(target, currency, amount, EXECUTED, ticket_id, f"turn {turn}"))
        spent += [Spent(m.order, m.currency, m.amount_cents, EXECUTED, ticket_id, f"turn {turn}") for m in moved]
    held = HeldAction.objects.filter(ticket__customer_id=ticket.customer_id, tool__in=names,
                                     status__in=(HeldAction.Status.PENDING, HeldAction.Status.APPROVED))
    lanes: dict[int, list[MoneyData]] = {}
    for pk, ticket_id, name, arguments in held.values_list("pk", "ticket_id", "tool", "arguments"):
        try:
            args = REGISTRY[name].args_model.model_validate(arguments)
        except ValidationError:
            continue
        if ticket_id not in lanes:
            lanes[ticket_id] = [MoneyData(*row) for row in MoneyTotal.objects.filter(ticket_id=ticket_id).values_list(
                "order", "currency", "paid_cents", "refunded_cents")]
        money = call_money(REGISTRY[name], args, lanes[ticket_id])
        if money is not None and money.cents:
            spent.append(Spent(money.order, money.currency, money.cents, PENDING, ticket_id, f"hold #{pk}"))
    return Window(hours=hours, spent=tuple(spent))
