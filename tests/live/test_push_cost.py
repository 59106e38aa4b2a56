"""A push costs the same on a 2,000-turn ticket as on a short one, and opening a socket is cheap.

Work is counted, not timed: turns read from the database (every Turn row built), conversation
items rendered, session reads, renders. The control is the way the conversation was rendered
before (LIVE_CONVERSATION_WINDOW=0: every turn read and the whole conversation in the snapshot).
"""

from __future__ import annotations

import asyncio
import re
from importlib import import_module

import pytest
from channels.db import DatabaseSyncToAsync, database_sync_to_async
from django.conf import settings
from django.contrib.auth import get_user_model
from django.db.backends.utils import CursorWrapper

from sundry.desk import panels as desk_panels
from sundry.desk.lifecycle import ticket_create
from sundry.live import fanout, panels
from sundry.tickets.models import Ticket, Turn
from sundry.tickets.services import turn_append
from tests.factories import CustomerFactory, TicketClassFactory
from tests.live.test_consumers import _login, _open, desk, help_

LONG = 2000
# Frames are waited for, never timed: the bound is generous so a loaded machine does not fail a
# count (the control re-reads all 2,000 turns per push).
WAIT = 60
ITEM = re.compile(r'class="turn-item" id="(?:turn|msg)-(\d+)"')


@pytest.fixture
def long_ticket(transactional_db):
    users = get_user_model().objects
    staff, owner = users.create_user("sam", password="x", is_staff=True), users.create_user("alice", password="x")
    ticket = ticket_create(
        customer=CustomerFactory(user=owner).person, ticket_class=TicketClassFactory(), subject="A long one"
    )
    Turn.objects.bulk_create(
        Turn(
            ticket=ticket,
            number=n,
            author="customer" if n % 2 else "agent",
            text=f"Message {n}: where is my parcel, and when will the refund land?",
        )
        for n in range(1, LONG + 1)
    )
    Ticket.objects.filter(pk=ticket.pk).update(last_turn_number=LONG)
    return {"ticket": Ticket.objects.get(pk=ticket.pk), "staff": _login(staff)[1], "alice": _login(owner)[1]}


class Counts:
    """Turn rows built from the database and conversation items rendered, in every thread."""

    def __init__(self, monkeypatch):
        self.turns = self.items = 0
        from_db, render = Turn.from_db.__func__, panels.render_to_string

        def counted_from_db(cls, *args, **kwargs):
            self.turns += 1
            return from_db(cls, *args, **kwargs)

        def counted_render(template, *args, **kwargs):
            self.items += template in ("desk/panels/turn.html", "portal/panels/message.html")
            return render(template, *args, **kwargs)

        monkeypatch.setattr(Turn, "from_db", classmethod(counted_from_db))
        monkeypatch.setattr(panels, "render_to_string", counted_render)

    def reset(self):
        self.turns = self.items = 0


async def _push_one(long_ticket, counts, socket_of, cookie):
    socket = socket_of(long_ticket["ticket"].pk, cookie)
    snapshot = await _open(socket)
    counts.reset()
    turn = await database_sync_to_async(turn_append)(
        ticket=long_ticket["ticket"], author="agent", text="Your refund landed this morning."
    )
    frame = await socket.receive_from(timeout=WAIT)
    await socket.disconnect()
    return snapshot, frame, turn, (counts.turns, counts.items)


@pytest.mark.parametrize("audience", ["staff", "customer"])
async def test_a_push_on_a_2000_turn_ticket_reads_renders_and_sends_one_turn(long_ticket, monkeypatch, audience):
    counts = Counts(monkeypatch)
    socket_of, cookie = (desk, long_ticket["staff"]) if audience == "staff" else (help_, long_ticket["alice"])
    snapshot, frame, turn, (read, rendered) = await _push_one(long_ticket, counts, socket_of, cookie)

    shown = [int(n) for n in ITEM.findall(snapshot)]
    assert shown == list(range(LONG - panels.window() + 1, LONG + 1))  # the page opens at the latest turns
    assert "data-earlier" in snapshot
    assert ITEM.findall(frame) == [str(turn.number)]  # the push: the new turn, appended, and nothing else of it
    assert "beforeend:#panel-conversation" in frame and 'id="panel-conversation"' not in frame
    item = re.search(
        r'<div class="turn-item".*?</div>\s*</div>|<div class="turn-item".*?</article></div>', frame, re.S
    ).group(0)
    assert len(frame.encode()) < len(item.encode()) + 1500, (len(frame), len(item))  # one turn's worth of bytes
    assert read <= 2 and rendered == 1, (read, rendered)  # the new turn read and rendered, no other


async def test_control_the_whole_conversation_rendered_on_every_push(long_ticket, monkeypatch, settings):
    settings.LIVE_CONVERSATION_WINDOW = 0  # as before: every turn read on every push, all of them in the snapshot
    counts = Counts(monkeypatch)
    snapshot, frame, turn, (read, rendered) = await _push_one(long_ticket, counts, desk, long_ticket["staff"])

    assert len(ITEM.findall(snapshot)) == LONG
    assert ITEM.findall(frame) == [str(turn.number)]  # the diff was already one turn...
    assert read >= LONG + 1  # ...but every turn was read to make it
    assert len(snapshot) > 100 * len(frame)


async def test_a_socket_opens_with_one_session_read_and_one_render(long_ticket, monkeypatch):
    store = import_module(settings.SESSION_ENGINE).SessionStore
    loads, renders = [], []
    load, render_current = store.load, panels.render_current
    monkeypatch.setattr(store, "load", lambda self: loads.append(1) or load(self))
    monkeypatch.setattr(panels, "render_current", lambda access: renders.append(1) or render_current(access))
    ticket = long_ticket["ticket"]

    socket = desk(ticket.pk, long_ticket["staff"])
    await _open(socket)
    assert (len(loads), len(renders)) == (1, 1)

    # Control: a socket whose access is due for its re-check reads the session again.
    (hub,) = fanout.hubs_of(f"ticket-{ticket.pk}-staff")
    (watcher,) = hub.watchers
    watcher.access_deadline = 0.0
    await socket.send_to(text_data='{"type": "sync", "version": -5}')
    await socket.receive_from(timeout=WAIT)  # behind: a snapshot
    assert (len(loads), len(renders)) == (2, 2)
    await socket.disconnect()


async def test_a_socket_opens_in_one_trip_to_the_database_and_its_share_of_a_render(long_ticket, monkeypatch):
    """Who the socket is and whether they may watch are read in one trip (one connection where
    connections are not kept, `CONN_MAX_AGE=0`): the session, its user and the ticket, three
    statements; the snapshot's render is the other trip (shared by the sockets that open together),
    at most 14 statements for the desk and 10 for the customer, as measured, so neither can creep.
    The desk's panels read what two of them show (pending holds, current summary, compaction runs,
    the ledger's entries) once a rendering (`panels.shared_read`), the ticket's row comes with what
    the head shows (its response timer, rating, tags and the colleagues to assign it to), and a
    customer's records are counted only when there may be more than the five shown: 25 statements
    without any of these, 20 with the ledger and the head's reads on their own. The customer's
    page reads the ticket with its rating, and its confirmed values once (12 statements before). Negative control: behind Channels' auth
    middleware (as before) the user is read in a trip of its own, three trips in all; one
    statement more in the render (or the reads not shared) fails its bound."""
    trips: list[list[str]] = []
    real_handler, real_execute = DatabaseSyncToAsync.thread_handler, CursorWrapper.execute

    def handler(self, loop, *args, **kwargs):
        trips.append([])
        return real_handler(self, loop, *args, **kwargs)

    def execute(self, sql, params=None):
        if trips:
            trips[-1].append(sql)
        return real_execute(self, sql, params)

    monkeypatch.setattr(DatabaseSyncToAsync, "thread_handler", handler)
    monkeypatch.setattr(CursorWrapper, "execute", execute)
    # Staff: the session, its user, the ticket; a customer: their own desk record too. Then the
    # render's statements, bounded as measured.
    for socket_of, cookie, reads, render_reads in (
        (desk, long_ticket["staff"], 3, 14),
        (help_, long_ticket["alice"], 4, 10),
    ):
        trips.clear()
        socket = socket_of(long_ticket["ticket"].pk, cookie)
        await _open(socket)
        assert len(trips) == 2, [len(t) for t in trips]  # the check, the render
        check = trips[0]
        assert [re.search(r'FROM "(\w+)"', sql).group(1) for sql in check[:2]] == ["django_session", "auth_user"]
        assert len(check) == reads, check
        assert len(trips[1]) <= render_reads, trips[1]
        await socket.disconnect()


@pytest.mark.parametrize("shared", [True, False], ids=["shared", "control: each its own"])
async def test_sockets_of_one_session_due_for_their_re_check_share_one_read(long_ticket, monkeypatch, shared):
    """A push that finds many sockets of one session past their re-check period reads who may
    watch once for all of them, not once each (the backstop re-check, off the hot path).
    Control: with nothing shared (`SHARED_CHECK_SECONDS = 0`) each socket reads the session."""
    from sundry.live import consumers

    if not shared:
        monkeypatch.setattr(consumers, "SHARED_CHECK_SECONDS", 0.0)
    store = import_module(settings.SESSION_ENGINE).SessionStore
    loads, load = [], store.load
    monkeypatch.setattr(store, "load", lambda self: loads.append(1) or load(self))
    ticket = long_ticket["ticket"]
    sockets = [desk(ticket.pk, long_ticket["staff"]) for _ in range(3)]
    for socket in sockets:
        await _open(socket)
    (hub,) = fanout.hubs_of(f"ticket-{ticket.pk}-staff")
    for watcher in hub.watchers:
        watcher.access_deadline = 0.0
    loads.clear()
    await database_sync_to_async(turn_append)(ticket=ticket, author="agent", text="Your refund landed.")
    for socket in sockets:
        assert "beforeend:#panel-conversation" in await socket.receive_from(timeout=WAIT)
    assert len(loads) == (1 if shared else 3)
    for socket in sockets:
        await socket.disconnect()


async def test_a_push_renders_only_the_panels_whose_data_changed(long_ticket, monkeypatch):
    from sundry.context import services as lanes

    templates = []
    render = panels.render_to_string
    monkeypatch.setattr(panels, "render_to_string", lambda t, *a, **k: templates.append(t) or render(t, *a, **k))
    ticket = long_ticket["ticket"]
    socket = desk(ticket.pk, long_ticket["staff"])
    await _open(socket)
    every = [p.template for p in desk_panels.STAFF_PANELS.values()]
    # Control: the first rendering renders every panel, each once: the conversation's shell (the
    # panel without its items, for diffs) is cut from the same rendering, not rendered again.
    assert sorted(t for t in templates if t in every) == sorted(every)

    templates.clear()
    await database_sync_to_async(lanes.state_set)(
        ticket=ticket, name="refund_method", value="store credit", turn=3, source="staff", confirmed=True
    )
    frame = await socket.receive_from(timeout=WAIT)
    assert 'id="panel-state"' in frame
    assert [t for t in templates if t != "live/marker.html"] == ["desk/panels/state.html"]  # that panel alone
    await socket.disconnect()


def test_earlier_turns_page_by_page_without_javascript_and_only_for_who_may_see_them(long_ticket):
    from django.test import Client

    ticket, n = long_ticket["ticket"], panels.window()
    staff, owner, other = Client(), Client(), Client()
    users = get_user_model().objects
    staff.force_login(users.get(username="sam"))
    owner.force_login(users.get(username="alice"))
    other.force_login(users.create_user("mallory", password="x"))
    CustomerFactory(user=users.get(username="mallory"))

    page = staff.get(f"/desk/tickets/{ticket.pk}/").content.decode()
    assert f'href="/desk/tickets/{ticket.pk}/turns/"' in page  # the link a page without JavaScript follows
    first = staff.get(f"/desk/tickets/{ticket.pk}/turns/").content.decode()  # the window before the page's
    assert [int(x) for x in ITEM.findall(first)] == list(range(LONG - 2 * n + 1, LONG - n + 1))
    assert f'href="?before={LONG - 2 * n + 1}"' in first
    fragment = staff.get(f"/desk/tickets/{ticket.pk}/turns/?before=11", HTTP_X_SUNDRY_FRAGMENT="1")
    assert [int(x) for x in ITEM.findall(fragment.content.decode())] == list(range(1, 11))
    assert fragment["X-Sundry-Earlier"] == "0" and "<html" not in fragment.content.decode()
    mine = owner.get(f"/help/tickets/{ticket.pk}/messages/?before=3", HTTP_X_SUNDRY_FRAGMENT="1")
    assert [int(x) for x in ITEM.findall(mine.content.decode())] == [1, 2]

    assert staff.get(f"/desk/tickets/{ticket.pk}/turns/?before=x").status_code == 400
    assert other.get(f"/help/tickets/{ticket.pk}/messages/").status_code == 404  # another customer's ticket
    assert owner.get(f"/desk/tickets/{ticket.pk}/turns/").status_code in (302, 403, 404)  # not staff


async def _staff_access(long_ticket):
    user = await database_sync_to_async(get_user_model().objects.get)(username="sam")
    return await database_sync_to_async(panels.viewer_for)(user, panels.STAFF, long_ticket["ticket"].pk)


@pytest.mark.parametrize("stamp", ["when its reads begin", "control: when it is asked for"])
async def test_sockets_that_join_before_a_render_begins_share_it(long_ticket, monkeypatch, stamp):
    """Sockets opening a ticket together queue their checks and its render on the one database
    thread: a socket that joins after the render was asked for but before its reads began is
    served by it, so the ticket's first render is made once, not once per socket (what made the
    2-a-ticket spread slow to open). Control: a render stamped when it is asked for (as before)
    serves only the sockets that joined before that, and the second socket gets a render of its own."""
    import threading
    import time

    from sundry.live import consumers

    if stamp.startswith("control"):
        real = consumers._render

        def asked(access, begun):
            begun.append(time.monotonic())
            return real(access, [])

        monkeypatch.setattr(consumers, "_render", asked)
    renders, render_current = [], panels.render_current
    monkeypatch.setattr(panels, "render_current", lambda access: renders.append(1) or render_current(access))
    access = await _staff_access(long_ticket)
    gate = threading.Event()
    busy = asyncio.ensure_future(database_sync_to_async(gate.wait)(WAIT))  # the thread is busy (other checks)
    first = asyncio.ensure_future(consumers.RENDERS.since(access, time.monotonic()))
    await asyncio.sleep(0.05)
    second = asyncio.ensure_future(consumers.RENDERS.since(access, time.monotonic()))  # joined later
    await asyncio.sleep(0.05)
    gate.set()
    await busy
    one, two = await first, await second
    assert one.version == two.version == long_ticket["ticket"].version
    assert len(renders) == (1 if stamp.startswith("when") else 2)


async def test_a_socket_that_joins_after_a_render_began_gets_the_next_one(long_ticket, monkeypatch):
    """The other side of sharing: a render whose reads had begun before a socket joined may have
    missed a commit made in between (whose push the socket may not have been there to get), so
    it never serves that socket's snapshot: a second render, started after it, does."""
    import threading
    import time

    from sundry.live import consumers

    began, gate = threading.Event(), threading.Event()
    renders, render_current = [], panels.render_current

    def held(access):
        renders.append(1)
        began.set()
        assert gate.wait(WAIT)
        return render_current(access)

    monkeypatch.setattr(panels, "render_current", held)
    access = await _staff_access(long_ticket)
    first = asyncio.ensure_future(consumers.RENDERS.since(access, time.monotonic()))
    assert await asyncio.to_thread(began.wait, WAIT)
    second = asyncio.ensure_future(consumers.RENDERS.since(access, time.monotonic()))
    await asyncio.sleep(0.05)
    gate.set()
    one, two = await first, await second
    assert len(renders) == 2 and one is not two


def test_the_conversation_rendered_once_is_what_two_renderings_made(long_ticket):
    """The conversation panel is rendered once with a mark where its items go; its HTML and its
    shell are exactly what rendering it with the items and without them gives, and still safe
    (the page places it unescaped)."""
    from django.template.loader import render_to_string
    from django.utils.safestring import SafeString, mark_safe

    staff = get_user_model().objects.get(username="sam")
    ticket, viewer = panels.viewer_for(staff, panels.STAFF, long_ticket["ticket"].pk)
    panel = desk_panels.STAFF_PANELS["conversation"]
    parts = panels.render_panel_parts(panel, ticket, viewer)
    context = {"ticket": ticket, "viewer": viewer, "panel_id": panel.dom_id, "window": panels.window()}
    context.update(panel.build(ticket, viewer, None))
    joined = mark_safe("\n".join(html for _, html in parts.items))
    assert parts.html == render_to_string(panel.template, {**context, "items_html": joined})
    assert parts.shell == render_to_string(panel.template, {**context, "items_html": ""})
    assert isinstance(parts.html, SafeString) and "Show earlier" in parts.html and len(parts.items) == panels.window()
