"""The actions proposed on a ticket and not (yet) run, as the reply check reads them.

A confirmation card awaiting the customer and a call held for staff are open;
a card the customer declined, a hold staff rejected, and either refused on its
re-check are declined; a card confirmed (by the customer, or staff on their
behalf) is marked confirmed, which backs "the customer has confirmed …". Read in one query, once per step (and once per
guarded customer text), never per sentence: the stream's sentences and the
stored reply are judged on the same `replyclaims.Records`.
"""

from __future__ import annotations

from django.db.models import DateTimeField, JSONField, Value
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from sundry.agent.guards.replyclaims import CONFIRMED, DECLINED, OPEN, Proposal
from sundry.agent.models import Confirmation, HeldAction
from sundry.context import selectors
from sundry.context.lanes import LaneSnapshot
from sundry.core import money

_HOLD = {
    HeldAction.Status.PENDING: OPEN,
    HeldAction.Status.APPROVED: OPEN,
    HeldAction.Status.REJECTED: DECLINED,
    HeldAction.Status.REFUSED: DECLINED,
}


def values_of(arguments) -> tuple[str, ...]:
    out = []
    for v in (arguments or {}).values() if isinstance(arguments, dict) else ():
        for item in v if isinstance(v, list) else [v]:
            if isinstance(item, (str, int)) and not isinstance(item, bool):
                out.append(str(item))
    return tuple(out)


def amount_of(card: dict, arguments: dict) -> tuple[int | None, str]:
    """A card's figure as it shows it ("15.00 USD"); else the call's amount and currency arguments."""
    shown = str((card or {}).get("amount") or "").split()
    if len(shown) == 2:
        try:
            return money.parse_major(shown[0], shown[1]), shown[1].upper()
        except money.MoneyError:
            pass
    data = arguments if isinstance(arguments, dict) else {}
    currency = str(data.get("currency") or "").upper()
    if data.get("amount") not in (None, "") and currency:
        try:
            return money.parse_major(str(data["amount"]), currency), currency
        except money.MoneyError:
            pass
    return None, ""


def _cards(ticket_id: int):
    return Confirmation.objects.filter(
        status__in=[Confirmation.Status.PENDING, Confirmation.Status.DECLINED, Confirmation.Status.CONFIRMED],
        ticket_id=ticket_id,
    ).order_by()


def _holds(ticket_id: int):
    return HeldAction.objects.filter(ticket_id=ticket_id, status__in=list(_HOLD)).order_by()


# Read beside the lanes by a step (`lane_snapshot(also=LANES)`), in the lanes' own statement.
_CARD, _HELD = ("tool", "arguments", "card", "status", "expires_at", "outcome"), ("tool", "arguments", "status")
selectors.ALSO["open_cards"] = (_cards, _CARD)
selectors.ALSO["open_holds"] = (_holds, _HELD)
LANES = ("open_cards", "open_holds")


def read(ticket_id: int) -> tuple[Proposal, ...]:
    """The ticket's open and declined cards and holds, in one query. A card past its window is not open."""
    cards = _cards(ticket_id).annotate(src=Value("card")).values_list("src", *_CARD)
    holds = (
        _holds(ticket_id)
        .annotate(
            src=Value("hold"),
            shown=Value({}, output_field=JSONField()),
            until=Value(None, output_field=DateTimeField()),
            result=Value(""),
        )
        .values_list("src", "tool", "arguments", "shown", "status", "until", "result")
    )
    # Neither side keeps its model's default ordering: SQLite refuses ORDER BY inside a UNION.
    return _proposals(cards.union(holds, all=True))


def of_snapshot(snapshot: LaneSnapshot) -> tuple[Proposal, ...] | None:
    """`read`, from the rows a snapshot read with the lanes (`LANES`); None if it read none."""
    if not all(name in snapshot.also for name in LANES):
        return None
    cards = [
        ("card", tool, args, card, status, _moment(expires), outcome)
        for tool, args, card, status, expires, outcome in snapshot.also["open_cards"]
    ]
    holds = [("hold", tool, args, {}, status, None, "") for tool, args, status in snapshot.also["open_holds"]]
    return _proposals(cards + holds)


def _moment(value):
    """A timestamp as the lanes' statement gave it: JSON text on PostgreSQL."""
    return parse_datetime(value) if isinstance(value, str) else value


def _proposals(rows) -> tuple[Proposal, ...]:
    now = timezone.now()
    out = []
    for src, tool, arguments, card, status, expires, outcome in rows:
        confirmed = src == "card" and status == Confirmation.Status.CONFIRMED
        if src == "hold":
            state = _HOLD[status]
        elif status == Confirmation.Status.PENDING:
            if expires <= now:
                continue
            state = OPEN
        elif confirmed and outcome != "refused":
            state = CONFIRMED  # ran, or awaits staff: backs only "the customer confirmed it"
        else:  # declined by the customer, or confirmed and refused on its re-check
            state = DECLINED
        cents, currency = amount_of(card, arguments)
        out.append(Proposal(tool, values_of(arguments), state, cents, currency, confirmed))
    return tuple(out)
