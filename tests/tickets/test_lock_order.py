"""One lock order (the ticket row first) between staff edits and agent steps, on PostgreSQL.

Scripted interleaving: a third session holds the ticket's row; an agent step that harvests
an order already in the ledger queues on it first, then a staff rename of that ledger entry.
When the row is let go the step goes first. Were the edit to lock the ledger row before the
ticket row, the two would deadlock (the step holds the ticket and wants the entry, the edit
the reverse); with one order the edit waits, then finds the entry changed and answers 409.
"""

from __future__ import annotations

import threading

import psycopg
import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.test import Client

from sundry.agent.loop import agent_run
from sundry.agent.provider.gateway import Gateway
from sundry.agent.provider.scripted import ScriptedModel
from sundry.agent.services import customer_message_post
from sundry.agent.step import agent_step
from sundry.context.models import LedgerEntry
from sundry.desk.lifecycle import ticket_create
from sundry.tickets.models import Ticket, Turn
from sundry.tooling.messages import ModelResponse, ToolCall
from tests.factories import CustomerFactory, TicketClassFactory, paid_order
from tests.faults.servers import wait_for

pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]

ORDER = "SU-10480"


def get_order(call_id: str) -> ModelResponse:
    return ModelResponse(tool_calls=[ToolCall(id=call_id, name="get_order", arguments={"order_number": ORDER})])


def _raw_connection() -> psycopg.Connection:
    params = connection.get_connection_params()
    params.pop("cursor_factory", None)
    params.pop("context", None)
    return psycopg.connect(
        **{k: v for k, v in params.items() if k in ("host", "port", "user", "password", "dbname")}, autocommit=False
    )


def _waiting_on_locks(db: psycopg.Connection) -> int:
    with db.cursor() as cur:
        cur.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'"
        )
        return cur.fetchone()[0]


@pytest.mark.parametrize("round_", range(5))
def test_a_staff_edit_and_an_agent_step_at_once_never_deadlock_and_a_stale_edit_is_409(round_):
    if connection.vendor != "postgresql":
        pytest.skip("row locks and deadlocks are PostgreSQL's")
    customer = CustomerFactory()
    paid_order(customer=customer, number=ORDER)
    ticket = ticket_create(
        customer=customer.person, ticket_class=TicketClassFactory(approval_rules={}), subject="Where"
    )
    customer_message_post(ticket=ticket, text=f"Where is {ORDER}?", wake=False)
    agent_run(ticket.pk, gateway=Gateway(override=ScriptedModel([get_order("c1"), ModelResponse(text="Coming.")])))
    entry = LedgerEntry.objects.get(ticket=ticket, value=ORDER)
    staff = Client()
    staff.force_login(get_user_model().objects.create_user("sam", password="pw", is_staff=True))
    ticket = Ticket.objects.select_related("ticket_class", "customer").get(pk=ticket.pk)

    outcome: dict = {}

    def step():
        try:
            outcome["step"] = agent_step(ticket, gateway=Gateway(override=ScriptedModel([get_order("c2")])))
        except Exception as exc:  # noqa: BLE001 — the test reports what the step died of
            outcome["step_error"] = exc
        finally:
            connection.close()

    def edit():
        try:
            outcome["edit"] = staff.post(
                f"/desk/tickets/{ticket.pk}/ledger/rename",
                HTTP_HX_REQUEST="true",
                data={"value": ORDER, "role": "disputed_order", "version": str(entry.version)},
            )
        finally:
            connection.close()

    holder = _raw_connection()
    holder.execute("SELECT id FROM tickets_ticket WHERE id = %s FOR UPDATE", (ticket.pk,))
    watcher = _raw_connection()
    watcher.autocommit = True
    agent = threading.Thread(target=step)
    agent.start()
    wait_for(lambda: _waiting_on_locks(watcher) >= 1, 20, "the step to queue on the ticket's row")
    desk = threading.Thread(target=edit)
    desk.start()
    wait_for(lambda: _waiting_on_locks(watcher) >= 2, 20, "the edit to queue behind it")
    holder.rollback()
    holder.close()
    agent.join(30)
    desk.join(30)
    watcher.close()
    assert not agent.is_alive() and not desk.is_alive(), "still waiting: a lock cycle"
    assert "step_error" not in outcome, f"the agent step died: {outcome['step_error']!r}"
    response = outcome["edit"]
    assert response.status_code == 409, (response.status_code, response.content[:300])
    assert b"renamed this entry first" in response.content
    # The step's harvest is in; the stale rename is not.
    assert Turn.objects.filter(ticket=ticket, kind="tool_result", payload__call_id="c2").exists()
    assert LedgerEntry.objects.get(pk=entry.pk).role != "disputed_order"
