"""The lane renderers: labels, verbatim content, and whole tool-call units."""

from __future__ import annotations

import pytest

from sundry.context import render
from sundry.context.lanes import (
    ActionData,
    LedgerData,
    MoneyData,
    RuleData,
    StateFieldData,
    SummaryData,
    TurnData,
)

RULES = [
    RuleData(
        id=2,
        text='I don\'t want a replacement — just fix it, "properly".',
        turn=9,
        scope="order",
        scope_ref="SU-20481",
        enforcement={"block_tools": ["offer_replacement"]},
    ),
    RuleData(id=1, text="Phone only, never email me.", turn=3, enforcement={"block_tools": ["send_email"]}),
]
LEDGER = [
    LedgerData(
        role="damaged_order",
        value="SU-20481",
        kind="order",
        verified=True,
        first_seen_turn=4,
        last_used_turn=12,
        note="refund issued",
    ),
    LedgerData(
        role="order_mentioned", value="SU-20418", kind="order", verified=False, first_seen_turn=2, last_used_turn=2
    ),
    LedgerData(
        role="old_parcel",
        value="1Z999AA10123456784",
        kind="tracking",
        verified=True,
        first_seen_turn=1,
        last_used_turn=1,
        archived=True,
    ),
]


def test_system_prompt_carries_instructions_and_class_policy():
    text = render.render_system_prompt("Refunds above 100.00 USD need a manager.")
    assert text.startswith(render.SYSTEM_HEADING)
    assert "Refunds above 100.00 USD need a manager." in text
    for must in ("ID LEDGER", "RULES IN FORCE", "STATE", "SUMMARY", "look it up again", "reply_to_customer"):
        assert must in text


def test_rules_are_verbatim_with_turn_scope_and_blocked_tools():
    text = render.render_rules(RULES)
    lines = text.splitlines()
    assert lines[0] == render.RULES_HEADING == "RULES IN FORCE FOR THIS TICKET"
    # Ordered by the turn they were stated, whatever order they came in.
    assert lines[1].startswith('1. "Phone only, never email me."') and "turn 3" in lines[1]
    assert "scope ticket" in lines[1] and "blocks tools: send_email" in lines[1]
    assert '"I don\'t want a replacement — just fix it, "properly"."' in lines[2]
    assert "scope order SU-20481" in lines[2] and "blocks tools: offer_replacement" in lines[2]
    assert [r.text for r in render.parse_rules(text)] == [RULES[1].text, RULES[0].text]
    assert render.parse_rules(text)[1].block_tools == ("offer_replacement",)


def test_a_rule_naming_its_orders_says_which_and_parses_back():
    rule = RuleData(
        id=4,
        text="Whatever you do, don't cancel SU-27849.",
        turn=2,
        enforcement={"block_tools": ["cancel_order"], "only_on": ["SU-27849"]},
    )
    text = render.render_rules([rule])
    assert "blocks tools: cancel_order; only on: SU-27849" in text
    parsed = render.parse_rules(text)[0]
    assert (parsed.text, parsed.block_tools, parsed.only_on) == (rule.text, ("cancel_order",), ("SU-27849",))
    assert render.parse_rules(render.render_rules(RULES))[0].only_on == ()


def test_rules_cap_never_truncates_or_drops():
    long_rule = RuleData(id=3, text="Never " + "really " * 200 + "email me.", turn=5)
    text = render.render_rules(RULES + [long_rule], cap_tokens=10)
    for rule in RULES + [long_rule]:
        assert f'"{rule.text}"' in text


def test_no_rules_says_so():
    assert render.render_rules([]) == f"{render.RULES_HEADING}\n{render.NO_RULES}"


def test_ledger_lines_fixed_columns_unverified_marker_and_no_archived():
    text = render.render_ledger(LEDGER)
    lines = text.splitlines()
    assert lines[0] == "ID LEDGER (verbatim, do not paraphrase)"
    assert lines[1] == render.LEDGER_COLUMNS
    assert "order_mentioned | SU-20418 | order | UNVERIFIED | first seen turn 2 | last used turn 2 | - | -" in lines
    assert (
        "damaged_order | SU-20481 | order | verified | first seen turn 4 | last used turn 12 | refund issued | -"
        in lines
    )
    assert "1Z999AA10123456784" not in text  # archived entries never reach the model
    parsed = {e.value: e for e in render.parse_ledger(text)}
    assert set(parsed) == {"SU-20481", "SU-20418"}
    assert parsed["SU-20418"].verified is False and parsed["SU-20481"].note == "refund issued"
    assert parsed["SU-20481"].last_used_turn == 12


def test_state_block_sections_and_parse_round_trip():
    text = render.render_state(
        [
            StateFieldData("refund_method", "original_method", 7, "customer", True),
            StateFieldData("issue", "scratched leg", 5, "model", False),
        ],
        [
            ActionData(
                tool="issue_refund",
                target="SU-87310",
                turn=6,
                idempotency_key="k-6-1",
                reversible=False,
                amount_cents=4000,
                currency="USD",
            )
        ],
        [MoneyData(order="SU-87310", currency="USD", paid_cents=12000, refunded_cents=4000)],
    )
    assert text.startswith(render.STATE_HEADING) and "override the summary" in text
    assert "- refund_method: original_method (turn 7, customer, confirmed)" in text
    assert "- issue: scratched leg (turn 5, model, inferred)" in text
    assert "issue_refund on SU-87310 · 40.00 USD · IRREVERSIBLE · key k-6-1" in text
    assert "- SU-87310: paid 120.00 USD; refunded so far 40.00 USD; still refundable 80.00 USD" in text
    parsed = render.parse_state(text)
    assert parsed.fields == {"issue": "scratched leg", "refund_method": "original_method"}
    action = parsed.actions[0]
    assert (action.tool, action.target, action.amount_cents, action.currency, action.reversible, action.key) == (
        "issue_refund",
        "SU-87310",
        4000,
        "USD",
        False,
        "k-6-1",
    )
    assert parsed.money["SU-87310"].refundable_cents == 8000


def test_empty_state_is_labelled():
    assert render.render_state([], [], []) == f"{render.STATE_HEADING}\n{render.NO_STATE}"


def test_summary_is_marked_as_system_record():
    assert render.render_summary(None) == ""
    text = render.render_summary(SummaryData(covers_through_turn=14, text="Refund for [damaged_order] issued."))
    assert text.startswith("SUMMARY OF EARLIER TURNS — written by the system")
    assert "not something the customer said or agreed" in text
    assert "turns 1–14" in text and "Refund for [damaged_order] issued." in text


def test_lane_message_labels_system_blocks():
    m = render.lane_message("ledger", "x")
    assert (m.role, m.lane, m.content) == ("system", "ledger", "x")
    assert render.lane_of(m) == "ledger"
    assert render.lane_of(render.Message(role="system", content=render.STATE_HEADING + "\n-")) == "state"
    with pytest.raises(ValueError):
        render.lane_message("recent", "x")


# --- turns → messages ------------------------------------------------------------------


def _call(n, call_id, name="get_order", args=None, text=""):
    return TurnData(n, "agent", "tool_call", text, {"calls": [{"id": call_id, "name": name, "arguments": args or {}}]})


def _result(n, call_id, text='{"ok": true}', name="get_order"):
    return TurnData(n, "tool", "tool_result", text, {"call_id": call_id, "name": name, "ok": True})


def test_each_turn_kind_maps_to_its_role_and_prefix():
    turns = [
        TurnData(1, "customer", "message", "Where is SU-20481?"),
        TurnData(2, "staff", "note", "Customer is a VIP."),
        TurnData(3, "system", "event", "Ticket reassigned."),
        _call(4, "c1", args={"order_number": "SU-20481"}, text="Let me check."),
        _result(5, "c1", '{"order_number": "SU-20481"}'),
        TurnData(6, "agent", "message", "It is on its way."),
        TurnData(7, "staff", "message", "I've added a note for the courier."),
        TurnData(8, "system", "error", "The model returned invalid JSON."),
    ]
    msgs = render.turns_to_messages(turns)
    assert [(m.role, m.turns) for m in msgs] == [
        ("user", [1]),
        ("user", [2]),
        ("user", [3]),
        ("assistant", [4]),
        ("tool", [5]),
        ("assistant", [6]),
        ("assistant", [7]),
        ("system", [8]),
    ]  # Sundry's notice: a system message, not the customer's voice
    assert msgs[0].content == "Where is SU-20481?" and render.is_customer_message(msgs[0])
    assert msgs[1].content == "[staff note to the agent] Customer is a VIP." and not render.is_customer_message(msgs[1])
    assert msgs[2].content == "[system event] Ticket reassigned."
    assert msgs[3].content == "Let me check." and msgs[3].tool_calls[0].arguments == {"order_number": "SU-20481"}
    assert (msgs[4].tool_call_id, msgs[4].tool_name) == ("c1", "get_order")
    assert msgs[4].content == render.DATA_HEADER + '\n{"order_number": "SU-20481"}'
    assert msgs[6].content == "(reply sent by staff) I've added a note for the courier."
    assert msgs[7].content == "[system notice] The model returned invalid JSON."


def test_rejections_and_errors_answer_their_call():
    turns = [
        TurnData(
            1,
            "agent",
            "tool_call",
            "",
            {
                "calls": [
                    {"id": "a", "name": "issue_refund", "arguments": {"order_number": "SU-20418"}},
                    {"id": "b", "name": "get_order", "arguments": {"order_number": "SU-99999"}},
                ]
            },
        ),
        TurnData(
            2,
            "system",
            "rejection",
            "rejected",
            {"call_id": "a", "guard": "mutation", "reason": "SU-20418 is one edit away from SU-20481"},
        ),
        TurnData(3, "system", "error", "no order SU-99999 exists", {"call_id": "b"}),
    ]
    msgs = render.turns_to_messages(turns)
    assert [m.role for m in msgs] == ["assistant", "tool", "tool"]
    assert msgs[1].content == "ERROR (guard: mutation): SU-20418 is one edit away from SU-20481"
    assert msgs[1].tool_name == "issue_refund"
    assert msgs[2].content == "ERROR: no order SU-99999 exists" and msgs[2].tool_call_id == "b"


def _assert_no_orphans(msgs):
    call_ids = [c.id for m in msgs for c in m.tool_calls]
    result_ids = [m.tool_call_id for m in msgs if m.role == "tool"]
    assert sorted(call_ids) == sorted(result_ids)
    # Every result sits right after the assistant message that made its call.
    for i, m in enumerate(msgs):
        if m.tool_calls:
            following = [x.tool_call_id for x in msgs[i + 1 : i + 1 + len(m.tool_calls)]]
            assert following == [c.id for c in m.tool_calls]


def test_missing_result_gets_a_placeholder():
    turns = [TurnData(1, "customer", "message", "hi"), _call(2, "c1"), TurnData(4, "agent", "message", "done")]
    msgs = render.turns_to_messages(turns)
    _assert_no_orphans(msgs)
    placeholder = msgs[2]
    assert placeholder.role == "tool" and placeholder.tool_call_id == "c1"
    assert placeholder.content == render.MISSING_RESULT and "not in the context" in placeholder.content


def test_result_without_its_call_is_dropped():
    turns = [
        _result(3, "gone"),
        TurnData(4, "system", "rejection", "no", {"call_id": "gone2", "guard": "id"}),
        TurnData(5, "customer", "message", "still there?"),
    ]
    msgs = render.turns_to_messages(turns)
    assert [m.role for m in msgs] == ["user"]
    _assert_no_orphans(msgs)


def test_results_are_moved_next_to_their_call():
    # A staff note landed between the call and its result: providers need the result adjacent.
    turns = [_call(1, "c1"), TurnData(2, "staff", "note", "careful"), _result(3, "c1")]
    msgs = render.turns_to_messages(turns)
    assert [m.role for m in msgs] == ["assistant", "tool", "user"]
    _assert_no_orphans(msgs)


def test_failed_tool_result_is_marked_as_error():
    turns = [_call(1, "c1"), TurnData(2, "tool", "tool_result", '{"error": "nope"}', {"call_id": "c1", "ok": False})]
    assert render.turns_to_messages(turns)[1].content == 'ERROR: {"error": "nope"}'


def test_older_actions_fold_into_one_line_per_tool_and_target():
    def refund(turn, order, cents=1000):
        return ActionData(
            tool="issue_refund",
            target=order,
            turn=turn,
            idempotency_key=f"key-{turn}",
            reversible=False,
            amount_cents=cents,
            currency="USD",
        )

    older = [refund(t, "SU-10001") for t in (2, 10, 20)] + [refund(5, "SU-10002", 2550)]
    older.append(ActionData(tool="create_return", target="SU-10002", turn=7, idempotency_key="key-r", reversible=True))
    newest = [refund(100 + t, f"SU-2000{t}") for t in range(render.ACTIONS_IN_FULL)]
    text = render.render_state([], older + newest, [])
    assert "- turns 2–20 · issue_refund on SU-10001 · 30.00 USD in all · IRREVERSIBLE · 3 times" in text
    assert "- turn 5 · issue_refund on SU-10002 · 25.50 USD · IRREVERSIBLE · once" in text
    assert "- turn 7 · create_return on SU-10002 · no amount · reversible · once" in text
    assert all(f"key key-{100 + t}" in text for t in range(render.ACTIONS_IN_FULL))  # the newest keep their keys
    assert "key-2" not in text and "key-r" not in text
    parsed = render.parse_state(text)
    assert len(parsed.actions) == 3 + render.ACTIONS_IN_FULL
    folded = parsed.actions[0]
    assert (folded.tool, folded.target, folded.turn, folded.amount_cents, folded.reversible, folded.key) == (
        "issue_refund",
        "SU-10001",
        20,
        3000,
        False,
        "",
    )

    # Many more actions on the same targets leave the folded part the same size.
    many = [refund(t, "SU-10001") for t in range(2, 60)] + older[3:] + newest
    assert len(render.render_state([], many, []).splitlines()) == len(text.splitlines())


def test_ledger_descriptions_are_shown_parsed_back_and_never_break_a_cell():
    entries = [
        LedgerData("order", "SU-25386", "order", True, 3, 9, description="Air Fryer 5.5L · delivered"),
        LedgerData("order_2", "SU-27531", "order", True, 3, 3, description="USB-C Charger 65W | in_transit"),
    ]
    text = render.render_ledger(entries)
    assert "| order | SU-25386 |" not in text  # role first, value second
    assert text.splitlines()[2].endswith("| - | Air Fryer 5.5L · delivered")
    assert text.splitlines()[3].endswith("| - | USB-C Charger 65W / in_transit")
    parsed = {e.value: e.description for e in render.parse_ledger(text)}
    assert parsed == {"SU-25386": "Air Fryer 5.5L · delivered", "SU-27531": "USB-C Charger 65W / in_transit"}


def test_ledger_descriptions_stay_within_their_bound_most_recently_used_first():
    long = "Wireless Noise-Cancelling Headphones, " * 5
    entries = [
        LedgerData(f"order_{i}", f"SU-{10000 + i}", "order", True, 1, i, description=f"{i} {long}")
        for i in range(1, 60)
    ]
    shown = render.ledger_descriptions(entries)
    assert all(len(d) <= render.DESCRIPTION_CHARS for d in shown.values())
    assert sum(map(len, shown.values())) <= render.DESCRIPTIONS_TOTAL_CHARS
    assert "SU-10059" in shown and "SU-10001" not in shown  # the least recently used give way
    text = render.render_ledger(entries)
    assert all(f"SU-{10000 + i}" in text for i in range(1, 60))  # every ID stays


# --- requests a real model reads right -------------------------------------------------


def test_money_in_minor_units_is_shown_in_major_units_beside_it():
    import json

    result = {
        "order_number": "SU-20481",
        "currency": "INR",
        "total_cents": 455800,
        "amount": "12.00 INR",
        "amount_cents": 1200,
        "items": [{"product": "Lamp", "unit_price_cents": 199}],
        "refunds": [],
    }
    turns = [
        TurnData(1, "agent", "tool_call", "", {"calls": [{"id": "c1", "name": "get_order", "arguments": {}}]}),
        TurnData(2, "tool", "tool_result", json.dumps(result), {"call_id": "c1", "name": "get_order", "ok": True}),
    ]
    shown = json.loads(render.result_data(render.turns_to_messages(turns)[1].content))
    assert list(shown)[:4] == ["order_number", "currency", "total_cents", "total"]
    assert shown["total"] == "4558.00 INR" and shown["items"][0]["unit_price"] == "1.99 INR"
    assert shown["amount"] == "12.00 INR"  # a major-unit field the result already has is left alone
    assert render.with_major_units('{"count_cents": 3}') == '{"count_cents": 3}'  # no currency in reach: unchanged


def test_a_reply_sent_through_reply_to_customer_appears_once():
    turns = [
        TurnData(1, "customer", "message", "Hi"),
        TurnData(
            2,
            "agent",
            "tool_call",
            "",
            {"calls": [{"id": "r", "name": "reply_to_customer", "arguments": {"message": "Your order shipped."}}]},
        ),
        TurnData(3, "tool", "tool_result", '{"sent": true}', {"call_id": "r", "name": "reply_to_customer", "ok": True}),
        TurnData(4, "agent", "message", "Your order shipped.", {"via": "reply_to_customer"}),
    ]
    messages = render.turns_to_messages(turns)
    assert [m.role for m in messages] == ["user", "assistant", "tool"]
    assert sum("Your order shipped." in (m.content + str([c.arguments for c in m.tool_calls])) for m in messages) == 1


def test_kept_history_that_opens_with_the_agent_starts_with_a_user_turn():
    from sundry.context.assembly import assemble
    from sundry.context.lanes import LaneSnapshot

    snap = LaneSnapshot(
        ticket_id=1,
        customer_id="cus_7k2m9q4x",
        class_policy="",
        rules=[],
        ledger=[],
        state=[],
        actions=[],
        money=[],
        summary=SummaryData(10, "Earlier: the customer asked about a lamp."),
        turns=[TurnData(11, "agent", "message", "Anything else?"), TurnData(12, "customer", "message", "No")],
    )
    messages = [m for m in assemble(snap, model="offline").request.messages if m.role != "system"]
    assert messages[0].role == "user" and messages[0].content == render.HISTORY_OPENS_NOTICE
    assert [m.role for m in messages[1:]] == ["assistant", "user"]
