"""A real Celery worker process over Redis, for tests that need one.

Needs PostgreSQL (the worker must share the test database) and Redis: run with
DATABASE_URL and REDIS_URL set (bash bin/test does). Each test uses its own
queue (SUNDRY_TASK_QUEUE) so no other worker can take its tasks.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid

import pytest
from django.conf import settings
from django.db import connection

# Small, so Redis redelivers a killed worker's unacked task within seconds (production: hard limit + 60 s).
VISIBILITY_TIMEOUT = 3
WORKER = (
    """
import sys
from sundry.celery import app
app.conf.broker_transport_options = {"visibility_timeout": %d, "unacked_restore_interval": 1,
                                     "unacked_restore_throttle": 1}
app.worker_main(["worker", "-Q", sys.argv[1], "--pool", "solo", "--concurrency", "1", "-l", "info",
                 "--without-gossip", "--without-mingle", "--without-heartbeat"])
"""
    % VISIBILITY_TIMEOUT
)


@pytest.fixture
def worker_env(redis_url):
    """The environment of a worker on a queue of its own, sharing the test database."""
    if not settings.DATABASES["default"]["ENGINE"].endswith("postgresql"):
        pytest.skip("needs PostgreSQL: a worker process cannot share the SQLite test database (set DATABASE_URL)")
    db = connection.settings_dict
    queue = f"sundry-test-worker-{uuid.uuid4().hex[:10]}"
    url = (
        f"postgres://{db['USER']}:{db['PASSWORD'] or ''}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"
    )
    env = dict(os.environ, DATABASE_URL=url, REDIS_URL=redis_url, SUNDRY_TASK_QUEUE=queue, PYTHONUNBUFFERED="1")
    yield env
    import redis

    redis.Redis.from_url(redis_url).delete(queue)  # nothing of ours is left queued


class Worker:
    def __init__(self, env, log_path, delay: float = 0, **extra_env):
        from sundry.compaction.offline import DELAY_ENV

        env = dict(env, **({DELAY_ENV: str(delay)} if delay else {}), **extra_env)
        self.log = open(log_path, "ab")
        self.proc = subprocess.Popen(
            [sys.executable, "-c", WORKER, env["SUNDRY_TASK_QUEUE"]],
            env=env,
            cwd=settings.BASE_DIR,
            stdout=self.log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def wait_ready(self, timeout: float = 60) -> None:
        """Until the worker consumes its queue (it logs "ready"), for tests whose timing starts then."""
        path = self.log.name
        wait_for(lambda: b" ready." in open(path, "rb").read(), timeout, "the worker to start")

    def kill9(self):
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=10)

    def stop(self):
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.kill9()
        self.log.close()


def wait_for(predicate, timeout, what):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")
