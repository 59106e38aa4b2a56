"""No model call holds the ticket's row: while the model thinks, between calls to a tool server,
another session can lock the ticket's row at once (staff editing it, a customer posting). Judged
from a second PostgreSQL session, which tries the row with NOWAIT from inside the model's turn."""

from __future__ import annotations

import psycopg
import pytest
from django.db import connection

from sundry.agent.loop import agent_run
from sundry.agent.provider.gateway import Gateway
from sundry.agent.provider.scripted import ScriptedModel
from sundry.agent.services import customer_message_post
from sundry.desk.lifecycle import ticket_create
from sundry.tickets.models import Ticket, Turn
from sundry.tooling.messages import ModelResponse, ToolCall
from sundry.toolservers.models import ToolServer
from tests.factories import CustomerFactory, TicketClassFactory
from tests.toolservers.conftest import FIXTURES, odd_command

pytestmark = pytest.mark.django_db(transaction=True)


def _session() -> psycopg.Connection:
    params = {
        k: v
        for k, v in connection.get_connection_params().items()
        if k in ("host", "port", "user", "password", "dbname")
    }
    return psycopg.connect(**params, autocommit=False)


def _row_free(ticket_pk: int) -> bool:
    """Whether another session could lock the ticket's row now."""
    with _session() as db, db.cursor() as cur:
        try:
            cur.execute(f"SELECT 1 FROM {Ticket._meta.db_table} WHERE id = %s FOR UPDATE NOWAIT", [ticket_pk])
        except psycopg.errors.LockNotAvailable:
            return False
        finally:
            db.rollback()
    return True


@pytest.fixture
def ticket():
    tclass = TicketClassFactory(approval_rules={})
    ToolServer.objects.create(
        ticket_class=tclass,
        name="odd",
        command=odd_command(),
        timeout_seconds=10,
        connect_timeout_seconds=20,
        declaration_path=str(FIXTURES / "odd.declarations.json"),
    )
    ticket = ticket_create(customer=CustomerFactory().person, ticket_class=tclass, subject="Record REC-10001")
    customer_message_post(ticket=ticket, wake=False, text="Please look at record REC-10001.")
    return ticket


def test_the_ticket_row_is_free_while_the_model_answers(ticket):
    seen = []

    def answer(response):
        def step(_request):
            seen.append(_row_free(ticket.pk))
            return response

        return step

    lookup = ModelResponse(tool_calls=[ToolCall(id="c1", name="lookup_ticket", arguments={"ref": "REC-10001"})])
    model = ScriptedModel([answer(lookup), answer(ModelResponse(text="It is open."))])
    agent_run(ticket.pk, gateway=Gateway(override=model))
    assert Turn.objects.get(ticket=ticket, payload__call_id="c1").payload["ok"] is True  # harvested in between
    assert seen == [True, True]


def test_negative_control_a_session_holding_the_row_is_seen(ticket):
    with _session() as holder, holder.cursor() as cur:
        cur.execute(f"SELECT 1 FROM {Ticket._meta.db_table} WHERE id = %s FOR UPDATE", [ticket.pk])
        assert _row_free(ticket.pk) is False
        holder.rollback()
    assert _row_free(ticket.pk) is True
