"""A plain reply is one statement: the bump, the reply's turn and the step's record (`step._reply_at_once`).

It runs outside any transaction, so it may write only while nothing came since the step read the
ticket: its bump's condition is the run's claim and the ticket's last turn. While the model writes,
another process writes to the ticket: a stop (a time limit recorded late) or a lost claim must leave
the step writing nothing; a customer's message must not stop it (the step's transaction then posts
the reply, as for every other step). Control: with the last-turn condition dropped, the stopped run
posts its reply after the stop.
"""

from __future__ import annotations

import threading

import pytest
from django.db import connection
from django.utils import timezone

from sundry.agent import failures, loop, step
from sundry.agent.models import AgentStep
from sundry.agent.provider.gateway import Gateway
from sundry.agent.services import customer_message_post
from sundry.desk.lifecycle import ticket_create
from sundry.tickets import versions
from sundry.tickets.models import Ticket, Turn
from sundry.tooling.messages import ModelResponse
from tests.factories import CustomerFactory, TicketClassFactory

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(connection.vendor != "postgresql", reason="one statement on PostgreSQL only"),
]

REPLY = "Thank you for writing to us."


@pytest.fixture
def ticket():
    customer = CustomerFactory()
    ticket = ticket_create(customer=customer.person, ticket_class=TicketClassFactory(approval_rules={}), subject="Hi")
    customer_message_post(ticket=ticket, text="Where is my parcel?", wake=False)
    return ticket


class RepliesAfter:
    """Its answer is a reply, given once `write` (if any) has run on another connection."""

    name = "replies-after"

    def __init__(self, write=None):
        self.write, self.calls = write, 0

    def complete(self, request):
        self.calls += 1
        if self.calls == 1 and self.write is not None:

            def other():
                try:
                    self.write()
                finally:
                    connection.close()

            thread = threading.Thread(target=other)
            thread.start()
            thread.join()
        return ModelResponse(text=REPLY)


def after(ticket, number):
    return list(
        Turn.objects.filter(ticket=ticket, number__gt=number).order_by("number").values_list("kind", "author", "text")
    )


def test_the_reply_its_record_and_its_stamps_are_written_together(ticket, monkeypatch):
    seen = []
    monkeypatch.setattr(step, "resolution_listeners", [seen.append])
    before = ticket.last_turn_number
    steps, _ = loop.run_slice(ticket.pk, gateway=Gateway(override=RepliesAfter()))
    assert steps == 1
    assert after(ticket, before) == [(Turn.Kind.MESSAGE, Turn.Author.AGENT, REPLY)]
    row = Ticket.objects.get(pk=ticket.pk)
    record = AgentStep.objects.get(ticket=ticket)
    assert (record.outcome, record.is_resolution) == (AgentStep.Outcome.REPLY, True)
    assert record.first_turn == record.last_turn == before + 1 == row.last_turn_number
    assert row.stamps[versions.TURNS] == row.stamps[versions.STEPS] == row.version
    (resolved,) = seen
    assert (resolved.step_id, resolved.version, resolved.last_turn) == (record.pk, row.version, before + 1)
    assert resolved.next_lanes is not None and resolved.next_lanes.turns[-1].text == REPLY
    assert row.agent_claimed_at is None


def test_a_stop_recorded_while_the_model_replies_leaves_the_step_writing_nothing(ticket):
    before = ticket.last_turn_number
    model = RepliesAfter(lambda: failures.run_failed(ticket.pk, "it ran past its time limit"))
    steps, _ = loop.run_slice(ticket.pk, gateway=Gateway(override=model))
    assert steps == 1 and model.calls == 1
    # The stop and the customer's hand-off it posts (`handoff`), nothing after them.
    kinds = [(k, a) for k, a, _ in after(ticket, before)]
    assert kinds == [(Turn.Kind.ERROR, Turn.Author.SYSTEM), (Turn.Kind.MESSAGE, Turn.Author.AGENT)]
    assert REPLY not in [t for _, _, t in after(ticket, before)]
    assert not AgentStep.objects.filter(ticket=ticket).exists()


def test_control_without_the_last_turn_condition_the_stopped_run_replies(ticket, monkeypatch):
    real = step.turn_append
    monkeypatch.setattr(step, "turn_append", lambda **kw: real(**{k: v for k, v in kw.items() if k != "through"}))
    before = ticket.last_turn_number
    model = RepliesAfter(lambda: failures.run_failed(ticket.pk, "it ran past its time limit"))
    loop.run_slice(ticket.pk, gateway=Gateway(override=model))
    assert after(ticket, before)[-1] == (Turn.Kind.MESSAGE, Turn.Author.AGENT, REPLY)  # posted after the stop


def test_a_claim_taken_while_the_model_replies_leaves_the_step_writing_nothing(ticket):
    before = ticket.last_turn_number
    model = RepliesAfter(lambda: Ticket.objects.filter(pk=ticket.pk).update(agent_claimed_at=timezone.now()))
    loop.run_slice(ticket.pk, gateway=Gateway(override=model))
    assert after(ticket, before) == []
    assert not AgentStep.objects.filter(ticket=ticket).exists()


def test_a_message_posted_while_the_model_replies_does_not_stop_the_step(ticket, monkeypatch):
    tried, real = [], step.turn_append

    def append(**kw):
        turn = real(**kw)
        if "through" in kw:
            tried.append(turn)
        return turn

    monkeypatch.setattr(step, "turn_append", append)
    before = ticket.last_turn_number
    model = RepliesAfter(
        lambda: customer_message_post(
            ticket=Ticket.objects.select_related("ticket_class", "customer").get(pk=ticket.pk),
            text="Any news?",
            wake=False,
        )
    )
    loop.run_slice(ticket.pk, gateway=Gateway(override=model))
    got = after(ticket, before)
    # The message, then the reply once (the one statement wrote nothing; the step's transaction posted it).
    assert got[:2] == [
        (Turn.Kind.MESSAGE, Turn.Author.CUSTOMER, "Any news?"),
        (Turn.Kind.MESSAGE, Turn.Author.AGENT, REPLY),
    ], got
    assert tried[0] is None  # the one statement found a turn it had not read, and wrote nothing
    record = AgentStep.objects.order_by("number").filter(ticket=ticket).first()
    assert record.outcome == AgentStep.Outcome.REPLY and record.last_turn == before + 2
