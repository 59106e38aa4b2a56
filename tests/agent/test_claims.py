"""A run knows its own claim: its retry takes the claim back at once, a slow model call keeps it
alive, and letting go survives a connection the database dropped. "Worker lost" is said only
when another run's claim lapsed."""

from __future__ import annotations

import threading
import time
from contextlib import nullcontext
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from sundry.agent import claims, loop
from sundry.agent.provider.gateway import Gateway
from sundry.agent.provider.scripted import ScriptedModel
from sundry.agent.services import customer_message_post
from sundry.desk.lifecycle import ticket_create
from sundry.tickets.models import Ticket, Turn
from sundry.tooling.messages import ModelResponse
from tests.factories import CustomerFactory, TicketClassFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def ticket():
    return ticket_create(
        customer=CustomerFactory().person, ticket_class=TicketClassFactory(approval_rules={}), subject="Help"
    )


def recovered(ticket):
    return Turn.objects.filter(ticket=ticket, payload__recovered=True).count()


def replies(ticket):
    return Turn.objects.filter(ticket=ticket, author=Turn.Author.AGENT, kind=Turn.Kind.MESSAGE).count()


def left_unreleased(ticket, owner, *, ago=timedelta(0)):
    """A run's first attempt failed with the database and could not let go of its claim."""
    Ticket.objects.filter(pk=ticket.pk).update(agent_claimed_at=timezone.now() - ago, agent_claimed_by=owner)


def test_a_retry_of_the_same_run_takes_its_claim_back_at_once_and_reports_no_lost_worker(ticket):
    customer_message_post(ticket=ticket, text="Hello?", wake=False)
    left_unreleased(ticket, "task-1#0")
    steps, _ = loop.run_slice(
        ticket.pk,
        owner="task-1#1",
        earlier=("task-1#0",),
        gateway=Gateway(override=ScriptedModel([ModelResponse(text="Hi! How can I help?")])),
    )
    assert steps == 1 and replies(ticket) == 1 and recovered(ticket) == 0
    row = Ticket.objects.get(pk=ticket.pk)
    assert (row.agent_claimed_at, row.agent_claimed_by) == (None, "")


@pytest.mark.parametrize(
    "owner, earlier", [("task-2#0", ()), ("task-1#0", ())], ids=["another-run", "the-same-attempt-delivered-again"]
)
def test_control_another_run_waits_for_a_live_claim(ticket, owner, earlier):
    """Another task, or the same attempt redelivered after its worker died, waits for the claim."""
    customer_message_post(ticket=ticket, text="Hello?", wake=False)
    left_unreleased(ticket, "task-1#0")
    assert loop.run_slice(ticket.pk, owner=owner, earlier=earlier, gateway=Gateway(override=ScriptedModel([]))) == (
        0,
        False,
    )
    assert claims.claimed_elsewhere(ticket.pk, ("task-2#0",))
    assert not claims.claimed_elsewhere(ticket.pk, ("task-1#1", "task-1#0"))
    assert replies(ticket) == 0


def test_a_lapsed_claim_of_a_dead_worker_is_a_lost_worker(ticket):
    """The same attempt delivered again after its worker died (acks_late) takes over the lapsed claim."""
    customer_message_post(ticket=ticket, text="Hello?", wake=False)
    left_unreleased(ticket, "task-1#0", ago=claims.CLAIM_TTL * 2)
    steps, _ = loop.run_slice(
        ticket.pk,
        owner="task-1#0",
        gateway=Gateway(override=ScriptedModel([ModelResponse(text="Hi! How can I help?")])),
    )
    assert steps == 1 and recovered(ticket) == 1


@pytest.mark.django_db(transaction=True)
def test_letting_go_retries_on_a_fresh_connection(ticket):
    held = claims.claim(ticket.pk, "task-1")
    connection.ensure_connection()
    connection.connection.close()  # the server dropped it, as a restart or a blip does
    assert claims.release(held)
    assert Ticket.objects.get(pk=ticket.pk).agent_claimed_at is None


class SlowModel:
    """A model that takes `seconds` to answer; halfway through, another run tries to claim the ticket."""

    name = "slow"

    def __init__(self, ticket_id, seconds):
        self.ticket_id, self.seconds, self.other = ticket_id, seconds, []

    def complete(self, request):
        def try_claim():
            self.other.append(claims.claim(self.ticket_id, "task-other"))
            connection.close()

        time.sleep(self.seconds / 2)
        thread = threading.Thread(target=try_claim)
        thread.start()
        thread.join()
        time.sleep(self.seconds / 2)
        return ModelResponse(text="Here you go.")


@pytest.fixture
def short_ttl(monkeypatch):
    monkeypatch.setattr(claims, "CLAIM_TTL", timedelta(seconds=1))
    monkeypatch.setattr(claims, "HEARTBEAT_SECONDS", 0.2)


@pytest.mark.django_db(transaction=True)
def test_a_model_call_longer_than_the_ttl_keeps_the_claim(ticket, short_ttl):
    customer_message_post(ticket=ticket, text="Hello?", wake=False)
    model = SlowModel(ticket.pk, seconds=3)
    steps, _ = loop.run_slice(ticket.pk, owner="task-1", gateway=Gateway(override=model))
    assert model.other == [None], "another run took the claim while the model was answering"
    assert steps == 1 and replies(ticket) == 1 and recovered(ticket) == 0


@pytest.mark.django_db(transaction=True)
def test_control_without_the_heartbeat_a_slow_call_loses_its_claim(ticket, short_ttl, monkeypatch):
    monkeypatch.setattr(claims, "heartbeat", lambda held, every=None: nullcontext())
    customer_message_post(ticket=ticket, text="Hello?", wake=False)
    model = SlowModel(ticket.pk, seconds=3)
    loop.run_slice(ticket.pk, owner="task-1", gateway=Gateway(override=model))
    [taken] = model.other
    assert taken is not None and taken.took_over
    assert replies(ticket) == 0  # the step found its claim gone and wrote nothing


class PostsWhileAnswering:
    """Answers every request with a plain reply; during its first call the customer sends `texts`."""

    name = "posts-while-answering"

    def __init__(self, ticket_id, texts):
        self.ticket_id, self.texts, self.calls = ticket_id, texts, 0

    def complete(self, request):
        self.calls += 1
        if self.calls == 1:

            def post():
                for text in self.texts:
                    customer_message_post(
                        ticket=Ticket.objects.select_related("ticket_class").get(pk=self.ticket_id), text=text
                    )
                connection.close()

            thread = threading.Thread(target=post)
            thread.start()
            thread.join()
        return ModelResponse(text=f"Answer {self.calls}.")


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("one_wake", [True, False], ids=["one-wake-up-in-flight", "control-a-task-per-message"])
def test_messages_posted_while_a_run_works_queue_no_task_of_their_own_and_are_answered(ticket, monkeypatch, one_wake):
    from sundry.agent import services

    queued = []
    monkeypatch.setattr(services, "enqueue_on_commit", lambda task, *args, **kw: queued.append(args))
    if not one_wake:  # a post judges both on what its row lock read
        monkeypatch.setattr(services.claims, "claimed_in", lambda *a, **k: False)
        monkeypatch.setattr(services.outbox, "pending_in", lambda *a, **k: False)
    customer_message_post(ticket=ticket, text="Hello?")
    assert len(queued) == 1
    model = PostsWhileAnswering(ticket.pk, ["Are you there?", "Where is my parcel?", "Hello??"])
    loop.run_slice(ticket.pk, owner="task-1#0", gateway=Gateway(override=model))
    assert len(queued) == (1 if one_wake else 4)
    turns = list(
        Turn.objects.filter(ticket=ticket, kind=Turn.Kind.MESSAGE).order_by("number").values_list("author", flat=True)
    )
    assert turns[-1] == Turn.Author.AGENT, turns  # the last message was answered by the same run
    assert model.calls == 2
    assert Ticket.objects.get(pk=ticket.pk).agent_wake_turn is None  # the outbox settled


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("one_wake", [True, False], ids=["one-task-per-burst", "control-a-task-per-message"])
def test_a_burst_posted_before_any_run_starts_queues_one_task_and_one_run_answers_it_all(ticket, monkeypatch, one_wake):
    from sundry.agent import services

    queued = []
    monkeypatch.setattr(services, "enqueue_on_commit", lambda task, *args, **kw: queued.append(args))
    if not one_wake:
        monkeypatch.setattr(services.outbox, "pending_in", lambda *a, **k: False)
    for text in ("Hello?", "Are you there?", "Where is my parcel?"):
        customer_message_post(ticket=ticket, text=text)  # the first task has not started: no claim yet
    assert len(queued) == (1 if one_wake else 3)
    loop.run_slice(
        ticket.pk,
        owner="task-1#0",
        gateway=Gateway(override=ScriptedModel([ModelResponse(text="Here I am: let me look into your parcel.")])),
    )
    authors = list(
        Turn.objects.filter(ticket=ticket, kind=Turn.Kind.MESSAGE).order_by("number").values_list("author", flat=True)
    )
    assert authors[-1] == Turn.Author.AGENT and authors.count(Turn.Author.AGENT) == 1, authors
    assert Ticket.objects.get(pk=ticket.pk).agent_wake_turn is None  # the outbox settled


@pytest.mark.django_db(transaction=True)
def test_a_wake_up_older_than_the_grace_queues_afresh(ticket, monkeypatch, settings):
    """A mark whose task may have been lost (the broker was away) does not silence new posts for good."""
    from sundry.agent import services

    queued = []
    monkeypatch.setattr(services, "enqueue_on_commit", lambda task, *args, **kw: queued.append(args))
    customer_message_post(ticket=ticket, text="Hello?")
    Ticket.objects.filter(pk=ticket.pk).update(
        agent_wake_at=timezone.now() - timedelta(seconds=settings.AGENT_SWEEP_GRACE_SECONDS + 1)
    )
    customer_message_post(ticket=ticket, text="Anyone?")
    assert len(queued) == 2
