"""How the loop commits: one transaction and one push per step, input that arrives
mid-run, the claim's lease, and the compaction check that skips reading the lanes when far under."""

from __future__ import annotations

import threading

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from sundry.agent import calls, claims, loop, step
from sundry.agent.loop import agent_run
from sundry.agent.models import AgentStep
from sundry.agent.provider.gateway import Gateway
from sundry.agent.provider.scripted import ScriptedModel
from sundry.agent.services import customer_message_post
from sundry.compaction import services as compaction
from sundry.compaction.trigger import LANE_GROWTH_ALLOWANCE, clearly_under
from sundry.context.models import LedgerEntry, MoneyTotal
from sundry.desk.lifecycle import ticket_create
from sundry.tickets import events
from sundry.tickets.models import Ticket, Turn
from sundry.tickets.services import turn_append
from sundry.tooling.messages import ModelResponse, ToolCall
from tests.factories import CustomerFactory, TicketClassFactory, paid_order

pytestmark = pytest.mark.django_db


@pytest.fixture
def ticket():
    customer = CustomerFactory()
    paid_order(customer=customer, number="SU-10480", prices=(6000, 4000))
    return ticket_create(
        customer=customer.person, ticket_class=TicketClassFactory(approval_rules={}), subject="Where is it"
    )


def get_order():
    return ModelResponse(tool_calls=[ToolCall(id="c1", name="get_order", arguments={"order_number": "SU-10480"})])


@pytest.mark.django_db(transaction=True)
def test_a_message_that_arrives_mid_run_is_answered_before_the_run_ends(ticket):
    customer_message_post(ticket=ticket, text="Where is order SU-10480?", wake=False)
    claimed_meanwhile = []

    def second_message():
        # The customer writes again while the model is thinking; that message's own
        # wake-up would find the ticket claimed by this run.
        customer_message_post(
            ticket=Ticket.objects.select_related("ticket_class").get(pk=ticket.pk),
            text="Also, can I change the address?",
            wake=False,
        )
        claimed_meanwhile.append(claims.claim(ticket.pk) is not None)
        connection.close()

    def answer_while_a_second_message_arrives(request):
        writer = threading.Thread(target=second_message)
        writer.start()
        writer.join()
        return ModelResponse(text="It is on its way.")

    model = ScriptedModel([answer_while_a_second_message_arrives, ModelResponse(text="Yes, I can help with that.")])
    assert agent_run(ticket.pk, gateway=Gateway(override=model)) == 2
    assert claimed_meanwhile == [False]
    shown = [" ".join(m.content or "" for m in r.messages) for r in model.requests]
    assert "change the address" not in shown[0] and "change the address" in shown[1]
    last = Turn.objects.filter(ticket=ticket).order_by("-number").first()
    assert (last.author, last.text) == ("agent", "Yes, I can help with that.")
    assert Ticket.objects.get(pk=ticket.pk).agent_claimed_at is None


def test_a_run_with_no_new_input_takes_one_pass(ticket):
    customer_message_post(ticket=ticket, text="Where is order SU-10480?", wake=False)
    model = ScriptedModel([get_order(), ModelResponse(text="On its way.")])
    assert agent_run(ticket.pk, gateway=Gateway(override=model)) == 2
    assert agent_run(ticket.pk, gateway=Gateway(override=ScriptedModel([]))) == 0  # nothing to answer


def test_a_step_that_fails_midway_leaves_nothing_half_applied(ticket, monkeypatch):
    customer_message_post(ticket=ticket, text="Where is order SU-10480?", wake=False)
    before = Ticket.objects.get(pk=ticket.pk).last_turn_number

    def broken_harvest(**kwargs):
        raise RuntimeError("harvest broke")

    monkeypatch.setattr(calls.lanes, "ledger_harvest", broken_harvest)
    with pytest.raises(RuntimeError, match="harvest broke"):
        agent_run(ticket.pk, gateway=Gateway(override=ScriptedModel([get_order()])))
    fresh = Ticket.objects.get(pk=ticket.pk)
    # Neither the call turn, nor the result, nor money, nor a step record: the step is one transaction.
    assert fresh.last_turn_number == before
    assert not Turn.objects.filter(ticket=ticket, number__gt=before).exists()
    assert not MoneyTotal.objects.filter(ticket=ticket).exists()
    assert not AgentStep.objects.filter(ticket=ticket).exists()
    assert fresh.agent_claimed_at is None  # the claim is released all the same


@pytest.mark.django_db(transaction=True)
def test_a_tool_step_commits_once_and_pushes_once(ticket, monkeypatch):
    customer_message_post(ticket=ticket, text="Where is order SU-10480?", wake=False)
    pushed, real_push = [], events._push
    monkeypatch.setattr(
        events, "_push", lambda ticket_id, version=None: pushed.append(ticket_id) or real_push(ticket_id, version)
    )
    version = Ticket.objects.get(pk=ticket.pk).version
    step.agent_step(
        Ticket.objects.select_related("ticket_class", "customer").get(pk=ticket.pk),
        gateway=Gateway(override=ScriptedModel([get_order()])),
    )
    # Call turn and result turn: two version bumps, one commit, one push. The harvest's ledger
    # writes ride on the result turn's bump (same transaction, nothing read between); it was three.
    assert Ticket.objects.get(pk=ticket.pk).version == version + 2
    assert pushed == [ticket.pk]
    assert LedgerEntry.objects.filter(ticket=ticket, value="SU-10480", verified=True).exists()


@pytest.mark.django_db(transaction=True)
def test_each_step_pushes_once_with_the_version_it_committed(ticket, monkeypatch):
    customer_message_post(ticket=ticket, text="Where is order SU-10480?", wake=False)
    sent = []
    monkeypatch.setattr(events, "group_send", lambda groups, message: sent.append(message["version"]))
    model = ScriptedModel([get_order(), ModelResponse(text="On its way.")])
    assert agent_run(ticket.pk, gateway=Gateway(override=model)) == 2  # a tool step, then a reply
    assert len(sent) == 2 and sent[1] == Ticket.objects.get(pk=ticket.pk).version
    assert sent[1] == sent[0] + 1  # the first carried the tool step's version: the reply bumped it once


def test_changes_in_one_transaction_queue_one_push_per_ticket(ticket, django_capture_on_commit_callbacks):
    other = ticket_create(customer=ticket.customer, ticket_class=ticket.ticket_class, subject="Another")
    with django_capture_on_commit_callbacks() as callbacks, transaction.atomic():
        for _ in range(3):
            turn_append(ticket=ticket, author="customer", text="hello?")
        turn_append(ticket=other, author="customer", text="and here")
    assert sorted(getattr(c, "pushes_ticket", None) for c in callbacks) == sorted([ticket.pk, other.pk])


# --- the compaction check's cheap path ----------------------------------------------------------


def test_clearly_under_allows_for_lane_growth():
    assert clearly_under(request_tokens=1000, appended_tokens=200, appended_turns=2, trigger_tokens=6400)
    near = 6400 - LANE_GROWTH_ALLOWANCE - 8 * 2 - 200
    assert not clearly_under(request_tokens=near, appended_tokens=200, appended_turns=2, trigger_tokens=6400)
    assert clearly_under(request_tokens=near - 1, appended_tokens=200, appended_turns=2, trigger_tokens=6400)


def reply_without_the_check(ticket):
    """One reply step with no resolution listener registered."""
    saved = list(loop.resolution_listeners)
    loop.resolution_listeners[:] = []
    try:
        agent_run(ticket.pk, gateway=Gateway(override=ScriptedModel([ModelResponse(text="On its way.")])))
    finally:
        loop.resolution_listeners[:] = saved


def test_far_under_the_trigger_the_check_reads_no_lanes(ticket):
    customer_message_post(ticket=ticket, text="Where is order SU-10480?", wake=False)
    reply_without_the_check(ticket)  # the check is called by hand below, to count its queries
    step = AgentStep.objects.get(ticket=ticket, is_resolution=True)
    with CaptureQueriesContext(connection) as queries:
        assert compaction.compaction_consider(ticket_id=ticket.pk, step_id=step.pk) is None
    assert len(queries) == 2  # the step (with its class) and the tokens it appended
    assert not any("context_" in q["sql"] for q in queries.captured_queries)


def test_near_the_trigger_the_check_assembles_and_queues(ticket):
    tclass = ticket.ticket_class
    # Over the trigger (1,000) but within the budget: a request over the budget is compacted in
    # the step itself, before it is sent (tests/compaction/test_before_step.py).
    tclass.token_budget, tclass.trigger_fraction = 20_000, 0.05
    tclass.save()
    customer_message_post(ticket=ticket, text="Where is order SU-10480?", wake=False)
    for i in range(30):
        turn_append(ticket=ticket, author="customer" if i % 2 else "agent", text=f"filler line {i} " * 12)
    reply_without_the_check(ticket)
    step = AgentStep.objects.get(ticket=ticket, is_resolution=True)
    assert step.request_tokens > tclass.trigger_tokens
    run = compaction.compaction_consider(ticket_id=ticket.pk, step_id=step.pk)
    assert run is not None and run.tokens_before > tclass.trigger_tokens


def test_the_id_a_call_used_is_not_evicted_by_the_ids_its_own_result_brings():
    # A small window (80 tokens): the lookup's result brings more IDs than fit. The order
    # the agent just looked up counts as used by then, a live entity that leaves last.
    customer = CustomerFactory()
    paid_order(customer=customer, number="SU-10480", prices=(6000, 4000, 2500))
    ticket = ticket_create(
        customer=customer.person,
        ticket_class=TicketClassFactory(approval_rules={}, ledger_share=0.01),
        subject="Where is it",
    )
    customer_message_post(ticket=ticket, text="Where is order SU-10480?", wake=False)
    assert agent_run(ticket.pk, gateway=Gateway(override=ScriptedModel([get_order(), ModelResponse(text="Found it.")])))
    order = LedgerEntry.objects.get(ticket=ticket, value="SU-10480")
    assert (order.status, order.verified, order.used_in_call) == ("active", True, True)
    assert LedgerEntry.objects.filter(ticket=ticket, status="archived").exists()  # the window did overflow


def test_a_run_opens_by_claiming_and_loading_the_ticket_with_what_awaits_it(ticket):
    Ticket.objects.filter(pk=ticket.pk).update(agent_claimed_at=None)
    customer_message_post(ticket=ticket, text="Where is order SU-10480?", wake=False)
    loaded, (waiting, mid_task, number), held = loop._open(ticket.pk)
    assert (waiting, mid_task, number) == (True, False, 1)
    assert loaded.ticket_class.pk == ticket.ticket_class.pk and loaded.customer.pk == ticket.customer.pk
    assert loop._open(ticket.pk) is None  # claimed now
    assert loop._open(ticket.pk + 1000) is None
    assert claims.release(held) and Ticket.objects.get(pk=ticket.pk).agent_claimed_at is None


def test_a_run_whose_lease_was_taken_over_leaves_the_new_claim_alone(ticket):
    held = claims.claim(ticket.pk)
    # The lease lapsed and another run claimed the ticket.
    Ticket.objects.filter(pk=ticket.pk).update(agent_claimed_at=timezone.now() - claims.CLAIM_TTL * 2)
    other = claims.claim(ticket.pk)
    assert other is not None
    assert claims.renew(held) is None and not claims.release(held)
    assert Ticket.objects.get(pk=ticket.pk).agent_claimed_at == other.stamp
    assert claims.renew(other)[0] == Ticket.Handler.AGENT


@pytest.mark.django_db(transaction=True)
def test_a_failing_after_commit_hook_never_lets_go_of_a_claim_another_run_took(ticket, monkeypatch):
    customer_message_post(ticket=ticket, text="Where is order SU-10480?", wake=False)
    taken = []

    def another_run_claims_then_the_hook_fails(resolved):
        Ticket.objects.filter(pk=ticket.pk).update(agent_claimed_at=timezone.now())
        taken.append(Ticket.objects.get(pk=ticket.pk).agent_claimed_at)
        raise RuntimeError("a listener failed")

    monkeypatch.setattr(step, "resolution_listeners", [another_run_claims_then_the_hook_fails])
    model = ScriptedModel([get_order(), ModelResponse(text="On its way.")])
    with pytest.raises(RuntimeError):
        agent_run(ticket.pk, gateway=Gateway(override=model))
    assert Ticket.objects.get(pk=ticket.pk).agent_claimed_at == taken[0]  # the other run's claim stands
    assert Turn.objects.filter(ticket=ticket, kind=Turn.Kind.MESSAGE, author=Turn.Author.AGENT).count() == 1
