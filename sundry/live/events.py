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


def user_group(user_id: int) -> str:
    """Every socket a user has open, whatever it watches: logout closes them all."""
    return f"user-{user_id}"


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


def user_sockets_close(user_id: int) -> None:
    """Close every open socket of this user (called at logout)."""
    layer = get_channel_layer()
    if layer is None:
        return
    try:
        async_to_sync(layer.group_send)(user_group(user_id), {"type": "session.ended"})
    except Exception:  # the session is gone anyway: each socket re-checks it on its next push
        log.warning("closing sockets of user %s failed", user_id, exc_info=True)
