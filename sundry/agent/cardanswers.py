"""A call equal to a card already answered on the ticket: what became of it, read from the records.

A card stands for one exact call (`cards.digest`) and its answer is single-use. Once the customer
(or staff on their behalf) confirmed it, the same call again makes no new card — the page must not
ask for a go-ahead already given — and the model reads instead what became of the call: waiting for
staff (the hold its re-check made), done, still running, declined by staff, or refused on its
re-check. A card answered "Not now", or confirmed and then refused on its re-check without staff,
is proposed again only once the customer (or staff, in a note) has written since: that new message
may ask for it again; without one, the answer stands. A hold staff decided stands on this ticket
(the decline told the model not to repeat the call, and a hold is never made twice for one call).
"""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models import Q
from django.utils import timezone

from sundry.agent.models import Confirmation, HeldAction
from sundry.tickets.models import Ticket, Turn

WAITING, DONE, RUNNING, STAFF_DECLINED, REFUSED, DECLINED = (
    "waiting_for_staff",
    "done",
    "running",
    "declined_by_staff",
    "refused",
    "declined",
)
_REASON_MAX = 300


@dataclass(frozen=True)
class Answered:
    """The card that answers a call again, what became of its call, and what the model reads."""

    card: Confirmation
    state: str
    hold: HeldAction | None = None
    reason: str = ""

    @property
    def until_asked(self) -> bool:
        """Whether a new message from the customer lifts it: a "Not now", or a refusal on re-check that
        no staff decision was part of. Staff's decisions, a call done or waiting stand on this ticket."""
        return self.state in (REFUSED, DECLINED) and self.hold is None

    def result(self) -> dict:
        """The call's result as the model reads it: not run now, and why, from the records."""
        title = self.card.card.get("title") or self.card.tool
        held = f" (hold #{self.hold.pk})" if self.hold is not None else ""
        who = "Staff, on the customer's behalf," if self.card.via == Confirmation.Via.STAFF else "The customer"
        said = f"{who} already confirmed this exact call on card #{self.card.pk} ({title})"
        ran = self.hold.result_turn if self.hold is not None else self.card.result_turn
        notes = {
            WAITING: f"{said}; its re-check held it for staff approval{held}, where it is awaiting staff "
            "approval. It was not proposed or held again. Do not call it again; tell the customer it is with staff.",
            DONE: f"{said}, and it ran{' once staff approved it' + held if self.hold is not None else ''}"
            f"{f' at turn {ran}' if ran else ''}: {title} is done. It was not run again. Tell the customer it is done.",
            RUNNING: f"{said}; it is being carried out now. It was not run again. Do not call it again.",
            STAFF_DECLINED: f"{said}, but staff declined it{held}; nothing was done. It was not proposed "
            "again. Do not call it again; tell the customer our team declined it.",
            REFUSED: f"{said}{', and staff approved it' + held if self.hold is not None else ''}, but it was not "
            f"carried out: {self.reason or 'a check refused it'}. Nothing was done and it was not proposed again. "
            + (
                "Tell the customer why; it is proposed again only if they ask for it again."
                if self.until_asked
                else "Do not call it again; tell the customer why."
            ),
            DECLINED: (
                f"Staff withdrew card #{self.card.pk} ({title}) for this exact call, on the customer's behalf"
                if self.card.via == Confirmation.Via.STAFF
                else f"The customer declined this exact call on card #{self.card.pk} ({title}): they pressed Not now"
            )
            + "; nothing was done. No new card was made: propose it again only if they ask for it again.",
        }
        return {
            "ok": False,
            "already_answered": self.state,
            "card": title,
            **({"held_for_staff_approval": True} if self.state == WAITING else {}),
            "note": notes[self.state],
        }


def answered(ticket: Ticket, digest: str) -> Answered | None:
    """What answers a call of `digest` on `ticket` in place of a card: the latest card the customer (or
    staff on their behalf) answered for that exact call, and what became of it. None when a card is
    right: one is open for the call (it is reused), none was answered, or the answer was "Not now" or a
    refusal on re-check and the customer has written since."""
    mine = Confirmation.objects.filter(ticket=ticket, digest=digest)
    if mine.filter(status=Confirmation.Status.PENDING, expires_at__gt=timezone.now()).exists():
        return None
    card = mine.filter(status__in=[Confirmation.Status.CONFIRMED, Confirmation.Status.DECLINED]).order_by("-pk").first()
    if card is None:
        return None
    found = _became(card)
    if found.until_asked and _written_since(ticket, card):
        return None
    return found


def _became(card: Confirmation) -> Answered:
    """What became of a decided card's call, from its outcome and the result and hold it names."""
    if card.status == Confirmation.Status.DECLINED:
        return Answered(card, DECLINED)
    result = (
        Turn.objects.filter(ticket_id=card.ticket_id, number=card.result_turn).first()
        if card.result_turn is not None
        else None
    )
    if card.outcome == "executed":
        return Answered(card, DONE)
    if card.outcome == "refused":
        return Answered(card, REFUSED, reason=_reason(result))
    if card.outcome != "held":
        return Answered(card, RUNNING)  # a tool server's call runs after the decision commits
    pk = (result.payload or {}).get("held") if result is not None else None
    hold = HeldAction.objects.filter(pk=pk).first() if isinstance(pk, int) else None
    if hold is None or hold.status in (HeldAction.Status.PENDING, HeldAction.Status.APPROVED):
        return Answered(card, WAITING, hold)
    if hold.status == HeldAction.Status.EXECUTED:
        return Answered(card, DONE, hold)
    if hold.status == HeldAction.Status.REJECTED:
        return Answered(card, STAFF_DECLINED, hold)
    # Approved by staff and refused on its re-check (or already run elsewhere): it stands on this ticket.
    ran = Turn.objects.filter(ticket_id=hold.ticket_id, number=hold.result_turn).first() if hold.result_turn else None
    return Answered(card, REFUSED, hold, _reason(ran))


def _reason(turn: Turn | None) -> str:
    """Why a call was not carried out, as its rejection or error turn says (one line, cut)."""
    if turn is None:
        return ""
    text = " ".join(str((turn.payload or {}).get("reason") or turn.text or "").split()).removeprefix("ERROR: ")
    return text if len(text) <= _REASON_MAX else text[: _REASON_MAX - 1] + "…"


def _written_since(ticket: Ticket, card: Confirmation) -> bool:
    """Whether the customer wrote (or staff left a note) after the card's answer was recorded."""
    decided = (
        Turn.objects.filter(ticket=ticket, kind=Turn.Kind.EVENT, payload__confirmation=card.pk)
        .order_by("number")
        .values_list("number", flat=True)
        .first()
    )
    after = max(n for n in (decided, card.result_turn, card.turn) if n is not None)
    return (
        Turn.objects.filter(ticket=ticket, number__gt=after)
        .filter(Q(author=Turn.Author.CUSTOMER, kind=Turn.Kind.MESSAGE) | Q(kind=Turn.Kind.NOTE))
        .exists()
    )
