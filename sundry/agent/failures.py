"""What staff see when a run could not finish: an error turn in the conversation and the
ticket flagged for attention. The claim is released by the run itself (`loop.agent_run`
lets go in a `finally`), or lapses if its worker died.

`flag` appends a reason to the ticket's attention line instead of replacing one already
there, so one cause never hides another.
"""

from __future__ import annotations

import logging

from django.db import transaction

from sundry.agent import outbox
from sundry.tickets.models import Ticket, Turn
from sundry.tickets.services import turn_append
from sundry.tickets.versions import ticket_lock

log = logging.getLogger("sundry.agent")

ATTENTION_MAX = Ticket._meta.get_field("attention").max_length


def flag(ticket_id: int, reason: str) -> None:
    """Add `reason` to the ticket's attention line (inside the caller's transaction)."""
    current = Ticket.objects.filter(pk=ticket_id).values_list("attention", flat=True).first() or ""
    if reason in current:
        return
    joined = f"{current} · {reason}" if current else reason
    Ticket.objects.filter(pk=ticket_id).update(attention=joined[:ATTENTION_MAX])


def run_failed(ticket_id: int, reason: str) -> None:
    """A run stopped without answering (a time limit, an unexpected error, retries used up)."""
    with transaction.atomic():
        ticket_lock(ticket_id)  # lock order: the ticket row first
        ticket = Ticket.objects.select_related("ticket_class").get(pk=ticket_id)
        turn_append(ticket=ticket, author=Turn.Author.SYSTEM, kind=Turn.Kind.ERROR,
                    text=f"The agent's run stopped before it answered ({reason}). "
                         "Staff: please reply by hand, or hand the ticket back to the agent to try again.",
                    payload={"run_failed": reason})
        flag(ticket_id, f"Agent run stopped: {reason}"[:120])
        # Staff have it now: the sweep must not start the same run over and over.
        outbox.settle(ticket_id, ticket.last_turn_number)


def run_recovered(ticket: Ticket) -> None:
    """A run took over a lapsed claim: the run before it died (its worker was lost)."""
    with transaction.atomic():
        turn_append(ticket=ticket, author=Turn.Author.SYSTEM, kind=Turn.Kind.ERROR,
                    text="The previous agent run stopped unexpectedly (its worker was lost); "
                         "a new run has taken the ticket over.",
                    payload={"recovered": True})
        flag(ticket.pk, "Agent run recovered after a lost worker")
