"""Writes to tickets and turns. Every write bumps the ticket's version."""

from __future__ import annotations

import json

from django.conf import settings
from django.db import transaction

from sundry.core.tokens import count_tokens, encoding_name_for
from sundry.context.services import ledger_record_system_id, rule_close_scope, rules_carry_customer_scope
from sundry.live.events import ticket_changed
from sundry.tickets.models import Ticket, TicketClass, Turn
from sundry.tickets.versions import bump, ticket_lock, ticket_touch  # noqa: F401  (ticket_lock, ticket_touch: part of this module's API)


class MessageRefused(ValueError):
    """A message that cannot be accepted; the text says why and names the limit."""


def validate_message_text(text: str) -> str:
    cleaned = (text or "").strip()
    if not cleaned:
        raise MessageRefused("The message is empty. Type something before sending.")
    limit = settings.MAX_MESSAGE_CHARS
    if len(cleaned) > limit:
        raise MessageRefused(
            f"The message is {len(cleaned):,} characters; the limit is {limit:,}. Split it into shorter messages."
        )
    return cleaned


def ticket_create(*, customer, ticket_class: TicketClass, subject: str) -> Ticket:
    with transaction.atomic():
        ticket = Ticket.objects.create(customer=customer, ticket_class=ticket_class, subject=subject[:200])
        # The desk knows who the customer is: their ID enters the ledger as verified.
        ledger_record_system_id(ticket=ticket, kind="customer", value=customer.customer_id, role="customer", turn=0)
        # "Never email me" said on an earlier ticket still holds on this one.
        rules_carry_customer_scope(ticket=ticket)
    return ticket


def ticket_set_status(*, ticket: Ticket, status: str, user=None) -> Ticket:
    """Resolve, close or reopen a ticket. Resolving closes the ticket's and its orders' rule scopes."""
    if status not in Ticket.Status.values:
        raise MessageRefused(f"Status must be one of {', '.join(Ticket.Status.values)}.")
    with transaction.atomic():
        Ticket.objects.filter(pk=ticket.pk).update(status=status)
        ticket.status = status
        who = user.get_username() if user else "the system"
        turn = turn_append(ticket=ticket, author=Turn.Author.SYSTEM, kind=Turn.Kind.EVENT,
                           text=f"{who} set the ticket to {status}.", payload={"status": status})
        if status in (Ticket.Status.RESOLVED, Ticket.Status.CLOSED):
            for scope in ("ticket", "order"):
                rule_close_scope(ticket=ticket, scope=scope, turn=turn.number)
    return ticket


def _calls_tokens(payload: dict | None, model: str) -> int:
    """A tool-call turn's weight is mostly its calls, not its (often empty) text."""
    calls = (payload or {}).get("calls")
    return count_tokens(json.dumps(calls, ensure_ascii=False), model) if calls else 0


def turn_append(
    *, ticket: Ticket, author: str, kind: str = Turn.Kind.MESSAGE, text: str = "", payload: dict | None = None,
    client_key: str = "",
) -> Turn:
    """Append a turn with the next number, its token count and the ticket's version bump.

    Numbering comes from the ticket row's own counter, bumped under its row
    lock, so concurrent writers (the agent worker and a customer message)
    never collide. The ticket object is kept current (turn counter, version).
    """
    model = ticket.ticket_class.working_model
    tokens = count_tokens(text, model) + _calls_tokens(payload, model)
    # No savepoint of its own: a failure here fails the caller's whole transaction.
    with transaction.atomic(savepoint=False):
        number, version = bump(ticket.pk, turn=True)
        turn = Turn.objects.create(ticket=ticket, number=number, author=author, kind=kind, text=text,
                                   payload=payload or {}, tokens=tokens, encoding=encoding_name_for(model),
                                   client_key=client_key)
        ticket_changed(ticket.pk)
    ticket.last_turn_number, ticket.version = number, version
    return turn
