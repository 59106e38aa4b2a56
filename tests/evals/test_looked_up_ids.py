"""A lookup that answered verifies the IDs it was asked about, and the harness judges a refused
ID against what the guard saw before the call — never the call's own result."""

from __future__ import annotations

import json

import pytest

from sundry.evals import importers
from sundry.evals.harness import HarnessConfig, run_ticket
from sundry.tooling.domain import Domain


def _call(cid, name, **args):
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": cid, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}],
    }


def _result(cid, content):
    return {
        "role": "tool",
        "tool_call_id": cid,
        "content": content if isinstance(content, str) else json.dumps(content),
    }


def booking(user="sara_doe_4961", typed=True):
    """The customer types their user ID and a flight; the agent looks both up (neither answer repeats
    the ID it was asked about) and books."""
    said = (
        f"Hi, my user ID is {user}. Please book me on flight HAT123 on 2024-05-20."
        if typed
        else "Hi, please book me on flight HAT123 on 2024-05-20."
    )
    messages = [
        {"role": "user", "content": said},
        _call("c1", "get_user_details", user_id=user),
        _result(
            "c1",
            {
                "name": {"first_name": "Sara", "last_name": "Doe"},
                "payment_methods": {"credit_card_1": {"source": "credit_card", "id": "credit_card_1"}},
            },
        ),
        _call("c2", "get_flight_status", flight_number="HAT123", date="2024-05-20"),
        _result("c2", "available"),
        _call(
            "c3",
            "book_reservation",
            user_id=user,
            origin="JFK",
            destination="SEA",
            flight_type="one_way",
            cabin="economy",
            flights=[{"flight_number": "HAT123", "date": "2024-05-20"}],
            passengers=[{"first_name": "Sara", "last_name": "Doe", "dob": "1990-01-01"}],
            payment_methods=[{"payment_id": "credit_card_1", "amount": 120}],
            total_baggages=0,
            nonfree_baggages=0,
            insurance="no",
        ),
        _result("c3", {"reservation_id": "ZZ9Q4X", "user_id": user, "status": "booked"}),
        {"role": "assistant", "content": "You're booked on HAT123: reservation ZZ9Q4X."},
    ]
    return importers.openai_messages(messages, ticket_id="booking", domain="airline")


def refused(result):
    return {(m["value"], m["class"]) for m in result.made_up}


def test_an_id_a_lookup_answered_about_is_usable_for_the_write_after_it():
    result = run_ticket(booking(), HarnessConfig())
    assert refused(result) == set()
    s = result.stats["sundry"]
    assert s["id_checks"] >= 3 and s["id_ok"] == s["id_checks"]


def test_control_without_lookup_verification_the_write_is_refused(monkeypatch):
    monkeypatch.setattr(Domain, "looked_up", lambda self, tool, arguments, result: [])
    result = run_ticket(booking(), HarnessConfig())
    assert ("sara_doe_4961", "typed_not_looked_up") in refused(result)
    assert ("HAT123", "typed_not_looked_up") in refused(result)


def test_a_write_whose_own_result_echoes_a_made_up_id_is_counted_as_made_up():
    """Nobody typed or returned `ghost_user_1` before the booking; its own result repeating it
    does not make it 'recorded in the same response as its lookup'."""
    ticket = booking(user="ghost_user_1", typed=False)
    # The lookup of the made-up user failed, as a real server's would.
    for t in ticket.turns:
        if t.kind == "tool_result" and t.payload.get("call_id") == "c1":
            t.text, t.payload["ok"] = "Error: user not found", False
    result = run_ticket(ticket, HarnessConfig())
    assert ("ghost_user_1", "made_up") in refused(result)
    assert result.stats["sundry"]["refused_made_up"] >= 1
    assert result.stats["sundry"]["refused_same_response"] == 0


@pytest.mark.parametrize("answer", ["", "[]", "{}"])
def test_an_empty_answer_verifies_nothing(answer):
    from sundry.evals.domains import DOMAINS

    d = DOMAINS["airline"]
    assert d.domain.looked_up("get_flight_status", {"flight_number": "HAT123"}, answer) == []
    assert d.domain.looked_up("get_flight_status", {"flight_number": "HAT123"}, "available") == [("HAT123", "flight")]
    # A write proves nothing by answering.
    assert d.domain.looked_up("cancel_reservation", {"reservation_id": "ABC123"}, '{"ok": true}') == []


@pytest.mark.django_db
def test_the_live_ledger_marks_a_looked_up_id_verified():
    """The services do what the replay does: the customer's typed order number, unverified, becomes
    verified when a lookup asked about it answers — whether or not the answer repeats it."""
    from sundry.context.models import LedgerEntry
    from sundry.context.services import ledger_harvest, ledger_note_customer_ids
    from sundry.desk.lifecycle import ticket_create
    from tests.factories import CustomerFactory, TicketClassFactory

    ticket = ticket_create(customer=CustomerFactory().person, ticket_class=TicketClassFactory(), subject="Help")
    ledger_note_customer_ids(ticket=ticket, turn=1, text="Where is SU-77777?")
    assert not LedgerEntry.objects.get(ticket=ticket, value="SU-77777").verified
    ledger_harvest(
        ticket=ticket,
        turn=2,
        tool_name="get_order",
        result={"status": "shipped"},
        arguments={"order_number": "SU-77777"},
    )
    assert LedgerEntry.objects.get(ticket=ticket, value="SU-77777").verified
    # Control: the same answer without the call's arguments verifies nothing.
    ledger_note_customer_ids(ticket=ticket, turn=3, text="And SU-77778?")
    ledger_harvest(ticket=ticket, turn=4, tool_name="get_order", result={"status": "shipped"})
    assert not LedgerEntry.objects.get(ticket=ticket, value="SU-77778").verified


def _v1_file(tmp_path, trajectories):
    path = tmp_path / "tau_v1.json"
    path.write_text(json.dumps([{"task_id": n, "reward": 1.0, "traj": t} for n, t in enumerate(trajectories)]))
    return path


def test_a_trajectory_without_tool_calls_takes_the_files_domain(tmp_path):
    """A τ-bench v1 file: its first trajectory has no tool call at all (the customer gave up)."""
    quiet = [
        {"role": "system", "content": "policy"},
        {"role": "user", "content": "Never mind, bye."},
        {"role": "assistant", "content": "Goodbye!"},
    ]
    worked = [
        {"role": "user", "content": "my user ID is sara_doe_4961"},
        _call("c1", "get_reservation_details", reservation_id="ZZ9Q4X"),
        _result("c1", {"reservation_id": "ZZ9Q4X"}),
        {"role": "assistant", "content": "Found you."},
    ]
    tickets = importers.openai_file(_v1_file(tmp_path, [quiet, worked]))
    assert [t.domain for t in tickets] == ["airline", "airline"]
    assert [t.id for t in tickets] == ["airline-0", "airline-1"]
    run_ticket(tickets[0], HarnessConfig())  # and it runs


def test_a_file_with_no_tool_call_at_all_is_refused_naming_the_fix(tmp_path):
    quiet = [{"role": "user", "content": "Never mind, bye."}, {"role": "assistant", "content": "Goodbye!"}]
    with pytest.raises(
        importers.ImportFailed,
        match="ticket 0: no tool call names a known domain .no tool calls.; pass --domain with one of: airline, ",
    ):
        importers.openai_file(_v1_file(tmp_path, [quiet, quiet]))
    assert [t.domain for t in importers.openai_file(_v1_file(tmp_path, [quiet]), domain="retail")] == ["retail"]
