"""A step whose request would go over the class's budget compacts first, in place: the trigger
runs only after resolution steps and queues its run, so lookups in between can grow the request
past the budget before a summary lands."""

from __future__ import annotations

import pytest

from sundry.agent import step
from sundry.agent.models import AgentStep, HeldAction
from sundry.agent.provider.gateway import Gateway
from sundry.agent.provider.scripted import ScriptedModel
from sundry.compaction.models import CompactionRun
from sundry.compaction.services import compact_before_step
from sundry.context.selectors import lane_snapshot
from sundry.tickets.models import Ticket
from sundry.tooling.messages import ModelResponse
from tests.compaction.helpers import long_ticket
from tests.compaction.test_service import total

pytestmark = pytest.mark.django_db


def _over_budget_ticket():
    ticket = long_ticket(exchanges=11)
    before = total(ticket).accounting
    tc = ticket.ticket_class
    # A budget the request is over, with room for the fixed part and a few recent turns; the
    # trigger at its usual fraction (it would have fired at the last resolution step).
    tc.token_budget = before.total_tokens - 1_500
    tc.trigger_fraction = 0.7
    tc.save()
    return Ticket.objects.select_related("ticket_class", "customer").get(pk=ticket.pk), before.total_tokens


def _step(ticket) -> int:
    """One step with a scripted reply; the size of the request it sent, as the step recorded it."""
    step.agent_step(ticket, gateway=Gateway(override=ScriptedModel([ModelResponse(text="Thanks for waiting.")])))
    return AgentStep.objects.filter(ticket=ticket).latest("number").request_tokens


def test_a_request_over_the_budget_is_compacted_before_it_is_sent():
    ticket, before = _over_budget_ticket()
    sent = _step(ticket)
    run = CompactionRun.objects.get(ticket=ticket)
    assert run.status in (CompactionRun.Status.SUCCEEDED, CompactionRun.Status.FALLBACK), run.status
    assert run.tokens_before == before > ticket.ticket_class.token_budget
    assert sent <= ticket.ticket_class.token_budget < before, (sent, before)


def test_control_without_the_hook_the_request_goes_out_over_the_budget(monkeypatch):
    monkeypatch.setattr(step, "before_request_hooks", [])
    ticket, before = _over_budget_ticket()
    assert _step(ticket) == before > ticket.ticket_class.token_budget
    assert not CompactionRun.objects.filter(ticket=ticket).exists()


def test_under_the_budget_nothing_is_compacted_in_the_step():
    ticket, before = _over_budget_ticket()
    ticket.ticket_class.token_budget = before + 1_000
    ticket.ticket_class.save()
    assert _step(ticket) == before
    assert not CompactionRun.objects.filter(ticket=ticket).exists()


def test_a_held_approval_leaves_the_request_as_it_is():
    ticket, before = _over_budget_ticket()
    HeldAction.objects.create(
        ticket=ticket,
        tool="issue_refund",
        arguments={},
        call_id="h1",
        reason="over threshold",
        idempotency_key="held-1",
        turn=ticket.last_turn_number,
    )
    snap = lane_snapshot(ticket)
    assert compact_before_step(ticket, snap, step.assemble_request(ticket, snap)) is False
    assert not CompactionRun.objects.filter(ticket=ticket).exists()
