"""The realistic benchmark: what a customer waits for, with a model that takes seconds.

Run by `python -m bench --realistic` (or directly, printing one JSON object):

    python -m bench.realbench --slots 4 --tickets 50 --duration 150 [--model-min 1 --model-max 3]

Everything runs as Sundry is deployed, on loopback (needs REDIS_URL), on a
PostgreSQL server of the run's own (`--postgres private`, the default: initdb on
a free port, so the connections Sundry opens neither starve nor are starved by
other work on a shared server) or in a throwaway database on DATABASE_URL's
server (`--postgres configured`):

- the model: `sundry.evals.modelserver`, an OpenAI-compatible HTTP server
  answering with the offline model after a deterministic 1–3 s; the ticket
  class names `openai-compatible:offline` and SUNDRY_OPENAI_COMPAT_BASE_URL
  points at it, so every step goes through the gateway, the SDK and HTTP;
- the web process (`python -m sundry.web`) and Celery workers (prefork,
  `--slots` processes) started through `bench.benchworker`, which only
  writes down when each task starts and ends;
- `--tickets` customers, each logged in to their own ticket, posting messages
  over HTTP as the page does (htmx headers, CSRF token) and thinking between
  messages (a seeded log-normal spread), and a staff desk socket per ticket,
  listening for the agent's reply to be pushed.

A customer waits for the reply to each message before thinking up the next.
Figures (all from measurements of this run):

- reply push latency: from just before the message is posted until the
  conversation panel holding the agent's reply reaches the desk socket;
- model time per step, as the model server spent it and as the gateway saw it;
- Sundry's share of step time: the agent tasks' time minus the model's,
  as a percentage of the model's (split into the SDK/HTTP part and the rest);
- per message, the reply latency beyond the model time of its steps, with and
  without the wait for a free worker slot (a capacity figure, not overhead).

Bounded: customers start no new message after `--duration` seconds, wait at
most `--reply-timeout` for each reply; every process is stopped by its pid and
the database is dropped however the run ends.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import random
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path

HOST = "127.0.0.1"
MODEL_NAME = "openai-compatible:offline"
# A new agent reply in a desk frame: the turn's article and its number (desk/panels/turn.html).
AGENT_REPLY = re.compile(rb'<article class="turn agent message[^"]*">\s*<header><span class="num">(\d+)</span>')
CSRF_IN_PAGE = re.compile(r'"X-CSRFToken":\s*"([^"]+)"')

# What customers write, with their own orders filled in: tracking, refunds, returns,
# cancellations, listings and small talk, in the proportions a shop's desk sees them.
SCRIPT = [
    "Hi, where is my order {shipped}? It has been a while.",
    "Thanks. Can you tell me what else I ordered recently?",
    "The {item} from order {delivered} arrived damaged. Phone only, never email please.",
    "I'd like a refund of {partial} for the damage, I'll keep it.",
    "OK. And where is {shipped} now?",
    "I want to return the items from {delivered2}, they don't fit.",
    "I don't want a replacement, just the return please.",
    "Please cancel order {placed}, I ordered it by mistake.",
    "Could you check {delivered} again for me?",
    "Thanks for your help.",
]


@dataclass
class Config:
    slots: int = 4
    tickets: int = 50
    duration: float = 150.0  # seconds during which customers start new messages
    messages: int = 0  # per ticket; 0: as many as fit in the duration
    model_min: float = 1.0
    model_max: float = 3.0
    think_median: float = 20.0
    think_min: float = 4.0
    think_max: float = 60.0
    reply_timeout: float = 120.0
    seed: int = 1
    # "private": a PostgreSQL server of the run's own (initdb on a free port); "configured":
    # a throwaway database on the server DATABASE_URL names.
    postgres: str = "private"
    # Time each task's stages and each publish (`bench.stageclock`, `bench.benchweb`) for the
    # per-message breakdown (`bench.breakdown`); 0: the plain processes.
    stages: int = 1


@dataclass
class Exchange:
    """One customer message and the reply it got, timed on this process's clocks."""

    ticket: int
    index: int
    posted_wall: float  # time.time() just before the POST: matched against steps and tasks
    posted: float  # time.monotonic() just before the POST
    answered_http: float = 0.0  # the POST's response read
    status: int = 0
    replied: float | None = None  # the desk socket received a frame with a newer agent reply
    reply_turn: int | None = None


@dataclass
class Watch:
    """What one desk socket has seen: new agent replies by turn number, with arrival times."""

    latest: int = -1
    arrivals: list[tuple[int, float]] = field(default_factory=list)
    changed: asyncio.Event = field(default_factory=asyncio.Event)
    ready: asyncio.Event = field(default_factory=asyncio.Event)


# --- measuring -------------------------------------------------------------------------


def worker_command(slots: int, queue: str) -> list[str]:
    """A prefork Celery worker of Sundry's app with task timestamps (`bench.benchworker`), `slots` processes
    taking `queue` alone (its own name, so two benchmarks on one Redis never share one)."""
    return [
        sys.executable,
        "-m",
        "celery",
        "-A",
        "bench.benchworker",
        "worker",
        "--pool",
        "prefork",
        "--concurrency",
        str(slots),
        "-Q",
        queue,
        "-n",
        f"{queue}@%h",
        "--loglevel",
        "WARNING",
        "--without-gossip",
        "--without-mingle",
        "--without-heartbeat",
    ]


def pct(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else round(1000 * seconds, 1)


def think_time(rng: random.Random, cfg: Config) -> float:
    """Seconds a customer takes to read a reply and write the next message: log-normal, clipped."""
    if cfg.think_median <= 0:
        return 0.0
    value = rng.lognormvariate(math.log(cfg.think_median), 0.6)
    return min(cfg.think_max, max(cfg.think_min, value))


def _new_replies(watch: Watch, frame: bytes, now: float) -> None:
    numbers = [int(n) for n in AGENT_REPLY.findall(frame)]
    newest = max(numbers, default=-1)
    if watch.ready.is_set() and newest > watch.latest:
        watch.arrivals.append((newest, now))
        watch.changed.set()
    watch.latest = max(watch.latest, newest, 0)
    watch.ready.set()


async def _desk(port: int, ticket: int, cookie: str, watch: Watch, stop: asyncio.Event) -> None:
    from websockets.asyncio.client import connect

    async with connect(
        f"ws://{HOST}:{port}/ws/desk/tickets/{ticket}/",
        origin=f"http://{HOST}:{port}",
        additional_headers={"Cookie": f"sessionid={cookie}"},
        compression=None,
        max_size=None,
        open_timeout=30,
        ping_interval=None,
    ) as ws:
        reader = asyncio.ensure_future(_read(ws, watch))
        await stop.wait()
        reader.cancel()


async def _read(ws, watch: Watch) -> None:
    async for frame in ws:
        now = time.monotonic()
        _new_replies(watch, frame.encode() if isinstance(frame, str) else frame, now)


async def _customer(
    port: int,
    ticket: int,
    cookie: str,
    texts: list[str],
    watch: Watch,
    cfg: Config,
    rng: random.Random,
    deadline: float,
    out: list[Exchange],
    *,
    first_delay: float,
    messages: int,
) -> None:
    import httpx2 as httpx

    base = f"http://{HOST}:{port}"
    # The client drops an idle connection well before uvicorn's 5 s keep-alive timeout; at equal
    # timeouts a post after a ~5 s think can go out on a connection the server is closing (ReadError).
    limits = httpx.Limits(keepalive_expiry=2.0)
    async with httpx.AsyncClient(
        base_url=base, cookies={"sessionid": cookie}, timeout=cfg.reply_timeout, limits=limits
    ) as http:
        page = await http.get(f"/help/tickets/{ticket}/")
        page.raise_for_status()
        found = CSRF_IN_PAGE.search(page.text)
        token = found.group(1) if found else http.cookies.get("csrftoken", "")
        headers = {
            "X-CSRFToken": token,
            "HX-Request": "true",
            "Origin": base,
            "Referer": f"{base}/help/tickets/{ticket}/",
        }
        await asyncio.wait_for(watch.ready.wait(), 30)
        await asyncio.sleep(first_delay)
        index = 0
        while time.monotonic() < deadline and (not messages or index < messages):
            text = texts[index % len(texts)]
            seen = watch.latest
            watch.changed.clear()
            ex = Exchange(ticket, index, time.time(), time.monotonic())
            response = await http.post(f"/help/tickets/{ticket}/message", data={"text": text}, headers=headers)
            ex.answered_http, ex.status = time.monotonic(), response.status_code
            out.append(ex)
            if response.status_code == 200:
                ends = ex.posted + cfg.reply_timeout
                while ex.replied is None and time.monotonic() < ends:
                    reply = next(((n, at) for n, at in watch.arrivals if n > seen), None)
                    if reply:
                        ex.reply_turn, ex.replied = reply
                        break
                    try:
                        await asyncio.wait_for(watch.changed.wait(), max(0.01, ends - time.monotonic()))
                    except asyncio.TimeoutError:
                        break
                    watch.changed.clear()
            index += 1
            if not messages or index < messages:
                await asyncio.sleep(think_time(rng, cfg))


async def drive(
    port: int, tickets: list[dict], staff_cookies: list[str], cfg: Config, warm: dict | None = None
) -> tuple[list[Exchange], float]:
    """Every customer and desk socket at once; first, unmeasured, one exchange on the `warm` ticket
    (the web process's first post and push load what a process loads once). Returns the exchanges
    and the wall-clock time the measured part began."""
    stop = asyncio.Event()
    exchanges: list[Exchange] = []
    watched = tickets + ([warm] if warm else [])
    watches = {t["id"]: Watch() for t in watched}
    desks = [
        asyncio.ensure_future(_desk(port, t["id"], staff_cookies[i % len(staff_cookies)], watches[t["id"]], stop))
        for i, t in enumerate(watched)
    ]
    try:
        if warm:
            await _customer(
                port,
                warm["id"],
                warm["cookie"],
                warm["texts"],
                watches[warm["id"]],
                cfg,
                random.Random(cfg.seed),
                time.monotonic() + cfg.reply_timeout,
                [],
                first_delay=0,
                messages=1,
            )
        measured_from = time.time()
        deadline = time.monotonic() + cfg.duration
        customers = [
            _customer(
                port,
                t["id"],
                t["cookie"],
                t["texts"],
                watches[t["id"]],
                cfg,
                random.Random(cfg.seed * 1000 + i),
                deadline,
                exchanges,
                # customers do not all start at once
                first_delay=random.Random(cfg.seed * 1000 + i).uniform(0, cfg.think_median),
                messages=cfg.messages,
            )
            for i, t in enumerate(tickets)
        ]
        results = await asyncio.gather(*customers, return_exceptions=True)
    finally:
        stop.set()
        await asyncio.gather(*desks, return_exceptions=True)
    errors = [r for r in results if isinstance(r, BaseException)]
    if errors:
        raise RuntimeError(f"{len(errors)} customers failed; first: {errors[0]!r}") from errors[0]
    return exchanges, measured_from


# --- the processes ---------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def _wait_for(check, deadline: float, what: str, proc: subprocess.Popen | None = None) -> None:
    while time.monotonic() < deadline:
        if check():
            return
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"{what}: the process exited with {proc.returncode}")
        time.sleep(0.1)
    raise TimeoutError(f"{what}: not ready in time")


def _listening(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex((HOST, port)) == 0


def _stop(proc: subprocess.Popen | None, grace: float = 30) -> None:
    """Stop a process this run started, by its pid; its own children (a worker pool) with it."""
    if proc is None or proc.poll() is not None:
        return
    proc.send_signal(signal.SIGTERM)  # a Celery worker finishes its running tasks first (warm shutdown)
    try:
        proc.wait(grace)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)  # its own session: started with start_new_session
        proc.wait(10)


@contextmanager
def _throwaway_database(url: str):
    """A new, empty database on the PostgreSQL server `url` names, dropped however the block ends."""
    from urllib.parse import urlsplit, urlunsplit

    import psycopg

    name = f"sundry_realbench_{os.getpid()}"
    admin = urlunsplit(urlsplit(url)._replace(path="/postgres"))  # the server's maintenance database
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield urlunsplit(urlsplit(url)._replace(path=f"/{name}"))
    finally:
        try:
            from django.db import connections

            connections.close_all()
        except Exception:
            pass
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _facts(customer) -> dict:
    from sundry.shop.models import Order

    orders = list(Order.objects.filter(customer=customer).prefetch_related("items__product").order_by("number"))
    by = {}
    for o in orders:
        by.setdefault(o.status, []).append(o)
    delivered = by.get("delivered") or orders
    first = delivered[0]
    item = first.items.first()
    return {
        "shipped": (by.get("shipped") or delivered)[0].number,
        "delivered": first.number,
        "delivered2": delivered[1 if len(delivered) > 1 else 0].number,
        "placed": (by.get("placed") or orders)[0].number,
        "item": item.product.name.lower() if item else "item",
        "partial": f"{max(1, first.total_cents // 400)}.00 {first.currency}",
    }


def setup(cfg: Config) -> tuple[list[dict], list[str]]:
    """Migrate, seed a shop, and make the bench class, the tickets and the logins (sessions, not passwords).

    One ticket more than asked for: the warm-up ticket, last in the list."""
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.test import Client

    from sundry.desk.lifecycle import ticket_create
    from sundry.shop.models import Customer, Order
    from sundry.shop.seed import generate_shop
    from sundry.tickets.models import TicketClass

    call_command("migrate", verbosity=0)
    generate_shop(seed=cfg.seed, customers=cfg.tickets + 21, orders=(cfg.tickets + 21) * 10)
    tclass = TicketClass.objects.create(
        name="Benchmark",
        slug="benchmark",
        token_budget=8000,
        trigger_fraction=0.8,
        recent_turns_kept=8,
        working_model=MODEL_NAME,
        approval_rules={"issue_refund": {"above": {"USD": 10000, "EUR": 10000, "GBP": 8000, "INR": 800000}}},
    )
    users = get_user_model()
    staff_cookies = []
    for i in range(max(1, cfg.tickets // 10)):  # a desk of staff, each watching about ten tickets
        client = Client()
        client.force_login(users.objects.create_user(f"bench-staff{i}", is_staff=True))
        staff_cookies.append(client.cookies["sessionid"].value)
    with_orders = Order.objects.filter(status="delivered").values_list("customer", flat=True).distinct()
    customers = list(Customer.objects.filter(pk__in=with_orders).order_by("customer_id")[: cfg.tickets + 1])
    if len(customers) < cfg.tickets + 1:
        raise RuntimeError(
            f"the seeded shop has {len(customers)} customers with delivered orders, not {cfg.tickets + 1}"
        )
    tickets = []
    for i, customer in enumerate(customers):
        user = users.objects.create_user(f"bench-customer{i}")
        customer.user = user
        customer.save(update_fields=["user"])
        facts = _facts(customer)
        ticket = ticket_create(customer=customer.person, ticket_class=tclass, subject="Help with my orders")
        client = Client()
        client.force_login(user)
        rotate = i % len(SCRIPT)  # tickets start at different points of the script
        texts = [t.format(**facts) for t in SCRIPT[rotate:] + SCRIPT[:rotate]]
        tickets.append(
            {
                "id": ticket.pk,
                "cookie": client.cookies["sessionid"].value,
                "texts": texts,
                "customer": customer.customer_id,
            }
        )
    return tickets, staff_cookies


def _postgres_bin() -> Path | None:
    try:
        found = subprocess.run(["pg_config", "--bindir"], capture_output=True, text=True, timeout=10).stdout.strip()
    except OSError:
        found = ""
    candidates = [Path(found)] if found else []
    candidates += sorted(Path("/usr/lib/postgresql").glob("*/bin"), reverse=True)
    return next((c for c in candidates if (c / "initdb").exists() and (c / "pg_ctl").exists()), None)


@contextmanager
def _private_postgres(workdir: Path, bindir: Path):
    """A PostgreSQL server of the run's own on a free loopback port, stopped (by its data
    directory's pid) however the block ends. Yields the URL of its maintenance database.

    The run opens as many connections as Sundry needs at this size; on a server shared with
    other work it would take them from others, and others' would be missing here."""
    data, port = workdir / "pgdata", _free_port()
    as_owner: list[str] = []
    if os.geteuid() == 0:  # PostgreSQL refuses to run as root: as the postgres user, in a directory it owns
        shutil.chown(workdir, "postgres", "postgres")
        as_owner = ["runuser", "-u", "postgres", "--"]
    subprocess.run(
        [
            *as_owner,
            str(bindir / "initdb"),
            "-D",
            str(data),
            "-U",
            "postgres",
            "--auth=trust",
            "-E",
            "UTF8",
            "--no-sync",
        ],
        check=True,
        capture_output=True,
        timeout=120,
    )
    options = f"-p {port} -c listen_addresses={HOST} -c unix_socket_directories={workdir} -c max_connections=300"
    subprocess.run(
        [
            *as_owner,
            str(bindir / "pg_ctl"),
            "-D",
            str(data),
            "-o",
            options,
            "-l",
            str(workdir / "pg.log"),
            "-w",
            "-t",
            "60",
            "start",
        ],
        check=True,
        capture_output=True,
        timeout=90,
    )
    try:
        yield f"postgres://postgres@{HOST}:{port}/postgres"
    finally:
        subprocess.run(
            [*as_owner, str(bindir / "pg_ctl"), "-D", str(data), "-m", "fast", "-w", "-t", "60", "stop"],
            capture_output=True,
            timeout=90,
        )


def run(cfg: Config, *, say=lambda *_: None) -> dict:
    configured = os.environ.get("DATABASE_URL", "")
    bindir = _postgres_bin() if cfg.postgres == "private" else None
    if cfg.postgres == "private" and bindir is None:
        return {"skipped": "--postgres private: no PostgreSQL server binaries (initdb, pg_ctl) on this machine"}
    if cfg.postgres == "configured" and not configured.startswith(("postgres://", "postgresql://")):
        return {"skipped": "--postgres configured: DATABASE_URL does not name PostgreSQL"}
    if not os.environ.get("REDIS_URL"):
        return {"skipped": "needs REDIS_URL (real Celery workers and the Redis channel layer)"}
    workdir = Path(tempfile.mkdtemp(prefix="sundry-realbench-"))
    try:
        if bindir is not None:
            with _private_postgres(workdir, bindir) as server, _throwaway_database(server) as url:
                return {**_run(cfg, workdir, url, say), "database": "a private PostgreSQL server started by the run"}
        with _throwaway_database(configured) as url:
            return {**_run(cfg, workdir, url, say), "database": "a throwaway database on DATABASE_URL's server"}
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def _run(cfg: Config, workdir: Path, database_url: str, say) -> dict:
    tag = f"realbench-{os.getpid()}"
    model_port, web_port = _free_port(), _free_port()
    tasklog, modellog, ready = workdir / "tasks.jsonl", workdir / "model.jsonl", workdir / "worker.ready"
    env = {
        **os.environ,
        "DATABASE_URL": database_url,
        "SUNDRY_CHANNEL_PREFIX": tag,
        "SUNDRY_TASK_QUEUE": tag,
        "SUNDRY_OPENAI_COMPAT_BASE_URL": f"http://{HOST}:{model_port}/v1",
        "SUNDRY_OPENAI_COMPAT_API_KEY": "loopback",
        "DJANGO_SETTINGS_MODULE": "sundry.settings",
        "SUNDRY_DEBUG": "0",
        "SUNDRY_LOG_LEVEL": "ERROR",
        "SUNDRY_REALBENCH_TASKLOG": str(tasklog),
        "SUNDRY_REALBENCH_READY": str(ready),
        **({"SUNDRY_REALBENCH_STAGES": "1"} if cfg.stages else {}),
    }
    os.environ.update(env)
    import django

    django.setup()
    say(f"  setting up {cfg.tickets} tickets in a throwaway database …")
    tickets, staff_cookies = setup(cfg)
    tickets, warm = tickets[:-1], tickets[-1]
    logs = {name: open(workdir / f"{name}.log", "wb") for name in ("model", "web", "worker")}
    procs: dict[str, subprocess.Popen] = {}
    try:
        procs["model"] = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "sundry.evals.modelserver",
                "--port",
                str(model_port),
                "--min",
                str(cfg.model_min),
                "--max",
                str(cfg.model_max),
                "--seed",
                str(cfg.seed),
                "--log",
                str(modellog),
            ],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=logs["model"],
            start_new_session=True,
        )
        procs["web"] = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "bench.benchweb" if cfg.stages else "sundry.web",
                "--host",
                HOST,
                "--port",
                str(web_port),
                "--log-level",
                "warning",
            ],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=logs["web"],
            start_new_session=True,
        )
        procs["worker"] = subprocess.Popen(
            worker_command(cfg.slots, tag),
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=logs["worker"],
            start_new_session=True,
        )
        deadline = time.monotonic() + 90
        _wait_for(lambda: _listening(model_port), deadline, "model server", procs["model"])
        _wait_for(lambda: _listening(web_port), deadline, "web process", procs["web"])
        _wait_for(ready.exists, deadline, "Celery worker", procs["worker"])
        say(
            f"  {cfg.tickets} customers posting for {cfg.duration:.0f} s to {cfg.slots} worker slots "
            f"(model {cfg.model_min}–{cfg.model_max} s a call) …"
        )
        with _connection_count(database_url) as connections:
            exchanges, started = asyncio.run(drive(web_port, tickets, staff_cookies, cfg, warm))
            ended = time.time()
        time.sleep(1.0)  # the last runs release their tickets after the reply
    except BaseException:
        for name, log in logs.items():
            log.flush()
        tails = {name: (workdir / f"{name}.log").read_text(errors="replace")[-1500:] for name in logs}
        for proc in procs.values():
            _stop(proc)
        say(f"  failed; process logs: {json.dumps(tails)[:4000]}")
        raise
    _stop(procs.pop("worker"))  # warm shutdown: every running task finishes and is written down
    for proc in procs.values():
        _stop(proc)
    for log in logs.values():
        log.close()
    _forget_queue(tag)
    keep = os.environ.get("SUNDRY_REALBENCH_KEEP")  # a folder to copy the run's raw records to
    if keep:
        for path in (tasklog, modellog):
            if path.exists():
                shutil.copy(path, Path(keep) / path.name)
    errors = {name: (workdir / f"{name}.log").read_text(errors="replace")[-3000:] for name in logs}
    # Only the measured part: the warm-up's calls and task came before it.
    ids = {t["id"] for t in tickets}
    tasks = [
        t for t in _lines(tasklog) if t["start"] >= started and (t["task"] != "sundry.agent.run" or t["arg"] in ids)
    ]
    ticket_of = {t["customer"]: t["id"] for t in tickets}
    calls = [{**c, "ticket": ticket_of.get(c.get("customer"))} for c in _lines(modellog) if c["arrived"] >= started]
    figures = measure(cfg, exchanges, tasks, calls, _steps(sorted(ids)))
    figures["wall_seconds"] = round(ended - started, 1)
    if cfg.stages:
        from bench import breakdown

        figures["breakdown"] = breakdown.breakdown(
            [
                {
                    "ticket": ex.ticket,
                    "posted": ex.posted_wall,
                    "replied": None if ex.replied is None else ex.posted_wall + (ex.replied - ex.posted),
                }
                for ex in exchanges
            ],
            tasks,
            calls,
        )
    figures["database_connections_peak"] = connections["peak"]
    figures["process_log_tails"] = {name: text for name, text in errors.items() if text.strip()}
    return figures


@contextmanager
def _connection_count(url: str):
    """The most connections the run's database had open at once (sampled twice a second,
    not counting the sampler's own)."""
    import threading

    import psycopg

    seen = {"peak": 0}
    stop = threading.Event()

    def sample():
        with psycopg.connect(url, autocommit=True) as conn:
            while not stop.wait(0.5):
                ((n,),) = conn.execute(
                    "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
                    " AND pid <> pg_backend_pid()"
                ).fetchall()
                seen["peak"] = max(seen["peak"], n)

    thread = threading.Thread(target=sample, name="connection-count", daemon=True)
    thread.start()
    try:
        yield seen
    finally:
        stop.set()
        thread.join(5)


def _lines(path: Path) -> list[dict]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _steps(ticket_ids: list[int]) -> list[dict]:
    from sundry.agent.models import AgentStep

    return [
        {
            "ticket": s["ticket_id"],
            "latency_ms": s["latency_ms"],
            "at": s["created_at"].timestamp(),
            "offline": s["offline"],
            "outcome": s["outcome"],
        }
        for s in AgentStep.objects.filter(ticket_id__in=ticket_ids).values(
            "ticket_id", "latency_ms", "created_at", "offline", "outcome"
        )
    ]


def _forget_queue(queue: str) -> None:
    """The run's task queue leaves keys in Redis; remove them."""
    try:
        import redis

        client = redis.Redis.from_url(os.environ["REDIS_URL"])
        client.delete(queue, f"_kombu.binding.{queue}")
        client.close()
    except Exception:
        pass


def measure(cfg: Config, exchanges: list[Exchange], tasks: list[dict], calls: list[dict], steps: list[dict]) -> dict:
    """The report's figures, from the run's own records (no constants)."""
    agent_tasks = [t for t in tasks if t["task"] == "sundry.agent.run"]
    other_tasks = [t for t in tasks if t["task"] != "sundry.agent.run"]
    model_seconds = [c["seconds"] for c in calls]
    gateway_seconds = [s["latency_ms"] / 1000 for s in steps]
    task_total, model_total, gateway_total = (
        sum(t["seconds"] for t in agent_tasks),
        sum(model_seconds),
        sum(gateway_seconds),
    )
    # Steps and task starts belong to the exchange of their ticket that was posted last before them.
    by_ticket: dict[int, list[Exchange]] = {}
    for ex in sorted(exchanges, key=lambda e: e.posted_wall):
        by_ticket.setdefault(ex.ticket, []).append(ex)

    def owner(ticket: int, at: float) -> Exchange | None:
        found = None
        for ex in by_ticket.get(ticket, []):
            if ex.posted_wall <= at:
                found = ex
        return found

    # The model's time for a message: the model server's time on the calls that served its ticket
    # (the customer ID in the request's ledger says which) since the message was posted.
    model_of: dict[int, float] = {}
    steps_of: dict[int, int] = {}
    for c in calls:
        ex = owner(c["ticket"], c["arrived"]) if c.get("ticket") is not None else None
        if ex is not None:
            model_of[id(ex)] = model_of.get(id(ex), 0.0) + c["seconds"]
            steps_of[id(ex)] = steps_of.get(id(ex), 0) + 1
    first_start: dict[int, float] = {}
    for t in sorted(agent_tasks, key=lambda t: t["start"]):
        ex = owner(t["arg"], t["start"])
        if ex is not None and id(ex) not in first_start:
            first_start[id(ex)] = t["start"]
    replied = [ex for ex in exchanges if ex.replied is not None]
    latency = [ex.replied - ex.posted for ex in replied]
    beyond = [ex.replied - ex.posted - model_of.get(id(ex), 0.0) for ex in replied]
    waits = []
    for ex in replied:
        if id(ex) in first_start:
            http_done_wall = ex.posted_wall + (ex.answered_http - ex.posted)
            waits.append(max(0.0, first_start[id(ex)] - http_done_wall))
    beyond_no_wait = []
    for ex in replied:
        if id(ex) in first_start:
            http_done_wall = ex.posted_wall + (ex.answered_http - ex.posted)
            wait = max(0.0, first_start[id(ex)] - http_done_wall)
            beyond_no_wait.append(ex.replied - ex.posted - model_of.get(id(ex), 0.0) - wait)
    share = 100 * (task_total - model_total) / model_total if model_total else None
    beyond_p99 = pct(beyond, 0.99)
    return {
        "config": asdict(cfg),
        "messages": {
            "posted": len(exchanges),
            "replied": len(replied),
            "unanswered": sum(1 for ex in exchanges if ex.status == 200 and ex.replied is None),
            "http_errors": sum(1 for ex in exchanges if ex.status != 200),
            "http_statuses": {
                str(k): sum(1 for ex in exchanges if ex.status == k) for k in sorted({ex.status for ex in exchanges})
            },
            "steps_per_message": round(sum(steps_of.values()) / len(steps_of), 2) if steps_of else None,
        },
        "reply_push_ms": {
            "p50": _ms(pct(latency, 0.5)),
            "p99": _ms(pct(latency, 0.99)),
            "max": _ms(max(latency, default=None)),
        },
        "post_http_ms": {
            "p50": _ms(pct([ex.answered_http - ex.posted for ex in exchanges], 0.5)),
            "p99": _ms(pct([ex.answered_http - ex.posted for ex in exchanges], 0.99)),
        },
        # Per message: what the customer waited beyond the model's own time for that message's steps.
        "beyond_model_ms": {"p50": _ms(pct(beyond, 0.5)), "p99": _ms(beyond_p99)},
        "slot_wait_ms": {"p50": _ms(pct(waits, 0.5)), "p99": _ms(pct(waits, 0.99))},
        "beyond_model_without_slot_wait_ms": {
            "p50": _ms(pct(beyond_no_wait, 0.5)),
            "p99": _ms(pct(beyond_no_wait, 0.99)),
        },
        "model_ms_per_step": {
            "server_p50": _ms(pct(model_seconds, 0.5)),
            "server_mean": _ms(statistics.fmean(model_seconds)) if model_seconds else None,
            "gateway_p50": _ms(pct(gateway_seconds, 0.5)),
            "gateway_mean": _ms(statistics.fmean(gateway_seconds)) if gateway_seconds else None,
        },
        "steps": {
            "recorded": len(steps),
            "model_calls": len(calls),
            "offline": sum(1 for s in steps if s["offline"]),
            "calls_unattributed": sum(1 for c in calls if c.get("ticket") is None),
            "model_errors": sum(1 for s in steps if s["outcome"] == "model_error"),
        },
        "agent_tasks": {"count": len(agent_tasks), "seconds": round(task_total, 2)},
        "other_tasks": {"count": len(other_tasks), "seconds": round(sum(t["seconds"] for t in other_tasks), 2)},
        # Sundry's own time in the agent's tasks (everything but the model server's time), against the model's.
        "sundry_share_pct": round(share, 2) if share is not None else None,
        "sundry_ms_per_step": round(1000 * (task_total - model_total) / len(calls), 1) if calls else None,
        "sundry_share_split_pct": {
            "sdk_and_http": round(100 * (gateway_total - model_total) / model_total, 2) if model_total else None,
            "worker_rest": round(100 * (task_total - gateway_total) / model_total, 2) if model_total else None,
        },
        "targets": {
            "sundry_share_pct_max": 1.0,
            "beyond_model_p99_ms_max": 150.0,
            "sundry_share_met": share is not None and share <= 1.0,
            "reply_push_met": beyond_p99 is not None and beyond_p99 <= 0.150,
        },
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    defaults = Config()
    for name, value in asdict(defaults).items():
        parser.add_argument(f"--{name.replace('_', '-')}", type=type(value), default=value)
    args = parser.parse_args(argv)
    if args.postgres not in ("private", "configured"):
        parser.error("--postgres is 'private' or 'configured'")
    cfg = Config(**vars(args))

    def stopped(signum, frame):  # terminated from outside: stop the processes and the database on the way out
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, stopped)
    figures = run(cfg, say=lambda line: print(line, file=sys.stderr, flush=True))
    if figures.get("breakdown"):
        from bench import breakdown

        print("\n".join(breakdown.table(figures["breakdown"])), file=sys.stderr, flush=True)
    print(json.dumps(figures))
    return 0


if __name__ == "__main__":
    sys.exit(main())
