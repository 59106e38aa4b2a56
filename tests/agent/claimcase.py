"""The ticket a reply-check test runs through the loop, and what its customer reads of it.

A customer with a paid order opens a ticket (the agent not woken: the test runs it with a scripted
model) and has their page open; what they read is their turns and that page. `case` is the refund the
promise tests share: a broken lamp, 15.00 USD asked back.
"""

from __future__ import annotations

import pytest
from django.test import Client

from sundry.agent.loop import agent_run
from sundry.agent.provider.gateway import Gateway
from sundry.agent.provider.scripted import ScriptedModel
from sundry.agent.services import customer_message_post
from sundry.desk.lifecycle import ticket_create
from sundry.portal.selectors import customer_turns
from sundry.tooling.messages import ModelResponse, ToolCall
from tests.factories import CustomerFactory, TicketClassFactory, paid_order

ORDER = "SU-41001"  # the order of `case`


def open_case(users, text, *, order, subject, username="dana", **order_fields) -> dict:
    """A ticket on a paid order `order` (`order_fields` go to `paid_order`), opened with `text` (None: no
    message yet), and the customer's logged-in page: {"ticket", "page", "order"}."""
    user = users.objects.create_user(username, password="pw")
    customer = CustomerFactory(user=user)
    placed = paid_order(customer=customer, number=order, **order_fields)
    ticket = ticket_create(
        customer=customer.person, ticket_class=TicketClassFactory(approval_rules={}), subject=subject
    )
    if text is not None:
        customer_message_post(ticket=ticket, text=text, wake=False)
    page = Client()
    page.force_login(user)
    return {"ticket": ticket, "page": page, "order": placed}


def customer_reads(case) -> str:
    """Everything the customer sees of the ticket: their turns, and their page's HTML."""
    turns = " ".join(t.text for t in customer_turns(case["ticket"]))
    return turns + case["page"].get(f"/help/tickets/{case['ticket'].pk}/").content.decode()


def run_scripted(case, said, *answers) -> ScriptedModel:
    """The customer writes `said`; the agent runs on the scripted `answers` (the model returned)."""
    customer_message_post(ticket=case["ticket"], text=said, wake=False)
    model = ScriptedModel(list(answers))
    agent_run(case["ticket"].pk, gateway=Gateway(override=model))
    return model


def others_said(case) -> list[str]:
    """What the customer's page shows that they did not write: the agent's and staff's messages, in order."""
    return [t.text for t in customer_turns(case["ticket"]) if t.author != "customer"]


def phone_call_logged(case, summary) -> ModelResponse:
    """The model's call logging a phone call with `case`'s customer, `summary` its text (shown on the card)."""
    customer_id = case["ticket"].customer.external_key
    arguments = {"customer_id": customer_id, "summary": summary}
    return ModelResponse(tool_calls=[ToolCall(id="p1", name="log_phone_call", arguments=arguments)])


def reply_via(via, text) -> ModelResponse:
    """`text` as the model's plain reply (via "reply") or through the reply_to_customer tool."""
    if via == "reply":
        return ModelResponse(text=text)
    return ModelResponse(tool_calls=[ToolCall(id="s1", name="reply_to_customer", arguments={"message": text})])


def looked_up_then_said(via, text, *, order, after, again=True) -> list[ModelResponse]:
    """The scripted answers: `order` looked up, `text` said (twice, for the re-ask, unless not `again`), then
    `after` as the plain reply."""
    lookup = ModelResponse(tool_calls=[ToolCall(id="g1", name="get_order", arguments={"order_number": order})])
    reply = reply_via(via, text)
    return [lookup, reply, *([reply] if again else []), ModelResponse(text=after)]


@pytest.fixture
def case(django_user_model):
    return open_case(
        django_user_model,
        f"The lamp on {ORDER} arrived broken, can I get 15.00 back?",
        order=ORDER,
        subject="Refund",
        prices=(12999,),
    )


# The calls the promise tests script on `case`: its order looked up, then 15.00 USD refunded on it.
LOOKUP = ModelResponse(tool_calls=[ToolCall(id="g1", name="get_order", arguments={"order_number": ORDER})])
REFUND = ModelResponse(
    tool_calls=[
        ToolCall(
            id="r1",
            name="issue_refund",
            arguments={"order_number": ORDER, "amount": "15.00", "currency": "USD", "reason": "damaged"},
        )
    ]
)
