"""Tell watchers a ticket changed, after the change commits.

The database is the truth: a push only carries the ticket's version and a
hint; clients that miss one resync from a full snapshot.
"""

from __future__ import annotations

import logging

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.db import transaction

log = logging.getLogger("sundry.live")


def staff_group(ticket_id: int) -> str:
    return f"ticket-{ticket_id}-staff"


def customer_group(ticket_id: int) -> str:
    return f"ticket-{ticket_id}-customer"


def _push(ticket_id: int) -> None:
    from sundry.tickets.models import Ticket

    version = Ticket.objects.filter(pk=ticket_id).values_list("version", flat=True).first()
    if version is None:
        return
    layer = get_channel_layer()
    if layer is None:
        return
    message = {"type": "ticket.changed", "ticket": ticket_id, "version": version}
    for group in (staff_group(ticket_id), customer_group(ticket_id)):
        try:
            async_to_sync(layer.group_send)(group, message)
        except Exception:  # a lost push is repaired by the client's resync
            log.warning("push to %s failed", group, exc_info=True)


def ticket_changed(ticket_id: int) -> None:
    transaction.on_commit(lambda: _push(ticket_id))
