"""A step's first turn is its claim check: no locking read first, and still nothing written after a stop.

While the model answers, another process writes to the ticket. A stop (the run's time limit
recorded late) must leave the step writing nothing — not its call's turn, not the tool's
result, not its record; a customer's message must not stop it. The check rides on the step's
first turn (`step._FirstTurn`): the bump's own claim condition, and a look for a stop only
when the turn's number shows others wrote. Control: with that look skipped, the stopped run
posts after its stop.
"""

from __future__ import annotations

import threading

import pytest
from django.db import connection

from sundry.agent import failures, loop
from sundry.agent.models import AgentStep
from sundry.agent.provider.gateway import Gateway
from sundry.agent.services import customer_message_post
from sundry.desk.lifecycle import ticket_create
from sundry.tickets.models import Ticket, Turn
from sundry.tooling.messages import ModelResponse, ToolCall
from tests.factories import CustomerFactory, TicketClassFactory, paid_order

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def ticket():
    customer = CustomerFactory()
    paid_order(customer=customer, number="SU-10480", prices=(6000,))
    ticket = ticket_create(customer=customer.person, ticket_class=TicketClassFactory(approval_rules={}), subject="Hi")
    customer_message_post(ticket=ticket, text="Where is order SU-10480?", wake=False)
    return ticket


class WritesWhileAnswering:
    """Its first answer is a lookup, given once `write` has run on another connection; then a reply."""

    name = "writes-while-answering"

    def __init__(self, write):
        self.write, self.calls = write, 0

    def complete(self, request):
        self.calls += 1
        if self.calls == 1:

            def other():
                try:
                    self.write()
                finally:
                    connection.close()

            thread = threading.Thread(target=other)
            thread.start()
            thread.join()
            return ModelResponse(
                tool_calls=[ToolCall(id="c1", name="get_order", arguments={"order_number": "SU-10480"})]
            )
        return ModelResponse(text="It is on its way.")


def after(ticket, number):
    return list(Turn.objects.filter(ticket=ticket, number__gt=number).order_by("number").values_list("kind", "author"))


def test_a_stop_recorded_while_the_model_answers_leaves_the_step_writing_nothing(ticket):
    before = ticket.last_turn_number
    model = WritesWhileAnswering(lambda: failures.run_failed(ticket.pk, "it ran past its time limit"))
    steps, _ = loop.run_slice(ticket.pk, gateway=Gateway(override=model))
    assert steps == 1 and model.calls == 1
    # The stop and the customer's hand-off it posts (`handoff`), nothing after them.
    assert after(ticket, before) == [(Turn.Kind.ERROR, Turn.Author.SYSTEM), (Turn.Kind.MESSAGE, Turn.Author.AGENT)]
    assert not AgentStep.objects.filter(ticket=ticket).exists()
    row = Ticket.objects.get(pk=ticket.pk)
    assert row.agent_claimed_at is None and row.last_turn_number == before + 2


def test_control_without_the_look_for_a_stop_the_stopped_run_posts(ticket, monkeypatch):
    monkeypatch.setattr(failures, "stopped_after", lambda *a, **k: False)
    before = ticket.last_turn_number
    model = WritesWhileAnswering(lambda: failures.run_failed(ticket.pk, "it ran past its time limit"))
    loop.run_slice(ticket.pk, gateway=Gateway(override=model))
    assert (Turn.Kind.TOOL_CALL, Turn.Author.AGENT) in after(ticket, before)  # the call's turn came after the stop


def test_a_message_posted_while_the_model_answers_does_not_stop_the_step(ticket):
    before = ticket.last_turn_number
    model = WritesWhileAnswering(
        lambda: customer_message_post(
            ticket=Ticket.objects.select_related("ticket_class", "customer").get(pk=ticket.pk),
            text="Any news?",
            wake=False,
        )
    )
    loop.run_slice(ticket.pk, gateway=Gateway(override=model))
    kinds = [k for k, _ in after(ticket, before)]
    assert kinds[:3] == [Turn.Kind.MESSAGE, Turn.Kind.TOOL_CALL, Turn.Kind.TOOL_RESULT], kinds
    assert kinds[-1] == Turn.Kind.MESSAGE and model.calls == 2  # and the run answered
