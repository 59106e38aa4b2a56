"""Where the harness gets tickets: trace files, recorded exports, and the demo shop.

`shared_dir()` finds `<repo>/../shared` (present on the team's machines, absent
in a fresh clone), or the folder `SUNDRY_SHARED_DIR` names (a checkout elsewhere,
such as a git worktree); callers say clearly what they skip when it is missing.
"""

from __future__ import annotations

import os
import tempfile
from contextlib import contextmanager
from pathlib import Path

from django.conf import settings

from sundry.evals import importers
from sundry.evals.records import RecordedTicket, export_ticket


def shared_dir() -> Path | None:
    named = os.environ.get("SUNDRY_SHARED_DIR")
    path = Path(named) if named else Path(settings.BASE_DIR).resolve().parent / "shared"
    return path if path.is_dir() else None


def tau2_traces_dir() -> Path | None:
    shared = shared_dir()
    path = shared / "corpora" / "tau2" / "traces" if shared else None
    return path if path and path.is_dir() else None


def trace_files(paths: list[str | Path]) -> list[Path]:
    out = []
    for p in map(Path, paths):
        out += sorted(p.glob("*.json")) + sorted(p.glob("*.jsonl")) if p.is_dir() else [p]
    return out


def load_files(paths: list[Path], *, limit: int | None = None, domain: str | None = None) -> list[RecordedTicket]:
    tickets = []
    for path in paths:
        found = importers.load_any(path, domain=domain)
        tickets += found[:limit] if limit else found
    return tickets


def db_demo_tickets() -> list[RecordedTicket]:
    """Every ticket in the configured database, exported to our recorded format."""
    from sundry.tickets.models import Ticket

    return [export_ticket(t) for t in Ticket.objects.select_related("customer", "ticket_class").order_by("pk")]


@contextmanager
def throwaway_database(*, file_backed: bool = False):
    """A fresh test database (in-memory SQLite, or a test_ PostgreSQL database) for the block's length.

    `file_backed` puts SQLite in a temporary file instead, for work that writes from two
    threads (in-process background tasks): an in-memory database shared between threads
    fails with "table is locked" rather than waiting its turn.

    Pushes go to a channel prefix of their own meanwhile (or an in-memory layer): a throwaway
    ticket's id may equal a real one's, and a desk watching that ticket must not hear about it.
    """
    from channels.layers import channel_layers
    from django.test.utils import (
        override_settings,
        setup_databases,
        setup_test_environment,
        teardown_databases,
        teardown_test_environment,
    )

    db = settings.DATABASES["default"]
    saved_test = dict(db.get("TEST") or {})
    tmp = None
    if file_backed and db["ENGINE"].endswith("sqlite3"):
        tmp = tempfile.TemporaryDirectory(prefix="sundry-evals-")
        db["TEST"] = {**saved_test, "NAME": str(Path(tmp.name) / "throwaway.sqlite3")}
    elif db["ENGINE"].endswith("postgresql"):  # never the test database a concurrent test run uses
        db["TEST"] = {**saved_test, "NAME": f"test_{db['NAME']}_evals_{os.getpid()}"}
    setup_test_environment()
    old = setup_databases(verbosity=0, interactive=False, keepdb=False)
    layers = override_settings(CHANNEL_LAYERS=_private_layers())
    layers.enable()
    channel_layers.backends.clear()
    try:
        yield
    finally:
        _end_other_sessions()
        layers.disable()
        channel_layers.backends.clear()
        teardown_databases(old, verbosity=0)
        teardown_test_environment()
        db["TEST"] = saved_test
        if tmp is not None:
            tmp.cleanup()


@contextmanager
def private_pushes():
    """Pushes go to a channel prefix of their own for the block's length: tickets a run makes and
    removes again are never heard by a desk or a customer's page watching the real ones."""
    from channels.layers import channel_layers
    from django.test.utils import override_settings

    layers = override_settings(CHANNEL_LAYERS=_private_layers())
    layers.enable()
    channel_layers.backends.clear()
    try:
        yield
    finally:
        layers.disable()
        channel_layers.backends.clear()


def _private_layers() -> dict:
    """The configured layer under a prefix of its own (pushes cost what they cost in production
    and no real desk hears them), or the in-memory layer when there is no Redis."""
    from django.conf import settings

    default = settings.CHANNEL_LAYERS["default"]
    if default["BACKEND"] == "channels.layers.InMemoryChannelLayer":
        return {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    config = {**default.get("CONFIG", {}), "prefix": f"sundry-throwaway-{os.getpid()}"}
    return {"default": {**default, "CONFIG": config}}


def _end_other_sessions() -> None:
    """Background threads keep their own connections; PostgreSQL will not drop a database in use."""
    from django.db import connection

    from sundry.core.background import wait_idle

    wait_idle()
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                " WHERE datname = current_database() AND pid <> pg_backend_pid()"
            )


def fresh_demo_tickets(*, customers: int = 120, orders: int = 1200, say=print) -> list[RecordedTicket]:
    """Seed a small demo shop in a throwaway database, work the demo tickets with the agent loop, export them.

    Background work stays in-process and is awaited, so nothing reaches a broker. Compaction
    is not queued at resolution steps nor done before a step over the budget: the harness
    compacts the recorded turns itself, and a
    worker thread writing to an in-memory test database would only contend for its lock.
    """
    from django.test.utils import override_settings

    from sundry.agent import loop, step

    listeners, loop.resolution_listeners[:] = list(loop.resolution_listeners), []
    hooks, step.before_request_hooks[:] = list(step.before_request_hooks), []
    try:
        with throwaway_database(), override_settings(BACKGROUND_MODE="in-process"):
            return _work_demo(customers, orders, say)
    finally:
        loop.resolution_listeners[:] = listeners
        step.before_request_hooks[:] = hooks


def _work_demo(customers: int, orders: int, say) -> list[RecordedTicket]:
    from sundry.core.background import wait_idle
    from sundry.shop.demo import create_demo_tickets, ensure_classes, ensure_logins
    from sundry.shop.seed import generate_shop

    say(f"  seeding a demo shop ({customers} customers, {orders} orders) in a throwaway database …")
    generate_shop(seed=settings.DEMO_SEED, customers=customers, orders=orders)
    ensure_classes()
    ensure_logins()
    say("  working the demo tickets with the offline model through the agent loop …")
    tickets = create_demo_tickets(work=True)
    wait_idle()
    return [export_ticket(t) for t in tickets]
