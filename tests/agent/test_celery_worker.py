"""Agent runs in a real Celery worker over Redis: a claim left by a killed run lapses
and the ticket is answered (the worker and its environment: tests/workers.py)."""

from __future__ import annotations

import pytest
from django.conf import settings
from django.utils import timezone

from sundry.agent import loop
from sundry.agent.services import customer_message_post
from sundry.agent.tasks import agent_run_task
from sundry.desk.lifecycle import ticket_create
from sundry.tickets.models import Ticket, Turn
from tests.factories import CustomerFactory, TicketClassFactory, paid_order
from tests.workers import Worker, wait_for, worker_env  # noqa: F401  (fixture)

pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]

CLAIM_TTL = 2  # seconds, in the worker; production: settings.AGENT_CLAIM_TTL_SECONDS


def test_a_killed_runs_claim_lapses_and_the_retried_task_answers(worker_env, tmp_path):
    customer = CustomerFactory()
    paid_order(customer=customer, number="SU-10480")
    ticket = ticket_create(
        customer=customer.person, ticket_class=TicketClassFactory(approval_rules={}), subject="Where"
    )
    customer_message_post(ticket=ticket, text="Where is my order SU-10480?", wake=False)
    log = tmp_path / "worker.log"
    # A model call must end within a claim's life (settings refuse otherwise); this one is offline.
    worker = Worker(
        worker_env, log, SUNDRY_AGENT_CLAIM_TTL=str(CLAIM_TTL), SUNDRY_MODEL_CALL_TIMEOUT=str(CLAIM_TTL / 2)
    )
    try:
        # The run that held this ticket was killed mid-step: its claim is still fresh. Set
        # once the worker is up: a slow start would otherwise outlast the short test TTL.
        worker.wait_ready()
        Ticket.objects.filter(pk=ticket.pk).update(agent_claimed_at=timezone.now())
        agent_run_task.apply_async(args=[ticket.pk], queue=worker_env["SUNDRY_TASK_QUEUE"])
        wait_for(
            lambda: Turn.objects.filter(ticket=ticket, author="agent", kind="message").exists(),
            60,
            "the retried task to answer once the dead claim lapsed",
        )
    finally:
        worker.stop()
    text = log.read_text()
    assert "Retry in" in text, text  # the first delivery found the claim taken and retried
    assert Ticket.objects.get(pk=ticket.pk).agent_claimed_at is None


def test_claims_outlast_a_step_and_lapse_before_the_broker_redelivers():
    # A live run renews its claim every step; one step makes one model call, bounded with its retries.
    assert loop.CLAIM_TTL.total_seconds() > settings.MODEL_CALL_TIMEOUT
    # The retry of a task that found the ticket claimed waits past the TTL, and must be
    # handed out before Redis's visibility timeout would redeliver it as lost.
    assert loop.CLAIM_TTL.total_seconds() + 1 < settings.CELERY_BROKER_TRANSPORT_OPTIONS["visibility_timeout"]
