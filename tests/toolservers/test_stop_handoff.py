"""The repeat guard's stop among a tool server's calls, which run outside the step's transaction and
before the words written with them are posted: the customer is told a person will reply only when no
such words follow (`calls.run_calls`'s `hand_off`), never the hand-off and then the model's words.
"""

from __future__ import annotations

import pytest

from sundry.agent import handoff
from sundry.agent.loop import agent_run
from sundry.agent.provider.gateway import Gateway
from sundry.agent.provider.scripted import ScriptedModel
from sundry.agent.services import customer_message_post
from sundry.desk.lifecycle import ticket_create
from sundry.portal.selectors import customer_turns
from sundry.tickets.models import Ticket, Turn
from sundry.tooling.messages import ModelResponse, ToolCall
from sundry.toolservers.models import ToolServer
from tests.factories import CustomerFactory, TicketClassFactory
from tests.toolservers.conftest import FIXTURES, odd_command

pytestmark = pytest.mark.django_db(transaction=True)

SAID = "Let me look at record REC-10001 for you."


def refused(n: int, text: str = "") -> ModelResponse:
    """A call to the server's tool that the schema guard refuses every time (no `ref`)."""
    return ModelResponse(text=text, tool_calls=[ToolCall(id=f"x{n}", name="lookup_ticket", arguments={})])


@pytest.fixture
def ticket():
    tclass = TicketClassFactory(approval_rules={})
    ToolServer.objects.create(
        ticket_class=tclass,
        name="odd",
        command=odd_command(),
        declaration_path=str(FIXTURES / "odd.declarations.json"),
        timeout_seconds=2,
        connect_timeout_seconds=20,
    )
    ticket = ticket_create(customer=CustomerFactory().person, ticket_class=tclass, subject="Record REC-10001")
    customer_message_post(ticket=ticket, wake=False, text="Please look at record REC-10001.")
    return ticket


def said(ticket) -> list[str]:
    return [t.text for t in customer_turns(ticket) if t.author != Turn.Author.CUSTOMER]


def run(ticket, *steps) -> None:
    model = ScriptedModel(list(steps))
    agent_run(ticket.pk, gateway=Gateway(override=model))
    assert model.remaining == 0
    assert Ticket.objects.get(pk=ticket.pk).attention.startswith("Repeated failing call: lookup_ticket")


def test_calls_only_then_the_stop_tells_the_customer(ticket):
    run(ticket, refused(1), refused(2), refused(3))
    assert said(ticket) == [handoff.TEXT]


def test_words_posted_after_the_stopping_calls_answer_and_no_hand_off_comes_before_them(ticket):
    run(ticket, refused(1), refused(2), refused(3, SAID))
    assert said(ticket) == [SAID]
