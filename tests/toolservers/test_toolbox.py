"""A class's toolbox is resolved once per run: its servers are read once, not once per call.

The run's load says whether the class has servers (an EXISTS in the load's one statement);
the toolbox reads their rows once, and every step and call of the run works from it. A
posted message reads them once too, from the declaration files alone.
"""

from __future__ import annotations

import pytest

from sundry.agent.loop import agent_run
from sundry.agent.provider.gateway import Gateway
from sundry.agent.provider.scripted import ScriptedModel
from sundry.agent.services import customer_message_post
from sundry.agent.toolbox import toolbox_for
from sundry.desk.lifecycle import ticket_create
from sundry.tooling.messages import ModelResponse, ToolCall
from sundry.toolservers.models import ToolServer
from tests.factories import CustomerFactory, TicketClassFactory
from tests.querystages import count_queries
from tests.toolservers.conftest import FIXTURES, odd_command

pytestmark = pytest.mark.django_db(transaction=True)

SERVERS = r'FROM "toolservers_toolserver"'


def lookup(n: int) -> ModelResponse:
    return ModelResponse(tool_calls=[ToolCall(id=f"l{n}", name="lookup_ticket", arguments={"ref": "REC-10001"})])


@pytest.fixture
def ticket():
    tclass = TicketClassFactory(approval_rules={})
    ToolServer.objects.create(
        ticket_class=tclass,
        name="odd",
        command=odd_command(),
        declaration_path=str(FIXTURES / "odd.declarations.json"),
        timeout_seconds=5,
        connect_timeout_seconds=20,
    )
    ticket = ticket_create(customer=CustomerFactory().person, ticket_class=tclass, subject="Record REC-10001")
    customer_message_post(ticket=ticket, wake=False, text="Please look at record REC-10001.")
    toolbox_for(tclass)  # listed once here, so the run below is counted, not the listing
    return ticket


@pytest.mark.parametrize("calls", [1, 3])
def test_a_run_reads_its_class_servers_once_however_many_calls_it_makes(ticket, calls):
    """The load's EXISTS and the toolbox's read: two statements name the servers, for one call or three.
    Negative control: with the servers' hold setting read per guarded call (as before the toolbox),
    the run with three calls names them five times and fails."""
    model = ScriptedModel([*(lookup(n) for n in range(calls)), ModelResponse(text="Found it.")])
    with count_queries() as counted:
        agent_run(ticket.pk, gateway=Gateway(override=model))
    assert model.remaining == 0
    assert len(counted.matching(SERVERS)) == 2, counted.report()


def test_a_posted_message_reads_its_class_servers_once(ticket):
    """The IDs it types and the rules it states read the declaration files, from one read of the rows.
    Negative control: before the toolbox each of the two asked for the rows again (three statements)."""
    with count_queries() as counted:
        customer_message_post(ticket=ticket, wake=False, text="Never email me about record REC-10002, please.")
    assert len(counted.matching(SERVERS)) == 1, counted.report()
