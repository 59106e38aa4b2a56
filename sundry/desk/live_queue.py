"""The desk queue's websocket: the page's counts, badges and table pushed when any ticket changes.

Staff only: the socket's session and role are checked before it joins anything,
counted against the socket limits (sundry.live.limits), and re-read on the same
schedule as a ticket socket's. It joins its user's group (logout closes it) and
the desk's queue group through the process's hub (sundry.live.fanout), which
hands it every ticket push. A push does not carry what changed in the queue, so
the socket re-reads the queue for its own view (filters, sort, page, "mine"),
at most once a second however many tickets change, and sends it only when it
differs from what the page holds.
"""

from __future__ import annotations

import asyncio
import json
import time

from channels.generic.websocket import AsyncWebsocketConsumer

from sundry.core.people import is_desk_staff
from sundry.desk.queue import MAX_QUERY_CHARS, queue_update
from sundry.live import fanout, limits
from sundry.live.consumers import (
    CLOSE_FORBIDDEN,
    CLOSE_SIGNED_OUT,
    recheck_deadline,
    session_user,
)
from sundry.live.dbtrips import database_trip
from sundry.tickets.events import QUEUE_GROUP, session_tag, user_group

REFRESH_MIN_SECONDS = 1.0  # a busy desk changes tickets many times a second; the page needs one view of it


@database_trip
def _check(scope):
    """(None, user) if the socket's session is a staff member's now; else (close code, None)."""
    connected_as = scope.get("user")
    user = session_user(scope)
    if user is None or user.pk != getattr(connected_as, "pk", None):
        return (CLOSE_SIGNED_OUT if getattr(connected_as, "is_authenticated", False) else CLOSE_FORBIDDEN), None
    return (None, user) if is_desk_staff(user) else (CLOSE_FORBIDDEN, None)


@database_trip
def _render(user, query: str) -> str:
    return queue_update(user, query)


def _clean_query(query: str) -> str:
    """The page's query string, bounded, without NULs (raw or %00): PostgreSQL takes no NUL in a string,
    and no filter the page offers has one."""
    return query[:MAX_QUERY_CHARS].replace("\x00", "").replace("%00", "")


class QueueConsumer(AsyncWebsocketConsumer):
    async def connect(self):
        self.joined, self.admitted_for, self.user = [], None, None
        self.access_deadline = 0.0
        self.query = _clean_query(self.scope.get("query_string", b"").decode("latin-1"))
        self.sent_html = None
        self.last_refresh = 0.0
        self.pending: asyncio.Task | None = None
        self.sending = asyncio.Lock()
        await self.accept()
        refusal, user = await _check(self.scope)
        if refusal is None:
            refusal = limits.admit(user.pk)
        if refusal is not None:
            await self.close(code=refusal)
            return
        self.admitted_for, self.user, self.access_deadline = user.pk, user, recheck_deadline()
        self.joined = [user_group(user.pk)]
        await self.channel_layer.group_add(self.joined[0], self.channel_name)
        await fanout.join(QUEUE_GROUP, self)
        self.joined.append(QUEUE_GROUP)
        # Joined first, rendered second: a change committed in between brings its own push.
        await self._refresh()

    async def disconnect(self, code):
        await self._leave()
        if self.admitted_for is not None:
            limits.release(self.admitted_for)
            self.admitted_for = None

    async def _leave(self):
        if self.pending is not None:
            self.pending.cancel()
            self.pending = None
        if QUEUE_GROUP in self.joined:
            await fanout.leave(QUEUE_GROUP, self)
        for group in self.joined:
            if group != QUEUE_GROUP:
                await self.channel_layer.group_discard(group, self.channel_name)
        self.joined = []

    def ready(self) -> bool:
        return True  # a push only schedules a refresh: it never waits

    async def receive(self, text_data=None, bytes_data=None):
        """The page says which view it shows (after a filter change) or checks in (every 20 s)."""
        if not self.joined:
            return
        try:
            message = limits.parse_frame(text_data, bytes_data)
        except limits.FrameRefused as exc:
            # Not something the page sends: closed with the reason, as a ticket socket is (the page reconnects).
            await self._leave()
            self.user = None
            await self.close(code=exc.code, reason=str(exc)[:120])
            return
        if message.get("type") == "view" and isinstance(message.get("query"), str):
            self.query = _clean_query(message["query"].lstrip("?"))
            self.sent_html = None  # the page's table came from its own request: send the view afresh
            await self._refresh()
        elif message.get("type") == "sync":
            await self._refresh()

    # --- group messages ------------------------------------------------------------------------

    async def ticket_changed(self, event):
        if not self.joined or (self.pending is not None and not self.pending.done()):
            return  # a refresh is already coming; it reads everything committed by then
        wait = self.last_refresh + REFRESH_MIN_SECONDS - time.monotonic()
        self.pending = asyncio.ensure_future(self._refresh_after(max(0.0, wait)))

    async def access_changed(self, event):
        self.access_deadline = 0.0
        await self._user()

    async def session_ended(self, event):
        key = getattr(self.scope.get("session"), "session_key", None)
        if event.get("session") is None or (key and event["session"] == session_tag(key)):
            await self._close(CLOSE_SIGNED_OUT)
        else:
            await self.access_changed(event)

    # --- sending -------------------------------------------------------------------------------

    async def _user(self):
        if self.user is not None and time.monotonic() < self.access_deadline:
            return self.user
        refusal, user = await _check(self.scope)
        if refusal is not None:
            await self._close(refusal)
            return None
        self.user, self.access_deadline = user, recheck_deadline()
        return user

    async def _refresh_after(self, delay: float):
        await asyncio.sleep(delay)
        # From here on a new push schedules the next refresh: this one may read before its commit.
        self.pending = None
        await self._refresh()

    async def _refresh(self):
        async with self.sending:
            user = await self._user()
            if user is None or not self.joined:
                return
            self.last_refresh = time.monotonic()
            text = await self._frame(user)
            if text != self.sent_html:
                self.sent_html = text
                await self.send(text_data=text)

    async def _frame(self, user) -> str:
        """What this socket sends now; a refresh sends it only when it differs from the last."""
        return json.dumps({"type": "queue", "html": await _render(user, self.query)})

    async def _close(self, code: int):
        await self._leave()
        self.user = None
        await self.close(code=code)
