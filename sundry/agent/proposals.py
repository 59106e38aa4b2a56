"""The actions proposed on a ticket and not (yet) run, as the reply check reads them.

A confirmation card awaiting the customer and a call held for staff are open;
a card the customer declined, a hold staff rejected, and either refused on its
re-check are declined. Read in one query each, once per step (and once per
guarded customer text), never per sentence: the stream's sentences and the
stored reply are judged on the same `replyclaims.Records`.
"""

from __future__ import annotations

from django.utils import timezone

from sundry.agent.models import Confirmation, HeldAction
from sundry.agent.replyclaims import DECLINED, OPEN, Proposal
from sundry.core import money

_CARD = {Confirmation.Status.PENDING: OPEN, Confirmation.Status.DECLINED: DECLINED}
_HOLD = {HeldAction.Status.PENDING: OPEN, HeldAction.Status.APPROVED: OPEN, HeldAction.Status.REJECTED: DECLINED,
         HeldAction.Status.REFUSED: DECLINED}


def _values(arguments) -> tuple[str, ...]:
    out = []
    for v in (arguments or {}).values() if isinstance(arguments, dict) else ():
        for item in v if isinstance(v, list) else [v]:
            if isinstance(item, (str, int)) and not isinstance(item, bool):
                out.append(str(item))
    return tuple(out)


def _amount(card: dict, arguments: dict) -> tuple[int | None, str]:
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


def read(ticket_id: int) -> tuple[Proposal, ...]:
    """The ticket's open and declined cards and holds. A card past its window is not open."""
    now = timezone.now()
    out = []
    for tool, arguments, card, status, expires, outcome in Confirmation.objects.filter(
            ticket_id=ticket_id, status__in=list(_CARD)).values_list(
            "tool", "arguments", "card", "status", "expires_at", "outcome"):
        if status == Confirmation.Status.PENDING and expires <= now:
            continue
        cents, currency = _amount(card, arguments)
        out.append(Proposal(tool, _values(arguments), _CARD[status], cents, currency))
    refused = Confirmation.objects.filter(ticket_id=ticket_id, status=Confirmation.Status.CONFIRMED, outcome="refused")
    for tool, arguments, card in refused.values_list("tool", "arguments", "card"):
        cents, currency = _amount(card, arguments)
        out.append(Proposal(tool, _values(arguments), DECLINED, cents, currency))
    for tool, arguments, status in HeldAction.objects.filter(ticket_id=ticket_id, status__in=list(_HOLD)).values_list(
            "tool", "arguments", "status"):
        cents, currency = _amount({}, arguments)
        out.append(Proposal(tool, _values(arguments), _HOLD[status], cents, currency))
    return tuple(out)
