"""A held reply must not leave the customer silent: Sundry's own words that a person will reply.

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

Being an agent message, the hand-off also answers the message for the run loop (`loop._ANSWERED`):
a later wake with no new input leaves the ticket to staff instead of asking the model again, as
after a reply whose held rest is staff's (`kept`); a new customer message starts a run as ever.
"""

from __future__ import annotations

from django.db.models import Q

from sundry.context import render
from sundry.tickets.attention import has_reason
from sundry.tickets.models import Ticket, Turn

# What the customer reads: true whenever it is posted (the hold flagged the ticket for staff).
TEXT = (
    "I couldn't give you a reliable answer to this, so I've passed your message to our team. Someone will reply here."
)
# The flags a held reply raises (`step._hold_reply`, `step._hold_rest`).
# A later message while the flag stands and staff have not acted: as true, and shorter.
STILL_WITH_TEAM = "Thanks, I've added this to what our team has. Someone will reply here."
HELD_CAUSES = ("Reply held for staff", "Part of a reply held for staff")
ENABLED = True  # the tests' negative control switches it off


def _flag_stands(attention: str) -> bool:
    return any(has_reason(attention, cause) for cause in HELD_CAUSES)


def _staff_acted_since(ticket_id: int, number: int) -> bool:
    """A staff reply, or a takeover or hand-back, after turn `number`."""
    return (
        Turn.objects.filter(ticket_id=ticket_id, number__gt=number)
        .filter(
            Q(kind=Turn.Kind.MESSAGE, author=Turn.Author.STAFF) | Q(kind=Turn.Kind.EVENT, payload__has_key="handler")
        )
        .exists()
    )


def due(ticket_id: int) -> str:
    """What a hold now tells the customer ("" for nothing): `TEXT`, or `STILL_WITH_TEAM` when the full
    line was posted under a standing flag staff have not acted on. Read under the ticket's row lock (the
    held reply's turn took it) and before the hold raises its flag: the line as staff last left it."""
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
    told = messages.filter(author=Turn.Author.AGENT, payload__via=render.HANDED_OFF, text=TEXT)
    last = told.values_list("number", flat=True).first()
    if last is None or not _flag_stands(row[1]) or _staff_acted_since(ticket_id, last):
        return TEXT
    return STILL_WITH_TEAM


def tell(ticket: Ticket, append, held_turn: int) -> Turn | None:
    """Post the hand-off through the step's `append` if it is due; the turn, or None."""
    text = due(ticket.pk)
    if not text:
        return None
    return append(
        ticket=ticket,
        author=Turn.Author.AGENT,
        kind=Turn.Kind.MESSAGE,
        text=text,
        payload={"via": render.HANDED_OFF, "held_turn": held_turn},
    )
