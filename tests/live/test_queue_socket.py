"""The desk queue's socket: staff only, within the socket caps, and it pushes the queue's counts,
badges and table when a ticket changes — once per burst of changes, for the page's own view."""

from __future__ import annotations

import json
import time

from channels.db import database_sync_to_async

from sundry.agent.models import HeldAction
from sundry.desk import live_queue as queue_refresh
from sundry.desk.lifecycle import ticket_create
from sundry.live import limits
from sundry.live.consumers import CLOSE_FORBIDDEN, CLOSE_SIGNED_OUT, CLOSE_TOO_MANY
from sundry.tickets.services import turn_append
from tests.live.test_consumers import _login, _socket, world  # noqa: F401  (world is a fixture)
from tests.live.test_sessions_and_limits import _closed_with


def queue(cookie, query: str = ""):
    return _socket("/ws/desk/queue/" + (f"?{query}" if query else ""), cookie)


async def _frame(socket, timeout=5) -> str:
    message = json.loads(await socket.receive_from(timeout=timeout))
    assert message["type"] == "queue"
    return message["html"]


async def test_staff_get_the_queue_and_its_changes(world):
    socket = queue(world["staff"][1])
    connected, _ = await socket.connect()
    assert connected
    first = await _frame(socket)
    assert 'id="queue-counts"' in first and 'id="queue-table"' in first and "Broken kettle" in first
    assert 'data-count="all">1<' in first
    ticket = world["ticket"]  # loaded with its customer and class
    fresh = await database_sync_to_async(ticket_create)(
        customer=ticket.customer, ticket_class=ticket.ticket_class, subject="Lamp flickers"
    )
    await database_sync_to_async(turn_append)(ticket=fresh, author="customer", text="My lamp flickers.")
    pushed = await _frame(socket)
    assert "Lamp flickers" in pushed and 'data-count="all">2<' in pushed
    assert 'data-badge="new"' in pushed and "2 new, not answered yet" in pushed  # nobody has replied on either
    await database_sync_to_async(HeldAction.objects.create)(
        ticket=fresh,
        tool="issue_refund",
        call_id="c9",
        idempotency_key="held-c9",
        turn=3,
        arguments={"order_number": "SU-41234", "amount": "1.00"},
    )
    await database_sync_to_async(turn_append)(ticket=fresh, author="system", kind="event", text="held")
    pushed = await _frame(socket)
    assert 'data-badge="held"' in pushed and "1 awaiting approval" in pushed
    await socket.disconnect()


async def test_a_burst_of_changes_is_one_refresh(world):
    socket = queue(world["staff"][1])
    await socket.connect()
    await _frame(socket)
    ticket = world["ticket"]
    started = time.monotonic()
    for n in range(5):
        await database_sync_to_async(ticket_create)(
            customer=ticket.customer, ticket_class=ticket.ticket_class, subject=f"Burst {n}"
        )
    spread = time.monotonic() - started
    frames = [await _frame(socket)]
    while not await socket.receive_nothing(timeout=1.6):
        frames.append(await _frame(socket))
    # Five pushes make at most two frames — the first push's, and one for everything after it —
    # plus one a second for as long as the five writes took (on a busy machine they spread out;
    # the page refreshes at most once a second, REFRESH_MIN_SECONDS). One frame per push fails.
    allowed = 2 + int(spread / queue_refresh.REFRESH_MIN_SECONDS)
    assert len(frames) <= min(allowed, 4), f"{len(frames)} frames for 5 writes over {spread:.1f} s"
    assert all(f"Burst {n}" in frames[-1] for n in range(5))
    await socket.disconnect()


async def test_the_socket_follows_the_pages_view(world):
    socket = queue(world["staff"][1], "view=mine")
    await socket.connect()
    mine = await _frame(socket)
    assert "No tickets match." in mine  # nothing is assigned to sam
    await socket.send_to(text_data=json.dumps({"type": "view", "query": "?view=all"}))
    assert "Broken kettle" in await _frame(socket)
    await socket.disconnect()


async def test_customers_and_strangers_are_refused(world):
    for cookie in (world["alice"][1], None):
        socket = queue(cookie)
        connected, _ = await socket.connect()
        assert connected  # accepted only to say why it closes
        await _closed_with(socket, CLOSE_FORBIDDEN)


async def test_a_user_no_longer_staff_is_closed_on_the_next_change(world):
    socket = queue(world["staff"][1])
    await socket.connect()
    await _frame(socket)
    user = world["staff_user"]
    user.is_staff = False
    await database_sync_to_async(user.save)()  # the save makes the user's sockets re-read access
    await _closed_with(socket, CLOSE_FORBIDDEN)


async def test_logout_closes_the_queue(world):
    client, cookie = world["staff"]
    socket = queue(cookie)
    await socket.connect()
    await _frame(socket)
    await database_sync_to_async(client.post)("/logout/")
    await _closed_with(socket, CLOSE_SIGNED_OUT)


async def test_queue_sockets_count_against_the_per_user_cap(world, settings):
    settings.LIVE_MAX_SOCKETS_PER_USER = 2
    before = limits.open_sockets()
    cookie = world["staff"][1]
    sockets = [queue(cookie) for _ in range(2)]
    for s in sockets:
        await s.connect()
        await _frame(s)
    one_too_many = queue(cookie)
    connected, _ = await one_too_many.connect()
    assert connected
    await _closed_with(one_too_many, CLOSE_TOO_MANY)
    for s in sockets:
        await s.disconnect()
    assert limits.open_sockets() == before


QUEUE_FRAMES_REFUSED = [
    "\x00",
    '{"type": "view"}\x00',
    "[" * 5000 + "]" * 5000,
    "x" * 20_000,
    "null",
    "[]",
    '{"type": 5}',
    '{"type": "view", "query": NaN}',
]
QUEUE_QUERIES_WITH_NUL = ["q=a\x00b", "q=a%00b", "tag=%00", "view=all\x00", "class=%00&assignee=%00"]


async def test_bad_frames_close_the_queue_socket_with_a_reason_and_nul_queries_are_answered(world):
    """A frame no page sends closes the socket with a close frame naming why (the page reconnects);
    a view whose query holds a NUL (which PostgreSQL cannot take) is answered without it."""
    for frame in QUEUE_FRAMES_REFUSED:
        socket = queue(world["staff"][1])
        await socket.connect()
        await _frame(socket)
        await socket.send_to(text_data=frame)
        out = await socket.receive_output(timeout=5)
        assert out["type"] == "websocket.close", (frame[:20], out)
        assert out["code"] in (limits.CLOSE_FRAME_INVALID, limits.CLOSE_FRAME_TOO_BIG) and out.get("reason"), frame[:20]
        await socket.disconnect()
    for query in QUEUE_QUERIES_WITH_NUL:
        socket = queue(world["staff"][1])
        await socket.connect()
        await _frame(socket)
        await socket.send_to(text_data=json.dumps({"type": "view", "query": query}))
        assert 'id="queue-table"' in await _frame(socket), query
        await socket.disconnect()
    # On connect too: the page's own query string with a NUL.
    socket = queue(world["staff"][1], "q=a%00b")
    await socket.connect()
    assert 'id="queue-table"' in await _frame(socket)
    await socket.disconnect()
