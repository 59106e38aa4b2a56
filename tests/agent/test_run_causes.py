"""Every error turn names its true cause, and Sundry's notices reach the model in Sundry's voice.

A claim kept because the database failed under its run is taken over with the database named, not a
lost worker; a run that gives up after the database failed lets go of its claim; the notice of a
stopped run is a system message in the request, never a message from the customer."""

from __future__ import annotations

import socket
import uuid
from contextlib import contextmanager
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from sundry.agent import claims, failures, tasks
from sundry.agent.loop import agent_run
from sundry.agent.provider.gateway import Gateway, to_pai_messages
from sundry.agent.provider.scripted import ScriptedModel
from sundry.context.render import SYSTEM_NOTICE_PREFIX, is_customer_message
from sundry.desk.lifecycle import ticket_create
from sundry.tickets.models import Ticket, Turn
from sundry.tickets.services import turn_append
from sundry.tooling.messages import ModelResponse
from tests.factories import CustomerFactory, TicketClassFactory


def waiting_ticket():
    ticket = ticket_create(
        customer=CustomerFactory().person, ticket_class=TicketClassFactory(approval_rules={}), subject="Lamp"
    )
    turn_append(ticket=ticket, author=Turn.Author.CUSTOMER, text="Where is my lamp?")
    return ticket


@contextmanager
def database_away():
    """This process's connection points at a port nothing listens on: every query fails, for real."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = s.getsockname()[1]
    connection.close()
    port, connection.settings_dict["PORT"] = connection.settings_dict["PORT"], dead
    try:
        yield
    finally:
        connection.close()
        connection.settings_dict["PORT"] = port


def lapse(ticket):
    Ticket.objects.filter(pk=ticket.pk).update(
        agent_claimed_at=timezone.now() - claims.CLAIM_TTL - timedelta(seconds=1)
    )


def take_over(ticket) -> Turn:
    model = ScriptedModel([ModelResponse(text="Your lamp ships tomorrow.")])
    agent_run(ticket.pk, gateway=Gateway(override=model))
    return Turn.objects.get(ticket=ticket, kind=Turn.Kind.ERROR, payload__recovered=True)


@pytest.mark.django_db(transaction=True)
def test_a_claim_kept_because_the_database_failed_is_taken_over_naming_the_database():
    if connection.vendor != "postgresql":
        pytest.skip("needs PostgreSQL: the database is taken away by its port")
    ticket = waiting_ticket()
    held = claims.claim(ticket.pk, owner=f"task-{uuid.uuid4().hex}#0")
    with database_away():
        assert claims.release(held) is False  # it could not let go
    lapse(ticket)
    error = take_over(ticket)
    assert "the database failed under it" in error.text and "worker" not in error.text, error.text
    assert "database failure" in Ticket.objects.get(pk=ticket.pk).attention


@pytest.mark.django_db(transaction=True)
def test_negative_control_a_claim_whose_run_said_nothing_is_a_lost_worker():
    ticket = waiting_ticket()
    claims.claim(ticket.pk, owner=f"task-{uuid.uuid4().hex}#0")  # then its worker died: no release, no word
    lapse(ticket)
    error = take_over(ticket)
    assert "its worker was lost" in error.text and "database" not in error.text, error.text


@pytest.mark.django_db
@pytest.mark.parametrize("owners", [("task-b#7", "task-b#8"), ()])
def test_a_run_that_gives_up_after_the_database_failed_lets_go_of_its_claim(owners):
    ticket = waiting_ticket()
    claims.claim(ticket.pk, owner="task-b#8")
    tasks._give_up(ticket.pk, "the database failed 9 times: connection refused", owners=owners)
    assert Turn.objects.filter(ticket=ticket, kind=Turn.Kind.ERROR, payload__has_key="run_failed").exists()
    claimed = Ticket.objects.get(pk=ticket.pk).agent_claimed_by
    # Negative control (no owners given, as before): the claim stays, to lapse and read as a dead worker's.
    assert claimed == ("" if owners else "task-b#8")


@pytest.mark.django_db
def test_the_notice_of_a_stopped_run_reaches_the_model_as_a_system_message_in_its_place():
    ticket = waiting_ticket()
    failures.run_failed(ticket.pk, "it ran past the 34 s time limit")
    turn_append(ticket=ticket, author=Turn.Author.CUSTOMER, text="Hello? Anyone there?")
    model = ScriptedModel([ModelResponse(text="Sorry for the wait: your lamp ships tomorrow.")])
    agent_run(ticket.pk, gateway=Gateway(override=model))
    messages = model.requests[0].messages
    notice = next(m for m in messages if "34 s time limit" in m.content)
    assert notice.role == "system" and notice.content.startswith(SYSTEM_NOTICE_PREFIX)
    assert not is_customer_message(notice)
    assert [m.content for m in messages if is_customer_message(m)] == ["Where is my lamp?", "Hello? Anyone there?"]
    # On the wire it stays between the customer's two messages, as a system part, not at the top.
    parts = [p for r in to_pai_messages(model.requests[0]) for p in r.parts]
    kinds = [(type(p).__name__, getattr(p, "content", "")) for p in parts]
    at = next(i for i, (_, c) in enumerate(kinds) if isinstance(c, str) and "34 s time limit" in c)
    assert kinds[at][0] == "SystemPromptPart"
    assert kinds[at - 1] == ("UserPromptPart", "Where is my lamp?") and kinds[at + 1][1] == "Hello? Anyone there?"
