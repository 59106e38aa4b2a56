"""Why staff must look at a ticket: the agent's promise that people will follow up, a model
it could not reach, a reply it held, a run it stopped.

`Ticket.attention` holds one line the queue filters on and the desk shows at the
top of the ticket. A follow-up never overwrites another reason to look (a
tripped breaker, a customer's flag): it is added after it, within the field.
No other cause overwrites one either; a cause that resolves itself clears only
its own reason, and staff clear the line they read.
"""

from __future__ import annotations

from django.db import transaction

from sundry.tickets.models import Ticket, Turn
from sundry.tickets.versions import ticket_update
from sundry.tickets.services import turn_append

FOLLOW_UP_PREFIX = "Follow-up promised"
_SEPARATOR = " · "
_LIMIT = Ticket._meta.get_field("attention").max_length


def follow_up_line(reason: str, turn: int) -> str:
    return f"{FOLLOW_UP_PREFIX} (turn {turn}): {' '.join((reason or '').split())}"


def with_follow_up(attention: str, line: str) -> str:
    """The attention text with a follow-up line: replacing an earlier follow-up, after any other reason."""
    kept = without_follow_up(attention)
    text = f"{kept}{_SEPARATOR}{line}" if kept else line
    return text if len(text) <= _LIMIT else text[: _LIMIT - 1] + "…"


def without_follow_up(attention: str) -> str:
    if attention.startswith(FOLLOW_UP_PREFIX):
        return ""
    head, _, _ = attention.partition(_SEPARATOR + FOLLOW_UP_PREFIX)
    return head


def follow_up_request(*, ticket_id: int, reason: str, turn: int) -> str:
    """Flag the ticket for staff follow-up with the reason; returns the attention text now shown."""
    with transaction.atomic():
        ticket = Ticket.objects.select_for_update().only("attention").get(pk=ticket_id)
        attention = with_follow_up(ticket.attention, follow_up_line(reason, turn))
        ticket_update(ticket_id, attention=attention)  # bumps the version, pushes after commit
    return attention


def follow_up_resolve(*, ticket: Ticket, user) -> bool:
    """Staff followed up: the follow-up leaves the attention line (other reasons stay), and the turn log says who."""
    with transaction.atomic():
        current = Ticket.objects.select_for_update().only("attention").get(pk=ticket.pk).attention
        kept = without_follow_up(current)
        if kept == current:
            return False
        Ticket.objects.filter(pk=ticket.pk).update(attention=kept)
        # The event turn bumps the version and pushes after commit (tickets.versions).
        turn_append(ticket=ticket, author=Turn.Author.SYSTEM, kind=Turn.Kind.EVENT,
                    text=f"{user.get_username()} handled the promised follow-up.", payload={"follow_up_resolved": True})
    return True


# The agent's flag when the model cannot be reached; a later step that reaches it clears it.
MODEL_UNAVAILABLE = "Model unavailable"


def attention_flag(ticket_id: int, text: str) -> bool:
    """Flag the ticket unless another cause already holds the flag. Returns whether this one was set."""
    return ticket_update(ticket_id, where={"attention": ""}, attention=text[:_LIMIT])


def attention_clear(ticket_id: int, prefix: str) -> bool:
    """The cause `prefix` names is resolved: its reason leaves the line (a follow-up after it stays).
    Returns whether it was there."""
    with transaction.atomic():
        current = Ticket.objects.select_for_update().filter(pk=ticket_id).values_list("attention", flat=True).first()
        if not current or not current.startswith(prefix):
            return False
        rest = current[len(without_follow_up(current)):].removeprefix(_SEPARATOR)
        return ticket_update(ticket_id, attention=rest)


def attention_dismiss(*, ticket: Ticket, user, shown: str) -> bool:
    """Staff dealt with the reason they were shown: it clears, and the turn log says who cleared what.

    Only that reason clears: one raised meanwhile by another cause stays for staff to read.
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
