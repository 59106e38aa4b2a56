"""A second change asking for something else is a new request; the same change again is a
repeat. Judged by the product's repeat guard on a recorded airline conversation, and by the
declaration of the tool (`repeats: "arguments"` on the reservation changes)."""

from __future__ import annotations

import json

import pytest

from sundry.evals import importers
from sundry.evals.domains import DOMAINS
from sundry.evals.harness import HarnessConfig, run_ticket


def _call(cid, name, **args):
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": cid, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}],
    }


def _result(cid, content):
    return {"role": "tool", "tool_call_id": cid, "content": json.dumps(content)}


def bags(cid, total, nonfree):
    return [
        _call(
            cid,
            "update_reservation_baggages",
            reservation_id="ZZ9Q4X",
            total_baggages=total,
            nonfree_baggages=nonfree,
            payment_id="credit_card_1",
        ),
        _result(cid, {"reservation_id": "ZZ9Q4X", "user_id": "sara_doe_4961", "total_baggages": total}),
    ]


def ticket():
    messages = [
        {"role": "user", "content": "Hi, my user ID is sara_doe_4961, reservation ZZ9Q4X. Add one bag please."},
        _call("c1", "get_reservation_details", reservation_id="ZZ9Q4X"),
        _result("c1", {"reservation_id": "ZZ9Q4X", "user_id": "sara_doe_4961"}),
        _call("c2", "get_user_details", user_id="sara_doe_4961"),
        _result("c2", {"user_id": "sara_doe_4961", "payment_methods": {"credit_card_1": {"id": "credit_card_1"}}}),
        *bags("c3", 1, 0),
        {"role": "assistant", "content": "Done: one bag."},
        {"role": "user", "content": "Actually make it three bags."},
        *bags("c4", 3, 2),  # a second change, asking for something else
        {"role": "assistant", "content": "Done: three bags."},
        {"role": "user", "content": "Three bags, right?"},
        *bags("c5", 3, 2),  # the same change again: a repeat
        {"role": "assistant", "content": "Yes, three."},
    ]
    return importers.openai_messages(messages, ticket_id="bags", domain="airline")


def test_a_second_change_is_not_held_and_the_same_change_again_is():
    result = run_ticket(ticket(), HarnessConfig())
    s = result.stats["sundry"]
    assert (s["second_changes"], s["second_changes_held"]) == (1, 0)
    assert (s["repeats_proposed"], s["repeats_held"]) == (1, 1)
    assert not [f for f in result.failures if f.check in ("second_change_held", "repeat_not_held")]


def test_control_declared_to_repeat_by_target_the_second_change_is_held(monkeypatch):
    decl = DOMAINS["airline"].domain.tool("update_reservation_baggages")
    monkeypatch.setattr(decl, "repeats", "target")
    result = run_ticket(ticket(), HarnessConfig())
    s = result.stats["sundry"]
    assert s["second_changes"] == 0 and s["repeats_proposed"] == 2 and s["repeats_held"] == 2


@pytest.mark.parametrize(
    "a, b, same",
    [
        ({"x": 1, "y": [1, 2]}, {"y": [1, 2], "x": 1}, True),
        ({"x": 1, "z": None}, {"x": 1}, True),
        ({"x": 1}, {"x": 2}, False),
    ],
)
def test_the_digest_ignores_key_order_and_nulls_only(a, b, same):
    from sundry.tooling.domain import arguments_digest

    assert (arguments_digest(a) == arguments_digest(b)) is same
