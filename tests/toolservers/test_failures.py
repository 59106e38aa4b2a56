"""A tool server that hangs, dies or offers tools its declaration file leaves out.

The step never sticks: a call past the server's timeout, or to a server that died,
gives the model an error result and the ticket an attention flag, and the next call
reaches a fresh connection. An undeclared tool is usable, its result is not
harvested, and a call that may write waits for staff, then runs outside the
approval's transaction.
"""

from __future__ import annotations

import json
import time

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from sundry.agent.loop import agent_run
from sundry.agent.models import AgentStep, HeldAction
from sundry.agent.provider.gateway import Gateway
from sundry.agent.provider.scripted import ScriptedModel
from sundry.agent.services import customer_message_post, held_action_decide
from sundry.context.models import ActionTaken, LedgerEntry
from sundry.desk.lifecycle import ticket_create
from sundry.tickets.models import Ticket, Turn
from sundry.tooling.messages import ModelResponse, ToolCall
from sundry.toolservers import catalog
from sundry.toolservers.models import ToolServer
from tests.factories import CustomerFactory, TicketClassFactory, customer_confirms
from tests.toolservers.conftest import FIXTURES, odd_command

pytestmark = pytest.mark.django_db(transaction=True)


def call(name, _id, **arguments):
    return ModelResponse(tool_calls=[ToolCall(id=_id, name=name, arguments=arguments)])


def run(ticket, *steps):
    model = ScriptedModel(list(steps))
    agent_run(ticket.pk, gateway=Gateway(override=model))
    assert model.remaining == 0
    return model


def result(ticket, call_id) -> Turn:
    return Turn.objects.get(ticket=ticket, kind=Turn.Kind.TOOL_RESULT, payload__call_id=call_id)


@pytest.fixture
def odd(request):
    tclass = TicketClassFactory(approval_rules={})
    server = ToolServer.objects.create(
        ticket_class=tclass,
        name="odd",
        command=odd_command(),
        declaration_path=str(FIXTURES / "odd.declarations.json"),
        timeout_seconds=2,
        connect_timeout_seconds=20,
    )  # a hang is 2 s; starting may take longer
    ticket = ticket_create(customer=CustomerFactory().person, ticket_class=tclass, subject="Record REC-10001")
    customer_message_post(ticket=ticket, wake=False, text="Please look at record REC-10001.")
    return server, ticket


def test_a_hanging_server_gives_an_error_result_and_a_flag_and_the_step_goes_on(odd):
    server, ticket = odd
    started = time.monotonic()
    run(
        ticket,
        call("slow_lookup", "s1", ref="REC-10001"),
        call("lookup_ticket", "s2", ref="REC-10001"),
        ModelResponse(text="Found it."),
    )
    elapsed = time.monotonic() - started
    hung = result(ticket, "s1")
    assert hung.payload["ok"] is False and hung.payload["server_failed"] is True
    assert "no answer within 2 s" in hung.text
    # The step went on: the next call reached a fresh connection and the run replied.
    assert result(ticket, "s2").payload["ok"] is True
    assert Turn.objects.filter(ticket=ticket, kind=Turn.Kind.MESSAGE, author=Turn.Author.AGENT).exists()
    assert elapsed < 45, f"the run took {elapsed:.0f} s: a hung call held it up"
    # The flag was raised, then cleared when the server answered again; the turn log keeps the failure.
    assert AgentStep.objects.filter(ticket=ticket).count() == 3
    assert Ticket.objects.get(pk=ticket.pk).attention == ""


def test_a_hang_as_the_last_call_leaves_the_flag_for_staff(odd):
    server, ticket = odd
    run(ticket, call("slow_lookup", "s1", ref="REC-10001"), ModelResponse(text="It is being looked into."))
    ticket.refresh_from_db()
    assert ticket.attention.startswith("Tool server odd failed on slow_lookup")


def test_a_server_that_dies_mid_call_gives_an_error_and_a_flag_then_restarts(odd):
    server, ticket = odd
    run(ticket, call("crash", "k1", ref="REC-10001"), ModelResponse(text="Looking into it."))
    died = result(ticket, "k1")
    assert died.payload["ok"] is False and died.payload["server_failed"] is True
    ticket.refresh_from_db()
    assert "Tool server odd failed on crash" in ticket.attention
    customer_message_post(ticket=ticket, wake=False, text="Any news on REC-10001?")
    run(ticket, call("lookup_ticket", "k2", ref="REC-10001"), ModelResponse(text="Here it is."))
    assert result(ticket, "k2").payload["ok"] is True
    ticket.refresh_from_db()
    assert ticket.attention == ""  # the server answered again: its own flag cleared


def test_undeclared_tools_are_usable_unharvested_and_their_writes_held(odd):
    server, ticket = odd
    model = run(
        ticket,
        call("lookup_ticket", "u1", ref="REC-10001"),
        call("peek", "u2", ref="REC-10001"),
        call("stamp_record", "u3", ref="REC-10001", note="checked"),
        ModelResponse(text="With staff."),
    )
    offered = {t.name for t in model.requests[0].tools}
    assert {"peek", "stamp_record", "lookup_ticket"} <= offered
    # A declared lookup is harvested; an undeclared read-only tool runs, is marked, and is not harvested.
    ledger = set(LedgerEntry.objects.filter(ticket=ticket).values_list("value", flat=True))
    assert {"REC-10001", "OWN-77881"} <= ledger
    peek = result(ticket, "u2")
    assert peek.payload["ok"] is True and peek.payload["undeclared"] is True and "SEC-99120" in peek.text
    assert "SEC-99120" not in ledger
    # An undeclared tool that may write is held for staff.
    held = HeldAction.objects.get(ticket=ticket)
    assert held.tool == "stamp_record" and result(ticket, "u3").payload["guard"] == "approval"
    # Approved, it runs once, outside the approval's transaction; still not harvested.
    staff = get_user_model().objects.create_user("ann", password="pw", is_staff=True)
    held_action_decide(held_id=held.pk, ticket=ticket, approve=True, user=staff, wake=False)
    held.refresh_from_db()
    assert held.status == HeldAction.Status.EXECUTED
    stamped = Turn.objects.get(pk__gt=0, ticket=ticket, kind=Turn.Kind.TOOL_RESULT, payload__call_id="u3-approved")
    assert "STAMP-00001" in stamped.text and stamped.payload["undeclared"] is True
    assert not LedgerEntry.objects.filter(ticket=ticket, value="STAMP-00001").exists()
    # Staff see which results came from undeclared tools.
    client = Client()
    client.force_login(staff)
    page = client.get(f"/desk/tickets/{ticket.pk}/").content.decode()
    assert page.count('<span class="pill warn">undeclared</span> <b>') == 2  # peek, and the approved stamp
    assert "<b>peek</b> from tool server odd" in page and "<b>lookup_ticket</b> from" not in page


def test_undeclared_writes_run_when_the_server_is_set_not_to_hold_them(odd):
    """The hold is the server's setting, so the check above can fail: turned off, the write runs."""
    server, ticket = odd
    ToolServer.objects.filter(pk=server.pk).update(hold_undeclared_writes=False)
    catalog.forget()
    run(ticket, call("stamp_record", "w1", ref="REC-10001", note="checked"), ModelResponse(text="Stamped."))
    assert result(ticket, "w1").payload["ok"] is True and not HeldAction.objects.filter(ticket=ticket).exists()


def test_an_unreachable_server_keeps_its_last_listing_and_every_call_fails_with_a_flag(odd, tool_limits):
    server, ticket = odd
    tool_limits.TOOL_COMMANDS = [*tool_limits.TOOL_COMMANDS, "python -c 'import sys; sys.exit(1)'"]  # starts, exits
    catalog.class_tools(server.ticket_class)  # listed once, and kept on the row
    server.refresh_from_db()
    assert {t["name"] for t in server.listed_tools} >= {"lookup_ticket", "slow_lookup"}
    ToolServer.objects.filter(pk=server.pk).update(command="python -c 'import sys; sys.exit(1)'")
    catalog.forget()
    from sundry.tooling import mcp_client

    mcp_client.close_all()
    model = run(ticket, call("lookup_ticket", "n1", ref="REC-10001"), ModelResponse(text="Looking into it."))
    assert "lookup_ticket" in {t.name for t in model.requests[0].tools}
    assert result(ticket, "n1").payload["server_failed"] is True
    assert "SUNDRY_TOOL_COMMANDS" not in result(ticket, "n1").text  # it ran and died; the limits did not stop it
    assert Ticket.objects.get(pk=ticket.pk).attention.startswith("Tool server odd failed on lookup_ticket")


def test_money_a_remote_write_moved_is_on_its_action(odd):
    server, ticket = odd
    customer_message_post(ticket=ticket, wake=False, text="Please refund 12.50 on record REC-10001.")
    run(
        ticket,
        call("lookup_ticket", "m1", ref="REC-10001"),
        call("refund_record", "m2", ref="REC-10001", amount="12.50"),
        ModelResponse(text="Please confirm the refund on the card."),
    )
    # The declaration file says it moves money: a card for the customer, nothing sent to the server yet.
    proposed = result(ticket, "m2")
    assert proposed.payload["ok"] is False and proposed.payload["guard"] == "confirmation"
    assert not ActionTaken.objects.filter(ticket=ticket).exists()
    [card] = customer_confirms(ticket)
    assert [e["id"] for e in card.card["entities"]] == ["REC-10001"] and card.card["why"] == "it moves money"
    assert card.outcome == "executed" and result(ticket, "m2-confirmed").payload["ok"] is True
    action = ActionTaken.objects.get(ticket=ticket)
    assert (action.tool, action.target, action.amount_cents, action.currency) == (
        "refund_record",
        "REC-10001",
        1250,
        "USD",
    )


@pytest.mark.parametrize("limit", [4096, 10**7], ids=["cut", "control-whole"])
def test_a_runaway_result_is_cut_told_and_not_harvested(odd, settings, limit):
    settings.TOOL_RESULT_MAX_BYTES = limit
    server, ticket = odd
    run(ticket, call("bulky_lookup", "b1", ref="REC-10001"), ModelResponse(text="It has a long history."))
    got = result(ticket, "b1")
    owner_known = LedgerEntry.objects.filter(ticket=ticket, value="OWN-77881").exists()
    if limit == 4096:
        assert got.payload["truncated"]["shown_bytes"] == 4096 and got.payload["truncated"]["total_bytes"] > 190_000
        assert len(got.text.encode()) < 4096 + 400 and "this result was cut at 4,096 of" in got.text
        assert not owner_known  # nothing in a cut result counts as looked up
    else:  # control: the same answer, whole, is harvested
        assert "truncated" not in got.payload and len(got.text) > 190_000 and owner_known


@pytest.mark.parametrize("opaque", [True, False], ids=["opaque", "control-not-opaque"])
def test_a_tool_taking_free_form_queries_waits_for_staff(odd, opaque, tmp_path, settings):
    """run_sql's statement names records the guards cannot see: declared opaque, each call is held for
    staff and nothing reaches the server. Control: the same declaration without `opaque` runs it."""
    server, ticket = odd
    if not opaque:
        decl = json.loads((FIXTURES / "odd.declarations.json").read_text())
        decl["tools"]["run_sql"]["opaque"] = False
        (tmp_path / "odd.json").write_text(json.dumps(decl))
        settings.TOOL_DECLARATIONS_DIRS = [tmp_path]
        ToolServer.objects.filter(pk=server.pk).update(declaration_path=str(tmp_path / "odd.json"))
        catalog.forget()
    statement = "UPDATE records SET total = 0 WHERE ref = 'REC-10002'"
    run(
        ticket,
        call("run_sql", "q1", sql=statement),
        call("lookup_ticket", "q2", ref="REC-10001"),
        ModelResponse(text="Thank you for your patience."),
    )
    stamps = json.loads(result(ticket, "q2").text)["stamps"]
    held = HeldAction.objects.filter(ticket=ticket, tool="run_sql")
    if opaque:
        assert held.count() == 1 and "free-form query" in held.get().reason and stamps == []
    else:
        assert not held.exists() and stamps == [f"sql: {statement}"]


def test_test_connection_warns_of_a_query_tool_not_declared_opaque(odd, tmp_path, settings):
    from sundry.toolservers import checks

    server, _ticket = odd
    assert not [w for w in checks.test_connection(server).warnings if "free-form query" in w]
    decl = json.loads((FIXTURES / "odd.declarations.json").read_text())
    del decl["tools"]["run_sql"]["opaque"]
    (tmp_path / "odd.json").write_text(json.dumps(decl))
    settings.TOOL_DECLARATIONS_DIRS = [tmp_path]
    ToolServer.objects.filter(pk=server.pk).update(declaration_path=str(tmp_path / "odd.json"))
    server.refresh_from_db()
    warned = [w for w in checks.test_connection(server).warnings if "free-form query" in w]
    assert warned == [
        "run_sql: takes a free-form query (sql); the guards cannot see which records it touches. "
        'Declare it "opaque": true so each call waits for staff.'
    ]
