"""Memory and connections of the web process under a long stream of posts.

Run as a subprocess by `manage.py benchmark --soak MINUTES` (it needs settings of its own):

    python -m sundry.evals.soakbench --minutes 10 --tickets 6 --watchers 60 --rate 2

A throwaway database (on the configured PostgreSQL server), `--tickets` tickets each with a
customer login, one staff login, and the web process as Sundry runs it (`python -m
sundry.web`) on a free loopback port. `--watchers` staff websockets are spread over the
tickets; then for `--minutes` customers post messages (and staff reply every third one)
over HTTP, `--rate` posts a second in all, round-robin over the tickets, so every post
renders and pushes a longer conversation to its ticket's watchers. Every `--every` seconds
it samples the web process's RSS, the PostgreSQL backends on the throwaway database, and
the turns stored. The tickets are worked by staff (no agent run is queued), so what grows
is the web process alone. Prints one JSON object.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from sundry.evals.pushbench import HOST, Client, Expectation, _database, _free_port, _memory_kb, _wait_port

PASSWORD = "soak-bench-password-1"


def _setup(tickets: int) -> tuple[list[int], list[str]]:
    from django.contrib.auth import get_user_model
    from django.core.management import call_command

    from sundry.shop.models import Customer
    from sundry.shop.seed import generate_shop
    from sundry.tickets.demo import ensure_classes
    from sundry.tickets.models import Ticket
    from sundry.tickets.services import ticket_create

    call_command("migrate", verbosity=0)
    generate_shop(seed=1, customers=tickets, orders=tickets * 2)
    users = get_user_model().objects
    users.create_user("soak-staff", password=PASSWORD, is_staff=True)
    ids, names = [], []
    standard = ensure_classes()["standard"]
    for i, customer in enumerate(Customer.objects.order_by("pk")[:tickets]):
        if customer.user is None:
            customer.user = users.create_user(f"soak-customer-{i}", password=PASSWORD)
            customer.save(update_fields=["user"])
        ticket = ticket_create(customer=customer, ticket_class=standard, subject=f"Soak ticket {i}")
        Ticket.objects.filter(pk=ticket.pk).update(handler=Ticket.Handler.STAFF)
        ids.append(ticket.pk)
        names.append(customer.user.username)
    return ids, names


def _login(base: str, username: str):
    import requests

    session = requests.Session()
    session.get(f"{base}/login/", timeout=30)
    response = session.post(f"{base}/login/", timeout=30, allow_redirects=False, data={
        "username": username, "password": PASSWORD, "csrfmiddlewaretoken": session.cookies["csrftoken"]})
    if response.status_code != 302:
        raise RuntimeError(f"login as {username} failed: {response.status_code}")
    session.headers.update({"X-CSRFToken": session.cookies["csrftoken"], "HX-Request": "true"})
    return session


class Backends:
    """PostgreSQL backends on the throwaway database, polled every second; the most seen
    since the last `take()` (this counter's own connection and the driver's are left out)."""

    def __init__(self, database_url: str):
        import psycopg
        from django.db import connection
        from urllib.parse import urlsplit

        self.name = urlsplit(database_url).path.lstrip("/")
        self.conn = psycopg.connect(database_url, autocommit=True)
        connection.ensure_connection()
        self.mine = {self.conn.info.backend_pid, connection.connection.info.backend_pid}
        self.most = 0

    def poll(self) -> int:
        rows = self.conn.execute("SELECT pid FROM pg_stat_activity WHERE datname = %s", (self.name,)).fetchall()
        now = sum(1 for (pid,) in rows if pid not in self.mine)
        self.most = max(self.most, now)
        return now

    def take(self) -> int:
        most, self.most = max(self.most, self.poll()), 0
        return most


def _turns() -> int:
    from sundry.tickets.models import Turn

    return Turn.objects.count()


async def _soak(args, port: int, tickets: list[int], customers: list[str], database_url: str, server_pid: int):
    from asgiref.sync import sync_to_async

    base = f"http://{HOST}:{port}"
    staff = await asyncio.to_thread(_login, base, "soak-staff")
    cookie = staff.cookies["sessionid"]
    sessions = [await asyncio.to_thread(_login, base, name) for name in customers]
    expect = Expectation()
    watchers = [Client(port, f"/ws/desk/tickets/{tickets[i % len(tickets)]}/", cookie, expect)
                for i in range(args.watchers)]
    for i in range(0, len(watchers), 20):
        await asyncio.wait_for(asyncio.gather(*(w.connect() for w in watchers[i:i + 20])), 60)

    backends = await sync_to_async(Backends, thread_sensitive=True)(database_url)
    samples, statuses, posted = [], {}, 0
    next_poll = 0.0
    started = time.monotonic()
    end = started + args.minutes * 60
    next_sample = started
    pool = ThreadPoolExecutor(4)
    loop = asyncio.get_running_loop()
    pending: set = set()

    def post(n: int) -> int:
        ticket = tickets[n % len(tickets)]
        text = f"Message {n}: where is my parcel, and when will the refund land? " * 3
        if n % 3 == 2:
            r = staff.post(f"{base}/desk/tickets/{ticket}/post", timeout=60,
                           data={"action": "reply", "text": f"Reply {n}: it is with the carrier.",
                                 "client_key": f"soak-{n}"})
        else:
            r = sessions[n % len(sessions)].post(f"{base}/help/tickets/{ticket}/message", timeout=60,
                                                 data={"text": text, "client_key": f"soak-{n}"})
        return r.status_code

    def sample() -> dict:
        memory = _memory_kb(server_pid)
        return {"t_s": round(time.monotonic() - started), "rss_mb": round(memory.get("VmRSS", 0) / 1024, 1),
                "peak_mb": round(memory.get("VmHWM", 0) / 1024, 1), "pg_backends_max": backends.take(),
                "turns": _turns(), "posted": posted, "sockets_open": sum(1 for w in watchers if
                                                                         w.transport and not w.transport.is_closing())}

    while time.monotonic() < end:
        now = time.monotonic()
        if now >= next_poll:
            await sync_to_async(backends.poll)()
            next_poll = now + 1
        if now >= next_sample:
            samples.append(await sync_to_async(sample)())
            print(json.dumps(samples[-1]), file=sys.stderr, flush=True)
            next_sample += args.every
        future = loop.run_in_executor(pool, post, posted)
        pending.add(future)
        future.add_done_callback(pending.discard)
        future.add_done_callback(lambda f: statuses.__setitem__(
            str(f.result()) if not f.exception() else repr(f.exception())[:60],
            statuses.get(str(f.result()) if not f.exception() else repr(f.exception())[:60], 0) + 1))
        posted += 1
        await asyncio.sleep(1 / args.rate)
    if pending:
        await asyncio.wait(pending, timeout=60)
    samples.append(await sync_to_async(sample)())
    for w in watchers:
        w.close()
    pool.shutdown(wait=False)
    return {"samples": samples, "statuses": statuses, "posted": posted}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=10)
    parser.add_argument("--tickets", type=int, default=6)
    parser.add_argument("--watchers", type=int, default=60)
    parser.add_argument("--rate", type=float, default=2.0, help="posts per second, all tickets together")
    parser.add_argument("--every", type=float, default=30.0, help="seconds between samples")
    args = parser.parse_args(argv)
    if not os.environ.get("REDIS_URL"):
        print(json.dumps({"skipped": "REDIS_URL is not set"}))
        return 0
    workdir = Path(tempfile.mkdtemp(prefix="sundry-soak-"))
    try:
        with _database(workdir) as (database_url, database):
            env = {**os.environ, "DATABASE_URL": database_url, "SUNDRY_CHANNEL_PREFIX": f"sundry-soak-{os.getpid()}",
                   "SUNDRY_TASK_QUEUE": f"sundry-soak-{os.getpid()}", "DJANGO_SETTINGS_MODULE": "sundry.settings",
                   "SUNDRY_LOG_LEVEL": "ERROR", "SUNDRY_DEBUG": "0",
                   # The limits are not under test here: a customer writes faster than anyone would.
                   "SUNDRY_RATE_CUSTOMER_MESSAGES": "100000/m"}
            os.environ.update(env)
            import django

            django.setup()
            tickets, customers = _setup(args.tickets)
            port = _free_port()
            log = open(workdir / "server.log", "wb")
            server = subprocess.Popen([sys.executable, "-m", "sundry.web", "--host", HOST, "--port", str(port),
                                       "--log-level", "warning"], env=env, stdout=subprocess.DEVNULL, stderr=log)
            try:
                _wait_port(port, time.monotonic() + 60)
                figures = asyncio.run(_soak(args, port, tickets, customers, database_url, server.pid))
            finally:
                server.terminate()
                try:
                    server.wait(15)
                except subprocess.TimeoutExpired:
                    server.kill()
                log.close()
                errors = (workdir / "server.log").read_text(errors="replace")[-3000:]
                if errors.strip():
                    print(errors, file=sys.stderr)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    rss = [s["rss_mb"] for s in figures["samples"]]
    half = len(rss) // 2
    figures.update(database=database, minutes=args.minutes, tickets=args.tickets, watchers=args.watchers,
                   rate_per_s=args.rate, rss_first_mb=rss[0], rss_last_mb=rss[-1], rss_max_mb=max(rss),
                   # levelling off: growth over the second half against the first
                   rss_growth_first_half_mb=round(rss[half] - rss[0], 1) if rss else None,
                   rss_growth_second_half_mb=round(rss[-1] - rss[half], 1) if rss else None,
                   pg_backends_max=max(s["pg_backends_max"] for s in figures["samples"]))
    print(json.dumps(figures))
    return 0


if __name__ == "__main__":
    sys.exit(main())
