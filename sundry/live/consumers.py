"""Websocket consumers: they only push; edits go over HTTP.

A watcher is checked (session, role, and the ticket itself) and counted
against the socket limits before it joins any group. Then, as Channels
documents, it joins its user's group and leaves it on disconnect; each group
message is handled by the method named for its type. Its ticket's pushes come
through the process's one member of the ticket's group (sundry.live.fanout),
which calls the same handler methods.
On connect it gets a full snapshot rendered from the database as it is then;
after each commit that changes its ticket it gets the panels whose rendering
changed, with the ticket's version. The page asks for a snapshot when a frame
does not follow the version it holds, and checks its version now and then, so
a push the channel layer dropped is repaired too.
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
import time
from importlib import import_module
from types import SimpleNamespace

from channels.generic.websocket import AsyncWebsocketConsumer
from django.conf import settings
from django.contrib import auth
from django.contrib.auth.models import AnonymousUser

from sundry.live import fanout, limits, panels
from sundry.live.dbtrips import database_trip
from sundry.live.presence import PresenceWatcher
from sundry.tickets.events import session_tag, user_group
from sundry.tickets.models import Ticket

log = logging.getLogger("sundry.live")

# Application close codes. The socket is accepted first and then closed with
# one, so the browser sees the reason and stops retrying; a refused handshake
# would look like a network drop (1006) and be retried forever.
CLOSE_FORBIDDEN = 4403
CLOSE_SIGNED_OUT = 4401
CLOSE_TOO_MANY = limits.CLOSE_TOO_MANY_FOR_USER
CLOSE_TRY_AGAIN_LATER = limits.CLOSE_TRY_AGAIN_LATER

# Access (session alive and unexpired, role, ticket ownership) is re-read at
# once when it may have changed — logout, a user or customer saved, a ticket
# saved or deleted (`access.changed`, see sundry.live.signals) — and otherwise
# at most this often per socket, as a backstop for changes made around the ORM
# and for sessions that expire. Each socket's deadline is jittered so hundreds
# of sockets opened together do not all re-read in the same push.
ACCESS_RECHECK_SECONDS = 30.0
ACCESS_RECHECK_JITTER = 0.5  # fraction of the period, drawn per check


def recheck_deadline() -> float:
    """When an open socket next re-reads who may watch (jittered, so sockets opened together do not re-check together)."""
    return time.monotonic() + ACCESS_RECHECK_SECONDS * (1 - ACCESS_RECHECK_JITTER * random.random())


def session_user(scope):
    """The user the socket's session belongs to now, read afresh from the session store.

    Loading a session honours its expiry (an expired one reads as empty), and
    `auth.get_user` checks the session's password hash and that the user may
    still log in; None when any of that fails.
    """
    key = getattr(scope.get("session"), "session_key", None)
    if not key:
        return None
    store = import_module(settings.SESSION_ENGINE).SessionStore(key)
    user = auth.get_user(SimpleNamespace(session=store))
    return user if user.is_authenticated else None


@database_trip
def _check(scope, audience: str, ticket_id: int, *, fresh: bool = True):
    """(None, (ticket, viewer)) if the socket may watch; else (close code, None).

    `fresh=False` (the handshake): who the socket connects as is read from its session here,
    beside the ticket, in one trip to the database (one connection) — a ticket socket's route
    has no auth middleware reading it apart (`sundry.routing`) — and kept in the scope; the
    session is not read a second time. Behind Channels' auth middleware, its user is taken."""
    if not fresh and "user" not in scope:
        scope["user"] = session_user(scope) or AnonymousUser()
    connected_as = scope.get("user")
    user = session_user(scope) if fresh else connected_as
    if user is None or not getattr(user, "is_authenticated", False) or user.pk != getattr(connected_as, "pk", None):
        signed_in = getattr(connected_as, "is_authenticated", False)
        return (CLOSE_SIGNED_OUT if signed_in and fresh else CLOSE_FORBIDDEN), None
    ticket, viewer = panels.viewer_for(user, audience, ticket_id)
    return (None, (ticket, viewer)) if ticket is not None else (CLOSE_FORBIDDEN, None)


# A re-check due on many sockets of one session and ticket at once (a push waking hundreds of
# them past their period, a user saved with hundreds of pages open) is one read: a check of the
# same session, user, audience and ticket that started this recently serves them all.
SHARED_CHECK_SECONDS = 1.0
_RECENT_CHECKS: dict[tuple, tuple[float, asyncio.Future]] = {}


async def _check_shared(scope, audience: str, ticket_id: int, *, since: float):
    """`_check` (fresh), or the result of one of the same session, user, audience and ticket
    that started at `since` or later."""
    key = (
        getattr(scope.get("session"), "session_key", None),
        getattr(scope.get("user"), "pk", None),
        audience,
        ticket_id,
    )
    now = time.monotonic()
    hit = _RECENT_CHECKS.get(key)
    if hit is not None and hit[0] >= since:
        return await asyncio.shield(hit[1])
    for old in [k for k, (at, _) in _RECENT_CHECKS.items() if at < now - SHARED_CHECK_SECONDS]:
        del _RECENT_CHECKS[old]
    check = asyncio.ensure_future(_check(scope, audience, ticket_id))
    _RECENT_CHECKS[key] = (now, check)
    return await asyncio.shield(check)


@database_trip
def _render(access, begun: list):
    begun.append(time.monotonic())  # before its first read: sockets that joined until now may share it
    return panels.render_current(access)


@database_trip
def _db_version(ticket_id):
    return Ticket.objects.filter(pk=ticket_id).values_list("version", flat=True).first()


class _Renders:
    """Renderings in flight in this process, so the sockets a push (or a reconnect
    storm) wakes at once share one render instead of queueing one each.

    Only a rendering whose reads began after a socket joined its groups may serve that
    socket's snapshot: anything committed after the render read the database is
    pushed to it. A render is stamped when its reads begin on the database thread, not
    when it is asked for: one still waiting its turn there (behind the checks of the
    sockets opening with it) serves every socket that joins before it begins, so the
    sockets that open a ticket together share its first render. A socket that joined
    after a render began waits for the next one, which starts when the running one ends
    and serves everyone who joined before it began: at most two renders per ticket and
    audience.
    """

    def __init__(self):
        # key -> (when its reads began: [] until they do, the render's task)
        self.running: dict[tuple, tuple[list, asyncio.Task]] = {}
        self.queued: dict[tuple, asyncio.Task] = {}

    async def since(self, access, started_after: float):
        ticket, viewer = access
        key = (viewer.audience, ticket.pk, ticket.created_at)
        running = self.running.get(key)
        if running is None:
            running = self._start(key, access)
        begun = running[0]
        if not begun or begun[0] >= started_after:  # not begun yet: it begins after now
            return await asyncio.shield(running[1])
        queued = self.queued.get(key)
        if queued is None:  # held in this dict until it starts
            queued = self.queued[key] = asyncio.ensure_future(self._after(key, running[1], access))
        return await asyncio.shield(queued)

    def _start(self, key, access) -> tuple[list, asyncio.Task]:
        begun: list = []
        task = asyncio.ensure_future(_render(access, begun))  # held in `running` until done
        entry = self.running[key] = (begun, task)
        task.add_done_callback(lambda done: self._done(key, done))
        return entry

    async def _after(self, key, before: asyncio.Task, access):
        await asyncio.wait([before])
        if self.queued.get(key) is asyncio.current_task():
            del self.queued[key]
        running = self.running.get(key)
        if running is None or running[1] is before:
            running = self._start(key, access)
        return await running[1]

    def _done(self, key, task) -> None:
        if self.running.get(key, (None, None))[1] is task:
            del self.running[key]


RENDERS = _Renders()


class TicketWatcher(PresenceWatcher, AsyncWebsocketConsumer):
    """One person watching one ticket; subclasses name the audience and its group."""

    audience = ""

    def ticket_group(self) -> str:
        raise NotImplementedError

    async def connect(self):
        self.ticket_id = int(self.scope["url_route"]["kwargs"]["ticket_id"])
        self.joined: list[str] = []
        self.admitted_for = None
        self.sent_version, self.sent_hashes = -1, None
        self.access, self.access_deadline = None, 0.0
        self.hub_group = None
        self.sending = asyncio.Lock()  # one frame at a time: each is diffed against the one before
        await self.accept()
        # Check before joining anything: a refused watcher never receives a group message.
        refusal, access = await _check(self.scope, self.audience, self.ticket_id, fresh=False)
        if refusal is None:
            refusal = limits.admit(self.scope["user"].pk)
        if refusal is not None:
            await self.close(code=refusal)
            return
        self.admitted_for = self.scope["user"].pk
        self.access, self.access_deadline = access, recheck_deadline()
        self.joined = [user_group(self.admitted_for)]
        await self.channel_layer.group_add(self.joined[0], self.channel_name)
        self.hub_group = self.ticket_group()
        await fanout.join(self.hub_group, self)
        self.joined_at = time.monotonic()
        # Joined first, rendered second: a commit in between brings its own push.
        await self._send_snapshot()
        await self.presence_joined()

    async def disconnect(self, code):
        await self._leave()
        if getattr(self, "admitted_for", None) is not None:
            limits.release(self.admitted_for)
            self.admitted_for = None

    async def _leave(self):
        if getattr(self, "hub_group", None):
            group, self.hub_group = self.hub_group, None
            await fanout.leave(group, self)
        for group in getattr(self, "joined", ()):
            await self.channel_layer.group_discard(group, self.channel_name)
        self.joined = []
        await self.presence_left()

    def ready(self) -> bool:
        """For the hub: True when a push can be served now, without re-reading access."""
        return (
            bool(self.joined)
            and self.access is not None
            and time.monotonic() < self.access_deadline
            and not self.sending.locked()
        )

    async def receive(self, text_data=None, bytes_data=None):
        """A full snapshot, a version check that yields one when behind, or (staff) typing news."""
        if not self.joined:
            return
        try:
            message = limits.parse_frame(text_data, bytes_data)
        except limits.FrameRefused as exc:
            # Not something the page sends: the socket closes with the reason (the page reconnects).
            await self._leave()
            self.access = None
            await self.close(code=exc.code, reason=str(exc)[:120])
            return
        kind = message.get("type")
        if kind == "resync":
            await self._send_snapshot()
        elif kind == "sync":
            if await self._access() is None:
                return
            if await _db_version(self.ticket_id) != message.get("version"):
                await self._send_snapshot()
            await self.presence_check()
        elif kind == "typing":
            await self.presence_typing(message.get("on") is True)

    # --- group messages (one method per message type) --------------------------------------

    async def ticket_changed(self, event):
        """A commit changed the ticket (sundry.tickets.events). Older news is already rendered."""
        async with self.sending:
            version = event.get("version", 0)
            if not self.joined or version <= self.sent_version:
                return
            access = await self._access()
            if access is None:
                return
            rendering = panels.cached_rendering(access, version)
            if rendering is None:
                rendering = await RENDERS.since(access, 0.0)  # whatever is rendering now, if new enough
                if rendering is not None and rendering.version < version:
                    rendering = await RENDERS.since(access, time.monotonic())
            await self._send_frame(rendering, self.sent_hashes)

    def stream_wording(self, text: str) -> str:
        """The streamed reply as this audience reads it (the customer page words it as their messages)."""
        return text

    async def reply_stream(self, event):
        """The agent's reply as it is written (sundry.agent.streaming): sent as JSON beside the frames,
        never a panel — the stored turn replaces it. The customer reads it as their messages read."""
        if not self.joined or event.get("ticket") != self.ticket_id:
            return
        if await self._access() is None:
            return
        text = event.get("text") or ""
        text = self.stream_wording(text)
        await self.send(
            text_data=json.dumps(
                {
                    "type": "reply_stream",
                    "stream": event.get("stream"),
                    "seq": event.get("seq"),
                    "state": event.get("state"),
                    "text": text,
                    "turn": event.get("turn"),
                }
            )
        )

    async def access_changed(self, event):
        """Who may watch what may have changed (sundry.live.signals): re-read it now (a read
        that started before this news came serves no one)."""
        self.access_deadline = 0.0
        await self._access(since=time.monotonic())

    async def session_ended(self, event):
        """The user logged out: the sockets of that session close; their others re-check."""
        key = getattr(self.scope.get("session"), "session_key", None)
        if event.get("session") is None or (key and event["session"] == session_tag(key)):
            await self._close(CLOSE_SIGNED_OUT)
        else:
            await self.access_changed(event)

    # --- sending ------------------------------------------------------------------------------

    async def _access(self, since: float | None = None):
        """The checked (ticket, viewer), re-read when due; None (and the socket closed) if it ended.
        The read may be another socket's of the same session and ticket, started at `since` or
        later (by default, within `SHARED_CHECK_SECONDS`, and never over the re-check period)."""
        now = time.monotonic()
        if self.access is not None and now < self.access_deadline:
            return self.access
        if since is None:  # never a read older than the re-check period itself
            since = now - min(SHARED_CHECK_SECONDS, ACCESS_RECHECK_SECONDS)
        refusal, access = await _check_shared(self.scope, self.audience, self.ticket_id, since=since)
        if refusal is not None:
            await self._close(refusal)
            return None
        self.access, self.access_deadline = access, recheck_deadline()
        return access

    async def _send_snapshot(self):
        async with self.sending:
            access = await self._access()
            if access is None:
                return
            # Never from the cache: rendered from the database by a render that started
            # after this socket joined its groups (anything committed later is pushed to it).
            await self._send_frame(await RENDERS.since(access, self.joined_at), None)

    async def _send_frame(self, rendering, sent_hashes):
        if rendering is None:  # the ticket is gone from this viewer's reach
            await self._close(CLOSE_FORBIDDEN)
            return
        if sent_hashes is not None and rendering.version <= self.sent_version:
            return  # a newer frame went out meanwhile
        frame = panels.compose(rendering, self.sent_version, sent_hashes)
        if frame.kind == "diff" and not frame.panels and frame.version == self.sent_version:
            return
        self.sent_version, self.sent_hashes = frame.version, frame.hashes
        self.sent_kind, self.sent_base = frame.kind, frame.base  # what the page's marker now says
        await self.send(text_data=frame.html)

    async def _close(self, code: int):
        await self._leave()
        self.access = None
        await self.close(code=code)
