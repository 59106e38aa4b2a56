"""The ticket row's version and turn counter: every write to a ticket or its lanes bumps the version.

Its own module, below both tickets.services and context.services, so each can
use it without importing the other.

Lock order: a transaction that writes a ticket's lanes locks the ticket row
first (`ticket_lock`, or a bump), then lane rows. Agent steps, staff edits and
compactions all follow it, so they queue on the ticket row instead of deadlocking.
"""

from __future__ import annotations

from django.db.models import F

from sundry.tickets.models import Ticket


def ticket_lock(ticket_id: int) -> None:
    """Take the ticket's row lock until the caller's transaction ends (call inside `atomic()`)."""
    if not Ticket.objects.select_for_update().filter(pk=ticket_id).values_list("pk", flat=True):
        raise Ticket.DoesNotExist(f"ticket {ticket_id} does not exist")


def bump(ticket_id: int, *, turn: bool = False) -> tuple[int, int]:
    """Bump the version (and the turn counter when `turn`); returns (last_turn_number, version).

    The UPDATE takes the ticket's row lock until the caller's transaction ends,
    which is what keeps concurrent writers' turn numbers apart.
    """
    changes = {"version": F("version") + 1}
    if turn:
        changes["last_turn_number"] = F("last_turn_number") + 1
    if not Ticket.objects.filter(pk=ticket_id).update(**changes):
        raise Ticket.DoesNotExist(f"ticket {ticket_id} does not exist")
    return Ticket.objects.values_list("last_turn_number", "version").get(pk=ticket_id)


def ticket_touch(ticket_id: int) -> int:
    """Bump the ticket's version (inside the caller's transaction) and return it."""
    return bump(ticket_id)[1]


def ticket_version(ticket_id: int) -> int | None:
    return Ticket.objects.filter(pk=ticket_id).values_list("version", flat=True).first()
