"""A class's tool servers configured predictably: tool names two servers share are refused at save,
a server's allow and deny lists decide what the model is offered and may call, and a server's own
timeout bounds connecting as well as calling."""

from __future__ import annotations

import json
import re
import time

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from sundry.agent.loop import agent_run
from sundry.agent.provider.gateway import Gateway
from sundry.agent.provider.scripted import ScriptedModel
from sundry.agent.services import customer_message_post
from sundry.desk.lifecycle import ticket_create
from sundry.tickets.models import Turn
from sundry.tooling import mcp_client
from sundry.tooling.messages import ModelResponse, ToolCall
from sundry.toolservers import catalog
from sundry.toolservers.models import ToolServer
from tests.factories import CustomerFactory, TicketClassFactory
from tests.toolservers.conftest import EXAMPLE, FIXTURES, odd_command

pytestmark = pytest.mark.django_db
RETAIL_DECL = EXAMPLE / "retail.declarations.json"
ODD_DECL = FIXTURES / "odd.declarations.json"
RETAIL_TOOLS = sorted(json.loads(RETAIL_DECL.read_text())["tools"])


@pytest.fixture
def admin_client():
    client = Client()
    client.force_login(get_user_model().objects.create_superuser("root", "root@example.com", "pw"))
    return client


def _form(tclass, **overrides):
    data = {
        "ticket_class": tclass.pk,
        "name": "retail",
        "enabled": "on",
        "transport": "stdio",
        "command": "python examples/tau2_retail_mcp/server.py --data ../shared/corpora/tau2/domains/retail",
        "working_dir": "",
        "env_names": "",
        "url": "",
        "header_env": "{}",
        "timeout_seconds": "15",
        "declaration_path": str(RETAIL_DECL),
        "allowed_tools": "",
        "denied_tools": "",
        "hold_undeclared_writes": "on",
        "sample_calls": "{}",
    }
    return {**data, **overrides}


def test_a_second_server_declaring_the_same_tools_is_refused_at_save_naming_both(admin_client):
    tclass = TicketClassFactory(name="Retail", slug="retail")
    assert admin_client.post("/admin/toolservers/toolserver/add/", _form(tclass)).status_code == 302
    page = admin_client.post("/admin/toolservers/toolserver/add/", _form(tclass, name="retail-b"))
    html = page.content.decode()
    assert page.status_code == 200 and "Tool names clash in this class" in html
    assert "&#x27;retail-b&#x27; and &#x27;retail&#x27; both offer calculate, cancel_pending_order" in html
    assert not ToolServer.objects.filter(name="retail-b").exists()
    # Controls: denying the shared names on the second server, or another class, saves.
    denied = _form(tclass, name="retail-b", denied_tools=", ".join(RETAIL_TOOLS))
    assert admin_client.post("/admin/toolservers/toolserver/add/", denied).status_code == 302
    other = TicketClassFactory(name="Other", slug="other")
    assert admin_client.post("/admin/toolservers/toolserver/add/", _form(other, name="retail-c")).status_code == 302


def test_a_clash_only_the_servers_listing_shows_is_warned_by_test_connection_then_refused(admin_client):
    tclass = TicketClassFactory()
    ToolServer.objects.create(
        ticket_class=tclass, name="odd", command=odd_command(), timeout_seconds=10, declaration_path=str(ODD_DECL)
    )
    twin = ToolServer.objects.create(ticket_class=tclass, name="twin", command=odd_command(), timeout_seconds=10)
    # Written past the admin, with no declaration: the class loads the first server's copies only.
    loaded = catalog.class_tools(tclass)
    assert loaded.remote["lookup_ticket"].server_name == "odd"
    assert "twin: lookup_ticket is already a tool of this class; skipped" in loaded.problems
    html = admin_client.post(f"/admin/toolservers/toolserver/{twin.pk}/test-connection/").content.decode()
    assert "&#x27;twin&#x27; and &#x27;odd&#x27; both offer bulky_lookup, crash, lookup_ticket" in html
    # The listing is kept, so saving the twin unchanged is refused; denying its copies saves.
    form = _form(tclass, name="twin", command=odd_command(), declaration_path="", timeout_seconds="10")
    page = admin_client.post(f"/admin/toolservers/toolserver/{twin.pk}/change/", form)
    assert page.status_code == 200 and "Tool names clash in this class" in page.content.decode()
    deny = "bulky_lookup crash lookup_ticket peek read_note refund_record run_sql slow_lookup stamp_record"
    page = admin_client.post(f"/admin/toolservers/toolserver/{twin.pk}/change/", {**form, "denied_tools": deny})
    assert page.status_code == 302
    catalog.forget()
    loaded = catalog.class_tools(tclass)
    assert loaded.problems == [] and loaded.remote["stamp_record"].server_name == "odd"


def _stamps(server) -> list:
    return (
        catalog.class_tools(server.ticket_class)
        and mcp_client.connection(catalog.server_spec(server))
        .call("lookup_ticket", {"ref": "REC-10001"}, 10)
        .data["stamps"]
    )


@pytest.mark.django_db(transaction=True)  # remote calls run outside transactions
@pytest.mark.parametrize("denied", [True, False], ids=["denied", "control-offered"])
def test_a_denied_tool_is_never_offered_and_a_call_to_it_never_reaches_the_server(denied):
    tclass = TicketClassFactory(approval_rules={})
    server = ToolServer.objects.create(
        ticket_class=tclass,
        name="odd",
        command=odd_command(),
        timeout_seconds=10,
        declaration_path=str(ODD_DECL),
        hold_undeclared_writes=False,
        denied_tools="stamp_record, run_sql" if denied else "",
    )
    offered = {s["name"] for s in catalog.class_tools(tclass).spec_list}
    assert ("stamp_record" in offered) is not denied and ("run_sql" in offered) is not denied
    assert "lookup_ticket" in offered
    ticket = ticket_create(customer=CustomerFactory().person, ticket_class=tclass, subject="Record REC-10001")
    customer_message_post(ticket=ticket, wake=False, text="Please stamp record REC-10001 'seen'.")
    model = ScriptedModel(
        [
            ModelResponse(
                tool_calls=[ToolCall(id="c1", name="stamp_record", arguments={"ref": "REC-10001", "note": "seen"})]
            ),
            ModelResponse(text="Thank you for your patience."),
        ]
    )
    agent_run(ticket.pk, gateway=Gateway(override=model))
    refused = Turn.objects.filter(ticket=ticket, kind=Turn.Kind.ERROR, payload__call_id="c1").first()
    # The server's own state says whether the call reached it.
    if denied:
        assert refused is not None and refused.payload["error"] == "unknown_tool"
        assert "stamp_record" not in refused.text.split("Available tools:")[1]
        assert _stamps(server) == []
    else:
        assert refused is None and _stamps(server) == ["seen"]


def test_an_allow_list_offers_only_the_tools_it_names():
    tclass = TicketClassFactory()
    ToolServer.objects.create(
        ticket_class=tclass,
        name="odd",
        command=odd_command(),
        timeout_seconds=10,
        declaration_path=str(ODD_DECL),
        allowed_tools="lookup_ticket",
    )
    assert set(catalog.class_tools(tclass).remote) == {"lookup_ticket"}


@pytest.mark.parametrize(
    "call,connect,waited", [(1.0, None, 1.0), (1.0, 3.0, 3.0)], ids=["the-call-timeout", "its-own-connect-timeout"]
)
def test_the_servers_own_timeout_bounds_connecting(call, connect, waited):
    """A server that never finishes its handshake is given up on after the server's own timeout — its
    connect timeout, else its call timeout — not a fixed 20 s (the two cases are each other's control)."""
    server = ToolServer.objects.create(
        ticket_class=TicketClassFactory(),
        name="mute",
        timeout_seconds=call,
        connect_timeout_seconds=connect,
        command=odd_command() + " --silent",
    )
    started = time.monotonic()
    with pytest.raises(mcp_client.ToolServerError, match=f"did not connect within {waited:g} s"):
        mcp_client.connection(catalog.server_spec(server))
    elapsed = time.monotonic() - started
    assert waited <= elapsed < waited + 10, elapsed


SHOP_TOOLS = ("get_order", "issue_refund", "lookup_customer", "track_parcel", "cancel_order")


@pytest.mark.django_db(transaction=True)  # remote calls run outside transactions
@pytest.mark.parametrize("with_server", [True, False], ids=["tool-server-class", "control-shop-class"])
def test_a_tool_server_class_prompt_names_only_its_own_tools(with_server):
    tclass = TicketClassFactory(approval_rules={})
    if with_server:
        ToolServer.objects.create(
            ticket_class=tclass,
            name="odd",
            command=odd_command(),
            timeout_seconds=10,
            connect_timeout_seconds=20,
            declaration_path=str(ODD_DECL),
        )
    ticket = ticket_create(customer=CustomerFactory().person, ticket_class=tclass, subject="Record REC-10001")
    customer_message_post(ticket=ticket, wake=False, text="Please look at record REC-10001.")
    model = ScriptedModel([ModelResponse(text="Looking.")])
    agent_run(ticket.pk, gateway=Gateway(override=model))
    system = model.requests[0].messages[0].content
    named = [n for n in SHOP_TOOLS if re.search(rf"\b{n}\b", system)]
    assert (named == []) is with_server, named
