"""A ticket class may deny tools: never offered to the model, and a call naming one is refused as a
tool the class does not have — judged from the request the model received and the shop's rows."""

from __future__ import annotations

import pytest

from sundry.agent.loop import agent_run
from sundry.agent.provider.gateway import Gateway
from sundry.agent.provider.scripted import ScriptedModel
from sundry.agent.services import customer_message_post
from sundry.desk.admin import TicketClassForm
from sundry.desk.lifecycle import ticket_create
from sundry.tickets.models import Turn
from sundry.tooling.messages import ModelResponse, ToolCall
from tests.factories import CustomerFactory, TicketClassFactory, paid_order
from tests.tickets.test_budget_lab import _class_post

pytestmark = pytest.mark.django_db

LOOKUP = ToolCall(id="g1", name="get_order", arguments={"order_number": "SU-61001"})


def _run(denied: str):
    customer = CustomerFactory()
    paid_order(customer=customer, number="SU-61001", prices=(2500,))
    tclass = TicketClassFactory(approval_rules={}, denied_tools=denied)
    ticket = ticket_create(customer=customer.person, ticket_class=tclass, subject="Where is it")
    customer_message_post(ticket=ticket, text="Where is order SU-61001?", wake=False)
    model = ScriptedModel([ModelResponse(tool_calls=[LOOKUP]), ModelResponse(text="Let me see.")])
    agent_run(ticket.pk, gateway=Gateway(override=model))
    offered = {t["name"] if isinstance(t, dict) else t.name for t in model.requests[0].tools}
    turns = Turn.objects.filter(ticket=ticket)
    error = turns.filter(kind=Turn.Kind.ERROR, payload__call_id="g1").first()
    ran = turns.filter(kind=Turn.Kind.TOOL_RESULT, payload__call_id="g1").exists()
    return offered, error, ran


def test_a_denied_tool_is_not_offered_and_its_call_is_refused():
    offered, error, ran = _run("get_order, track_parcel")
    assert "get_order" not in offered and "track_parcel" not in offered and "search_orders" in offered
    assert error is not None and error.payload["error"] == "denied_tool" and not ran
    assert error.text.startswith("The tool 'get_order' is not allowed on tickets of this class.")
    assert "get_order" not in error.text.split("Available tools:")[1]


def test_negative_control_without_the_deny_the_same_call_runs():
    offered, error, ran = _run("")
    assert "get_order" in offered and error is None and ran


def test_the_admin_refuses_a_name_that_is_not_a_tool_of_the_class():
    tclass = TicketClassFactory(approval_rules={})
    form = TicketClassForm(_class_post(tclass, denied_tools="send_emial"), instance=tclass)
    assert not form.is_valid() and "Not a tool of this class: send_emial" in str(form.errors["denied_tools"])
    form = TicketClassForm(_class_post(tclass, denied_tools="send_email  send_email,log_phone_call"), instance=tclass)
    assert form.is_valid(), form.errors
    assert form.cleaned_data["denied_tools"] == "send_email, log_phone_call"
