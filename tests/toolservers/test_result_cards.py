"""A tool server's results on the desk read as cards written from its declaration file: the retail
example as a real subprocess, a scripted model through the real loop, the desk page as staff see it.
A tool the declaration file leaves out (the misbehaving server's `peek`) gets no card: readable JSON."""

from __future__ import annotations

import re

import pytest

from sundry.agent.services import customer_message_post
from sundry.desk.lifecycle import ticket_create
from sundry.tickets.models import Turn
from sundry.tooling.messages import ModelResponse
from sundry.toolservers.models import ToolServer
from tests.factories import CustomerFactory, TicketClassFactory
from tests.tickets.test_result_cards import desk, outside_raw
from tests.toolservers.conftest import FIXTURES, odd_command
from tests.toolservers.test_retail_ticket import EMAIL, GIFT_CARD, KETTLE, ORDER, USER, call, run

pytestmark = pytest.mark.django_db(transaction=True)


def result_turn(ticket, call_id) -> int:
    return Turn.objects.get(ticket=ticket, kind=Turn.Kind.TOOL_RESULT, payload__call_id=call_id).number


def test_a_tool_servers_results_are_cards_with_fields_and_described_ids(client, retail_server):
    ticket = ticket_create(
        customer=CustomerFactory(name="Aarav Anderson", email=EMAIL).person,
        ticket_class=retail_server.ticket_class,
        subject="Tea kettle",
    )
    customer_message_post(ticket=ticket, wake=False, text=f"Hi, I'm Aarav ({EMAIL}). Where is order {ORDER}?")
    run(
        ticket,
        call("find_user_id_by_email", "c1", email=EMAIL),
        call("get_user_details", "c2", user_id=USER),
        call("get_order_details", "c3", order_id=ORDER),
        ModelResponse(text="It was delivered."),
    )
    page = desk(client, ticket)

    order = outside_raw(page[result_turn(ticket, "c3")])
    assert '<div class="tool-card result-card" data-tool="get_order_details">' in order
    # Title from the tool's name; what it does from the server's own listing of it.
    assert "<b>Get order details</b>" in order and "Get the status and details of an order." in order
    assert "<dt>Status</dt><dd>delivered</dd>" in order
    # Its IDs with what they are: the order and the kettle by the file's describe templates, the gift
    # card (which this result does not describe) by the ledger, from get_user_details.
    assert re.search(rf'<span class="muted">Order</span> <code class="id">{ORDER}</code> · Tea Kettle', order), order
    assert re.search(rf'<span class="muted">Item</span> <code class="id">{KETTLE}</code> · Tea Kettle', order)
    assert re.search(
        rf'<span class="muted">Payment method</span> <code class="id">{GIFT_CARD}</code> · gift_card', order
    ), order
    assert "paid" in order and "refundable" in order  # the order's figures, by the file's totals declaration
    assert '<pre class="result">' not in order and "&quot;" not in order  # no JSON without a click

    user = outside_raw(page[result_turn(ticket, "c2")])
    assert "<b>Get user details</b>" in user and "<dt>Name</dt><dd>Aarav Anderson</dd>" in user
    assert re.search(rf'<code class="id">{USER}</code> · Aarav Anderson · {re.escape(EMAIL)}', user), user
    # A bare-text answer (the user ID alone) is a card too: the ID the file's pattern finds in it.
    found = outside_raw(page[result_turn(ticket, "c1")])
    assert "<b>Find user id by email</b>" in found and f'<code class="id">{USER}</code>' in found


def test_a_tool_the_declaration_file_leaves_out_shows_readable_json(client):
    tclass = TicketClassFactory(approval_rules={})
    ToolServer.objects.create(
        ticket_class=tclass,
        name="odd",
        command=odd_command(),
        declaration_path=str(FIXTURES / "odd.declarations.json"),
        timeout_seconds=5,
        connect_timeout_seconds=20,
    )
    ticket = ticket_create(customer=CustomerFactory().person, ticket_class=tclass, subject="Record REC-10001")
    customer_message_post(ticket=ticket, wake=False, text="Please look at record REC-10001.")
    run(
        ticket,
        call("lookup_ticket", "u1", ref="REC-10001"),
        call("peek", "u2", ref="REC-10001"),
        ModelResponse(text="Found it."),
    )
    page = desk(client, ticket)
    declared, undeclared = (outside_raw(page[result_turn(ticket, c)]) for c in ("u1", "u2"))
    assert "<b>Lookup ticket</b>" in declared and '<code class="id">REC-10001</code>' in declared
    assert "tool-card" not in undeclared and '<span class="pill warn">undeclared</span>' in undeclared
    assert re.search(r'<pre class="result">\{\n &quot;', undeclared), undeclared  # indented JSON, not a card
