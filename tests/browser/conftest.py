"""Real-browser tests: Debian's Chromium driven by Playwright against a live ASGI server.

The server is daphne in a subprocess (HTTP and websockets on one port) with a
Celery worker beside it, both pointed at this run's test database and Redis,
exactly as the scaled deployment runs. Tests use `transactional_db`, so rows
they create are committed and the server sees them. Pushes from services the
test calls directly travel over the same Redis channel layer to the server's
sockets.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from django.conf import settings

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
SCREENSHOTS = ROOT / "artifacts" / "screenshots"
STARTUP_SECONDS = 120  # a wait on /healthz, not a sleep: seen over 40 s at load 12


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _database_url(db: dict) -> str:
    if db["ENGINE"].endswith("postgresql"):
        auth = db.get("USER") or ""
        if db.get("PASSWORD"):
            auth += f":{db['PASSWORD']}"
        return f"postgres://{auth}@{db.get('HOST') or '127.0.0.1'}:{db.get('PORT') or 5432}/{db['NAME']}"
    return f"sqlite:///{db['NAME']}"


def _wait_http(url: str, proc: subprocess.Popen, log: Path) -> None:
    deadline = time.monotonic() + STARTUP_SECONDS
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited early:\n{log.read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(url, timeout=1) as r:
                if r.status == 200:
                    return
        except OSError:
            time.sleep(0.2)
    raise RuntimeError(f"server did not answer in {STARTUP_SECONDS}s:\n{log.read_text()[-3000:]}")


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)


def _check_can_serve() -> dict:
    """The test database's settings, or a skip saying what the browser tests need."""
    if not os.path.exists(CHROMIUM):
        pytest.skip(f"no {CHROMIUM}: install Debian's chromium (bash bin/test does) to run the browser tests")
    from django.db import connection

    db = connection.settings_dict
    if db["ENGINE"].endswith("sqlite3") and ("memory" in str(db["NAME"]) or str(db["NAME"]) == ":memory:"):
        pytest.skip(
            "browser tests need a database a server process can open: PostgreSQL "
            "(bash bin/test sets DATABASE_URL) or a file-backed SQLite test database"
        )
    if not settings.REDIS_URL:
        pytest.skip(
            "browser tests need Redis for the channel layer and Celery between processes (bash bin/test sets REDIS_URL)"
        )
    return db


_servers_started = 0


@contextlib.contextmanager
def _serving(logs: Path):
    """A web process and a Celery worker on this run's test database and Redis, with the
    environment as it is now; yields the server's URL and stops both on exit."""
    global _servers_started
    db = _check_can_serve()
    from tests.conftest import TEST_CHANNEL_PREFIX

    _servers_started += 1
    port = _free_port()
    queue = f"sundry-browser-{os.getpid()}-{_servers_started}"
    env = dict(
        os.environ,
        DATABASE_URL=_database_url(db),
        REDIS_URL=settings.REDIS_URL,
        SUNDRY_CHANNEL_PREFIX=TEST_CHANNEL_PREFIX,
        SUNDRY_TASK_QUEUE=queue,
        DJANGO_SETTINGS_MODULE="sundry.settings",
        SUNDRY_DEBUG="1",
        PYTHONUNBUFFERED="1",
        # Tool servers' declaration files: the examples, and the variants tests write under artifacts/.
        SUNDRY_TOOL_DECLARATIONS_DIR=os.pathsep.join(["examples", "artifacts"]),
    )
    env.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
    web_log, worker_log = logs / "web.log", logs / "celery.log"
    bin_dir = Path(sys.executable).parent
    web = subprocess.Popen(
        [sys.executable, "-m", "sundry.web", "--host", "127.0.0.1", "--port", str(port)],
        cwd=ROOT,
        env=env,
        stdout=web_log.open("w"),
        stderr=subprocess.STDOUT,
    )
    worker = subprocess.Popen(
        [
            str(bin_dir / "celery"),
            "-A",
            "sundry",
            "worker",
            "-Q",
            queue,
            "--pool",
            "solo",
            "--without-gossip",
            "--without-mingle",
            "--without-heartbeat",
            "--loglevel",
            "WARNING",
        ],
        cwd=ROOT,
        env=env,
        stdout=worker_log.open("w"),
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_http(url + "/healthz", web, web_log)
        yield url
    finally:
        _stop(web)
        _stop(worker)


@pytest.fixture(scope="session")
def shared_live_server_url(django_db_setup, django_db_blocker, tmp_path_factory):
    """One web process and worker for every browser module on this test process (a pytest-xdist
    worker starts its own when it first runs a browser test): starting them per module cost
    seconds each time, and --dist loadgroup spreads a module's tests over every worker."""
    with _serving(tmp_path_factory.mktemp("browser-server")) as url:
        yield url


@pytest.fixture(scope="module")
def private_live_server_url(django_db_setup, django_db_blocker, tmp_path_factory):
    """A server of the module's own, started with the environment the module's fixtures set
    (an attachment folder, a model server's address): for modules that need the server to see
    something the shared one does not."""
    with _serving(tmp_path_factory.mktemp("browser-server")) as url:
        yield url


@pytest.fixture(scope="module")
def live_server_url(shared_live_server_url):
    """The server browser tests talk to; a module overrides this with `private_live_server_url`
    when its server needs its own environment."""
    return shared_live_server_url


@pytest.fixture(scope="module")
def browser(live_server_url):
    from playwright.sync_api import sync_playwright

    # Playwright's sync API keeps an event loop on this thread for as long as it
    # runs; the tests' ORM calls (and the database flush after each) are still
    # plain synchronous code between browser steps.
    previous = os.environ.get("DJANGO_ALLOW_ASYNC_UNSAFE")
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    try:
        with sync_playwright() as pw:
            chromium = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
            try:
                yield chromium
            finally:
                chromium.close()
    finally:
        if previous is None:
            os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
        else:
            os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = previous


@pytest.fixture(autouse=True)
def quiet_worker_before_flush(request):
    """After a test, let the server's Celery worker finish the agent runs and compactions it is
    still doing before the test database is emptied: a run writing while the flush truncates
    deadlocks the flush, and the rows left behind fail the next test. (pytest-django's database
    fixtures are set up before this conftest's, so this teardown runs before theirs.)"""
    yield
    marker = request.node.get_closest_marker("django_db")
    if marker is None or not marker.kwargs.get("transaction"):
        return
    if "browser" in request.fixturenames:
        # The test's pages go with it: an open page's socket keeps the server reading (its sync
        # every few seconds), and a read holding one table while the flush truncates the next one
        # deadlocks the flush (seen in a clean-clone run).
        for context in request.getfixturevalue("browser").contexts:
            context.close()
    from sundry.compaction.models import CompactionRun
    from sundry.tickets.models import Ticket

    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        if not (
            Ticket.objects.filter(agent_claimed_at__isnull=False).exists()
            or CompactionRun.objects.filter(
                status__in=(CompactionRun.Status.QUEUED, CompactionRun.Status.RUNNING)
            ).exists()
        ):
            return
        time.sleep(0.1)


@pytest.fixture(autouse=True)
def fresh_channel_layer():
    """Overrides the suite's: no Redis flush here (it would need async_to_sync on
    Playwright's thread, and the keys belong to the live server's sockets)."""
    from channels.layers import channel_layers

    channel_layers.backends.clear()
    yield
    channel_layers.backends.clear()


@pytest.fixture
def screenshots() -> Path:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    return SCREENSHOTS
