"""The customer's e-mail notice through a real Celery worker: queued by the reply's commit,
decided and sent in the worker, written by Django's file backend where the test reads it."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model

from sundry.agent.services import customer_message_post
from sundry.celery import app
from sundry.desk.lifecycle import ticket_create
from sundry.portal import notices
from sundry.tickets.services import turn_append
from tests.factories import CustomerFactory, TicketClassFactory
from tests.workers import Worker, wait_for, worker_env  # noqa: F401  (fixture)

pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]


def test_a_worker_sends_one_notice_after_the_reply_commits(worker_env, tmp_path, monkeypatch):
    mail_dir = tmp_path / "mail"
    # Tasks queued after commit go to this test's own worker.
    monkeypatch.setattr(app.conf, "task_default_queue", worker_env["SUNDRY_TASK_QUEUE"])
    customer = CustomerFactory(user=get_user_model().objects.create_user("alice"))
    ticket = ticket_create(customer=customer.person, ticket_class=TicketClassFactory(), subject="Refund for SU-10480")
    customer_message_post(ticket=ticket, text="Where is my refund for SU-10480?", wake=False)
    notices.preference_set(customer=customer.person, email=True)
    log = tmp_path / "worker.log"
    worker = Worker(
        worker_env,
        log,
        SUNDRY_EMAIL_BACKEND="file",
        SUNDRY_EMAIL_FILE_PATH=str(mail_dir),
        SUNDRY_PUBLIC_URL="https://help.example.test",
    )
    try:
        turn_append(
            ticket=ticket, author="staff", text="Your refund of 25.00 USD for SU-10480 went out.", payload={"by": "sam"}
        )
        wait_for(lambda: mail_dir.exists() and any(mail_dir.iterdir()), 60, "the worker to write the e-mail")
        # A second reply before she looks: the worker decides, and sends nothing more.
        turn_append(ticket=ticket, author="staff", text="It may take 3 days.", payload={"by": "sam"})
        wait_for(lambda: notices.ALREADY_TOLD in log.read_text(), 60, "the worker to decide the second notice")
    finally:
        worker.stop()
    files = list(mail_dir.iterdir())
    text = "".join(f.read_text() for f in files)
    assert text.count("Subject: ") == 1 and notices.SUBJECTS[notices.REPLY] in text
    assert f"https://help.example.test/help/tickets/{ticket.pk}/" in text and customer.email in text
    assert "SU-10480" not in text and "25.00" not in text
