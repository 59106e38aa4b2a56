"""Domain descriptions harvest foreign tools' identifiers by path, bare strings included."""

from __future__ import annotations

import json
from pathlib import Path

from sundry.context.lanes import LedgerData, TurnData
from sundry.evals import checks
from sundry.evals.domains import DOMAINS, select
from sundry.toolservers import declfile

ROOT = Path(__file__).resolve().parents[2]
RETAIL_FILE = ROOT / "examples" / "tau2_retail_mcp" / "retail.declarations.json"

RETAIL, AIRLINE, TELECOM = DOMAINS["retail"], DOMAINS["airline"], DOMAINS["telecom"]


def result(text, ok=True):
    return TurnData(1, "tool", "tool_result", text, {"call_id": "x", "ok": ok})


def test_path_language():
    data = {"a": [{"b": "1"}, {"b": "2"}], "m": {"k1": {"id": "v1"}, "k2": {"id": "v2"}}}
    assert select(data, "a[].b") == ["1", "2"]
    assert select(data, "m.~") == ["k1", "k2"]
    assert select(data, "m.*.id") == ["v1", "v2"]
    assert select([[{"f": "x"}, {"f": "y"}], [{"f": "z"}]], "[][].f") == ["x", "y", "z"]
    assert select(data, "missing.path") == []


def test_bare_string_results_are_harvested():
    assert RETAIL.harvest("find_user_id_by_email", result("kai_moreno_4471")) == [("user", "kai_moreno_4471")]
    assert RETAIL.harvest("find_user_id_by_name_zip", result("  mei_kovacs_8020\n")) == [("user", "mei_kovacs_8020")]
    assert TELECOM.harvest(
        "send_payment_request", result("Payment request sent to the customer for bill B1234321")
    ) == [("bill", "B1234321")]
    assert AIRLINE.harvest(
        "send_certificate", result("Certificate certificate_3221322 added to user noah_muller_9847 with amount 100.")
    ) == [("payment", "certificate_3221322"), ("user", "noah_muller_9847")]
    # A failed call harvests nothing, and neither does prose that merely looks like an id.
    assert RETAIL.harvest("find_user_id_by_email", result("Error: user not found", ok=False)) == []
    assert RETAIL.harvest("find_user_id_by_email", result("No user with that email")) == []


def test_json_results_by_path_including_mapping_keys():
    user = {
        "user_id": "kai_moreno_4471",
        "payment_methods": {"gift_card_9990001": {"id": "gift_card_9990001"}},
        "orders": ["#W1000001"],
        "email": "kai@example.com",
    }
    got = RETAIL.harvest("get_user_details", result(json.dumps(user)))
    assert ("payment_method", "gift_card_9990001") in got and ("order", "#W1000001") in got
    assert ("user", "kai_moreno_4471") in got
    assert all(v != "kai@example.com" for _, v in got)  # not an identifier field
    flights = [[{"flight_number": "HAT110"}, {"flight_number": "HAT172"}]]
    assert AIRLINE.harvest("search_onestop_flight", result(json.dumps(flights))) == [
        ("flight", "HAT110"),
        ("flight", "HAT172"),
    ]
    # get_details_by_id takes any id: the kind comes from the value's shape.
    assert TELECOM.id_args("get_details_by_id", {"id": "L1002"}) == [("id", "line", "L1002")]


def test_nested_argument_ids_reach_the_guard():
    args = {
        "user_id": "ana_lima_1203",
        "flights": [{"flight_number": "HAT101", "date": "2024-05-01"}],
        "payment_methods": [{"payment_id": "credit_card_0000000", "amount": 100}],
    }
    ids = AIRLINE.id_args("book_reservation", args)
    assert ("payment_methods[].payment_id", "payment", "credit_card_0000000") in ids
    known = [
        LedgerData("user", "ana_lima_1203", "user", True, 1, 1),
        LedgerData("flight", "HAT101", "flight", True, 2, 2),
    ]
    verdict = checks.guard_verdict(
        AIRLINE, "book_reservation", args, ledger=known, recent=frozenset(), typed=frozenset()
    )
    assert verdict.decision == "reject" and verdict.guard == "id" and "credit_card_0000000" in verdict.reason
    known.append(LedgerData("payment", "credit_card_0000000", "payment", True, 3, 3))
    verdict = checks.guard_verdict(
        AIRLINE, "book_reservation", args, ledger=known, recent=frozenset(), typed=frozenset()
    )
    assert verdict.decision == "allow"


def test_customer_typed_ids_are_spotted_by_shape():
    assert RETAIL.typed_ids("It's order #W1000001 on account kai_moreno_4471.") == [
        ("order", "#W1000001"),
        ("user", "kai_moreno_4471"),
    ]
    assert AIRLINE.typed_ids("PLEASE help with ZX9Q2A") == [("reservation", "ZX9Q2A")]
    assert TELECOM.typed_ids("my number is 555-123-2002") == [("phone", "555-123-2002")]


def test_sundry_rule_checks_map_onto_the_domain_tools():
    assert RETAIL.enforcement("Please do not cancel anything.") == {"block_tools": ["cancel_pending_order"]}
    assert AIRLINE.enforcement("Never cancel my trip.") == {"block_tools": ["cancel_reservation"]}
    assert RETAIL.enforcement("Don't refund to my gift card.") == {}


def test_retail_is_described_once_by_the_example_servers_declaration_file():
    # The harness measures the declaration a class's retail tool server is read by, loaded the same way.
    from_file = declfile.load(RETAIL_FILE)
    assert RETAIL.domain.model_dump() == from_file.model_dump()
    # No second description beside it: no retail tool is named in the harness's domain modules,
    # except the one the planted rule tempts.
    others = set(AIRLINE.domain.tools) | set(TELECOM.domain.tools) | {RETAIL.planted.probe_tool}
    own = sorted(set(from_file.tools) - others)
    assert len(own) >= 10
    sources = {p.name: p.read_text() for p in (ROOT / "sundry" / "evals" / "domains").glob("*.py")}
    assert not [(f, n) for f, text in sources.items() for n in own if n in text]
