"""Importers: τ²-bench results, OpenAI message lists and our own export map onto recorded tickets."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sundry.evals import importers, records
from sundry.evals.records import RecordedTicket, RecordedTurn

FIXTURES = Path(__file__).parent / "fixtures"


def test_tau2_results_become_turns_with_calls_paired_to_results():
    [ticket] = importers.tau2_results(FIXTURES / "tau2_retail_small.json")
    assert ticket.source == "tau2" and ticket.domain == "retail" and ticket.id == "retail-7"
    assert [t.number for t in ticket.turns] == list(range(1, len(ticket.turns) + 1))
    first_call = next(t for t in ticket.turns if t.kind == "tool_call")
    assert first_call.author == "agent"
    assert first_call.payload["calls"] == [
        {"id": "c1", "name": "find_user_id_by_email", "arguments": {"email": "kai.moreno@example.com"}}
    ]
    result = ticket.turns[first_call.number]  # the next turn
    assert result.kind == "tool_result" and result.text == "kai_moreno_4471"
    assert result.payload == {"call_id": "c1", "name": "find_user_id_by_email", "ok": True}
    # Two calls in one assistant message stay one turn; the failed one is marked not ok.
    double = [t for t in ticket.turns if t.kind == "tool_call" and len(t.payload["calls"]) == 2]
    assert len(double) == 1
    failed = next(t for t in ticket.turns if t.payload.get("call_id") == "c7")
    assert failed.payload["ok"] is False
    assert ticket.meta["reward"] == 1.0


def test_device_tools_the_customer_ran_are_not_agent_turns():
    [ticket] = importers.tau2_results(FIXTURES / "tau2_telecom_small.json")
    names = [c["name"] for t in ticket.turns if t.kind == "tool_call" for c in t.payload["calls"]]
    assert names == ["get_customer_by_phone", "send_payment_request"]
    assert not any("Status Bar" in t.text for t in ticket.turns)
    assert ticket.meta["customer_device_calls_skipped"] == 1
    # The customer's words after the device check are still there.
    assert any(t.author == "customer" and "4G" in t.text for t in ticket.turns)


def test_openai_messages_with_string_arguments_and_legacy_function_calls():
    [ticket] = importers.openai_file(FIXTURES / "openai_airline_small.json")
    assert ticket.domain == "airline"  # guessed from the tool names
    calls = [c for t in ticket.turns if t.kind == "tool_call" for c in t.payload["calls"]]
    assert calls[0]["arguments"] == {"reservation_id": "ZX9Q2A"}  # parsed from the JSON string
    assert calls[1]["name"] == "cancel_reservation"
    results = [t for t in ticket.turns if t.kind == "tool_result"]
    assert [r.payload["call_id"] for r in results] == [calls[0]["id"], calls[1]["id"]]
    assert ticket.turns[-1].text == "Done, it is cancelled."  # content given as parts
    assert not any("airline agent" in t.text for t in ticket.turns)  # their system prompt is not replayed


def test_malformed_arguments_are_kept_for_the_guard_to_refuse():
    ticket = importers.openai_messages(
        [
            {"role": "user", "content": "hi"},
            {
                "role": "assistant",
                "tool_calls": [{"id": "x", "function": {"name": "get_user_details", "arguments": "{oops"}}],
            },
            {"role": "tool", "tool_call_id": "x", "content": "Error: bad arguments"},
        ],
        ticket_id="t",
        domain="retail",
    )
    assert ticket.turns[1].payload["calls"][0]["arguments"] == "{oops"


def test_load_any_picks_the_format_and_round_trips_our_own(tmp_path):
    ticket = RecordedTicket(
        id="sundry-9",
        source="sundry",
        domain="demo_shop",
        customer_id="cus_00000001",
        turns=[RecordedTurn(number=1, author="customer", kind="message", text="Where is SU-40110?")],
    )
    path = records.dump([ticket], tmp_path / "one.json")
    assert json.loads(path.read_text())["format"] == records.FORMAT
    assert importers.load_any(path) == [ticket]
    assert importers.load_any(FIXTURES / "tau2_telecom_small.json")[0].source == "tau2"
    assert importers.load_any(FIXTURES / "openai_airline_small.json")[0].source == "openai"


def test_an_unknown_file_says_what_was_expected(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"hello": "world"}))
    with pytest.raises(importers.ImportFailed, match="OpenAI message list"):
        importers.load_any(bad)


@pytest.mark.django_db
def test_export_of_a_stored_ticket():
    from sundry.desk.lifecycle import ticket_create
    from sundry.tickets.models import Turn
    from sundry.tickets.services import turn_append
    from tests.factories import CustomerFactory, TicketClassFactory

    ticket = ticket_create(customer=CustomerFactory().person, ticket_class=TicketClassFactory(), subject="Lamp")
    turn_append(ticket=ticket, author=Turn.Author.CUSTOMER, text="Where is my lamp?")
    turn_append(
        ticket=ticket,
        author=Turn.Author.AGENT,
        kind=Turn.Kind.TOOL_CALL,
        payload={"calls": [{"id": "a", "name": "search_orders", "arguments": {}}]},
    )
    exported = records.export_ticket(ticket)
    assert exported.source == "sundry" and exported.domain == "demo_shop"
    assert exported.customer_id == ticket.customer.external_key
    assert [(t.number, t.author, t.kind) for t in exported.turns] == [
        (1, "customer", "message"),
        (2, "agent", "tool_call"),
    ]


@pytest.mark.parametrize(
    "content,expected",
    [
        ("hello\n", "neither JSON nor JSON lines (line 1"),
        ('{"a": 1}', "holds no OpenAI message list"),
        (None, "cannot be read: No such file or directory"),
        (b"\xff\xfe\x00garbage", "not UTF-8 text"),
    ],
)
def test_the_harness_refuses_a_file_it_cannot_import_with_the_reason(tmp_path, content, expected):
    from django.core.management import CommandError, call_command

    path = tmp_path / "trace.json"
    if isinstance(content, bytes):
        path.write_bytes(content)
    elif content is not None:
        path.write_text(content)
    with pytest.raises(CommandError, match="Cannot import the tickets") as exc:
        call_command("safety_harness", traces=[str(path)], demo="none", out=str(tmp_path / "reports"))
    assert expected in str(exc.value) and str(path) in str(exc.value)
    assert not (tmp_path / "reports").exists()  # nothing half-written
