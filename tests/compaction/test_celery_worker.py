"""Compaction in a real Celery worker process over Redis, including kill -9 mid-run
(the worker and its environment: tests/workers.py)."""

from __future__ import annotations

import time

import pytest

from sundry.agent.services import customer_message_post
from sundry.agent.tasks import agent_run_task
from sundry.compaction import services
from sundry.compaction.models import CompactionRun
from sundry.compaction.tasks import compaction_task
from sundry.context.models import Summary
from sundry.tickets.models import Turn
from tests.compaction.helpers import ORDER, long_ticket
from tests.workers import VISIBILITY_TIMEOUT, Worker, wait_for, worker_env  # noqa: F401  (fixture)

pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]


def replies_after(ticket, number):
    return list(
        Turn.objects.filter(
            ticket=ticket, number__gt=number, author=Turn.Author.AGENT, kind=Turn.Kind.MESSAGE
        ).values_list("text", flat=True)
    )


def status(run_id):
    return CompactionRun.objects.values_list("status", flat=True).get(pk=run_id)


def queue_run(ticket, env, monkeypatch):
    """Trigger a compaction; the real enqueue path, sent to this test's queue."""
    monkeypatch.setattr(
        services, "_enqueue", lambda run_id: compaction_task.apply_async(args=[run_id], queue=env["SUNDRY_TASK_QUEUE"])
    )
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
        # The customer writes while the compaction is lost with its worker: the ticket is answered
        # by the next worker all the same (a compaction in flight never stops the agent).
        asked = customer_message_post(ticket=ticket, text=f"Is {ORDER} any closer now?", wake=False)
        second = Worker(worker_env, log, delay=0.5)
        agent_run_task.apply_async(args=[ticket.pk], queue=worker_env["SUNDRY_TASK_QUEUE"])
        # Redis redelivers the unacked task (acks_late + visibility timeout); the run finishes.
        wait_for(lambda: status(run.pk) in CompactionRun.DONE, 90, "the redelivered task to finish the run")
        wait_for(lambda: replies_after(ticket, asked.number), 90, "the customer's message to be answered")
        time.sleep(VISIBILITY_TIMEOUT + 1)  # room for any duplicate delivery to (not) commit or answer again
        assert status(run.pk) == "succeeded", log.read_text()
        assert Summary.objects.filter(ticket=ticket).count() == 1
        assert Summary.objects.get(ticket=ticket, is_current=True).covers_through_turn == run.through_turn
        assert CompactionRun.objects.filter(ticket=ticket).count() == 1
        assert len(replies_after(ticket, asked.number)) == 1, log.read_text()
    finally:
        first.kill9()
        if second:
            second.stop()
        first.log.close()
