"""Memory and connections of the web process under a long stream of posts.

Run as a subprocess by `python -m bench --soak MINUTES` (it needs settings of its own):

    python -m bench.soakbench --minutes 10 --tickets 6 --watchers 60 --rate 2

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

from bench.pushbench import HOST, Client, Expectation, _database, _free_port, _memory_kb, _wait_port

PASSWORD = "soak-bench-password-1"


def _setup(tickets: int) -> tuple[list[int], list[str]]:
    """`tickets` tickets, each its own customer's, taken over by the staff login (a person
    replies only on a ticket they hold)."""
    from django.contrib.auth import get_user_model
    from django.core.management import call_command

    from sundry.shop.models import Customer
    from sundry.shop.seed import generate_shop

    call_command("migrate", verbosity=0)
    generate_shop(seed=1, customers=tickets, orders=tickets * 2)
    users = get_user_model().objects
    staff = users.create_user("soak-staff", password=PASSWORD, is_staff=True)
    ids, names = [], []
    for i, customer in enumerate(Customer.objects.order_by("pk")[:tickets]):
        if customer.user is None:
            customer.user = users.create_user(f"soak-customer-{i}", password=PASSWORD)
            customer.save(update_fields=["user"])
        ids.append(_new_ticket(customer.person, staff, f"Soak ticket {i}"))
        names.append(customer.user.username)
    return ids, names


def _new_ticket(person, staff, subject: str) -> int:
    """A ticket of the desk's customer record `person`, taken over by `staff`."""
    from sundry.desk.lifecycle import ticket_create
    from sundry.shop.demo import ensure_classes
    from sundry.tickets.models import Ticket

    ticket = ticket_create(customer=person, ticket_class=ensure_classes()["standard"], subject=subject)
    Ticket.objects.filter(pk=ticket.pk).update(handler=Ticket.Handler.STAFF, assigned_to=staff)
    return ticket.pk


def _successor(ticket_id: int, n: int) -> int:
    """A fresh ticket for the same customer, taken over by the same staff login."""
    from sundry.tickets.models import Ticket

    old = Ticket.objects.select_related("customer", "assigned_to").get(pk=ticket_id)
    return _new_ticket(old.customer, old.assigned_to, f"Soak ticket {n}")


def _login(base: str, username: str):
    import requests

    session = requests.Session()
    session.get(f"{base}/login/", timeout=30)
    response = session.post(
        f"{base}/login/",
        timeout=30,
        allow_redirects=False,
        data={"username": username, "password": PASSWORD, "csrfmiddlewaretoken": session.cookies["csrftoken"]},
    )
    if response.status_code != 302:
        raise RuntimeError(f"login as {username} failed: {response.status_code}")
    session.headers.update({"X-CSRFToken": session.cookies["csrftoken"], "HX-Request": "true"})
    return session


class Backends:
    """PostgreSQL backends on the throwaway database, polled every second; the most seen
    since the last `take()` (this counter's own connection and the driver's are left out)."""

    def __init__(self, database_url: str):
        from urllib.parse import urlsplit

        import psycopg
        from django.db import connection

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

    def watch(slot: int) -> Client:
        return Client(port, f"/ws/desk/tickets/{tickets[slot]}/", cookie, expect)

    watchers = [watch(i % len(tickets)) for i in range(args.watchers)]
    for i in range(0, len(watchers), 20):
        await asyncio.wait_for(asyncio.gather(*(w.connect() for w in watchers[i : i + 20])), 60)
    on_slot = [0] * len(tickets)  # posts on each slot's current ticket
    rotated = 0

    async def rotate(slot: int) -> None:
        """The slot's conversation is long enough: its watchers close, a new ticket takes its
        place and they open on that one (as staff move on to the next ticket)."""
        nonlocal rotated
        tickets[slot] = await sync_to_async(_successor, thread_sensitive=True)(tickets[slot], len(tickets) + rotated)
        rotated += 1
        on_slot[slot] = 0
        fresh = []
        for i in range(slot, len(watchers), len(tickets)):
            watchers[i].close()
            watchers[i] = watch(slot)
            fresh.append(watchers[i])
        await asyncio.wait_for(asyncio.gather(*(w.connect() for w in fresh)), 60)

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
            r = staff.post(
                f"{base}/desk/tickets/{ticket}/post",
                timeout=60,
                data={"action": "reply", "text": f"Reply {n}: it is with the carrier.", "client_key": f"soak-{n}"},
            )
        else:
            r = sessions[n % len(sessions)].post(
                f"{base}/help/tickets/{ticket}/message", timeout=60, data={"text": text, "client_key": f"soak-{n}"}
            )
        return r.status_code

    def sample() -> dict:
        memory = _memory_kb(server_pid)
        return {
            "t_s": round(time.monotonic() - started),
            "rss_mb": round(memory.get("VmRSS", 0) / 1024, 1),
            "peak_mb": round(memory.get("VmHWM", 0) / 1024, 1),
            "pg_backends_max": backends.take(),
            "turns": _turns(),
            "posted": posted,
            "sockets_open": sum(1 for w in watchers if w.transport and not w.transport.is_closing()),
        }

    while time.monotonic() < end:
        now = time.monotonic()
        if now >= next_poll:
            await sync_to_async(backends.poll)()
            next_poll = now + 1
        if now >= next_sample:
            samples.append(await sync_to_async(sample)())
            print(json.dumps(samples[-1]), file=sys.stderr, flush=True)
            next_sample += args.every
        slot = posted % len(tickets)
        if args.rotate and on_slot[slot] >= args.rotate:
            await rotate(slot)
        on_slot[slot] += 1
        future = loop.run_in_executor(pool, post, posted)
        pending.add(future)
        future.add_done_callback(pending.discard)
        future.add_done_callback(
            lambda f: statuses.__setitem__(
                str(f.result()) if not f.exception() else repr(f.exception())[:60],
                statuses.get(str(f.result()) if not f.exception() else repr(f.exception())[:60], 0) + 1,
            )
        )
        posted += 1
        await asyncio.sleep(1 / args.rate)
    if pending:
        await asyncio.wait(pending, timeout=60)
    samples.append(await sync_to_async(sample)())
    for w in watchers:
        w.close()
    pool.shutdown(wait=False)
    return {"samples": samples, "statuses": statuses, "posted": posted, "tickets_rotated": rotated}


def _slope(samples: list[dict]) -> float | None:
    """RSS growth in MB a minute over these samples (least squares)."""
    if len(samples) < 2:
        return None
    ts = [x["t_s"] / 60 for x in samples]
    ys = [x["rss_mb"] for x in samples]
    mt, my = sum(ts) / len(ts), sum(ys) / len(ys)
    var = sum((t - mt) ** 2 for t in ts)
    return round(sum((t - mt) * (y - my) for t, y in zip(ts, ys)) / var, 2) if var else None


# Levelled off: over the last third of the run RSS grows by less than this many MB a minute
# (a ratio to the first third would pass a slow climb after the steep first renders).
LEVEL_MB_PER_MIN = 1.0


def levelling(samples: list[dict]) -> dict:
    """Slopes over the first and last thirds of the run, the steady state (the last third's
    mean RSS) and whether RSS levelled off."""
    span = samples[-1]["t_s"]
    first = [x for x in samples if x["t_s"] <= span / 3]
    last = [x for x in samples if x["t_s"] >= 2 * span / 3]
    late = _slope(last)
    return {
        "rss_slope_first_third_mb_per_min": _slope(first),
        "rss_slope_last_third_mb_per_min": late,
        "rss_steady_mb": round(sum(x["rss_mb"] for x in last) / len(last), 1) if last else None,
        "levelled_off": late is not None and late < LEVEL_MB_PER_MIN,
    }


def heap_growth(directory: Path, top: int = 15) -> dict:
    """What the Python heap gained between the snapshot a third of the way in and the last,
    by line of allocation; and the heap beside RSS at every snapshot."""
    import tracemalloc

    snaps = sorted(directory.glob("heap-*.pickle"))
    marks = [json.loads(p.read_text()) for p in sorted(directory.glob("heap-*.json"))]
    out = {
        "heap": [{"traced_mb": round(m["traced_kb"] / 1024, 1), "rss_mb": round(m["rss_kb"] / 1024, 1)} for m in marks]
    }
    if len(snaps) >= 2:
        keep = [tracemalloc.Filter(False, tracemalloc.__file__)]
        before = tracemalloc.Snapshot.load(str(snaps[len(snaps) // 3])).filter_traces(keep)
        after = tracemalloc.Snapshot.load(str(snaps[-1])).filter_traces(keep)
        out["grew"] = [
            {
                "kb": round(d.size_diff / 1024),
                "count": d.count_diff,
                "where": [f"{f.filename.split('site-packages/')[-1]}:{f.lineno}" for f in d.traceback[:4]],
            }
            for d in after.compare_to(before, "traceback")[:top]
        ]
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=10)
    parser.add_argument("--tickets", type=int, default=6)
    parser.add_argument("--watchers", type=int, default=60)
    parser.add_argument("--rate", type=float, default=2.0, help="posts per second, all tickets together")
    parser.add_argument("--every", type=float, default=30.0, help="seconds between samples")
    parser.add_argument(
        "--rotate",
        type=int,
        default=0,
        metavar="POSTS",
        help="after this many posts a ticket is replaced by a new one and its watchers move "
        "to it, so conversations stop growing (0: they grow all the run)",
    )
    parser.add_argument(
        "--trace", action="store_true", help="tracemalloc in the web process: what the Python heap gained, by line"
    )
    parser.add_argument(
        "--leak", action="store_true", help="negative control: the web process keeps every rendering it makes"
    )
    args = parser.parse_args(argv)
    if not os.environ.get("REDIS_URL"):
        print(json.dumps({"skipped": "REDIS_URL is not set"}))
        return 0
    workdir = Path(tempfile.mkdtemp(prefix="sundry-soak-"))
    try:
        with _database(workdir) as (database_url, database):
            env = {
                **os.environ,
                "DATABASE_URL": database_url,
                "SUNDRY_CHANNEL_PREFIX": f"sundry-soak-{os.getpid()}",
                "SUNDRY_TASK_QUEUE": f"sundry-soak-{os.getpid()}",
                "DJANGO_SETTINGS_MODULE": "sundry.settings",
                "SUNDRY_LOG_LEVEL": "ERROR",
                "SUNDRY_DEBUG": "0",
                # The limits are not under test here: a customer writes faster than anyone would,
                # and every watcher shares one staff login.
                "SUNDRY_RATE_CUSTOMER_MESSAGES": "100000/m",
                "SUNDRY_LIVE_MAX_SOCKETS_PER_USER": "100000",
            }
            os.environ.update(env)
            import django

            django.setup()
            tickets, customers = _setup(args.tickets)
            port = _free_port()
            log = open(workdir / "server.log", "wb")
            command = [sys.executable, "-m", "sundry.web"]
            if args.trace or args.leak:
                (workdir / "heap").mkdir()
                command = [
                    sys.executable,
                    "-m",
                    "bench.soakserver",
                    "--every",
                    str(args.every),
                    *(["--trace", str(workdir / "heap")] if args.trace else []),
                    *(["--leak"] if args.leak else []),
                    "--",
                ]
            server = subprocess.Popen(
                [*command, "--host", HOST, "--port", str(port), "--log-level", "warning"],
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=log,
            )
            try:
                _wait_port(port, time.monotonic() + 180)
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
            if args.trace:
                figures["heap"] = heap_growth(workdir / "heap")
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    samples = figures["samples"]
    rss = [s["rss_mb"] for s in samples]
    figures.update(
        database=database,
        minutes=args.minutes,
        tickets=args.tickets,
        watchers=args.watchers,
        rate_per_s=args.rate,
        rotate_after_posts=args.rotate,
        leak=args.leak,
        rss_first_mb=rss[0],
        rss_last_mb=rss[-1],
        rss_max_mb=max(rss),
        pg_backends_max=max(s["pg_backends_max"] for s in samples),
        sockets_open_min=min(s["sockets_open"] for s in samples),
        **levelling(samples),
    )
    print(json.dumps(figures))
    return 0


if __name__ == "__main__":
    sys.exit(main())
