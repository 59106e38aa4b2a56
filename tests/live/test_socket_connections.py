"""Opening sockets on the web process as it is served (`python -m sundry.web`) makes no new
PostgreSQL connection per socket: their database calls take connections from a pool
(sundry.live.dbtrips).

Channels closes the connection around every `database_sync_to_async` call, so without the pool
each socket's access check and snapshot render opened a connection of its own (about 30 % of the
web process's time opening 500 sockets, docs/benchmarks.md). Counted by PostgreSQL itself
(`pg_stat_database.sessions`: connections made to the test database), not timed. Negative
control: the same server with the pool off (`SUNDRY_LIVE_DB_POOL=0`) makes two per socket.
"""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import time
import uuid
from contextlib import contextmanager
from pathlib import Path

import pytest
from django.db import connection

from tests.live.test_consumers import world  # noqa: F401  (a fixture)

ROOT = Path(__file__).resolve().parents[2]
SOCKETS = 12
# The sockets' pool holds at most two connections (sundry/web.py): two are made as the first
# calls come (24 without the pool: each socket's check and its own render).
MOST_WITH_THE_POOL = 2
WAIT = 60  # a bound on waits for conditions (a server listening, a frame), generous for a loaded machine


def _database_url() -> str:
    db = connection.settings_dict
    auth = (db.get("USER") or "") + (f":{db['PASSWORD']}" if db.get("PASSWORD") else "")
    return f"postgres://{auth}@{db.get('HOST') or '127.0.0.1'}:{db.get('PORT') or 5432}/{db['NAME']}"


def _sessions() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_stat_clear_snapshot()")
        cursor.execute("SELECT sessions FROM pg_stat_database WHERE datname = current_database()")
        return cursor.fetchone()[0]


def _wait_until(predicate, what: str):
    deadline = time.monotonic() + WAIT
    while not (value := predicate()):
        assert time.monotonic() < deadline, f"waited {WAIT}s for {what}"
        time.sleep(0.1)
    return value


@contextmanager
def _web_process(**env):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    from django.conf import settings

    server = subprocess.Popen(
        [sys.executable, "-m", "sundry.web", "--host", "127.0.0.1", "--port", str(port), "--log-level", "warning"],
        cwd=ROOT,
        env={
            **os.environ,
            "DATABASE_URL": _database_url(),
            "REDIS_URL": settings.REDIS_URL,
            "SUNDRY_CHANNEL_PREFIX": f"sundry-test-sockets-{uuid.uuid4().hex[:8]}",
            "DJANGO_SETTINGS_MODULE": "sundry.settings",
            "SUNDRY_DEBUG": "0",
            "SUNDRY_LIVE_MAX_SOCKETS_PER_USER": str(SOCKETS + 1),
            **env,
        },
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:

        def listening():
            assert server.poll() is None, server.stderr.read().decode(errors="replace")[-3000:]
            with socket.socket() as s:
                return s.connect_ex(("127.0.0.1", port)) == 0

        _wait_until(listening, "the web process to listen")
        yield port
    finally:
        server.terminate()
        try:
            server.wait(10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait(5)


async def _open_one_after_another(port: int, path: str, cookie: str) -> None:
    """Each socket accepted and holding its snapshot before the next opens (no render shared)."""
    from websockets.asyncio.client import connect

    opened = []
    try:
        for _ in range(SOCKETS):
            ws = await connect(
                f"ws://127.0.0.1:{port}{path}",
                origin=f"http://127.0.0.1:{port}",
                additional_headers={"Cookie": cookie},
                open_timeout=WAIT,
            )
            opened.append(ws)
            assert 'id="live-version"' in await asyncio.wait_for(ws.recv(), WAIT)
    finally:
        for ws in opened:
            await ws.close()


def _connections_made_opening_sockets(world, at_least: int, **env) -> int:
    """PostgreSQL connections made while SOCKETS sockets open, once at least `at_least` are counted
    (a session is counted when its backend flushes its statistics: at once when a connection
    closes, at its first idle moment while a pool keeps it)."""
    if connection.vendor != "postgresql":
        pytest.skip("counts PostgreSQL's own sessions: needs DATABASE_URL on PostgreSQL")
    from django.conf import settings

    if not settings.REDIS_URL:
        pytest.skip("the web process's sockets need Redis for the channel layer")
    cookie = world["staff"][1].decode()
    with _web_process(**env) as port:
        before = _sessions()
        asyncio.run(_open_one_after_another(port, f"/ws/desk/tickets/{world['ticket'].pk}/", cookie))
        return _wait_until(
            lambda: (made := _sessions() - before) >= at_least and made, f"{at_least} connections to be counted"
        )


def test_sockets_open_on_pooled_connections(world):
    made = _connections_made_opening_sockets(world, at_least=1)  # the trips took at least one
    assert made <= MOST_WITH_THE_POOL, f"{made} PostgreSQL connections for {SOCKETS} sockets"


def test_control_without_the_pool_each_socket_makes_a_connection(world):
    # The wait itself is the assertion: with the pool off, every socket's trips connect afresh.
    assert _connections_made_opening_sockets(world, at_least=SOCKETS, SUNDRY_LIVE_DB_POOL="0") >= SOCKETS
