"""Push latency from a committed change to N websocket clients, over the Redis channel layer.

Run as a subprocess by `python -m bench` (it needs its own settings: a
database the server shares, and a channel prefix of its own):

    python -m bench.pushbench --clients 50,200,500 --pushes 20 [--change turn --history 200]
                                     [--per-ticket 20] [--server daphne]

It migrates a throwaway database (on the configured PostgreSQL server when
DATABASE_URL names one, else a SQLite file), creates a staff login and the
tickets (each with `--history` turns already on it), starts the web process as
Sundry runs it (`python -m sundry.web`; `--server daphne` to compare) on a
free loopback port, connects N clients (a minimal RFC 6455 client, loopback
only) — all to one ticket, or `--per-ticket K` to each of N/K tickets — and
commits `--pushes` changes one at a time, to the tickets in turn (`--change
touch`: the version alone; `turn`: a customer message). Each push is timed
from just before its commit until every client watching that ticket holds a
frame with the new version (50 ms apart, so each push is measured on its own;
the clients run in this process, on the same two cores as the server they
measure). A client that never receives a version it watched is a lost push.
Each round also reports the web process's CPU (user + system, from /proc) per
socket opened and per push, PostgreSQL connections made per socket opened and
per push (`pg_stat_database.sessions`, this process's few included), the bytes a
watcher received per push, and how long opening every socket took; `--window 0` serves the conversation as it was
rendered before (every turn re-read per push), the control for those figures.
Everything is bounded: connects, waits and the server all
time out; the server is stopped by its own pid. Prints one JSON object.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

VERSION = re.compile(rb'data-version="(\d+)"')
HOST = "127.0.0.1"


class Client(asyncio.Protocol):
    """One websocket watcher: records when each version first arrives.

    A bare protocol that parses frames straight from the bytes it is handed,
    so the measuring side costs as little as possible: it shares this 2-core
    machine with the server it measures.
    """

    def __init__(self, port: int, path: str, cookie: str, expect: "Expectation"):
        self.port, self.path, self.cookie, self.expect = port, path, cookie, expect
        self.version = -1
        self.arrived: dict[int, float] = {}
        self.received = 0  # payload bytes of every text frame
        self.transport = None
        self.buffer = b""
        self.message = b""
        self.upgraded = asyncio.get_running_loop().create_future()

    async def connect(self) -> None:
        loop = asyncio.get_running_loop()
        await loop.create_connection(lambda: self, HOST, self.port)
        key = base64.b64encode(os.urandom(16)).decode()
        self.transport.write(
            (
                f"GET {self.path} HTTP/1.1\r\nHost: {HOST}:{self.port}\r\nUpgrade: websocket\r\n"
                f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n"
                f"Origin: http://{HOST}:{self.port}\r\nCookie: sessionid={self.cookie}\r\n\r\n"
            ).encode()
        )
        await self.upgraded

    def connection_made(self, transport) -> None:
        self.transport = transport

    def connection_lost(self, exc) -> None:
        if not self.upgraded.done():
            self.upgraded.set_exception(ConnectionError("closed before the upgrade"))

    def data_received(self, data: bytes) -> None:
        now = time.perf_counter()
        self.buffer += data
        if not self.upgraded.done():
            head, sep, rest = self.buffer.partition(b"\r\n\r\n")
            if not sep:
                return
            status = head.split(b"\r\n", 1)[0]
            if b" 101 " not in status:
                self.upgraded.set_exception(ConnectionError(status.decode(errors="replace")))
                return
            self.buffer = rest
            self.upgraded.set_result(None)
        self._frames(now)

    def _frames(self, now: float) -> None:
        buf = self.buffer
        while len(buf) >= 2:
            b1, b2 = buf[0], buf[1]
            n, at = b2 & 0x7F, 2
            if n == 126:
                if len(buf) < 4:
                    break
                n, at = int.from_bytes(buf[2:4], "big"), 4
            elif n == 127:
                if len(buf) < 10:
                    break
                n, at = int.from_bytes(buf[2:10], "big"), 10
            if len(buf) < at + n:
                break
            payload, buf = buf[at : at + n], buf[at + n :]
            opcode = b1 & 0x0F
            if opcode == 0x9:
                self._send(0xA, payload)  # pong
            elif opcode in (0x1, 0x0):
                self.message += payload
                self.received += len(payload)
                if b1 & 0x80:
                    for m in VERSION.finditer(self.message):
                        v = int(m.group(1))
                        if v > self.version:
                            self.version = v
                            if v not in self.arrived:
                                self.arrived[v] = now
                                self.expect.arrived(self, v)
                    self.message = b""
        self.buffer = buf

    def _send(self, opcode: int, payload: bytes) -> None:
        mask = os.urandom(4)
        masked = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
        self.transport.write(bytes([0x80 | opcode, 0x80 | len(payload)]) + mask + masked)

    def close(self) -> None:
        if self.transport:
            self.transport.close()


class Expectation:
    """Counts the clients of one push holding its version; wakes the driver when all of them do
    (no polling). Clients outside that push's audience are not counted."""

    def __init__(self):
        self.version, self.pending, self.done = None, set(), asyncio.Event()

    def expect(self, version: int, clients: list) -> None:
        self.version, self.done = version, asyncio.Event()
        self.pending = {id(c) for c in clients if c.version < version}
        if not self.pending:
            self.done.set()

    def arrived(self, client, version: int) -> None:
        # A newer version than expected also settles the client (it never sees the older one).
        if self.version is not None and version >= self.version and id(client) in self.pending:
            self.pending.discard(id(client))
            if not self.pending:
                self.done.set()


def write_history(ticket, history: int, **fields) -> None:
    """`history` turns, customer and agent in turn, written in one go (5,000 turns appended one by one
    would take longer than a benchmark); `fields` for every turn (`tokens=40`)."""
    from sundry.tickets.models import Turn

    Turn.objects.bulk_create(
        Turn(
            ticket=ticket,
            number=i + 1,
            author="customer" if i % 2 == 0 else "agent",
            text=f"Message {i + 1}: where is my parcel, and when will the refund land? " * 3,
            **fields,
        )
        for i in range(history)
    )


def _free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def _wait_port(port: int, deadline: float) -> None:
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex((HOST, port)) == 0:
                return
        time.sleep(0.1)
    raise TimeoutError(f"server did not listen on {HOST}:{port}")


def _cpu_seconds(pid: int) -> float:
    """User + system CPU the process (all its threads) has used so far."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return float("nan")
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _memory_kb(pid: int) -> dict:
    out = {}
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(("VmHWM", "VmRSS")):
                key, value = line.split(":", 1)
                out[key] = int(value.split()[0])
    except OSError:
        pass
    return out


def _sessions() -> int | None:
    """PostgreSQL sessions (connections) made to this database so far, counting this process's
    own (PostgreSQL 14's `pg_stat_database.sessions`); None on SQLite. A session is counted when
    its statistics are flushed (at its end, or within seconds while it idles), so a pool's few
    long-lived connections may show late; a connection per trip shows at once."""
    from django.db import connection

    if connection.vendor != "postgresql":
        return None
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_stat_clear_snapshot()")
        cursor.execute("SELECT sessions FROM pg_stat_database WHERE datname = current_database()")
        return cursor.fetchone()[0]


def _per(after, before, n: int):
    return None if after is None or before is None else round((after - before) / n, 2)


def _setup(history: int = 0, tickets: int = 1):
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.test import Client as HttpClient

    from sundry.desk.lifecycle import ticket_create
    from sundry.shop.demo import ensure_classes
    from sundry.shop.models import Customer
    from sundry.shop.seed import generate_shop
    from sundry.tickets.models import Ticket

    call_command("migrate", verbosity=0)
    generate_shop(seed=1, customers=3, orders=6)
    staff = get_user_model().objects.create_user("bench-staff", password="x", is_staff=True)
    made = []
    for n in range(tickets):
        ticket = ticket_create(
            customer=Customer.objects.first().person,
            ticket_class=ensure_classes()["standard"],
            subject=f"push benchmark {n + 1}",
        )
        # A conversation of this length is on every watcher's page.
        write_history(ticket, history)
        Ticket.objects.filter(pk=ticket.pk).update(last_turn_number=history, version=history)
        made.append(ticket.pk)
    http = HttpClient()
    http.force_login(staff)
    return made, http.cookies["sessionid"].value


CHANGE = {"kind": "touch"}


def _commit(ticket_id: int) -> None:
    """One committed change: a bare version bump (`touch`), or a customer message (`turn`),
    which changes the conversation panel every watcher must receive."""
    from django.db import transaction

    from sundry.tickets.models import Ticket
    from sundry.tickets.services import turn_append
    from sundry.tickets.versions import ticket_touch

    with transaction.atomic():
        if CHANGE["kind"] == "turn":
            ticket = Ticket.objects.select_related("ticket_class").get(pk=ticket_id)
            turn_append(ticket=ticket, author="customer", text=f"Any news on my order? ({ticket.last_turn_number + 1})")
        else:
            ticket_touch(ticket_id)  # bumps and pushes after commit


async def _round(
    n: int,
    per_ticket: int,
    pushes: int,
    port: int,
    ticket_ids: list[int],
    cookie: str,
    timeout: float,
    server_pid: int | None = None,
) -> dict:
    from asgiref.sync import sync_to_async

    from sundry.tickets.models import Ticket

    per_ticket = per_ticket or n  # 0: every client on one ticket
    watched = ticket_ids[: -(-n // per_ticket)]
    expect = Expectation()
    clients = [Client(port, f"/ws/desk/tickets/{watched[i // per_ticket]}/", cookie, expect) for i in range(n)]
    by_ticket = {t: [c for i, c in enumerate(clients) if watched[i // per_ticket] == t] for t in watched}
    cpu = (lambda: _cpu_seconds(server_pid)) if server_pid else (lambda: float("nan"))
    commit = sync_to_async(_commit)
    # One commit before anything is timed: this process's first (imports, first queries, the
    # notices' templates) took 0.5 s, and as the first push of 20 its 500 deliveries were the
    # round's p99. The server is measured; the committing side should be warm, as a worker is.
    await commit(watched[0])
    sessions = sync_to_async(_sessions)
    sessions_before = await sessions()
    cpu_before, open_started = cpu(), time.perf_counter()
    for i in range(0, n, 50):  # connect in batches so the accept backlog never overflows
        await asyncio.wait_for(asyncio.gather(*(c.connect() for c in clients[i : i + 50])), timeout)
    get_version = sync_to_async(lambda pk: Ticket.objects.values_list("version", flat=True).get(pk=pk))
    current = {t: await get_version(t) for t in watched}
    for t in watched:  # every client holds its snapshot before we start
        expect.expect(current[t], by_ticket[t])
        await asyncio.wait_for(expect.done.wait(), timeout)
    opened_s = time.perf_counter() - open_started
    await asyncio.sleep(0.3)  # the joins' presence news settles before the pushes are counted
    cpu_opened = cpu()
    sessions_opened = await sessions()
    snapshot_bytes = statistics.median(c.received for c in clients)
    received_before = sum(c.received for c in clients)
    latencies, lost, per_push, commit_ms = [], 0, [], []
    for p in range(pushes):
        ticket_id = watched[p % len(watched)]
        version = current[ticket_id] + 1  # the commit bumps the version by one; nothing else writes here
        audience = by_ticket[ticket_id]
        expect.expect(version, audience)
        started = time.perf_counter()
        await commit(ticket_id)
        commit_ms.append(round(1000 * (time.perf_counter() - started), 1))
        try:
            await asyncio.wait_for(expect.done.wait(), timeout)
        except asyncio.TimeoutError:
            pass
        current[ticket_id] = await get_version(ticket_id)
        if current[ticket_id] != version:
            raise RuntimeError(f"expected version {version}, the ticket is at {current[ticket_id]}")
        per_push.append(round(1000 * (max((c.arrived.get(version, started) for c in audience)) - started), 1))
        for c in audience:
            at = c.arrived.get(version)
            if at is None:
                lost += 1  # never saw this version
            else:
                latencies.append(at - started)
        await asyncio.sleep(0.05)  # let the server settle between pushes, as real changes are spaced
    cpu_pushed = cpu()
    sessions_pushed = await sessions()
    push_bytes = (sum(c.received for c in clients) - received_before) / max(1, pushes * min(n, per_ticket))
    for c in clients:
        c.close()
    await asyncio.sleep(0.2)
    return {
        "clients": n,
        "per_ticket": per_ticket,
        "tickets": len(watched),
        "pushes": pushes,
        "open_s": round(opened_s, 2),
        "cpu_ms_per_open": round(1000 * (cpu_opened - cpu_before) / n, 2),
        "cpu_ms_per_push": round(1000 * (cpu_pushed - cpu_opened) / pushes, 2),
        "db_sessions_per_open": _per(sessions_opened, sessions_before, n),
        "db_sessions_per_push": _per(sessions_pushed, sessions_opened, pushes),
        "bytes_per_push": round(push_bytes),
        "snapshot_bytes": round(snapshot_bytes),
        "deliveries": len(latencies),
        "lost": lost,
        "p50_ms": round(1000 * statistics.median(latencies), 2) if latencies else None,
        "p99_ms": round(1000 * sorted(latencies)[int(0.99 * (len(latencies) - 1))], 2) if latencies else None,
        "max_ms": round(1000 * max(latencies), 2) if latencies else None,
        "slowest_client_ms": per_push,
        "commit_ms": commit_ms,  # the part of each push's time spent committing, in this process
    }


def _throwaway_postgres(url: str) -> str:
    """A new, empty database on the server `url` names; returns its URL."""
    from urllib.parse import urlsplit, urlunsplit

    import psycopg

    name = f"sundry_pushbench_{os.getpid()}"
    # Through the server's maintenance database: the one `url` names need not exist.
    with psycopg.connect(urlunsplit(urlsplit(url)._replace(path="/postgres")), autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')
    return urlunsplit(urlsplit(url)._replace(path=f"/{name}"))


def _drop_postgres(url: str, throwaway: str) -> None:
    from urllib.parse import urlsplit, urlunsplit

    import psycopg

    with psycopg.connect(urlunsplit(urlsplit(url)._replace(path="/postgres")), autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{urlsplit(throwaway).path.lstrip("/")}" WITH (FORCE)')


def settings_layer() -> str:
    from django.conf import settings

    return settings.CHANNEL_LAYERS["default"]["BACKEND"]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", default="50,200,500")
    parser.add_argument("--pushes", type=int, default=20)
    parser.add_argument("--timeout", type=float, default=20.0)
    parser.add_argument(
        "--change",
        choices=["touch", "turn"],
        default="touch",
        help="what each commit changes: the version only, or a new customer message",
    )
    parser.add_argument("--history", type=int, default=0, help="turns each ticket already has before the pushes")
    parser.add_argument(
        "--per-ticket",
        type=int,
        default=0,
        help="clients per ticket, spread over clients/K tickets (0: all clients on one ticket)",
    )
    parser.add_argument(
        "--window",
        type=int,
        default=None,
        help="the conversation's window (SUNDRY_LIVE_CONVERSATION_WINDOW); 0: the whole conversation, "
        "re-read on every push, as before (the control)",
    )
    parser.add_argument(
        "--server",
        choices=["sundry", "daphne"],
        default="sundry",
        help="the web process as Sundry runs it (python -m sundry.web), or daphne to compare",
    )
    args = parser.parse_args(argv)
    if not os.environ.get("REDIS_URL"):
        print(json.dumps({"skipped": "REDIS_URL is not set"}))
        return 0
    workdir = Path(tempfile.mkdtemp(prefix="sundry-pushbench-"))
    try:
        with _database(workdir) as (database_url, database):
            figures = _measure(args, workdir, database_url)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    from urllib.parse import urlsplit

    print(
        json.dumps(
            {
                **figures,
                "database": database,
                "database_name": urlsplit(database_url).path.lstrip("/"),
                "layer": settings_layer(),
            }
        )
    )
    return 0


@contextmanager
def _database(workdir: Path):
    """The database the deployment would use: a throwaway one on the configured PostgreSQL
    server (dropped afterwards, whatever happens), else a SQLite file in `workdir` (both the
    driver here and the server process open it). Yields (url, description)."""
    configured = os.environ.get("DATABASE_URL", "")
    if not configured.startswith(("postgres://", "postgresql://")):
        yield f"sqlite:///{workdir / 'bench.sqlite3'}", "a throwaway SQLite file"
        return
    url = _throwaway_postgres(configured)
    try:
        yield url, "PostgreSQL (a throwaway database)"
    finally:
        from django.db import connections

        connections.close_all()
        _drop_postgres(configured, url)


def _measure(args, workdir: Path, database_url: str) -> dict:
    env = {
        **os.environ,
        "DATABASE_URL": database_url,
        "SUNDRY_CHANNEL_PREFIX": f"sundry-bench-{os.getpid()}",
        "DJANGO_SETTINGS_MODULE": "sundry.settings",
        "SUNDRY_LOG_LEVEL": "ERROR",
        "SUNDRY_DEBUG": "0",  # as served in production: no per-query debug log
        # Every client here shares one staff login: lift the per-user socket cap (not the process's).
        "SUNDRY_LIVE_MAX_SOCKETS_PER_USER": "100000",
        **({"SUNDRY_LIVE_CONVERSATION_WINDOW": str(args.window)} if args.window is not None else {}),
    }
    os.environ.update(env)
    import django

    django.setup()
    CHANGE["kind"] = args.change
    most = max(int(x) for x in args.clients.split(",") if x)
    tickets, cookie = _setup(history=args.history, tickets=-(-most // args.per_ticket) if args.per_ticket else 1)
    port = _free_port()
    server_log = open(workdir / "server.log", "wb")
    command = {
        "sundry": ["-m", "sundry.web", "--host", HOST, "--port", str(port), "--log-level", "warning"],
        # For comparison: the server Sundry used before (and `manage.py runserver` still uses).
        "daphne": ["-m", "daphne", "-b", HOST, "-p", str(port), "sundry.asgi:application"],
    }[args.server]
    server = subprocess.Popen([sys.executable, *command], env=env, stdout=subprocess.DEVNULL, stderr=server_log)
    rounds, memory = [], {}
    try:
        _wait_port(port, time.monotonic() + 90)  # a busy machine starts a server slowly
        idle = _memory_kb(server.pid)
        for n in [int(x) for x in args.clients.split(",") if x]:
            rounds.append(
                asyncio.run(_round(n, args.per_ticket, args.pushes, port, tickets, cookie, args.timeout, server.pid))
            )
            memory[n] = _memory_kb(server.pid)
    finally:
        server.terminate()
        try:
            server.wait(10)
        except subprocess.TimeoutExpired:
            server.kill()
        server_log.close()
        errors = (workdir / "server.log").read_text(errors="replace")[-4000:]
        if errors.strip():  # the server should say nothing at this log level; if it did, show it
            print(errors, file=sys.stderr)
    return {
        "rounds": rounds,
        "server_memory_kb": memory,
        "server_idle_kb": idle,
        "server": args.server,
        "history": args.history,
        "change": args.change,
        "window": args.window,
        "loadavg": os.getloadavg(),
    }


if __name__ == "__main__":
    sys.exit(main())
