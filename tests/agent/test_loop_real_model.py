"""The step loop against a model served over HTTP on 127.0.0.1, as teams serve local models."""

from __future__ import annotations

import json

import pytest

from sundry.agent import handoff
from sundry.agent.loop import agent_run
from sundry.agent.models import AgentStep
from sundry.agent.provider.gateway import CallLimits, Gateway
from sundry.agent.services import customer_message_post
from sundry.desk.lifecycle import ticket_create
from sundry.shop.models import Refund
from sundry.tickets.models import Ticket, Turn
from tests.agent.test_gateway import completion, fn_call, no_internet, serve  # noqa: F401  (fixtures)
from tests.factories import CustomerFactory, TicketClassFactory, paid_order

pytestmark = pytest.mark.django_db
MODEL = "openai-compatible:qwen2.5-1.5b"


@pytest.fixture
def desk(serve, monkeypatch):
    """A ticket whose class runs a model behind a local server answering from `answers` (functions of the body)."""
    answers: list = []
    server = serve(lambda path, body: answers.pop(0)(body))
    monkeypatch.setenv("SUNDRY_OPENAI_COMPAT_BASE_URL", server.url + "/v1")
    customer = CustomerFactory()
    paid_order(customer=customer, number="SU-26675", prices=(4000,))
    tclass = TicketClassFactory(approval_rules={}, working_model=MODEL, summariser_model="offline")
    ticket = ticket_create(customer=customer.person, ticket_class=tclass, subject="Refund?")
    customer_message_post(ticket=ticket, text="Did my refund for SU-26675 go through?")
    return {"server": server, "answers": answers, "ticket": ticket, "class": tclass}


def run(desk):
    return agent_run(desk["ticket"].pk, gateway=Gateway(limits=CallLimits(max_retries=0)))


def agent_messages(ticket):
    return list(Turn.objects.filter(ticket=ticket, author="agent", kind="message").values_list("text", flat=True))


def say(text):
    return lambda body: (200, completion(content=text))


def test_an_invented_refund_reference_is_asked_again_then_held_never_sent(desk):
    invented = "Your refund SU-26675-RF01 for 40.00 USD has been issued."
    desk["answers"] += [say(invented), say("Refund reference SU-26675-refund-1 is on its way.")]
    run(desk)
    ticket = desk["ticket"]
    assert agent_messages(ticket) == [handoff.TEXT]  # the customer reads only Sundry's hand-off
    # The second request showed the model its reply and why it was not sent.
    notice = desk["server"].bodies[1]["messages"][-1]
    assert notice["role"] == "user" and "SU-26675-RF01" in notice["content"]
    held = Turn.objects.get(ticket=ticket, kind="error")
    assert "held for staff" in held.text and held.payload["held_reply"].startswith("Refund reference")
    ticket.refresh_from_db()
    assert ticket.attention.startswith("Reply held for staff: invented_id")
    step = AgentStep.objects.get(ticket=ticket)
    assert step.outcome == "held_reply" and [c["action"] for c in step.checks["reply"]] == ["retry", "hold"]
    assert not Refund.objects.exists()


def test_a_corrected_reply_after_the_re_ask_is_posted(desk):
    desk["answers"] += [
        say("Refund SU-26675-RF01 done."),
        say("I can see order SU-26675; no refund has been made yet."),
    ]
    run(desk)
    assert agent_messages(desk["ticket"]) == ["I can see order SU-26675; no refund has been made yet."]


def test_a_hallucinated_tool_response_is_stripped_before_the_customer_sees_it(desk):
    desk["answers"] += [say('<tool_response>{"status": "delivered"}</tool_response>\nOrder SU-26675 was delivered.')]
    run(desk)
    [message] = Turn.objects.filter(ticket=desk["ticket"], author="agent", kind="message")
    assert message.text == "Order SU-26675 was delivered."
    assert message.payload["reply_check"]["notes"] == ["tool-protocol markup removed"]


def test_a_truncated_reply_is_asked_again(desk):
    cut = completion(content="Your order SU-26675 was deliv")
    cut["choices"][0]["finish_reason"] = "length"
    desk["answers"] += [lambda body: (200, cut), say("Order SU-26675 was delivered.")]
    run(desk)
    assert agent_messages(desk["ticket"]) == ["Order SU-26675 was delivered."]


def hermes(body):
    return 200, completion(
        content='<tool_call>\n{"name": "get_order", "arguments": {"order_number": "SU-26675"}}\n</tool_call>'
    )


def test_with_the_class_opted_in_a_hermes_call_written_as_text_is_made(desk):
    desk["class"].text_tool_calls = True
    desk["class"].save()
    desk["answers"] += [hermes, say("Order SU-26675 was delivered; no refund has been made.")]
    run(desk)
    ticket = desk["ticket"]
    result = Turn.objects.get(ticket=ticket, kind="tool_result")
    assert result.payload["ok"] and result.payload["name"] == "get_order"
    assert AgentStep.objects.filter(ticket=ticket).first().checks["text_calls"] == "hermes"
    # The next request carried it as a real call with its result.
    second = desk["server"].bodies[1]["messages"]
    assert any(m.get("tool_calls") for m in second) and any(m["role"] == "tool" for m in second)
    assert agent_messages(ticket) == ["Order SU-26675 was delivered; no refund has been made."]


def test_without_the_opt_in_a_call_written_as_text_never_reaches_the_customer(desk):
    desk["answers"] += [hermes, hermes]
    run(desk)
    ticket = desk["ticket"]
    assert (
        agent_messages(ticket) == [handoff.TEXT] and not Turn.objects.filter(ticket=ticket, kind="tool_result").exists()
    )
    ticket.refresh_from_db()
    assert "call_as_text" in ticket.attention


def test_the_same_malformed_call_three_times_ends_the_run_with_a_flag(desk):
    def bad(body):
        return 200, completion(tool_calls=[fn_call(f"c{len(body['messages'])}", "get_order", '{"order_number": NaN}')])

    desk["answers"] += [bad] * 6
    steps = run(desk)
    ticket = desk["ticket"]
    assert steps == 3
    rejections = list(Turn.objects.filter(ticket=ticket, kind="rejection").order_by("number"))
    assert [r.payload["guard"] for r in rejections] == ["schema", "schema", "repeat_failure"]
    assert "NaN is not a JSON value" in rejections[0].text
    ticket.refresh_from_db()
    assert ticket.attention.startswith("Repeated failing call: get_order")


def test_in_production_an_unresolvable_model_hands_the_ticket_to_staff(desk, settings, monkeypatch):
    settings.PRODUCTION = True
    monkeypatch.delenv("SUNDRY_OPENAI_COMPAT_BASE_URL")
    run(desk)
    ticket = Ticket.objects.get(pk=desk["ticket"].pk)
    assert ticket.handler == Ticket.Handler.STAFF
    assert ticket.attention.startswith("Model not configured") and "SUNDRY_OPENAI_COMPAT_BASE_URL" in ticket.attention
    error = Turn.objects.get(ticket=ticket, kind="error")
    assert "handed to staff" in error.text and error.payload["unresolved"] is True
    # No model spoke: the customer reads Sundry's hand-off, told before the ticket went to staff (`handoff`).
    assert desk["server"].requests == [] and agent_messages(ticket) == [handoff.TEXT]


def test_the_step_cap_flags_a_run_that_stops_mid_task(desk, settings):
    lookups = [
        lambda body, n=n: (
            200,
            completion(
                tool_calls=[
                    fn_call(
                        f"g{n}",
                        "search_orders",
                        json.dumps(
                            {
                                "customer_id": desk["ticket"].customer.external_key,
                                "status": ["open", "shipped", "delivered"][n % 3],
                            }
                        ),
                    )
                ]
            ),
        )
        for n in range(3)
    ]
    desk["answers"] += lookups
    assert agent_run(desk["ticket"].pk, gateway=Gateway(limits=CallLimits(max_retries=0)), max_steps=3) == 3
    ticket = Ticket.objects.get(pk=desk["ticket"].pk)
    assert ticket.attention.startswith("Run stopped at the run's 3-step cap")
    assert Turn.objects.filter(ticket=ticket, kind="error", payload__run_stopped=True).exists()
