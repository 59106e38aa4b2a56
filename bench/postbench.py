"""A customer's message POST and a desk reply POST, in one process: time and statements per post.

    python -m bench.postbench --posts 40 --history 40 [--database URL] [--profile N] [--socket-open]

Seeds (once per database) a small shop, the realistic benchmark's class and a customer with a
login; each run opens a fresh ticket of `--history` turns, so runs on one database start alike.
Then, through Django's test client with CSRF enforced and htmx headers — the whole middleware
stack, the session and login read, a PostgreSQL connection opened per request as in the web process
(`CONN_MAX_AGE=0`; closed between posts, untimed, as the server closes it after the response) — it posts the realistic benchmark's script of messages
(`bench.realbench.SCRIPT`: real order numbers, a stated rule, a refund asked) and times each
POST until its response is in hand. With `REDIS_URL` set the agent's wake-up goes to Celery over
Redis as deployed (on a queue of this run's own, purged afterwards; no worker takes it); between
posts, untimed, the ticket's wake-up mark is cleared, as the reply to the message before would
have, so every post queues its task. Then, on a second ticket taken over by a member of staff,
`--posts` desk replies (`/desk/tickets/<id>/post`, action reply).

Prints one JSON object: the 1-minute load average at start and end, and for each kind of post
the median, p90 and mean wall time (ms), the median CPU time of the posting thread (ms), the
statements a post sends (min, max) with, for the first post, the statements by module, and its
writes to Redis (round trips: a pipeline's commands go in one).
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import re
import statistics
import time
import traceback
from collections import Counter

_SUNDRY = re.compile(r"[/\\]sundry[/\\](.+\.py)$")


def _module() -> str:
    for frame in reversed(traceback.extract_stack()):
        hit = _SUNDRY.search(frame.filename)
        if hit:
            return hit.group(1)
    return "?"


def _seed() -> None:
    from django.contrib.auth import get_user_model
    from django.core.management import call_command

    from sundry.shop.seed import generate_shop
    from sundry.tickets.models import TicketClass

    call_command("migrate", verbosity=0)
    if TicketClass.objects.filter(slug="postbench").exists():
        return
    generate_shop(seed=7, customers=4, orders=40)
    TicketClass.objects.create(
        name="Post benchmark",
        slug="postbench",
        token_budget=8000,
        trigger_fraction=0.8,
        recent_turns_kept=8,
        working_model="offline",
        approval_rules={"issue_refund": {"above": {"USD": 10000, "EUR": 10000, "GBP": 8000, "INR": 800000}}},
    )
    get_user_model().objects.create_user("postbench-staff", password="x", is_staff=True)


def _ticket(history: int, handler: str):
    from django.contrib.auth import get_user_model

    from bench.pushbench import write_history
    from sundry.desk.lifecycle import ticket_create
    from sundry.shop.models import Customer, Order
    from sundry.tickets.models import Ticket, TicketClass

    with_orders = Order.objects.filter(status="delivered").values_list("customer", flat=True)
    customer = Customer.objects.filter(pk__in=with_orders).order_by("customer_id").first()
    if customer.user_id is None:
        customer.user = get_user_model().objects.create_user(f"postbench-{customer.customer_id}", password="x")
        customer.save(update_fields=["user"])
    ticket = ticket_create(
        customer=customer.person, ticket_class=TicketClass.objects.get(slug="postbench"), subject="Help with my orders"
    )
    write_history(ticket, history, tokens=40)
    staff = get_user_model().objects.get(username="postbench-staff")
    Ticket.objects.filter(pk=ticket.pk).update(
        last_turn_number=history,
        version=history,
        handler=handler,
        assigned_to=staff if handler == "staff" else None,
    )
    return ticket, customer, staff


def _client(user, page: str, socket_open: bool = False):
    from django.test import Client

    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    client.get(page)  # sets the CSRF cookie, as the page the customer posts from does
    token = client.cookies["csrftoken"].value
    headers = {"HTTP_X_CSRFTOKEN": token, "HTTP_HX_REQUEST": "true"}
    if socket_open:  # as the page's script says while its live socket is open (static/sundry-live.js)
        headers["HTTP_X_SUNDRY_LIVE"] = "1"
    return client, headers


def _count_redis_writes(sent: list) -> None:
    """Each write to Redis (a round trip: a pipeline's commands go in one write) appended to `sent`."""
    from redis.connection import AbstractConnection

    real = AbstractConnection.send_packed_command

    def counted(self, command, check_health=True):
        sent.append(1)
        return real(self, command, check_health)

    AbstractConnection.send_packed_command = counted


def _task_start(path, task_id: str, timeout: float = 60.0) -> float:
    """When the worker started task `task_id`, once it has finished it (bench.benchworker's log)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for line in path.read_text().splitlines() if path.exists() else []:
            task = json.loads(line)
            if task.get("id") == task_id:
                return task["start"]
        time.sleep(0.02)
    raise RuntimeError(f"the worker did not finish task {task_id} in {timeout:.0f} s")


def _posts(kind: str, posts: int, history: int, profile: int, tasklog=None, socket_open: bool = False) -> dict:
    from django.db import connection

    from bench.realbench import SCRIPT, _facts
    from sundry.tickets.models import Ticket

    ticket, customer, staff = _ticket(history, "agent" if kind == "customer" else "staff")
    if kind == "customer":
        client, headers = _client(customer.user, f"/help/tickets/{ticket.pk}/", socket_open)
        url = f"/help/tickets/{ticket.pk}/message"
        facts = _facts(customer)
        texts = [t.format(**facts) for t in SCRIPT]
    else:
        client, headers = _client(staff, f"/desk/tickets/{ticket.pk}/", socket_open)
        url = f"/desk/tickets/{ticket.pk}/post"
        texts = ["Thanks for waiting — I've checked with the carrier and it is on its way."]
    sent: list[tuple[str, str]] = []
    counting = [False]
    attribute = [True]  # which module sent each statement: the first post only (walking the stack is slow)

    def wrapper(execute, sql, params, many, context):
        if counting[0]:
            sent.append((_module() if attribute[0] else "", sql))
        return execute(sql, params, many, context)

    connection.execute_wrappers.append(wrapper)  # kept across the connections each request opens
    wall, cpu, statements, redis_trips, by_module = [], [], [], [], None
    redis_sent: list = []
    _count_redis_writes(redis_sent)
    handoffs, published = [], []
    if tasklog is not None:
        from celery.signals import after_task_publish

        def _published(sender=None, headers=None, **kwargs):
            published.append((time.time(), (headers or {}).get("id")))

        after_task_publish.connect(_published, weak=False)
    profiler = cProfile.Profile() if profile else None
    for i in range(posts + 1):  # the first post is a warm-up: what a process loads once
        data = {"text": texts[i % len(texts)], "client_key": f"{kind}-{os.getpid()}-{i}"}
        if kind == "staff":
            data["action"] = "reply"
        # The reply to the message before settled its wake-up: every post queues its task.
        Ticket.objects.filter(pk=ticket.pk).update(agent_wake_turn=None, agent_wake_at=None)
        # The web process connects to PostgreSQL per request (CONN_MAX_AGE=0) and closes after the
        # response is sent; the test client keeps the connection, so it is closed here, untimed.
        connection.close()
        sent.clear()
        redis_sent.clear()
        counting[0] = True
        if profiler is not None and 0 < i <= profile:
            profiler.enable()
        started, cpu_started = time.perf_counter(), time.thread_time()
        response = client.post(url, data, **headers)
        elapsed, cpu_used = time.perf_counter() - started, time.thread_time() - cpu_started
        if profiler is not None:
            profiler.disable()
        counting[0] = False
        if response.status_code != 200 or b"bad" in response.content[-300:]:
            raise RuntimeError(f"post {i} answered {response.status_code}: {response.content[-300:]!r}")
        if tasklog is not None:
            # Each post's run ends before the next post is made (the worker is otherwise idle).
            if published:
                at, task_id = published.pop()
                started = _task_start(tasklog, task_id)
                if i > 0:
                    handoffs.append(started - at)
                published.clear()
        if i == 0:
            continue
        wall.append(elapsed)
        cpu.append(cpu_used)
        statements.append(len(sent))
        redis_trips.append(len(redis_sent))
        if by_module is None:
            attribute[0] = False
            by_module = dict(Counter(m for m, _ in sent).most_common())
            if os.environ.get("POSTBENCH_SQL"):
                print("\n".join(f"{m:32s} {sql[:150]}" for m, sql in sent))
    connection.execute_wrappers.remove(wrapper)
    wall.sort()
    out = {
        "kind": kind,
        "posts": len(wall),
        "median_ms": round(1000 * statistics.median(wall), 2),
        "p90_ms": round(1000 * wall[int(0.9 * (len(wall) - 1))], 2),
        "mean_ms": round(1000 * statistics.mean(wall), 2),
        # This thread's CPU time in the post (the request's own work; not the server's, nor Redis's).
        "cpu_median_ms": round(1000 * statistics.median(cpu), 2),
        "statements": [min(statements), max(statements)],
        "redis_round_trips": [min(redis_trips), max(redis_trips)],
        "statements_first": by_module,
    }
    if handoffs:
        handoffs.sort()
        out["handoff_ms"] = {
            "median": round(1000 * statistics.median(handoffs), 2),
            "max": round(1000 * handoffs[-1], 2),
            "tasks": len(handoffs),
        }
    if profiler is not None:
        text = io.StringIO()
        pstats.Stats(profiler, stream=text).sort_stats("cumulative").print_stats(
            int(os.environ.get("POSTBENCH_LINES", "60"))
        )
        out["profile"] = text.getvalue()
    return out


def _start_worker(processes: int, workdir):
    import subprocess

    from django.conf import settings

    from bench.realbench import worker_command

    tasklog, ready = workdir / "tasks.jsonl", workdir / "ready"
    env = {**os.environ, "SUNDRY_REALBENCH_TASKLOG": str(tasklog), "SUNDRY_REALBENCH_READY": str(ready)}
    queue = settings.CELERY_TASK_DEFAULT_QUEUE
    worker = subprocess.Popen(
        worker_command(processes, queue),
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=open(workdir / "worker.log", "wb"),
        start_new_session=True,
    )
    deadline = time.monotonic() + 90
    while not ready.exists():
        if worker.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"the worker did not start: {(workdir / 'worker.log').read_text()[-2000:]}")
        time.sleep(0.1)
    return worker, tasklog


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--posts", type=int, default=40)
    parser.add_argument("--history", type=int, default=40)
    parser.add_argument("--kinds", default="customer,staff")
    parser.add_argument("--profile", type=int, default=0, help="profile the first N timed posts (cProfile)")
    parser.add_argument("--database", default="", help="a database URL to seed once and reuse")
    parser.add_argument(
        "--socket-open",
        action="store_true",
        help="posts say the page's live socket is open (the X-Sundry-Live header its script sends)",
    )
    parser.add_argument(
        "--worker",
        type=int,
        default=0,
        help="start a prefork Celery worker of this many processes (bench.benchworker) and time each "
        "customer post's hand-off: from its task's publish until the worker starts it",
    )
    args = parser.parse_args(argv)
    os.environ.update(
        {
            "DJANGO_SETTINGS_MODULE": "sundry.settings",
            "SUNDRY_LOG_LEVEL": "ERROR",
            "SUNDRY_DEBUG": "0",
            "SUNDRY_RATE_CUSTOMER_MESSAGES": "100000/m",  # the benchmark posts faster than a person
            "SUNDRY_TASK_QUEUE": f"postbench-{os.getpid()}",
            "SUNDRY_CHANNEL_PREFIX": f"sundry-postbench-{os.getpid()}",
        }
    )
    from contextlib import nullcontext
    from pathlib import Path
    from tempfile import mkdtemp

    from bench import pushbench

    context = nullcontext((args.database, "given")) if args.database else pushbench._database(Path(mkdtemp()))
    load_start = os.getloadavg()[0]
    with context as (url, _):
        os.environ["DATABASE_URL"] = url
        import django

        django.setup()
        from django.conf import settings

        _seed()
        worker = tasklog = None
        if args.worker and settings.BACKGROUND_MODE == "celery":
            worker, tasklog = _start_worker(args.worker, Path(mkdtemp()))
        try:
            results = [
                _posts(
                    kind,
                    args.posts,
                    args.history,
                    args.profile,
                    tasklog if kind == "customer" else None,
                    args.socket_open,
                )
                for kind in args.kinds.split(",")
            ]
        finally:
            if worker is not None:
                worker.terminate()
                worker.wait(30)
        if settings.BACKGROUND_MODE == "celery":
            from sundry.celery import app

            queue = settings.CELERY_TASK_DEFAULT_QUEUE
            with app.connection_for_write() as conn:
                conn.default_channel.queue_purge(queue)
                conn.default_channel.queue_delete(queue)
                # The transport's records of the run's queue and exchange (kept by a delete).
                conn.default_channel.client.delete(f"_kombu.binding.{queue}", f"_kombu.binding_permanent.{queue}")
    print(
        json.dumps(
            {
                "load": [round(load_start, 2), round(os.getloadavg()[0], 2)],
                "background": settings.BACKGROUND_MODE,
                "results": results,
            },
            indent=1,
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
