"""Fixtures of the database fault tests: a PostgreSQL of their own (migrated once, one fresh
database per test from that template), PgBouncer in transaction mode in front of it, the
stand-in model, and the product's web process and Celery worker pointed at either."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import uuid
from dataclasses import dataclass, field

import pytest
import requests

from tests.faults.servers import (
    ROOT,
    ModelServer,
    PgBouncer,
    PrivatePostgres,
    Process,
    postgres_bindir,
    web_process,
    worker_process,
)

TEMPLATE = "sundry_faults_template"
# Short, so a claim a failed step left behind lapses within the test (production: 240 s); a
# model call must end within it (the settings refuse otherwise).
CLAIM_TTL = 15
MODEL_CALL_TIMEOUT = 12
# The outbox sweep, when a test runs the worker with beat: often, and soon after a post.
SWEEP_SECONDS = 2
SWEEP_GRACE = 4


def _product_env(**extra) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST", "DJANGO_ALLOW"))}
    env.update(
        DJANGO_SETTINGS_MODULE="sundry.settings",
        PYTHONPATH=str(ROOT),
        PYTHONUNBUFFERED="1",
        SUNDRY_DEBUG="0",
        # A burst of a hundred posts from one customer is the fault load here, not abuse.
        SUNDRY_RATE_CUSTOMER_MESSAGES="10000/m",
    )
    env.update(extra)
    return env


@pytest.fixture(scope="session")
def pg():
    bindir = postgres_bindir()
    if bindir is None:
        pytest.skip("fault tests need PostgreSQL's server binaries (/usr/lib/postgresql/<version>/bin)")
    if os.geteuid() == 0 and not shutil.which("runuser"):
        pytest.skip("fault tests run as root need runuser to start PostgreSQL as the postgres user")
    server = PrivatePostgres(bindir)
    try:
        server.start()
        server.execute("postgres", f"CREATE DATABASE {TEMPLATE}")
        migrate = subprocess.run(
            [sys.executable, "manage.py", "migrate", "--noinput", "-v", "0"],
            cwd=ROOT,
            env=_product_env(DATABASE_URL=server.url(TEMPLATE)),
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert migrate.returncode == 0, migrate.stdout + migrate.stderr
        yield server
    finally:
        server.destroy()


@pytest.fixture
def fault_db(pg):
    """A fresh, migrated database on the private server, dropped afterwards."""
    if not pg.is_up():
        pg.start()
    name = f"faults_{uuid.uuid4().hex[:10]}"
    pg.execute("postgres", f"CREATE DATABASE {name} TEMPLATE {TEMPLATE}")
    yield name
    if not pg.is_up():
        pg.start()
    pg.execute("postgres", f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


@pytest.fixture(scope="session")
def _bouncer(pg):
    if not (shutil.which("pgbouncer") or os.path.exists("/usr/sbin/pgbouncer")):
        pytest.skip("PgBouncer is not installed (bash bin/test installs Debian's pgbouncer)")
    bouncer = PgBouncer(pg)
    yield bouncer
    bouncer.stop()


@pytest.fixture(params=["direct", "pgbouncer"])
def route(request, pg):
    """How the product reaches PostgreSQL: straight, or through PgBouncer in transaction mode."""
    if request.param == "pgbouncer":
        return request.getfixturevalue("_bouncer")
    return None


@pytest.fixture
def model():
    server = ModelServer()
    yield server
    server.close()


@dataclass
class Stack:
    """The product on the private server: its web process, maybe a worker, and the seeded rows."""

    pg: PrivatePostgres
    db: str
    url: str
    web: Process
    worker: Process | None
    seeded: dict
    env: dict = field(default_factory=dict)
    log_dir: object = None
    processes: list = field(default_factory=list)

    def start_worker(self, name: str, env: dict | None = None, **options) -> Process:
        """Another worker on the same queue (after the test killed or stopped one), stopped at
        teardown; `env` changes its settings."""
        worker = worker_process({**self.env, **(env or {})}, self.log_dir / f"{name}.log", **options)
        self.processes.append(worker)
        self.worker = worker
        return worker

    def login_staff(self) -> requests.Session:
        return self.login(self.seeded["staff_username"])

    def login(self, username: str | None = None) -> requests.Session:
        session = requests.Session()
        session.get(f"{self.url}/login/", timeout=10)
        response = session.post(
            f"{self.url}/login/",
            timeout=30,
            allow_redirects=False,
            data={
                "username": username or self.seeded["username"],
                "password": self.seeded["password"],
                "csrfmiddlewaretoken": session.cookies["csrftoken"],
            },
        )
        assert response.status_code == 302, response.text[:500]
        session.headers.update({"X-CSRFToken": session.cookies["csrftoken"], "HX-Request": "true"})
        return session

    def post(
        self, session: requests.Session, ticket: int, text: str, timeout: float = 30, client_key: str = ""
    ) -> requests.Response:
        data = {"text": text, **({"client_key": client_key} if client_key else {})}
        return session.post(f"{self.url}/help/tickets/{ticket}/message", data=data, timeout=timeout)

    def rows(self, sql: str, params=()) -> list[tuple]:
        return self.pg.execute(self.db, sql, params)

    def turns(self, ticket: int) -> list[tuple]:
        """(number, author, kind, text) of the ticket's turns, in order."""
        return self.rows(
            "SELECT number, author, kind, text FROM tickets_turn WHERE ticket_id = %s ORDER BY number", (ticket,)
        )

    def run_state(self, ticket: int) -> str:
        """What a failure message needs to tell a lost answer from a late one: the ticket's claim
        and outbox, and its agent steps (number, outcome, turns written, when)."""
        claim = self.rows(
            "SELECT agent_claimed_by, agent_claimed_at, agent_wake_turn, agent_wake_at, last_turn_number "
            "FROM tickets_ticket WHERE id = %s",
            (ticket,),
        )
        steps = self.rows(
            "SELECT number, outcome, first_turn, last_turn, created_at FROM agent_agentstep "
            "WHERE ticket_id = %s ORDER BY number",
            (ticket,),
        )
        return f"claim/outbox/last turn {claim}; steps {steps}"


@pytest.fixture
def stack(pg, fault_db, model, redis_url, route, tmp_path):
    """`stack(tickets=1, handler="agent", worker=True)` starts the product on this test's database."""
    started: list[Process] = []
    queue = f"sundry-faults-{uuid.uuid4().hex[:10]}"

    def start(
        *,
        tickets: int = 1,
        handler: str = "agent",
        worker: bool = True,
        as_compose: bool = False,
        beat: bool = False,
        concurrency: int = 1,
        web_env: dict | None = None,
        **extra_env: str,
    ) -> Stack:
        port = route.port if route is not None else pg.port
        env = _product_env(
            DATABASE_URL=pg.url(fault_db, port=port),
            REDIS_URL=redis_url,
            SUNDRY_CHANNEL_PREFIX=queue,
            SUNDRY_TASK_QUEUE=queue,
            SUNDRY_OPENAI_COMPAT_BASE_URL=model.url,
            SUNDRY_OPENAI_COMPAT_API_KEY="faults",
            SUNDRY_AGENT_CLAIM_TTL=str(CLAIM_TTL),
            SUNDRY_MODEL_CALL_TIMEOUT=str(MODEL_CALL_TIMEOUT),
            SUNDRY_MODEL_READ_TIMEOUT=str(MODEL_CALL_TIMEOUT - 2),
            SUNDRY_AGENT_SWEEP_SECONDS=str(SWEEP_SECONDS),
            SUNDRY_AGENT_SWEEP_GRACE=str(SWEEP_GRACE),
        )
        env.update(extra_env)
        seed = subprocess.run(
            [sys.executable, "-m", "tests.faults.seed", str(tickets), handler],
            cwd=ROOT,
            env=_product_env(DATABASE_URL=pg.url(fault_db)),
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert seed.returncode == 0, seed.stdout + seed.stderr
        seeded = json.loads(seed.stdout.strip().splitlines()[-1])
        # `web_env`: settings the web process alone has (the process that queues the agent's tasks).
        web, url = web_process({**env, **(web_env or {})}, tmp_path / "web.log")
        started.append(web)
        celery = None
        if worker:
            celery = worker_process(
                env, tmp_path / "worker.log", as_compose=as_compose, beat=beat, concurrency=concurrency
            )
            started.append(celery)
        return Stack(
            pg=pg,
            db=fault_db,
            url=url,
            web=web,
            worker=celery,
            seeded=seeded,
            env=env,
            log_dir=tmp_path,
            processes=started,
        )

    yield start
    for proc in reversed(started):
        proc.stop()
    import redis

    try:
        redis.Redis.from_url(redis_url, socket_connect_timeout=2).delete(queue)
    except redis.ConnectionError:
        pass  # a test that stopped its own Redis and failed before starting it again
