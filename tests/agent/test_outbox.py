"""The agent's outbox: a wake-up on record with its turn, settled by the run that read it,
queued again by the sweep when it was lost; a run cut into slices keeps it until done;
a run that could not finish tells staff."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest
from django.conf import settings
from django.utils import timezone

from sundry.agent import failures, outbox
from sundry.agent.claims import CLAIM_TTL
from sundry.agent.loop import agent_run, run_slice
from sundry.agent.provider.gateway import Gateway
from sundry.agent.provider.scripted import ScriptedModel
from sundry.agent.services import customer_message_post
from sundry.desk.lifecycle import ticket_create
from sundry.tickets.models import Ticket, Turn
from sundry.tooling.messages import ModelResponse, ToolCall
from tests.factories import CustomerFactory, TicketClassFactory, paid_order

pytestmark = pytest.mark.django_db


@pytest.fixture
def ticket():
    customer = CustomerFactory()
    paid_order(customer=customer, number="SU-10480")
    return ticket_create(customer=customer.person, ticket_class=TicketClassFactory(approval_rules={}), subject="Where")


def row(ticket) -> Ticket:
    return Ticket.objects.get(pk=ticket.pk)


def post(ticket, text="Where is SU-10480?") -> Turn:
    # Marked as a post with a broker would; the test runs the agent itself.
    turn = customer_message_post(ticket=ticket, text=text, wake=False)
    outbox.mark(ticket.pk, turn.number)
    return turn


def scripted(*steps) -> Gateway:
    return Gateway(override=ScriptedModel(list(steps)))


def get_order():
    return ModelResponse(tool_calls=[ToolCall(id="c1", name="get_order", arguments={"order_number": "SU-10480"})])


def test_a_post_that_wakes_the_agent_marks_the_ticket_in_its_transaction(ticket, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=False):
        turn = customer_message_post(ticket=ticket, text="Where is SU-10480?")
    fresh = row(ticket)
    assert fresh.agent_wake_turn == turn.number and fresh.agent_wake_at is not None


def test_the_run_that_answers_settles_the_mark(ticket):
    turn = post(ticket)
    assert row(ticket).agent_wake_turn == turn.number
    agent_run(ticket.pk, gateway=scripted(ModelResponse(text="On its way.")))
    assert row(ticket).agent_wake_turn is None


def test_the_sweep_queues_a_forgotten_wake_up_once_per_grace_period(ticket):
    post(ticket)
    assert outbox.forgotten() == []  # just posted: its own task is on the way
    long_ago = timezone.now() - timedelta(seconds=settings.AGENT_SWEEP_GRACE_SECONDS + 1)
    Ticket.objects.filter(pk=ticket.pk).update(agent_wake_at=long_ago)
    assert outbox.forgotten() == [ticket.pk]
    assert outbox.forgotten() == []  # stamped as queued: not again within the grace period


def test_the_sweep_leaves_a_live_claim_alone_and_takes_a_lapsed_one(ticket):
    post(ticket)
    long_ago = timezone.now() - timedelta(seconds=settings.AGENT_SWEEP_GRACE_SECONDS + 1)
    Ticket.objects.filter(pk=ticket.pk).update(agent_wake_at=long_ago, agent_claimed_at=timezone.now())
    assert outbox.forgotten() == []
    Ticket.objects.filter(pk=ticket.pk).update(agent_claimed_at=timezone.now() - CLAIM_TTL * 2)
    assert outbox.forgotten() == [ticket.pk]


def test_the_sweep_clears_the_mark_of_a_ticket_staff_took_over(ticket):
    post(ticket)
    long_ago = timezone.now() - timedelta(seconds=settings.AGENT_SWEEP_GRACE_SECONDS + 1)
    Ticket.objects.filter(pk=ticket.pk).update(agent_wake_at=long_ago, handler=Ticket.Handler.STAFF)
    assert outbox.forgotten() == []
    assert row(ticket).agent_wake_turn is None


def test_a_run_cut_at_its_deadline_keeps_the_mark_until_the_rest_answers(ticket):
    turn = post(ticket)
    model = ScriptedModel([get_order(), ModelResponse(text="It ships today.")])
    steps, cut = run_slice(ticket.pk, gateway=Gateway(override=model), deadline=time.monotonic())
    assert (steps, cut) == (1, True)
    assert row(ticket).agent_wake_turn == turn.number and row(ticket).agent_claimed_at is None
    steps, cut = run_slice(ticket.pk, gateway=Gateway(override=model), deadline=time.monotonic() + 60)
    assert (steps, cut) == (1, False)
    assert Turn.objects.filter(ticket=ticket, author="agent", kind="message").count() == 1
    assert row(ticket).agent_wake_turn is None


def test_a_run_that_could_not_finish_leaves_an_error_turn_and_adds_its_reason(ticket):
    post(ticket)
    Ticket.objects.filter(pk=ticket.pk).update(attention="Customer flagged a detail")
    failures.run_failed(ticket.pk, "it ran past the 270 s time limit")
    last, error = Turn.objects.filter(ticket=ticket).order_by("-number")[:2]
    assert error.kind == Turn.Kind.ERROR and "270 s time limit" in error.text
    assert last.payload.get("via") == "handoff"  # the customer is told a person will reply (`handoff`)
    fresh = row(ticket)
    assert fresh.attention.startswith("Customer flagged a detail · Agent run stopped")
    assert fresh.agent_wake_turn is None  # staff have it: the sweep does not start it over


def test_a_run_taking_over_a_lapsed_claim_with_work_left_says_so(ticket):
    post(ticket)
    Ticket.objects.filter(pk=ticket.pk).update(agent_claimed_at=timezone.now() - CLAIM_TTL * 2)
    agent_run(ticket.pk, gateway=scripted(ModelResponse(text="On its way.")))
    kinds = list(Turn.objects.filter(ticket=ticket).order_by("number").values_list("kind", "author"))
    assert kinds[-2:] == [("error", "system"), ("message", "agent")]
    assert "recovered after a lost worker" in row(ticket).attention
    assert row(ticket).agent_claimed_at is None
