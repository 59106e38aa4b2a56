"""A task's time limits are the worker's own (or passed explicitly), never the queuing process's; the
error turn of a run stopped by one names the limit in force."""

from __future__ import annotations

import json
import uuid

import pytest
import redis
from celery import Task
from celery.exceptions import SoftTimeLimitExceeded

from sundry.agent import failures, tasks
from sundry.agent.tasks import agent_run_task
from sundry.celery import app
from sundry.compaction.tasks import compaction_task
from sundry.desk.lifecycle import ticket_create
from sundry.tickets.models import Turn
from sundry.tickets.services import turn_append
from tests.factories import CustomerFactory, TicketClassFactory


def published(redis_url, task, *args, **options) -> list:
    """The `timelimit` header of the message `task.apply_async` puts on a queue of its own in Redis."""
    queue = f"sundry-test-limits-{uuid.uuid4().hex[:10]}"
    client = redis.Redis.from_url(redis_url)
    try:
        task.apply_async(args=args, queue=queue, **options)
        raw = client.lrange(queue, 0, -1)
        assert len(raw) == 1, raw
        return json.loads(raw[0])["headers"]["timelimit"]
    finally:
        client.delete(queue)


def test_messages_carry_no_limits_so_the_worker_applies_its_own(redis_url):
    assert agent_run_task.time_limit == 300  # this process's settings (the worker may have others)
    assert published(redis_url, agent_run_task, 1) == [None, None]
    assert published(redis_url, compaction_task, 1) == [None, None]


def test_limits_passed_explicitly_travel_with_the_message(redis_url):
    assert published(redis_url, agent_run_task, 1, time_limit=70, soft_time_limit=40) == [70, 40]


def test_negative_control_a_plain_celery_task_sends_the_queuing_process_limits(redis_url):
    def nothing(self):
        return None

    plain = app.task(name=f"tests.plain-{uuid.uuid4().hex[:6]}", base=Task, bind=True)(nothing)
    assert published(redis_url, plain) == [300, 270]


@pytest.mark.django_db
def test_the_error_turn_names_the_limit_the_worker_applied(monkeypatch):
    """A worker whose own settings give 34 s (SUNDRY_TASK_HARD_LIMIT=64), running a message with no
    limits: its error turn says 34 s, not this process's 270 s."""
    ticket = ticket_create(customer=CustomerFactory().person, ticket_class=TicketClassFactory(), subject="Lamp")
    turn_append(ticket=ticket, author=Turn.Author.CUSTOMER, text="Where is my lamp?")

    def past_the_limit(*args, **kwargs):
        raise SoftTimeLimitExceeded()

    monkeypatch.setattr(tasks, "run_slice", past_the_limit)
    monkeypatch.setattr(failures, "discard_connection", lambda: None)  # the test's transaction stays open
    monkeypatch.setattr(agent_run_task, "time_limit", 64)
    monkeypatch.setattr(agent_run_task, "soft_time_limit", 34)
    agent_run_task.push_request(id="t-1", retries=0, is_eager=False, timelimit=(None, None))
    try:
        assert agent_run_task.run(ticket.pk) == 0
    finally:
        agent_run_task.pop_request()
    error = Turn.objects.get(ticket=ticket, kind=Turn.Kind.ERROR)
    assert "the 34 s time limit" in error.text and "270" not in error.text, error.text
