"""A run's claim on its ticket: a lease, so one run works a ticket at a time.

The claim is the ticket's `agent_claimed_at`, set by a conditional update. It
lapses after `CLAIM_TTL`, so a killed worker cannot wedge the ticket; a run
renews it at every step. A run remembers the stamp it wrote, and renews or
lets go only while the row still holds that stamp: a run whose lease lapsed
and was taken over never touches the new holder's claim.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.utils import timezone

from sundry.tickets.models import Ticket

# See settings.AGENT_CLAIM_TTL_SECONDS: renewed at every step, so it bounds one step, not a run.
CLAIM_TTL = timedelta(seconds=settings.AGENT_CLAIM_TTL_SECONDS)


@dataclass
class Claim:
    ticket_id: int
    stamp: datetime  # the `agent_claimed_at` this run last wrote
    took_over: bool = False  # the claim had lapsed unreleased: the run before died


def claim(ticket_id: int) -> Claim | None:
    """Claim the ticket for a run; None if another run holds a live claim (or there is no such ticket)."""
    now = timezone.now()
    if Ticket.objects.filter(pk=ticket_id, agent_claimed_at__isnull=True).update(agent_claimed_at=now):
        return Claim(ticket_id, now)
    if Ticket.objects.filter(pk=ticket_id, agent_claimed_at__lt=now - CLAIM_TTL).update(agent_claimed_at=now):
        return Claim(ticket_id, now, took_over=True)
    return None


def stale(claimed_at: datetime | None) -> bool:
    """A claim older than the TTL: its run's worker died and the next run will take over."""
    return claimed_at is not None and claimed_at < timezone.now() - CLAIM_TTL


def renew(held: Claim) -> tuple[str, str, int, int] | None:
    """Renew the lease; the ticket's (handler, status, last_turn_number, version) then,
    or None if the claim was lost (lapsed and taken, or the ticket is gone)."""
    now = timezone.now()
    if not Ticket.objects.filter(pk=held.ticket_id, agent_claimed_at=held.stamp).update(agent_claimed_at=now):
        return None
    held.stamp = now
    return Ticket.objects.filter(pk=held.ticket_id).values_list(
        "handler", "status", "last_turn_number", "version").first()


def release(held: Claim) -> bool:
    """Let go of the claim if it is still this run's. Returns whether it was."""
    return bool(Ticket.objects.filter(pk=held.ticket_id, agent_claimed_at=held.stamp).update(agent_claimed_at=None))


def claimed_elsewhere(ticket_id: int) -> bool:
    """Another run holds a live claim on the ticket (or held it when its worker died)."""
    return Ticket.objects.filter(pk=ticket_id, agent_claimed_at__gte=timezone.now() - CLAIM_TTL).exists()
