"""The desk's browser notifications: a socket that tells a staff member which of the tickets
assigned to them need attention now, so every desk page can raise a notification for a new one.

It is the queue's socket (sundry.desk.live_queue: staff only, the socket caps, the user's group, the
desk's queue group through the hub, at most one re-read a second) sending a different view:
the member's own open tickets with an attention reason or an action held for approval, as
JSON, only when that list changed. The page decides what is new (sundry-notify.js).

Each reason travels as its cause ("Model unavailable", "Follow-up promised (turn 7)") and a
short digest of its full text: a notification on a desktop says why to look, not what the
ticket holds.
"""

from __future__ import annotations

import hashlib
import json

from django.db.models import Count, Q
from django.urls import reverse

from sundry.desk.live_queue import QueueConsumer
from sundry.live.dbtrips import database_trip
from sundry.tickets.attention import cause_of, reasons
from sundry.tickets.models import Ticket

HELD = "Approval waiting"
MAX_TICKETS = 50  # a member's own flagged tickets; past this the queue says the rest


def _digest(ticket_id: int, text: str) -> str:
    return hashlib.blake2b(f"{ticket_id}|{text}".encode(), digest_size=8).hexdigest()


def assigned_attention(user) -> list[dict]:
    """[{"ticket", "url", "causes", "keys"}] for `user`'s open tickets that need attention, newest change first."""
    rows = (
        Ticket.objects.filter(assigned_to=user)
        .exclude(status=Ticket.Status.CLOSED)
        .annotate(held=Count("held_actions", filter=Q(held_actions__status="pending")))
        .filter(~Q(attention="") | Q(held__gt=0))
        .order_by("-updated_at")
        .values_list("pk", "attention", "held")[:MAX_TICKETS]
    )
    out = []
    for pk, attention, held in rows:
        texts = reasons(attention) + ([HELD] if held else [])
        out.append(
            {
                "ticket": pk,
                "url": reverse("desk-ticket", args=[pk]),
                "causes": [cause_of(t)[:80] for t in texts],
                "keys": [_digest(pk, t) for t in texts],
            }
        )
    return out


@database_trip
def _read(user) -> list[dict]:
    return assigned_attention(user)


class AttentionConsumer(QueueConsumer):
    async def _frame(self, user) -> str:
        return json.dumps({"type": "attention", "tickets": await _read(user)})
