"""IDs inside a plain-text result are never counted as looked up: a note quoting a customer cannot
make an ID usable in a write. A declaration's `bare` pattern must match a whole result (an ID the
tool returns alone), so a pattern that would find IDs inside free text is refused at load."""

from __future__ import annotations

import json

import pytest

from sundry.agent.loop import agent_run
from sundry.agent.provider.gateway import Gateway
from sundry.agent.provider.scripted import ScriptedModel
from sundry.agent.services import customer_message_post
from sundry.context.models import LedgerEntry
from sundry.desk.lifecycle import ticket_create
from sundry.tickets.models import Turn
from sundry.tooling.messages import ModelResponse, ToolCall
from sundry.toolservers import declfile
from sundry.toolservers.models import ToolServer
from tests.factories import CustomerFactory, TicketClassFactory
from tests.toolservers.conftest import FIXTURES, odd_command

ODD_DECL = FIXTURES / "odd.declarations.json"


def call(name, _id, **arguments):
    return ModelResponse(tool_calls=[ToolCall(id=_id, name=name, arguments=arguments)])


@pytest.mark.django_db(transaction=True)  # remote calls run outside transactions
@pytest.mark.parametrize("read_with", ["read_note", "lookup_ticket"], ids=["plain-text-note", "control-lookup"])
def test_an_id_a_plain_text_result_mentions_is_not_usable_in_a_write(read_with):
    tclass = TicketClassFactory(approval_rules={})
    ToolServer.objects.create(
        ticket_class=tclass,
        name="odd",
        command=odd_command(),
        timeout_seconds=10,
        connect_timeout_seconds=20,
        declaration_path=str(ODD_DECL),
    )
    ticket = ticket_create(customer=CustomerFactory().person, ticket_class=tclass, subject="Record REC-10001")
    if read_with == "read_note":
        ref, text = "REC-10001", "Please look at record REC-10001."
    else:  # the control: the customer names the record, a declared lookup returns it
        ref, text = "REC-20002", "Please look at record REC-20002."
    customer_message_post(ticket=ticket, wake=False, text=text)
    model = ScriptedModel(
        [
            call(read_with, "r1", ref=ref),
            call("refund_record", "w1", ref="REC-20002", amount="5.00"),
            ModelResponse(text="Looking into it."),
        ]
    )
    agent_run(ticket.pk, gateway=Gateway(override=model))
    read = Turn.objects.get(ticket=ticket, kind=Turn.Kind.TOOL_RESULT, payload__call_id="r1")
    write = Turn.objects.get(ticket=ticket, payload__call_id="w1")
    if read_with == "read_note":
        assert "REC-20002" in read.text  # the model read it …
        assert write.kind == Turn.Kind.REJECTION and write.payload["guard"] != "confirmation"
        assert "REC-20002" in write.text
        assert not LedgerEntry.objects.filter(ticket=ticket, value="REC-20002", verified=True).exists()
    else:  # looked up in a declared result: the same write passes the ID guard and reaches its card
        assert write.payload["guard"] == "confirmation", write.text


def test_a_bare_pattern_that_would_read_ids_inside_free_text_is_refused_at_load(tmp_path):
    data = json.loads(ODD_DECL.read_text())
    data["tools"]["read_note"]["bare"] = ["(?P<record>REC-\\d{5})"]
    path = tmp_path / "loose.json"
    path.write_text(json.dumps(data))
    with pytest.raises(declfile.DeclarationError, match=r"tools\.read_note\.bare: .* must match the whole result"):
        declfile.load(path)
    data["tools"]["read_note"]["bare"] = ["^\\s*(?P<record>REC-\\d{5})\\s*$"]  # control: the whole result
    path.write_text(json.dumps(data))
    assert declfile.load(path).tools["read_note"].bare
