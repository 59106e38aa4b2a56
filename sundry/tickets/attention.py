"""A ticket's attention flag: one reason for staff to look, set by whoever saw it first.

One cause never overwrites another (a breaker alert outlives a later model
failure); a cause that resolves itself clears only its own flag.
"""

from __future__ import annotations

from sundry.tickets.models import Ticket

# The agent's own flags when the model cannot be reached; a later step that reaches it clears them.
MODEL_UNAVAILABLE = "Model unavailable"


def attention_flag(ticket_id: int, text: str) -> bool:
    """Flag the ticket unless another cause already holds the flag. Returns whether this one was set."""
    return bool(Ticket.objects.filter(pk=ticket_id, attention="").update(attention=text[:200]))


def attention_clear(ticket_id: int, prefix: str) -> bool:
    """Clear the flag if `prefix` raised it (its cause is resolved). Returns whether it was cleared."""
    return bool(Ticket.objects.filter(pk=ticket_id, attention__startswith=prefix).update(attention=""))
