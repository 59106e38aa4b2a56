"""Why staff must look at a ticket: the agent's promise that people will follow up, a model
it could not reach, a reply it held, a run it stopped, a tripped compaction breaker, a detail
the customer reported as wrong.

`Ticket.attention` holds the reasons on one line (joined by " · ") that the queue filters on
and the desk shows at the top of the ticket, each with its own button. Each cause is its own
reason: raising one replaces only an earlier reason of the same cause (a newer "Model
unavailable" error), never another's; a cause that resolves itself clears only its own
reason; staff clear or mark handled the reason they read, and only that one.
"""

from __future__ import annotations

from django.db import transaction

from sundry.tickets.models import Ticket, Turn
from sundry.tickets.services import turn_append
from sundry.tickets.versions import ticket_lock, ticket_update

FOLLOW_UP_PREFIX = "Follow-up promised"
# A customer's report that a detail is wrong (sundry.portal.services.detail_flag writes it).
FLAG_PREFIX = "Customer flagged"
SEPARATOR = " · "
REASON_LIMIT = 200  # one reason's length; the line holds as many as are up


def reasons(attention: str) -> list[str]:
    """The reasons on an attention line, in the order they were raised."""
    return [r for r in (attention or "").split(SEPARATOR) if r]


def has_reason(attention: str, prefix: str) -> bool:
    return bool(prefix) and any(r.startswith(prefix) for r in reasons(attention))


def without(attention: str, prefix: str) -> str:
    """The line with every reason `prefix` starts left out (an empty prefix names none)."""
    return SEPARATOR.join(r for r in reasons(attention) if not (prefix and r.startswith(prefix)))


def reason_text(text: str) -> str:
    """One reason as stored: on one line, never holding the separator, at most REASON_LIMIT long."""
    text = " ".join((text or "").split()).replace(SEPARATOR, " - ")
    return text if len(text) <= REASON_LIMIT else text[: REASON_LIMIT - 1] + "…"


def with_reason(attention: str, text: str, cause: str) -> str:
    """The line with `text` added last, in place of any reason of the same `cause` (a prefix)."""
    return SEPARATOR.join([*reasons(without(attention, reason_text(cause))), reason_text(text)])


def follow_up_line(reason: str, turn: int) -> str:
    return f"{FOLLOW_UP_PREFIX} (turn {turn}): {' '.join((reason or '').split())}"


def with_follow_up(attention: str, line: str) -> str:
    """The attention text with a follow-up line: replacing an earlier follow-up, after any other reason."""
    return with_reason(attention, line, FOLLOW_UP_PREFIX)


def without_follow_up(attention: str) -> str:
    return without(attention, FOLLOW_UP_PREFIX)


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
        turn_append(
            ticket=ticket,
            author=Turn.Author.SYSTEM,
            kind=Turn.Kind.EVENT,
            text=f"{user.get_username()} handled the promised follow-up.",
            payload={"follow_up_resolved": True},
        )
    return True


# The agent's flag when the model cannot be reached; a later step that reaches it clears it.
MODEL_UNAVAILABLE = "Model unavailable"
# The causes of the agent's other flags raised as a run ends without replying (`agent/handoff.py` reads
# them as standing flags): the same failing call again (`calls`), the run's step cap or deadline
# (`loop`), a run given up (`failures.run_failed`), no answer from the model twice, no model configured
# (`step`).
REPEATED_CALL = "Repeated failing call"
RUN_STOPPED = "Run stopped at"
RUN_FAILED = "Agent run stopped"
NO_ANSWER = "The model gave no answer"
NOT_CONFIGURED = "Model not configured"


def cause_of(text: str) -> str:
    """A reason's cause: what it says before its first colon ("Model unavailable: timed out")."""
    return text.partition(":")[0] if ":" in text else text


def attention_flag(ticket_id: int, text: str, *, cause: str | None = None) -> bool:
    """Raise `text` as a reason of its own (inside the caller's transaction, or its own): an
    earlier reason of the same cause (`cause`, a prefix; by default `cause_of(text)`) gives way
    to it, every other reason stays. Returns whether the line changed."""
    with transaction.atomic():
        current = Ticket.objects.select_for_update().filter(pk=ticket_id).values_list("attention", flat=True).first()
        if current is None:
            return False
        line = with_reason(current, text, cause or cause_of(text))
        return line != current and ticket_update(ticket_id, attention=line)  # bumps the version, pushes after commit


def attention_clear(ticket_id: int, prefix: str) -> bool:
    """The cause `prefix` names is resolved: its reasons leave the line, every other stays.
    Returns whether one was there."""
    with transaction.atomic():
        current = Ticket.objects.select_for_update().filter(pk=ticket_id).values_list("attention", flat=True).first()
        if not current or not has_reason(current, prefix):
            return False
        return ticket_update(ticket_id, attention=without(current, prefix))


def reason_remove(ticket_id: int, reason: str) -> bool:
    """Take exactly `reason` off the line (under the ticket's row lock); whether it was there."""
    current = Ticket.objects.select_for_update().filter(pk=ticket_id).values_list("attention", flat=True).first()
    kept = reasons(current or "")
    if reason not in kept:
        return False
    kept.remove(reason)
    return ticket_update(ticket_id, attention=SEPARATOR.join(kept))


def attention_dismiss(*, ticket: Ticket, user, shown: str) -> bool:
    """Staff dealt with the reason they were shown: it clears, and the turn log says who cleared what.

    Only that reason clears: any other, raised before or meanwhile by another cause, stays
    for staff to read. Returns whether it was cleared (False: it is no longer up).
    """
    if not shown:
        return False
    with transaction.atomic():
        cleared = reason_remove(ticket.pk, shown)
        if cleared:
            turn_append(
                ticket=ticket,
                author=Turn.Author.SYSTEM,
                kind=Turn.Kind.EVENT,
                text=f"{user.get_username()} cleared the flag: {shown}",
                payload={"attention_cleared": shown},
            )
    return cleared


def flags_resolve(*, ticket: Ticket, user, reason: str | None = None) -> bool:
    """Staff handled the customer's report `reason` names (every report, when None): it leaves the
    queue's line, the customer's page no longer reads "You reported this" for it, and the turn
    log says who."""
    with transaction.atomic():
        ticket_lock(ticket.pk)
        current = Ticket.objects.filter(pk=ticket.pk).values_list("attention", flat=True).first() or ""
        named = [r for r in reasons(current) if r.startswith(FLAG_PREFIX) and reason in (None, r)]
        if not named:
            return False
        for r in named:
            reason_remove(ticket.pk, r)
            flagged = Turn.objects.filter(ticket=ticket, kind=Turn.Kind.EVENT, payload__flag__reason=r).first()
            # A report from before reasons were kept apart names no turn: handling it ends every report.
            resolved = {"turn": flagged.number} if flagged is not None else True
            turn_append(
                ticket=ticket,
                author=Turn.Author.SYSTEM,
                kind=Turn.Kind.EVENT,
                text=f"{user.get_username()} handled the customer's flag: {r}",
                payload={"flag_resolved": resolved},
            )
    return True
