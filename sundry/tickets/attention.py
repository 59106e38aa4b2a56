"""A ticket's attention flag: one reason for staff to look, set by whoever saw it first.

One cause never overwrites another (a breaker alert outlives a later model
failure); a cause that resolves itself clears only its own flag.
"""

from __future__ import annotations

from django.db import transaction

from sundry.tickets.models import Ticket, Turn

# The agent's own flags when the model cannot be reached; a later step that reaches it clears them.
MODEL_UNAVAILABLE = "Model unavailable"


def attention_flag(ticket_id: int, text: str) -> bool:
    """Flag the ticket unless another cause already holds the flag. Returns whether this one was set."""
    return bool(Ticket.objects.filter(pk=ticket_id, attention="").update(attention=text[:200]))


def attention_clear(ticket_id: int, prefix: str) -> bool:
    """Clear the flag if `prefix` raised it (its cause is resolved). Returns whether it was cleared."""
    return bool(Ticket.objects.filter(pk=ticket_id, attention__startswith=prefix).update(attention=""))


def attention_dismiss(*, ticket: Ticket, user, shown: str) -> bool:
    """Staff dealt with the flag they were shown: it clears, and the turn log says who cleared what.

    Only the flag as shown clears: one raised meanwhile by another cause stays for staff to read.
    Returns whether it was cleared.
    """
    from sundry.tickets.services import turn_append

    with transaction.atomic():
        cleared = Ticket.objects.filter(pk=ticket.pk, attention=shown).exclude(attention="").update(attention="")
        if cleared:
            turn_append(ticket=ticket, author=Turn.Author.SYSTEM, kind=Turn.Kind.EVENT,
                        text=f"{user.get_username()} cleared the flag: {shown}", payload={"attention_cleared": shown})
    return bool(cleared)
