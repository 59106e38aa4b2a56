"""Who has a ticket open on the desk, and who is typing in its reply box.

Each desk socket marks its person as viewing the ticket while it is open and as
typing while the page says keys are coming. A mark lasts a short while unless
renewed (the page checks in every 20 s; it repeats "typing" every 2 s), and a
closing socket removes its own: a web process that dies leaves marks that
simply lapse. With Redis configured the marks live there, since a ticket's
watchers may be spread over several web processes; otherwise in this process.

Marks are kept per socket (one person may have the ticket open twice) in a
sorted set per ticket and kind, scored by when they lapse.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from dataclasses import dataclass

import redis
import redis.asyncio as aioredis
from django.conf import settings
from django.template.loader import render_to_string
from redis.exceptions import RedisError

from sundry.live.dbtrips import database_trip
from sundry.tickets.events import customer_group, staff_group
from sundry.tickets.models import Ticket

log = logging.getLogger("sundry.live")

VIEWING, TYPING = "viewing", "typing"
# The customer's own page open on their ticket: never shown to anyone, read by the e-mail
# notifier (sundry.portal.notices), which tells no one of a reply already on their screen.
CUSTOMER_VIEWING = "customer"
VIEWING_TTL = 60.0  # seconds: three of the page's 20 s check-ins
TYPING_TTL = 6.0  # seconds: the page repeats "typing" every 2 s while keys come


@dataclass(frozen=True)
class Mark:
    user_id: int
    name: str
    socket: str

    def member(self) -> str:
        return f"{self.user_id}|{self.socket}|{self.name}"

    @classmethod
    def parse(cls, member: str) -> Mark:
        user_id, socket, name = member.split("|", 2)
        return cls(int(user_id), name, socket)


def _key(ticket_id: int, kind: str) -> str:
    return f"{settings.CHANNEL_PREFIX}:presence:{ticket_id}:{kind}"


class _RedisStore:
    def __init__(self, url: str):
        self.url = url
        self.clients: dict = {}  # one client per event loop: a connection belongs to its loop

    def _client(self):
        loop = asyncio.get_running_loop()
        client = self.clients.get(loop)
        if client is None:
            client = self.clients[loop] = aioredis.from_url(self.url, socket_timeout=5, socket_connect_timeout=5)
        return client

    async def mark(self, ticket_id: int, kind: str, mark: Mark, ttl: float) -> None:
        key = _key(ticket_id, kind)
        async with self._client().pipeline(transaction=False) as pipe:
            pipe.zadd(key, {mark.member(): time.time() + ttl})
            pipe.expire(key, int(ttl) * 2 + 1)  # a ticket nobody watches leaves nothing behind
            await pipe.execute()

    async def unmark(self, ticket_id: int, kind: str, mark: Mark) -> None:
        await self._client().zrem(_key(ticket_id, kind), mark.member())

    async def current(self, ticket_id: int, kind: str) -> list[Mark]:
        key, now = _key(ticket_id, kind), time.time()
        async with self._client().pipeline(transaction=False) as pipe:
            pipe.zremrangebyscore(key, "-inf", now)
            pipe.zrangebyscore(key, now, "+inf")
            _, members = await pipe.execute()
        return [Mark.parse(m.decode()) for m in members]


class _LocalStore:
    def __init__(self):
        self.marks: dict[tuple, dict[str, float]] = {}

    async def mark(self, ticket_id, kind, mark, ttl):
        self.marks.setdefault((ticket_id, kind), {})[mark.member()] = time.time() + ttl

    async def unmark(self, ticket_id, kind, mark):
        self.marks.get((ticket_id, kind), {}).pop(mark.member(), None)

    async def current(self, ticket_id, kind):
        now, marks = time.time(), self.marks.get((ticket_id, kind), {})
        for member in [m for m, until in marks.items() if until <= now]:
            del marks[member]
        if not marks:
            self.marks.pop((ticket_id, kind), None)
        return [Mark.parse(m) for m in marks]


_STORES: dict = {}


def store():
    """The store for the configured Redis (or this process), made once per URL."""
    url = settings.REDIS_URL
    if url not in _STORES:
        _STORES[url] = _RedisStore(url) if url else _LocalStore()
    return _STORES[url]


# Presence is a courtesy: a Redis that is away (restarting, say) costs the line, never the socket.
_UNAVAILABLE = (RedisError, OSError, asyncio.TimeoutError)


async def mark(ticket_id: int, kind: str, who: Mark) -> None:
    try:
        await store().mark(ticket_id, kind, who, TYPING_TTL if kind == TYPING else VIEWING_TTL)
    except _UNAVAILABLE:
        log.warning("presence: could not mark %s on ticket %s", kind, ticket_id, exc_info=True)


async def unmark(ticket_id: int, kind: str, who: Mark) -> None:
    try:
        await store().unmark(ticket_id, kind, who)
    except _UNAVAILABLE:  # the mark lapses on its own
        log.warning("presence: could not unmark %s on ticket %s", kind, ticket_id, exc_info=True)


async def people(ticket_id: int) -> list[dict]:
    """Everyone on the ticket now, one entry per person: [{"user", "name", "typing"}], by name."""
    return (await people_and_sockets(ticket_id, None))[0]


async def people_and_sockets(ticket_id: int, user_id: int | None) -> tuple[list[dict], int]:
    """`people`, and how many sockets of user `user_id` view the ticket (in the same read)."""
    try:
        viewing = await store().current(ticket_id, VIEWING)
        typing = {m.user_id for m in await store().current(ticket_id, TYPING)}
    except _UNAVAILABLE:
        log.warning("presence: could not read ticket %s", ticket_id, exc_info=True)
        return [], 0
    return _people(viewing, typing), sum(m.user_id == user_id for m in viewing)


def _people(viewing: list[Mark], typing: set[int]) -> list[dict]:
    out = {}
    for m in viewing:
        out[m.user_id] = {"user": m.user_id, "name": m.name, "typing": m.user_id in typing}
    return sorted(out.values(), key=lambda p: p["name"])


_SYNC_CLIENTS: dict = {}


def customer_viewing(ticket_id: int) -> bool | None:
    """From synchronous code (the notifier's task): whether the ticket's customer has its page
    open now; None when the marks cannot be read."""
    url, now = settings.REDIS_URL, time.time()
    try:
        if url:
            if url not in _SYNC_CLIENTS:
                _SYNC_CLIENTS[url] = redis.Redis.from_url(url, socket_timeout=5, socket_connect_timeout=5)
            return bool(_SYNC_CLIENTS[url].zcount(_key(ticket_id, CUSTOMER_VIEWING), now, "+inf"))
        marks = store().marks.get((ticket_id, CUSTOMER_VIEWING), {})
        return any(until > now for until in list(marks.values()))
    except (RedisError, OSError):
        log.warning("presence: could not read ticket %s", ticket_id, exc_info=True)
        return None


def staff_html(everyone: list[dict], me: int) -> str:
    """The desk's presence line for staff member `me`: colleagues viewing and typing, never oneself."""
    return _staff_line(tuple((p["name"], bool(p["typing"])) for p in everyone if p["user"] != me))


@functools.lru_cache(maxsize=512)
def _staff_line(others: tuple) -> str:
    # Every desk socket of a ticket renders the line when anyone comes or goes: with hundreds of
    # sockets on one ticket, the same few lines were rendered once per socket per arrival.
    return render_to_string(
        "live/presence.html",
        {
            "typing": _names([name for name, typing in others if typing]),
            "viewing": _names([name for name, typing in others if not typing]),
        },
    ).strip()


NAMES_SHOWN = 3


def _names(names: list[str]) -> list[str]:
    """At most a few names; the rest counted ("ann, ben, cat and 4 others")."""
    if len(names) <= NAMES_SHOWN + 1:
        return names
    return names[:NAMES_SHOWN] + [f"{len(names) - NAMES_SHOWN} others"]


def customer_html(staff_typing: bool) -> str:
    return render_to_string("live/staff_typing.html", {"typing": staff_typing}).strip()


# --- the sockets' side ---------------------------------------------------------------------------

STAFF_AUDIENCE, CUSTOMER_AUDIENCE = "staff", "customer"  # sundry.live.panels' audiences
TYPING_MIN_SECONDS = 1.0  # a page's repeated "typing" renews the mark at most this often


@database_trip
def _holder(ticket_id: int):
    """The staff member who holds the ticket (taken over and assigned), or None."""
    row = Ticket.objects.filter(pk=ticket_id).values_list("handler", "assigned_to_id").first()
    return row[1] if row and row[0] == Ticket.Handler.STAFF else None


async def holder_typing(ticket_id: int, everyone: list[dict]) -> bool:
    """What the customer is told: only the person who may reply to them is "Support typing"
    (a colleague writing a note for the desk is not)."""
    typing = {p["user"] for p in everyone if p["typing"]}
    return bool(typing) and await _holder(ticket_id) in typing


class PresenceWatcher:
    """Presence for a ticket socket (sundry.live.consumers.TicketWatcher): a desk socket marks
    its person as viewing and typing and tells the ticket's watchers; every socket shows the
    presence its viewer may see, sent as a frame at the version the page already holds."""

    presence_mark: Mark | None = None
    customer_mark: Mark | None = None
    presence_sent: str | None = None
    presence_typing_at: float = 0.0
    presence_recheck: asyncio.Task | None = None

    async def presence_joined(self) -> None:
        # A page (re)connects showing nobody (sundry-presence.js hides the line while the socket
        # is down): only news is sent.
        self.presence_sent = staff_html([], 0) if self.audience == STAFF_AUDIENCE else customer_html(False)
        if self.audience == STAFF_AUDIENCE:
            user = self.scope["user"]
            self.presence_mark = Mark(user.pk, user.get_username(), self.channel_name)
            await mark(self.ticket_id, VIEWING, self.presence_mark)
            everyone, mine = await people_and_sockets(self.ticket_id, user.pk)
            if mine > 1:
                # The person shows on the ticket already (another of their pages): nobody's line
                # changes, so only this page is told. Hundreds of one person's sockets opening on
                # one ticket would otherwise tell every socket of each arrival.
                await self.presence_send(staff_html(everyone, user.pk))
            else:
                await self.presence_broadcast(everyone)
        else:
            user = self.scope["user"]
            self.customer_mark = Mark(user.pk, user.get_username(), self.channel_name)
            await mark(self.ticket_id, CUSTOMER_VIEWING, self.customer_mark)
            await self.presence_show(await holder_typing(self.ticket_id, await people(self.ticket_id)))

    async def presence_left(self) -> None:
        if self.presence_recheck is not None:
            self.presence_recheck.cancel()
            self.presence_recheck = None
        customer, self.customer_mark = self.customer_mark, None
        if customer is not None:
            await unmark(self.ticket_id, CUSTOMER_VIEWING, customer)
        who, self.presence_mark = self.presence_mark, None
        if who is None:
            return
        was_typing, self.presence_typing_at = self.presence_typing_at != 0.0, 0.0
        await unmark(self.ticket_id, TYPING, who)
        await unmark(self.ticket_id, VIEWING, who)
        everyone, left = await people_and_sockets(self.ticket_id, who.user_id)
        if left and not was_typing:
            return  # the person still shows, as before (another of their pages): nobody's line changes
        await self.presence_broadcast(everyone)

    async def presence_typing(self, on: bool) -> None:
        if self.presence_mark is None:
            return  # customers' typing is not shown to anyone
        now = time.monotonic()
        if on:
            if now - self.presence_typing_at < TYPING_MIN_SECONDS:
                return
            started = self.presence_typing_at == 0.0
            self.presence_typing_at = now
            await mark(self.ticket_id, TYPING, self.presence_mark)
            if not started:
                return  # still typing: the mark is renewed, nothing to tell
        else:
            if self.presence_typing_at == 0.0:
                return
            self.presence_typing_at = 0.0
            await unmark(self.ticket_id, TYPING, self.presence_mark)
        await self.presence_broadcast()

    async def presence_check(self) -> None:
        """The page checked in: renew this socket's mark and show marks that lapsed meanwhile."""
        if self.customer_mark is not None:
            await mark(self.ticket_id, CUSTOMER_VIEWING, self.customer_mark)
        if self.presence_mark is not None:
            await mark(self.ticket_id, VIEWING, self.presence_mark)
            if self.presence_typing_at and time.monotonic() - self.presence_typing_at > TYPING_TTL:
                self.presence_typing_at = 0.0  # the page stopped saying so without saying it stopped
        await self.presence_refresh()

    async def presence_broadcast(self, everyone: list[dict] | None = None) -> None:
        if everyone is None:
            everyone = await people(self.ticket_id)
        await self.channel_layer.group_send(
            staff_group(self.ticket_id), {"type": "presence.changed", "people": everyone}
        )
        await self.channel_layer.group_send(
            customer_group(self.ticket_id),
            {"type": "presence.changed", "staff_typing": await holder_typing(self.ticket_id, everyone)},
        )

    async def presence_changed(self, event) -> None:
        """Someone came, went, started or stopped typing (sent by the socket that changed it)."""
        if self.audience == STAFF_AUDIENCE and isinstance(event.get("people"), list):
            await self.presence_send(staff_html(event["people"], self.scope["user"].pk))
            typing = any(p.get("typing") for p in event["people"])
        elif self.audience == CUSTOMER_AUDIENCE and "staff_typing" in event:
            typing = bool(event["staff_typing"])
            await self.presence_show(typing)
        else:
            return
        if typing and self.presence_recheck is None:
            # A typing mark lapses without a message if its socket's process died: look again then.
            self.presence_recheck = asyncio.ensure_future(self._presence_recheck())

    async def _presence_recheck(self) -> None:
        try:
            while True:
                await asyncio.sleep(TYPING_TTL + 0.5)
                if not await self.presence_refresh():
                    return
        finally:
            if self.presence_recheck is asyncio.current_task():
                self.presence_recheck = None

    async def presence_refresh(self) -> bool:
        """Read the marks and show them; returns whether anyone is typing."""
        everyone = await people(self.ticket_id)
        if self.audience == STAFF_AUDIENCE:
            await self.presence_send(staff_html(everyone, self.scope["user"].pk))
            return any(p["typing"] for p in everyone)
        typing = await holder_typing(self.ticket_id, everyone)
        await self.presence_show(typing)
        return typing

    async def presence_show(self, staff_typing: bool) -> None:
        await self.presence_send(customer_html(staff_typing))

    async def presence_send(self, html: str) -> None:
        async with self.sending:
            # Only on a page that holds a frame: the marker repeats the version it holds.
            if not self.joined or self.sent_version < 0 or html == self.presence_sent:
                return
            self.presence_sent = html
            # The marker the page holds, unchanged: a snapshot's as it was, a diff's as one on itself.
            kind = getattr(self, "sent_kind", "diff")
            base = self.sent_base if kind == "snapshot" else self.sent_version
            marker = render_to_string("live/marker.html", {"version": self.sent_version, "base": base, "kind": kind})
            await self.send(text_data=marker + html)
