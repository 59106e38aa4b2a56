"""The agent's outbox: a wake-up is recorded on the ticket in the transaction that stores the
turn asking for it, and settled by the run that read through that turn.

The broker can be down when a message is posted, a worker can be killed with the task in
hand, a retried run can run out of retries: the ticket keeps its mark, and the sweep
(`sundry.agent.sweep`, every `AGENT_SWEEP_SECONDS`) queues it again once the mark is older
than `AGENT_SWEEP_GRACE_SECONDS` and no live claim holds the ticket.
"""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.db.models import Q
from django.utils import timezone

from sundry.agent.claims import CLAIM_TTL
from sundry.tickets.models import Ticket


def mark(ticket_id: int, turn: int) -> None:
    """Record that the agent owes `turn` an answer (call in the transaction that stored it,
    after the turn: the ticket row is locked, so marks only move forward). A customer's message
    writes its mark with the turn itself, in the same statement (`turn_append(wake=True)`)."""
    Ticket.objects.filter(pk=ticket_id).update(agent_wake_turn=turn, agent_wake_at=timezone.now())


def pending(ticket_id: int) -> bool:
    """An earlier wake-up is on record and recent: its task is queued (or its run is about to read),
    and a run reads every input through the newest turn, so a burst of posts needs one task. Past
    the grace period a mark may be one whose task was lost: then the caller queues afresh."""
    since = timezone.now() - timedelta(seconds=settings.AGENT_SWEEP_GRACE_SECONDS)
    return Ticket.objects.filter(pk=ticket_id, agent_wake_turn__isnull=False, agent_wake_at__gte=since).exists()


# The ticket row's fields `pending_in` reads (from the row lock's own statement: `versions.ticket_lock`).
PENDING_FIELDS = ("agent_wake_turn", "agent_wake_at")


def pending_in(row: dict) -> bool:
    """`pending`, judged on the row's `PENDING_FIELDS` as the caller's lock read them."""
    since = timezone.now() - timedelta(seconds=settings.AGENT_SWEEP_GRACE_SECONDS)
    return row["agent_wake_turn"] is not None and row["agent_wake_at"] is not None and row["agent_wake_at"] >= since


def settle(ticket_id: int, read_through: int) -> bool:
    """A run read through `read_through`: clear the mark if it asks for nothing newer."""
    return bool(
        Ticket.objects.filter(pk=ticket_id, agent_wake_turn__lte=read_through).update(
            agent_wake_turn=None, agent_wake_at=None
        )
    )


def forgotten(limit: int = 200) -> list[int]:
    """Tickets to queue again: marked longer ago than the grace period, no live claim, and
    still the agent's to work. Each is stamped as queued now, so the next sweep leaves it
    a grace period; marks on tickets the agent may no longer work are cleared."""
    now = timezone.now()
    marked = (
        Ticket.objects.filter(
            Q(agent_claimed_at__isnull=True) | Q(agent_claimed_at__lt=now - CLAIM_TTL),
            agent_wake_turn__isnull=False,
            agent_wake_at__lt=now - timedelta(seconds=settings.AGENT_SWEEP_GRACE_SECONDS),
        )
        .order_by("agent_wake_at")
        .values_list("pk", "handler", "status", "agent_wake_turn")[:limit]
    )
    due = []
    for pk, handler, status, turn in marked:
        still = Ticket.objects.filter(pk=pk, agent_wake_turn=turn)
        if handler != Ticket.Handler.AGENT or status == Ticket.Status.CLOSED:
            still.update(agent_wake_turn=None, agent_wake_at=None)  # handing back marks it afresh
        elif still.update(agent_wake_at=now):
            due.append(pk)
    return due
