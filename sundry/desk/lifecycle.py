"""A ticket's life: opened for a customer, resolved, closed or reopened.

These writes reach into the lanes (the customer's ID in the ledger, rules that carry over or
close with the ticket), so they sit above them; the ticket record below only appends and bumps.
"""

from __future__ import annotations

from django.db import transaction

from sundry.context.services import ledger_record_system_id, rule_close_scope, rules_carry_customer_scope
from sundry.tickets.events import ticket_created
from sundry.tickets.models import Ticket, TicketClass, Turn
from sundry.tickets.services import MessageRefused, turn_append
from sundry.tickets.versions import ticket_update


def ticket_create(*, customer, ticket_class: TicketClass, subject: str) -> Ticket:
    with transaction.atomic():
        ticket = Ticket.objects.create(customer=customer, ticket_class=ticket_class, subject=subject[:200])
        # The desk knows who the customer is: their ID enters the ledger as verified.
        ledger_record_system_id(ticket=ticket, kind="customer", value=customer.external_key, role="customer", turn=0)
        # "Never email me" said on an earlier ticket still holds on this one.
        rules_carry_customer_scope(ticket=ticket)
        ticket_created(ticket.pk)  # news for the desk's open queues, after commit
    return ticket


def ticket_set_status(*, ticket: Ticket, status: str, user=None) -> Ticket:
    """Resolve, close or reopen a ticket. Resolving closes the ticket's and its orders' rule scopes."""
    if status not in Ticket.Status.values:
        raise MessageRefused(f"Status must be one of {', '.join(Ticket.Status.values)}.")
    with transaction.atomic():
        ticket_update(ticket.pk, status=status)
        ticket.status = status
        who = user.get_username() if user else "the system"
        turn = turn_append(
            ticket=ticket,
            author=Turn.Author.SYSTEM,
            kind=Turn.Kind.EVENT,
            text=f"{who} set the ticket to {status}.",
            payload={"status": status},
        )
        if status in (Ticket.Status.RESOLVED, Ticket.Status.CLOSED):
            for scope in ("ticket", "order"):
                rule_close_scope(ticket=ticket, scope=scope, turn=turn.number)
    return ticket
