"""Websocket consumers: they only push; edits go over HTTP.

A watcher is checked (login, role, and the ticket itself) before it joins any
group. On connect it gets a full snapshot rendered for it; after each commit
that changes its ticket it gets the panels whose rendering changed, rendered
for it again from the database, with the ticket's version. The page asks for
a snapshot when a frame does not follow the version it holds, and checks its
version now and then, so a push the channel layer dropped is repaired too.
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
import time

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer
from channels.consumer import get_handler_name

from sundry.live import fanout, panels
from sundry.live.events import customer_group, staff_group, user_group
from sundry.tickets.models import Ticket

log = logging.getLogger("sundry.live")

# Application close codes. The socket is accepted first and then closed with
# one, so the browser sees the reason and stops retrying; a refused handshake
# would look like a network drop (1006) and be retried forever.
CLOSE_FORBIDDEN = 4403
CLOSE_SIGNED_OUT = 4401


def _session_alive(scope) -> bool:
    session = scope.get("session")
    key = getattr(session, "session_key", None)
    return bool(key) and session.exists(key)


def _current_user(scope):
    """Re-read the user every time: a revoked role or ended session stops the pushes."""
    from django.contrib.auth import get_user_model

    user = scope.get("user")
    if not getattr(user, "is_authenticated", False) or not _session_alive(scope):
        return None
    return get_user_model().objects.filter(pk=user.pk, is_active=True).first()


# Access (session alive, role, ticket ownership) is re-read at once when it may
# have changed — logout, a user or customer saved, a ticket saved or deleted
# (`access.changed`, see sundry.live.signals) — and otherwise at most this often
# per socket, as a backstop for changes made around the ORM. Each socket's
# deadline is jittered so hundreds of sockets opened together do not all
# re-read in the same push.
ACCESS_RECHECK_SECONDS = 30.0
ACCESS_RECHECK_JITTER = 0.5  # fraction of the period, drawn per check


def _recheck_deadline() -> float:
    return time.monotonic() + ACCESS_RECHECK_SECONDS * (1 - ACCESS_RECHECK_JITTER * random.random())


@database_sync_to_async
def _frame(scope, audience, ticket_id, sent_version, sent_hashes, version=None, access=None):
    user = scope.get("user") if access is not None else _current_user(scope)
    if user is None:
        return None
    return panels.frame_for(user, audience, ticket_id, sent_version=sent_version, sent_hashes=sent_hashes,
                            version=version, access=access)


@database_sync_to_async
def _allowed(scope, audience, ticket_id) -> bool:
    user = _current_user(scope)
    return user is not None and panels.viewer_for(user, audience, ticket_id)[0] is not None


@database_sync_to_async
def _render(access):
    """Render the ticket's current version for this audience into the shared cache."""
    return panels.render_current(access)


# Renderings in flight in this process, so the hundreds of sockets a push wakes
# at once share one render instead of queueing a thread hop each.
_RENDERING: "dict[tuple, asyncio.Future]" = {}


async def _rendered(access, version: int) -> None:
    ticket, viewer = access
    key = (viewer.audience, ticket.pk, ticket.created_at, version)
    task = _RENDERING.get(key)
    if task is None:
        task = asyncio.ensure_future(_render(access))
        _RENDERING[key] = task
        task.add_done_callback(lambda _t, key=key: _RENDERING.pop(key, None))
    await asyncio.shield(task)


@database_sync_to_async
def _db_version(ticket_id):
    return Ticket.objects.filter(pk=ticket_id).values_list("version", flat=True).first()


class TicketWatcher(AsyncWebsocketConsumer):
    """One person watching one ticket; subclasses name the audience and its group."""

    audience = ""

    def ticket_group(self) -> str:
        raise NotImplementedError

    async def dispatch(self, message):
        # Channels closes stale database connections before every handler, a
        # thread hop per message. Here every database touch already goes
        # through database_sync_to_async, which does that itself, and a push
        # served from the shared rendering touches no database at all.
        handler = getattr(self, get_handler_name(message), None)
        if handler is None:
            raise ValueError(f"No handler for message type {message['type']}")
        await handler(message)

    async def connect(self):
        self.ticket_id = int(self.scope["url_route"]["kwargs"]["ticket_id"])
        self.joined: list[str] = []
        self.sent_version, self.sent_hashes = -1, None
        self.access, self.access_deadline = None, 0.0
        await self.accept()
        # Check before joining anything: a refused watcher never receives a group message.
        if not await _allowed(self.scope, self.audience, self.ticket_id):
            await self.close(code=CLOSE_FORBIDDEN)
            return
        # The ticket's pushes come through this process's hub for the ticket
        # (sundry.live.fanout); the user's own group (logout) comes directly.
        self.joined = [user_group(self.scope["user"].pk)]
        await self.channel_layer.group_add(self.joined[0], self.channel_name)
        self.hub_group = self.ticket_group()
        await fanout.join(self.hub_group, self)
        # Joined first, rendered second: a commit in between brings its own push.
        await self._send(snapshot=True)

    async def disconnect(self, code):
        if getattr(self, "hub_group", None):
            await fanout.leave(self.hub_group, self)
        for group in self.joined:
            await self.channel_layer.group_discard(group, self.channel_name)

    # --- as a watcher of the process's hub (sundry.live.fanout) -------------------------

    def push_ready(self) -> bool:
        """True when a push can be served without reading access from the database."""
        return self.access is not None and time.monotonic() < self.access_deadline

    async def group_message(self, message: dict) -> None:
        await self.dispatch(message)

    async def receive(self, text_data=None, bytes_data=None):
        """Only two requests: a full snapshot, or a version check that yields one when behind."""
        try:
            message = json.loads(text_data or "{}")
        except ValueError:
            return
        if not isinstance(message, dict):
            return
        kind = message.get("type")
        if kind == "resync":
            await self._send(snapshot=True)
        elif kind == "sync":
            if await _db_version(self.ticket_id) != message.get("version"):
                await self._send(snapshot=True)

    async def _send(self, *, snapshot: bool, version: int | None = None):
        access = self.access if time.monotonic() < self.access_deadline else None
        hashes = None if snapshot else self.sent_hashes
        frame = None
        if access is not None and version is not None:
            # Access checked recently: serve the pushed version from the shared
            # rendering, rendering it once for every socket if nobody has yet.
            frame = panels.cached_frame(access, version, sent_version=self.sent_version, sent_hashes=hashes)
            if frame is None:
                try:
                    await _rendered(access, version)
                except Exception:  # the ticket is gone or rendering failed: the full path below decides
                    log.debug("shared rendering failed", exc_info=True)
                frame = panels.cached_frame(access, version, sent_version=self.sent_version, sent_hashes=hashes)
        if frame is None:
            frame = await _frame(self.scope, self.audience, self.ticket_id, self.sent_version, hashes,
                                 version=version, access=access)
        if frame is None:  # access ended (role revoked, ticket gone, signed out)
            await self.close(code=CLOSE_FORBIDDEN)
            return
        if access is None:
            self.access, self.access_deadline = frame.access, _recheck_deadline()
        if frame.kind == "diff" and not frame.panels and frame.version == self.sent_version:
            return
        self.sent_version, self.sent_hashes = frame.version, frame.hashes
        await self.send(text_data=frame.html)

    async def ticket_changed(self, event):
        """A commit changed the ticket (sundry.live.events). Older news is already rendered."""
        if event.get("version", 0) > self.sent_version:
            await self._send(snapshot=False, version=event.get("version"))

    async def access_changed(self, event):
        """Who may watch what may have changed (sundry.live.signals): re-read it now."""
        self.access, self.access_deadline = None, 0.0
        if not await _allowed(self.scope, self.audience, self.ticket_id):
            await self.close(code=CLOSE_FORBIDDEN)

    async def session_ended(self, event):
        """The user logged out elsewhere: this socket closes with them."""
        await self.close(code=CLOSE_SIGNED_OUT)


class StaffTicketConsumer(TicketWatcher):
    audience = panels.STAFF

    def ticket_group(self) -> str:
        return staff_group(self.ticket_id)


class CustomerTicketConsumer(TicketWatcher):
    audience = panels.CUSTOMER

    def ticket_group(self) -> str:
        return customer_group(self.ticket_id)
