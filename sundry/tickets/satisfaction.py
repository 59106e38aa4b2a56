"""Customer satisfaction: the customer's rating of a resolved ticket, whom it is credited to, and CSAT.

The scale is 1 (very poor) to 5 (very good), and CSAT is the share of ratings that are 4 or 5:
the usual definition, so the figure reads as it does in other support tools, and a "3, okay"
counts as not satisfied rather than half.

Credit goes to the author of the last reply the customer read before rating — the AI agent, or
the member of staff who sent it. That is the answer the customer rated; a ticket the agent
worked and a person finished counts for the person. It is fixed when the customer rates (and
again when they change their rating), so a later reassignment does not move it.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.db.models import Avg, Count, Q

from sundry.tickets.models import Rating, Ticket, TicketClass, Turn
from sundry.tickets.versions import ticket_touch

SCORES = {1: "Very poor", 2: "Poor", 3: "Okay", 4: "Good", 5: "Very good"}
SATISFIED = 4  # this score and above count as satisfied
COMMENT_LIMIT = 1000


class RatingRefused(ValueError):
    """A rating that cannot be taken; the text says why."""

    status = 422  # the input is wrong


class NotRatable(RatingRefused):
    status = 409  # the input is fine; the ticket is not resolved (now)


def parse_score(raw) -> int:
    text = str(raw or "").strip()
    if not (text.isascii() and text.isdigit() and len(text) == 1 and int(text) in SCORES):
        raise RatingRefused("Choose a rating from 1 (very poor) to 5 (very good).")
    return int(text)


def clean_comment(raw) -> str:
    text = str(raw or "").strip()
    if len(text) > COMMENT_LIMIT:
        raise RatingRefused(
            f"The comment is {len(text):,} characters; the limit is {COMMENT_LIMIT:,}. "
            "Shorten it and send again — your text is kept."
        )
    return text


def credit(ticket_id: int) -> tuple[str, object]:
    """(Rating.Credit, the staff user or None) for the last reply on the ticket."""
    last = (
        Turn.objects.filter(
            ticket_id=ticket_id, kind=Turn.Kind.MESSAGE, author__in=[Turn.Author.AGENT, Turn.Author.STAFF]
        )
        .order_by("-number")
        .values_list("author", "payload")
        .first()
    )
    if last is None:
        return Rating.Credit.NOBODY, None
    author, payload = last
    if author == Turn.Author.AGENT:
        return Rating.Credit.AGENT, None
    username = (payload or {}).get("by") or ""
    return Rating.Credit.STAFF, get_user_model().objects.filter(username=username).first()


def rating_save(*, ticket: Ticket, customer, score, comment) -> tuple[Rating, bool]:
    """The ticket's customer rates it (or changes their rating): (the rating, whether it is new).

    Only the ticket's own customer, only while it is resolved; the input is read before anything is written.
    """
    score, comment = parse_score(score), clean_comment(comment)
    with transaction.atomic():
        row = Ticket.objects.select_for_update().filter(pk=ticket.pk).values("customer_id", "status").first()
        if row is None or customer is None or row["customer_id"] != customer.pk:
            raise PermissionDenied("Only the ticket's customer may rate it.")
        if row["status"] != Ticket.Status.RESOLVED:
            raise NotRatable("You can rate this conversation once it is resolved.")
        credited, staff = credit(ticket.pk)
        rating, created = Rating.objects.update_or_create(
            ticket_id=ticket.pk,
            defaults={"score": score, "comment": comment, "credited": credited, "credited_staff": staff},
        )
        ticket_touch(ticket.pk)  # the desk's head and the customer's panel show it: push
    return rating, created


def rating_of(ticket) -> Rating | None:
    return Rating.objects.filter(ticket_id=ticket.pk).select_related("credited_staff").first()


RATING_WITH_TICKET = "rating__credited_staff"  # select_related on a ticket read: its rating as `rating_of` reads it


def rating_as_read(ticket) -> Rating | None:
    """The rating the ticket was read with (`select_related(RATING_WITH_TICKET)`: a live rendering
    reads it so, in the ticket's statement), else read now."""
    if Ticket.rating.is_cached(ticket):
        return getattr(ticket, "rating", None)  # None: read with the ticket, and there is none
    return rating_of(ticket)


# --- figures ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Csat:
    label: str
    ratings: int
    satisfied: int
    mean: float | None

    @property
    def share(self) -> int | None:
        """Percent of ratings that are 4 or 5; None with no ratings (not 0%: nobody said anything)."""
        return round(100 * self.satisfied / self.ratings) if self.ratings else None


def _counts():
    return {"n": Count("id"), "ok": Count("id", filter=Q(score__gte=SATISFIED)), "mean": Avg("score")}


def _csat(label: str, row: dict | None) -> Csat:
    row = row or {}
    mean = row.get("mean")
    return Csat(label, row.get("n", 0), row.get("ok", 0), round(float(mean), 1) if mean is not None else None)


def csat_by_class() -> list[Csat]:
    """Every class, rated or not, in the order the figures page lists classes."""
    rows = {r["ticket__ticket_class"]: r for r in Rating.objects.values("ticket__ticket_class").annotate(**_counts())}
    return [_csat(c.name, rows.get(c.pk)) for c in TicketClass.objects.order_by("token_budget", "name")]


def csat_by_agent() -> list[Csat]:
    """The AI agent first, then each member of staff credited with a rating, then ratings no reply earned."""
    out = []
    rows = Rating.objects.values("credited", "credited_staff__username").annotate(**_counts())
    for r in sorted(
        rows,
        key=lambda r: (
            r["credited"] != Rating.Credit.AGENT,
            r["credited"] == Rating.Credit.NOBODY,
            r["credited_staff__username"] or "",
        ),
    ):
        if r["credited"] == Rating.Credit.STAFF:
            label = r["credited_staff__username"] or "a former member of staff"
        else:
            label = Rating.Credit(r["credited"]).label
        out.append(_csat(label, r))
    return out
