"""Each reason to look at a ticket is its own: a cause never overwrites or hides another, a
cause that resolves itself clears only its own reason, and the desk's "Mark handled" / "Clear
flag" resolves exactly the reason it names — so a customer's report reads "You reported this"
until staff handle that report, whatever else the ticket was flagged for."""

from __future__ import annotations

import json

import pytest

from sundry.agent.failures import run_failed
from sundry.agent.loop import agent_run
from sundry.agent.provider.gateway import Gateway, ModelCallError
from sundry.agent.provider.scripted import ScriptedModel
from sundry.agent.services import customer_message_post
from sundry.compaction.services import compaction_run
from sundry.compaction.trigger import BREAKER_PREFIX
from sundry.context import services as lanes
from sundry.portal.selectors import reported_value_ids
from sundry.tickets.attention import FOLLOW_UP_PREFIX, MODEL_UNAVAILABLE, follow_up_request
from sundry.tickets.models import Ticket, Turn
from sundry.tickets.services import turn_append
from sundry.tooling.messages import ModelResponse
from tests.compaction.helpers import long_ticket
from tests.compaction.test_service import queued_run
from tests.factories import TicketClassFactory
from tests.portal.test_portal import HX, page  # noqa: F401  (page is a fixture)

pytestmark = pytest.mark.django_db


def attention(ticket) -> str:
    return Ticket.objects.values_list("attention", flat=True).get(pk=ticket.pk)


def run(ticket, *steps) -> None:
    agent_run(ticket.pk, gateway=Gateway(override=ScriptedModel(list(steps))))


def trip_breaker(ticket) -> None:
    for _ in range(3):
        failing = Gateway(override=ScriptedModel([RuntimeError("boom")]))
        assert compaction_run(queued_run(ticket).pk, gateway=failing).status == "failed"
        turn_append(ticket=ticket, author=Turn.Author.CUSTOMER, text="Any news?")  # the next check covers new turns


def test_model_unavailable_then_the_breaker_then_an_answer_clears_only_the_models_flag():
    # A budget the long ticket's request is within: over it, the first step would compact in place
    # and leave the breaker's runs nothing to compact.
    ticket = long_ticket(tclass=TicketClassFactory(approval_rules={}, token_budget=50_000))
    customer_message_post(ticket=ticket, text="Hello?", wake=False)
    run(ticket, ModelCallError("HTTP 503 from provider", retryable=True))
    assert attention(ticket).startswith(MODEL_UNAVAILABLE)

    trip_breaker(ticket)
    both = attention(ticket)
    assert MODEL_UNAVAILABLE in both and BREAKER_PREFIX in both, both  # the breaker did not overwrite it

    customer_message_post(ticket=ticket, text="Anyone there?", wake=False)
    run(ticket, ModelResponse(text="Yes, sorry for the wait."))
    left = attention(ticket)
    assert MODEL_UNAVAILABLE not in left and left.startswith(BREAKER_PREFIX), left  # its cause is gone, not the other's


def _flag(c, ticket, value, note="") -> None:
    assert (
        c["alice"].post(f"/help/tickets/{ticket.pk}/flag", {"value_id": value.pk, "note": note}, **HX).status_code
        == 200
    )


def _details(c, ticket) -> str:
    html = c["alice"].get(f"/help/tickets/{ticket.pk}/").content.decode()
    return html[html.index('id="panel-details"') :]


def _reasons_on_the_desk(c, ticket) -> list[str]:
    """The `shown` value of each attention button in the desk's head panel."""
    import re

    head = c["staff"].get(f"/desk/tickets/{ticket.pk}/").content.decode()
    head = head[head.index('class="ticket-head"') :]
    return [json.loads(f'"{v}"') for v in re.findall(r'"shown": "((?:[^"\\]|\\.)*)"', head)]


def test_a_customer_report_while_another_flag_is_up_is_its_own_and_mark_handled_resolves_it(page):
    ticket, c = page["ticket"], page["c"]
    method = lanes.state_set(
        ticket=ticket, name="refund_method", value="store_credit", turn=1, source="staff", confirmed=True
    )
    run_failed_reason = "it ran past the 270 s time limit"
    customer_message_post(ticket=ticket, text="Where is my refund?", wake=False)
    assert run_failed(ticket.pk, run_failed_reason)
    _flag(c, ticket, method, "I paid by card")
    line = attention(ticket)
    assert "Agent run stopped" in line and "Customer flagged" in line, line  # stored as its own reason
    assert "You reported this" in _details(c, ticket)
    reasons = _reasons_on_the_desk(c, ticket)
    assert len(reasons) == 2 and any(r.startswith("Customer flagged") for r in reasons), reasons

    report = next(r for r in reasons if r.startswith("Customer flagged"))
    answer = c["staff"].post(f"/desk/tickets/{ticket.pk}/attention/clear", {"shown": report}, **HX)
    assert answer.status_code == 200 and "Flag marked as handled" in answer.content.decode()
    assert reported_value_ids(ticket) == set()
    assert "You reported this" not in _details(c, ticket)
    assert attention(ticket).startswith("Agent run stopped"), attention(ticket)  # the other reason stays


def test_mark_handled_on_one_report_leaves_another_report_and_another_cause(page):
    ticket, c = page["ticket"], page["c"]
    method = lanes.state_set(
        ticket=ticket, name="refund_method", value="store_credit", turn=1, source="staff", confirmed=True
    )
    order = lanes.state_set(
        ticket=ticket, name="order_number", value="SU-61111", turn=1, source="customer", confirmed=True
    )
    _flag(c, ticket, method)
    follow_up_request(ticket_id=ticket.pk, reason="call the customer back about the card", turn=2)
    _flag(c, ticket, order)
    assert reported_value_ids(ticket) == {method.pk, order.pk}
    reasons = _reasons_on_the_desk(c, ticket)
    assert len(reasons) == 3, reasons
    first = next(r for r in reasons if "Refund" in r)
    assert c["staff"].post(f"/desk/tickets/{ticket.pk}/attention/clear", {"shown": first}, **HX).status_code == 200
    assert reported_value_ids(ticket) == {order.pk}  # only the report it named
    assert _details(c, ticket).count("You reported this") == 1
    left = attention(ticket)
    assert first not in left and FOLLOW_UP_PREFIX in left and "Customer flagged Order" in left, left

    # A stale button (the reason already handled) changes nothing and says so.
    again = c["staff"].post(f"/desk/tickets/{ticket.pk}/attention/clear", {"shown": first}, **HX)
    assert again.status_code == 409 and attention(ticket) == left
