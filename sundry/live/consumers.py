"""Websocket consumers: they only push; edits go over HTTP.

A watcher gets a snapshot on connect, then the updates sent to its group after
each commit. Staff and customer renderings live in separate groups.
"""

from __future__ import annotations

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer

from sundry.core.people import is_desk_staff
from sundry.live.events import staff_group

# Application close code: "forbidden". The socket is accepted first and then
# closed with it, so the browser sees 4403 and stops retrying; a refused
# handshake would look like a network drop (1006) and be retried forever.
CLOSE_FORBIDDEN = 4403


@database_sync_to_async
def _ticket_version(ticket_id: int) -> int | None:
    from sundry.tickets.models import Ticket

    return Ticket.objects.filter(pk=ticket_id).values_list("version", flat=True).first()


class StaffTicketConsumer(AsyncJsonWebsocketConsumer):
    """One staff member watching one ticket on the desk."""

    group_name: str | None = None

    async def connect(self):
        self.ticket_id = int(self.scope["url_route"]["kwargs"]["ticket_id"])
        user = self.scope.get("user")
        version = await _ticket_version(self.ticket_id) if is_desk_staff(user) else None
        await self.accept()
        if version is None:  # not staff, or no such ticket: say the same either way
            await self.close(code=CLOSE_FORBIDDEN)
            return
        self.group_name = staff_group(self.ticket_id)
        await self.channel_layer.group_add(self.group_name, self.channel_name)
        await self.send_json({"type": "snapshot", "ticket": self.ticket_id, "version": version})

    async def disconnect(self, code):
        if self.group_name:
            await self.channel_layer.group_discard(self.group_name, self.channel_name)

    async def receive_json(self, content, **kwargs):
        """Clients do not talk over this socket; edits go through views."""

    async def ticket_update(self, event):
        """Re-rendered panels for this ticket."""
        await self.send_json({"type": "update", "version": event["version"], "html": event["html"]})

    async def ticket_changed(self, event):
        """A bare version bump (sundry.live.events); the client resyncs if it missed one."""
        await self.send_json({"type": "changed", "ticket": event["ticket"], "version": event["version"]})
