"""Internal-only text never reaches the model: an internal note and an internal state field are read by
staff alone, so no encoding of them can reach a customer through the model (the verbatim reply check
stays as a second line). Judged from every request the model received, and the summariser's."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from sundry.agent.loop import agent_run
from sundry.agent.provider.gateway import Gateway
from sundry.agent.provider.scripted import ScriptedModel
from sundry.agent.services import customer_message_post, staff_internal_note_post, staff_note_post
from sundry.compaction.models import CompactionRun
from sundry.compaction.services import _inputs
from sundry.context import services as lanes
from sundry.context.assembly import assemble
from sundry.context.selectors import lane_snapshot
from sundry.desk.lifecycle import ticket_create
from sundry.tickets.models import Turn
from sundry.tooling.messages import ModelResponse
from tests.factories import CustomerFactory, TicketClassFactory

pytestmark = pytest.mark.django_db
SECRET = "watchlist since March, chargeback on card"
FIELD_SECRET = "Account under fraud review"


def _everything_the_model_read(model: ScriptedModel) -> str:
    return "\n".join(
        m.content + " ".join(str(c.arguments) for c in m.tool_calls) for r in model.requests for m in r.messages
    )


@pytest.fixture
def ticket():
    staff = get_user_model().objects.create_user("ann", is_staff=True)
    ticket = ticket_create(customer=CustomerFactory().person, ticket_class=TicketClassFactory(), subject="Refund")
    customer_message_post(ticket=ticket, text="Where is my refund?", wake=False)
    return ticket, staff


def test_an_internal_note_and_an_internal_field_never_reach_a_request(ticket):
    ticket, staff = ticket
    staff_internal_note_post(ticket=ticket, text=f"Internal: {SECRET}.", user=staff)
    lanes.state_set(
        ticket=ticket, name="internal_note", value=FIELD_SECRET, turn=1, source="staff", confirmed=True, user=staff
    )
    staff_note_post(ticket=ticket, text="Please tell them it is on its way.", user=staff)  # for the agent
    model = ScriptedModel([ModelResponse(text="A colleague is looking into it for you.")])
    agent_run(ticket.pk, gateway=Gateway(override=model))
    read = _everything_the_model_read(model)
    assert "Please tell them it is on its way." in read  # a note for the agent is read
    assert SECRET not in read and FIELD_SECRET not in read
    assert Turn.objects.filter(ticket=ticket, kind=Turn.Kind.INTERNAL).count() == 1


def test_negative_control_the_same_text_as_a_note_for_the_agent_is_read(ticket):
    ticket, staff = ticket
    staff_note_post(ticket=ticket, text=f"Internal: {SECRET}.", user=staff)
    model = ScriptedModel([ModelResponse(text="Noted.")])
    agent_run(ticket.pk, gateway=Gateway(override=model))
    assert SECRET in _everything_the_model_read(model)


def test_an_internal_note_does_not_wake_the_agent_nor_reach_the_summariser(ticket):
    ticket, staff = ticket
    staff_internal_note_post(ticket=ticket, text=f"Internal: {SECRET}.", user=staff)
    snap = lane_snapshot(ticket)
    assert all(t.kind != "internal" for t in snap.turns)
    assert SECRET not in str(assemble(snap, model="offline").request.model_dump())
    run = CompactionRun.objects.create(
        ticket=ticket, context_version=0, from_turn=1, through_turn=ticket.last_turn_number, model="offline"
    )
    turns, request, _, _ = _inputs(run)
    assert turns and all(t.kind != "internal" for t in turns)
    assert SECRET not in request.model_dump_json()


def test_the_desk_adds_an_internal_note_the_customer_never_sees(ticket):
    ticket, staff = ticket
    desk = Client()
    desk.force_login(staff)
    r = desk.post(
        f"/desk/tickets/{ticket.pk}/post",
        {"action": "internal", "text": f"Internal: {SECRET}."},
        HTTP_HX_REQUEST="true",
    )
    assert r.status_code == 200 and "Internal note added" in r.content.decode()
    page = desk.get(f"/desk/tickets/{ticket.pk}/").content.decode()
    assert SECRET in page and "internal note (staff only)" in page
