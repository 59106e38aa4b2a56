"""A held reply, or a run that stops without replying, must not leave the customer silent: Sundry's own
words that a person will reply.

When the reply check holds the model's reply (`step._hold_reply`), staff read it and the ticket is
flagged; the customer would read nothing. If that leaves their latest message unanswered, code — never
the model — posts `TEXT` to them as an agent message marked `via: handoff` (`render.HANDED_OFF`): the
customer's page and the desk show it like any reply, their socket gets it with the step's push, and the
model's request leaves it out (it never wrote it).

The full line is posted once per standing flag. A later message held while the reply-held flag stands
and staff have not acted since is answered with the short `STILL_WITH_TEAM` instead: every message the
customer sends gets an answer, and the second and later ones do not repeat the apology. Staff act by
replying, taking the ticket over or handing it back, or clearing the flag; after that a later hold tells
the customer in full again. Under takeover nothing is posted: a person already has the ticket.

A run that stops without replying flags the ticket for staff too, and would leave the customer as
silent (`tell_stopped`): the repeat guard's stop after calls only (`calls._stop_repeat`), the run's
step cap or deadline (`loop._stop_run`), a model that could not be reached, answered nothing twice or
is not configured (`step._commit`; the last hands the ticket to staff, after the line is read), and a
run the task gave up on (`failures.run_failed`). Each posts the same lines, read by the same `due`, and
each cause's flag is a standing flag as the hold's is. The message counts as answered there also by a
card or a held call shown to the customer at it or after (as the scorecard's `unanswered` reads them).
Nothing is posted where the run goes on: the duplicate guard's refusal (the first call's result answers
it), a recovered run, a call held for staff or a tool server's failure (the model reads them).

Being an agent message, the hand-off also answers the message for the run loop (`loop._ANSWERED`):
a later wake with no new input leaves the ticket to staff instead of asking the model again, as
after a reply whose held rest is staff's (`kept`); a new customer message starts a run as ever.
"""

from __future__ import annotations

from django.db.models import Q

from sundry.agent.models import Confirmation, HeldAction
from sundry.context import render
from sundry.tickets import attention
from sundry.tickets.attention import has_reason
from sundry.tickets.models import Ticket, Turn

# What the customer reads: true whenever it is posted (the hold or the stop flagged the ticket for staff).
TEXT = (
    "I couldn't give you a reliable answer to this, so I've passed your message to our team. Someone will reply here."
)
# The flags a held reply raises (`step._hold_reply`, `step._hold_rest`).
# A later message while the flag stands and staff have not acted: as true, and shorter.
STILL_WITH_TEAM = "Thanks, I've added this to what our team has. Someone will reply here."
HELD_CAUSES = ("Reply held for staff", "Part of a reply held for staff")
# The flags a run's stop without a reply raises (`tell_stopped`).
STOP_CAUSES = (
    attention.REPEATED_CALL,
    attention.RUN_STOPPED,
    attention.RUN_FAILED,
    attention.MODEL_UNAVAILABLE,
    attention.NO_ANSWER,
    attention.NOT_CONFIGURED,
)
ENABLED = True  # the tests' negative control switches it off
AFTER_STOPS = True  # likewise, for a stopped run's hand-off alone


def _flag_stands(line: str) -> bool:
    return any(has_reason(line, cause) for cause in HELD_CAUSES + STOP_CAUSES)


def _staff_acted_since(ticket_id: int, number: int) -> bool:
    """A staff reply, or a takeover or hand-back, after turn `number`."""
    return (
        Turn.objects.filter(ticket_id=ticket_id, number__gt=number)
        .filter(
            Q(kind=Turn.Kind.MESSAGE, author=Turn.Author.STAFF) | Q(kind=Turn.Kind.EVENT, payload__has_key="handler")
        )
        .exists()
    )


def _shown_since(ticket_id: int, number: int) -> bool:
    """A card or a call held for staff made at turn `number` or after: the customer's page shows it."""
    return (
        Confirmation.objects.filter(ticket_id=ticket_id, turn__gte=number).exists()
        or HeldAction.objects.filter(ticket_id=ticket_id, turn__gte=number).exists()
    )


def due(ticket_id: int, *, shown: bool = False) -> str:
    """What a hold (or a stop) now tells the customer ("" for nothing): `TEXT`, or `STILL_WITH_TEAM` when
    the full line was posted under a standing flag staff have not acted on. Read under the ticket's row lock
    (the held reply's turn took it) and before the hold raises its flag: the line as staff last left it.
    `shown`: a card or held call made since the message answers it too (a stopped run's)."""
    if not ENABLED:
        return ""
    row = Ticket.objects.filter(pk=ticket_id).values_list("handler", "attention").first()
    if row is None or row[0] == Ticket.Handler.STAFF:
        return ""  # taken over: a person has it, and says what they will
    messages = Turn.objects.filter(ticket_id=ticket_id, kind=Turn.Kind.MESSAGE).order_by("-number")
    latest = messages.filter(author=Turn.Author.CUSTOMER).values_list("number", flat=True).first()
    if latest is None:
        return ""
    # Answered already: a reply posted after it (its shown part, words with calls, a staff reply,
    # an earlier hand-off) — the customer is not left silent.
    if messages.filter(number__gt=latest, author__in=(Turn.Author.AGENT, Turn.Author.STAFF)).exists():
        return ""
    if shown and _shown_since(ticket_id, latest):
        return ""
    told = messages.filter(author=Turn.Author.AGENT, payload__via=render.HANDED_OFF, text=TEXT)
    last = told.values_list("number", flat=True).first()
    if last is None or not _flag_stands(row[1]) or _staff_acted_since(ticket_id, last):
        return TEXT
    return STILL_WITH_TEAM


def tell(ticket: Ticket, append, held_turn: int) -> Turn | None:
    """Post the hand-off through the step's `append` if it is due; the turn, or None."""
    return _post(ticket, append, due(ticket.pk), {"held_turn": held_turn})


def tell_stopped(ticket: Ticket, append, stop_turn: int) -> Turn | None:
    """A run stopped at turn `stop_turn` without replying, and its cause is about to flag the ticket:
    post the hand-off through `append` (under the ticket's row lock, before the flag) if it is due."""
    if not AFTER_STOPS:
        return None
    return _post(ticket, append, due(ticket.pk, shown=True), {"stopped_turn": stop_turn})


def _post(ticket: Ticket, append, text: str, about: dict) -> Turn | None:
    if not text:
        return None
    return append(
        ticket=ticket,
        author=Turn.Author.AGENT,
        kind=Turn.Kind.MESSAGE,
        text=text,
        payload={"via": render.HANDED_OFF, **about},
    )
