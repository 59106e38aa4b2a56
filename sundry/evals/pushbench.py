"""Push latency from a committed change to N websocket clients, over the Redis channel layer.

Run as a subprocess by `manage.py benchmark` (it needs its own settings: a
file database the server shares, and a channel prefix of its own):

    python -m sundry.evals.pushbench --clients 50,200,500 --pushes 20

It migrates a throwaway SQLite file, creates a staff login and a ticket,
starts daphne on a free loopback port, connects N clients (a minimal
RFC 6455 client, loopback only), commits `--pushes` changes one at a time and
times each from just before the commit until every client holds a frame with
the new version. Everything is bounded: connects, waits and the server all
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
from pathlib import Path

VERSION = re.compile(rb'data-version="(\d+)"')
HOST = "127.0.0.1"


class Client:
    """One websocket watcher: connects, then records when each version first arrives."""

    def __init__(self, port: int, path: str, cookie: str):
        self.port, self.path, self.cookie = port, path, cookie
        self.version = -1
        self.arrived: dict[int, float] = {}
        self.reader = self.writer = None

    async def connect(self) -> None:
        self.reader, self.writer = await asyncio.open_connection(HOST, self.port)
        key = base64.b64encode(os.urandom(16)).decode()
        self.writer.write((f"GET {self.path} HTTP/1.1\r\nHost: {HOST}:{self.port}\r\nUpgrade: websocket\r\n"
                           f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n"
                           f"Origin: http://{HOST}:{self.port}\r\nCookie: sessionid={self.cookie}\r\n\r\n").encode())
        head = await self.reader.readuntil(b"\r\n\r\n")
        if b" 101 " not in head.split(b"\r\n", 1)[0]:
            raise ConnectionError(head.split(b"\r\n", 1)[0].decode(errors="replace"))

    def _send(self, opcode: int, payload: bytes) -> None:
        mask = os.urandom(4)
        masked = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
        self.writer.write(bytes([0x80 | opcode, 0x80 | len(payload)]) + mask + masked)

    async def listen(self) -> None:
        buffer = b""
        while True:
            b1, b2 = await self.reader.readexactly(2)
            n = b2 & 0x7F
            if n == 126:
                n = int.from_bytes(await self.reader.readexactly(2), "big")
            elif n == 127:
                n = int.from_bytes(await self.reader.readexactly(8), "big")
            payload = await self.reader.readexactly(n)
            opcode = b1 & 0x0F
            if opcode == 0x9:
                self._send(0xA, payload)  # pong
            elif opcode == 0x8:
                return
            elif opcode in (0x1, 0x0):
                buffer += payload
                if b1 & 0x80:
                    for m in VERSION.finditer(buffer):
                        v = int(m.group(1))
                        if v > self.version:
                            self.version = v
                            self.arrived.setdefault(v, time.perf_counter())
                    buffer = b""

    def close(self) -> None:
        if self.writer:
            self.writer.close()


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


def _setup():
    from django.core.management import call_command
    from django.test import Client as HttpClient

    from django.contrib.auth import get_user_model
    from sundry.shop.models import Customer
    from sundry.shop.seed import generate_shop
    from sundry.tickets.demo import ensure_classes
    from sundry.tickets.services import ticket_create

    call_command("migrate", verbosity=0)
    generate_shop(seed=1, customers=3, orders=6)
    staff = get_user_model().objects.create_user("bench-staff", password="x", is_staff=True)
    ticket = ticket_create(customer=Customer.objects.first(), ticket_class=ensure_classes()["standard"],
                           subject="push benchmark")
    http = HttpClient()
    http.force_login(staff)
    return ticket, http.cookies["sessionid"].value


def _commit(ticket_id: int) -> None:
    from django.db import transaction

    from sundry.live.events import ticket_changed
    from sundry.tickets.services import ticket_touch

    with transaction.atomic():
        ticket_touch(ticket_id)
        ticket_changed(ticket_id)


async def _round(n: int, pushes: int, port: int, ticket_id: int, cookie: str, timeout: float) -> dict:
    from asgiref.sync import sync_to_async

    from sundry.tickets.models import Ticket

    clients = [Client(port, f"/ws/desk/tickets/{ticket_id}/", cookie) for _ in range(n)]
    for i in range(0, n, 50):  # connect in batches so the accept backlog never overflows
        await asyncio.wait_for(asyncio.gather(*(c.connect() for c in clients[i:i + 50])), timeout)
    tasks = [asyncio.create_task(c.listen()) for c in clients]
    get_version = sync_to_async(lambda: Ticket.objects.values_list("version", flat=True).get(pk=ticket_id))
    current = await get_version()
    deadline = time.monotonic() + timeout
    while any(c.version < current for c in clients) and time.monotonic() < deadline:
        await asyncio.sleep(0.01)  # every client holds its snapshot before we start
    latencies, lost = [], 0
    commit = sync_to_async(_commit)
    for _ in range(pushes):
        started = time.perf_counter()
        await commit(ticket_id)
        version = await get_version()
        deadline = time.monotonic() + timeout
        while any(version not in c.arrived and c.version < version for c in clients) and time.monotonic() < deadline:
            await asyncio.sleep(0.002)
        for c in clients:
            at = c.arrived.get(version)
            if at is None:
                lost += 1  # never saw this version (a later one would also count as a miss here)
            else:
                latencies.append(at - started)
    for t in tasks:
        t.cancel()
    for c in clients:
        c.close()
    await asyncio.sleep(0.2)
    return {"clients": n, "pushes": pushes, "deliveries": len(latencies), "lost": lost,
            "p50_ms": round(1000 * statistics.median(latencies), 2) if latencies else None,
            "p99_ms": round(1000 * sorted(latencies)[int(0.99 * (len(latencies) - 1))], 2) if latencies else None,
            "max_ms": round(1000 * max(latencies), 2) if latencies else None}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", default="50,200,500")
    parser.add_argument("--pushes", type=int, default=20)
    parser.add_argument("--timeout", type=float, default=20.0)
    args = parser.parse_args(argv)
    if not os.environ.get("REDIS_URL"):
        print(json.dumps({"skipped": "REDIS_URL is not set"}))
        return 0
    workdir = Path(tempfile.mkdtemp(prefix="sundry-pushbench-"))
    env = {**os.environ, "DATABASE_URL": f"sqlite:///{workdir / 'bench.sqlite3'}",
           "SUNDRY_CHANNEL_PREFIX": f"sundry-bench-{os.getpid()}", "DJANGO_SETTINGS_MODULE": "sundry.settings",
           "SUNDRY_LOG_LEVEL": "ERROR"}
    os.environ.update(env)
    import django

    django.setup()
    ticket, cookie = _setup()
    port = _free_port()
    server = subprocess.Popen([sys.executable, "-m", "daphne", "-b", HOST, "-p", str(port), "sundry.asgi:application"],
                              env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    rounds, memory = [], {}
    try:
        _wait_port(port, time.monotonic() + 30)
        idle = _memory_kb(server.pid)
        for n in [int(x) for x in args.clients.split(",") if x]:
            rounds.append(asyncio.run(_round(n, args.pushes, port, ticket.pk, cookie, args.timeout)))
            memory[n] = _memory_kb(server.pid)
    finally:
        server.terminate()
        try:
            server.wait(10)
        except subprocess.TimeoutExpired:
            server.kill()
        shutil.rmtree(workdir, ignore_errors=True)
    print(json.dumps({"rounds": rounds, "server_memory_kb": memory, "server_idle_kb": idle,
                      "database": "sqlite file (shared by driver and server)", "layer": "channels_redis"}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
