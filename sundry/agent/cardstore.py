"""Confirmation cards on record: proposing one, retiring the ones it replaces, reading the open ones.

Runs in the caller's transaction with the ticket row locked (a step, a staff
decision). Deciding a card — and running its call — is `agent.services.confirmation_decide`.
"""

from __future__ import annotations

from datetime import timedelta

from django.utils import timezone

from sundry.agent.guards import callguards as guards
from sundry.agent.guards import cards
from sundry.agent.models import Confirmation
from sundry.tickets.models import Ticket
from sundry.tickets.versions import ticket_touch
from sundry.tooling.domain import get_domain
from sundry.tooling.tools import Tool


def model_result(card: Confirmation) -> dict:
    """What the model reads as the call's result: not run, not refused, waiting for the customer."""
    return {
        "ok": False,
        "awaiting_customer_confirmation": True,
        "card": card.card.get("title", ""),
        "note": "Not run yet. The customer sees a card with exactly this action and the buttons Confirm and "
        "Not now; it runs only if they confirm. Tell them to check the card. Do not call it again.",
    }


def propose(
    ticket: Ticket, tool: Tool, call_id: str, verdict: guards.GuardVerdict, inp: guards.GuardInput
) -> Confirmation:
    """The pending card for this exact call: the one already open for it, or a new one that retires
    the open cards for the same entity (the model changed its mind: the old card is not the call)."""
    arguments = verdict.args.model_dump(mode="json")
    digest = cards.digest(tool.name, arguments)
    open_now = pending(ticket)
    same = next((c for c in open_now if c.digest == digest), None)
    if same is not None:
        return same
    decl = (inp.domain or get_domain()).tool(tool.name)
    card = cards.build(
        tool,
        decl,
        verdict.args,
        ledger=inp.ledger,
        money=inp.money,
        rules=verdict.details.get("rules", []),
        why=verdict.details.get("why", ""),
        corrections=verdict.details.get("corrections", []),
    )
    entities = cards.entity_ids_of(card.as_dict())
    created = Confirmation.objects.create(
        ticket=ticket,
        tool=tool.name,
        arguments=arguments,
        digest=digest,
        call_id=call_id,
        card=card.as_dict(),
        turn=ticket.last_turn_number,
        expires_at=timezone.now() + timedelta(minutes=ticket.ticket_class.confirmation_minutes),
    )
    for older in open_now:
        if (entities & cards.entity_ids_of(older.card)) or (not entities and older.tool == tool.name):
            older.status, older.note = Confirmation.Status.SUPERSEDED, f"Replaced by card #{created.pk}."
            older.save(update_fields=["status", "note"])
    return created


def retire_for(ticket: Ticket, values: set[str], note: str) -> int:
    """Retire the open cards acting on any of `values` (a number corrected since the card was made)."""
    if not values:
        return 0
    retired = 0
    for card in pending(ticket):
        if cards.entity_ids_of(card.card) & values:
            card.status, card.note = Confirmation.Status.SUPERSEDED, note
            card.save(update_fields=["status", "note"])
            retired += 1
    if retired:
        ticket_touch(ticket.pk)
    return retired


def pending(ticket: Ticket) -> list[Confirmation]:
    """The ticket's open cards, oldest first; a card past its window is retired here."""
    now = timezone.now()
    out = []
    for card in Confirmation.objects.filter(ticket=ticket, status=Confirmation.Status.PENDING).order_by("pk"):
        if card.expires_at <= now:
            card.status, card.note = Confirmation.Status.EXPIRED, "Not answered within the class's window."
            card.save(update_fields=["status", "note"])
            ticket_touch(ticket.pk)
        else:
            out.append(card)
    return out


def open_cards(ticket: Ticket) -> list[Confirmation]:
    """The open cards, for a page (read only: an expired one is simply not shown)."""
    return list(
        Confirmation.objects.filter(
            ticket=ticket, status=Confirmation.Status.PENDING, expires_at__gt=timezone.now()
        ).order_by("pk")
    )
