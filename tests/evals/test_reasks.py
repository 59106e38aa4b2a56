"""The scorecard's "asked again" counts every re-ask Sundry made, read from the steps' records of the
reply check, whatever followed it: a second reply, a tool call, or a call that failed."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from sundry.agent.loop import agent_run
from sundry.agent.models import AgentStep
from sundry.agent.provider.gateway import Gateway, ModelCallError
from sundry.agent.provider.scripted import ScriptedModel
from sundry.agent.services import customer_message_post
from sundry.desk.lifecycle import ticket_create
from sundry.evals import scorecard
from sundry.tooling.messages import ModelResponse, ToolCall
from tests.factories import CustomerFactory, TicketClassFactory, paid_order

pytestmark = pytest.mark.django_db

ORDER = "SU-41001"
INVENTED = ModelResponse(text="Your order SU-99999 shipped yesterday.")  # an ID the request never showed
LOOKUP = ModelResponse(tool_calls=[ToolCall(id="g1", name="get_order", arguments={"order_number": ORDER})])
PLAIN = ModelResponse(text="I'm looking into your order now and will write again shortly.")


def _ticket():
    customer = CustomerFactory()
    paid_order(customer=customer, number=ORDER, prices=(12999,))
    ticket = ticket_create(customer=customer.person, ticket_class=TicketClassFactory(approval_rules={}), subject="Hi")
    customer_message_post(ticket=ticket, text=f"Where is my order {ORDER}?", wake=False)
    return ticket


def _card(ticket):
    run = SimpleNamespace(
        ticket_id=ticket.pk,
        read={"false_claims": 0, "internal_shown": 0, "unanswered": 0},
        forbidden=0,
        error="",
        judgement=SimpleNamespace(missing=[], forbidden=[], correct=True),
        facts=[],
    )
    return scorecard.collect("m", [SimpleNamespace(error="", runs={"t": run})])


@pytest.mark.parametrize(
    "script, asked, rendered",
    [
        ([PLAIN], 0, 0),  # posted at once: nothing asked again
        ([INVENTED, PLAIN], 1, 1),  # asked again, answered with a reply
        ([INVENTED, INVENTED], 1, 1),  # asked again, held
        ([INVENTED, LOOKUP, PLAIN], 1, 0),  # asked again, answered with a call (then a reply in the next step)
        ([INVENTED, ModelCallError("HTTP 503 from provider", retryable=False)], 1, 0),  # the re-ask's call failed
    ],
)
def test_every_re_ask_is_counted_whatever_followed(script, asked, rendered):
    """`rendered`: what the old reading (re-asks followed by a second checked reply) counted."""
    ticket = _ticket()
    model = ScriptedModel(script)
    agent_run(ticket.pk, gateway=Gateway(override=model))
    assert len(model.requests) == len(script)  # every scripted answer was asked for
    card = _card(ticket)
    assert card.reply_retries == asked
    checks = [c for c in AgentStep.objects.filter(ticket=ticket).values_list("checks", flat=True)]
    old = sum(c.get("action") != "post" for s in checks for c in (s or {}).get("reply", [])[:-1])
    assert old == rendered
    assert f"(and {asked} replies asked again)" in scorecard.render(card)


def test_a_re_ask_not_sent_is_not_counted():
    """The records the step writes when it does not ask again (no time left; the part already shown kept)
    say "hold", not "retry"."""
    held = {"action": "hold", "reasons": ["invented_id", "no_time_to_ask_again"]}
    kept = {"action": "hold", "reasons": ["invented_id"], "kept_shown": True}
    assert scorecard.re_asks({"reply": [held]}) == scorecard.re_asks({"reply": [kept]}) == 0
    assert scorecard.re_asks({"reply": [{"action": "retry"}, {"action": "hold"}]}) == 1
    assert scorecard.re_asks({}) == scorecard.re_asks(None) == 0
