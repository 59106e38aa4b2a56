"""A ticket's attention flag: one reason for staff to look, set by whoever saw it first.

One cause never overwrites another (a breaker alert outlives a later model
failure); a cause that resolves itself clears only its own flag; staff clear
the flag they read. Every change bumps the ticket's version and pushes it.
"""

from __future__ import annotations

from django.db import transaction

from sundry.tickets.models import Turn
from sundry.tickets.services import turn_append
from sundry.tickets.versions import ticket_update

# The agent's flag when the model cannot be reached; a later step that reaches it clears it.
MODEL_UNAVAILABLE = "Model unavailable"


def attention_flag(ticket_id: int, text: str) -> bool:
    """Flag the ticket unless another cause already holds the flag. Returns whether this one was set."""
    return ticket_update(ticket_id, where={"attention": ""}, attention=text[:200])


def attention_clear(ticket_id: int, prefix: str) -> bool:
    """Clear the flag if `prefix` raised it (its cause is resolved). Returns whether it was cleared."""
    return ticket_update(ticket_id, where={"attention__startswith": prefix}, attention="")


def attention_dismiss(*, ticket, user, shown: str) -> bool:
    """Staff dealt with the flag they were shown: it clears, and the turn log says who cleared what.

    Only the flag as shown clears: one raised meanwhile by another cause stays for staff to read.
    Returns whether it was cleared.
    """
    if not shown:
        return False
    with transaction.atomic():
        cleared = ticket_update(ticket.pk, where={"attention": shown}, attention="")
        if cleared:
            turn_append(ticket=ticket, author=Turn.Author.SYSTEM, kind=Turn.Kind.EVENT,
                        text=f"{user.get_username()} cleared the flag: {shown}", payload={"attention_cleared": shown})
    return cleared
