"""Compaction in a real Celery worker process over Redis, including kill -9 mid-run.

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

from sundry.compaction import services
from sundry.compaction.models import CompactionRun
from sundry.compaction.offline import DELAY_ENV
from sundry.compaction.tasks import compaction_task
from sundry.context.models import Summary
from tests.compaction.helpers import long_ticket

pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]

# Small, so Redis redelivers a killed worker's unacked task within seconds (production: 2 × hard limit).
VISIBILITY_TIMEOUT = 3
WORKER = """
import sys
from sundry.celery import app
app.conf.broker_transport_options = {"visibility_timeout": %d, "unacked_restore_interval": 1,
                                     "unacked_restore_throttle": 1}
app.worker_main(["worker", "-Q", sys.argv[1], "--pool", "solo", "--concurrency", "1", "-l", "info",
                 "--without-gossip", "--without-mingle", "--without-heartbeat"])
""" % VISIBILITY_TIMEOUT


@pytest.fixture
def worker_env(redis_url):
    if not settings.DATABASES["default"]["ENGINE"].endswith("postgresql"):
        pytest.skip("needs PostgreSQL: a worker process cannot share the SQLite test database (set DATABASE_URL)")
    db = connection.settings_dict
    queue = f"sundry-test-compaction-{uuid.uuid4().hex[:10]}"
    url = f"postgres://{db['USER']}:{db['PASSWORD'] or ''}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"
    env = dict(os.environ, DATABASE_URL=url, REDIS_URL=redis_url, SUNDRY_TASK_QUEUE=queue, PYTHONUNBUFFERED="1")
    yield env
    import redis

    redis.Redis.from_url(redis_url).delete(queue)  # nothing of ours is left queued


class Worker:
    def __init__(self, env, log_path, delay: float = 0):
        env = dict(env, **({DELAY_ENV: str(delay)} if delay else {}))
        self.log = open(log_path, "ab")
        self.proc = subprocess.Popen([sys.executable, "-c", WORKER, env["SUNDRY_TASK_QUEUE"]], env=env,
                                     cwd=settings.BASE_DIR, stdout=self.log, stderr=subprocess.STDOUT,
                                     start_new_session=True)

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


def status(run_id):
    return CompactionRun.objects.values_list("status", flat=True).get(pk=run_id)


def queue_run(ticket, env, monkeypatch):
    """Trigger a compaction; the real enqueue path, sent to this test's queue."""
    monkeypatch.setattr(services, "_enqueue", lambda run_id: compaction_task.apply_async(
        args=[run_id], queue=env["SUNDRY_TASK_QUEUE"]))
    tc = ticket.ticket_class
    tc.trigger_fraction, tc.token_budget = 0.5, 2000
    tc.save()
    run = services.compaction_consider(ticket_id=ticket.pk)
    assert run is not None
    return run


def test_real_worker_runs_a_compaction(worker_env, monkeypatch, tmp_path):
    ticket = long_ticket()
    worker = Worker(worker_env, tmp_path / "worker.log")
    try:
        run = queue_run(ticket, worker_env, monkeypatch)
        wait_for(lambda: status(run.pk) in CompactionRun.DONE, 60, "the worker to finish the compaction")
        assert status(run.pk) == "succeeded", (tmp_path / "worker.log").read_text()
        assert Summary.objects.filter(ticket=ticket, is_current=True).count() == 1
    finally:
        worker.stop()


@pytest.mark.parametrize("round_", range(3))
def test_kill_9_mid_compaction_loses_nothing_and_commits_once(worker_env, monkeypatch, tmp_path, round_):
    ticket = long_ticket()
    log = tmp_path / "worker.log"
    first = Worker(worker_env, log, delay=30)  # slow summariser: the kill lands mid-call
    second = None
    try:
        run = queue_run(ticket, worker_env, monkeypatch)
        wait_for(lambda: status(run.pk) == "running", 60, "the first worker to start the run")
        time.sleep(0.5)
        first.kill9()
        assert status(run.pk) == "running" and not Summary.objects.filter(ticket=ticket).exists()
        second = Worker(worker_env, log, delay=0.5)
        # Redis redelivers the unacked task (acks_late + visibility timeout); the run finishes.
        wait_for(lambda: status(run.pk) in CompactionRun.DONE, 90, "the redelivered task to finish the run")
        time.sleep(VISIBILITY_TIMEOUT + 1)  # room for any duplicate delivery to (not) commit again
        assert status(run.pk) == "succeeded", log.read_text()
        assert Summary.objects.filter(ticket=ticket).count() == 1
        assert Summary.objects.get(ticket=ticket, is_current=True).covers_through_turn == run.through_turn
        assert CompactionRun.objects.filter(ticket=ticket).count() == 1
    finally:
        first.kill9()
        if second:
            second.stop()
        first.log.close()
