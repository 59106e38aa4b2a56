"""Validation of summariser output, one rejection reason at a time; the offline summariser; replay."""

from __future__ import annotations

import json
import re

import pytest
from django.core.management import call_command

from sundry.agent.provider.gateway import Gateway
from sundry.compaction import summariser as sm
from sundry.compaction.offline import OfflineSummariser
from sundry.compaction.services import compaction_run
from sundry.context.lanes import LedgerData, RuleData, SummaryData, TurnData

LEDGER = [
    LedgerData("damaged_order", "SU-40118", "order", True, 1, 3),
    LedgerData("garden_table", "itm_7k2m9q4x", "item", True, 1, 3),
]
TURNS = [
    TurnData(
        1,
        "customer",
        "message",
        "The table from SU-40118 arrived scratched. I don't want a replacement. Batch code QX77812 on the box." * 3,
    ),
    TurnData(
        2,
        "agent",
        "tool_call",
        "",
        {"calls": [{"id": "a", "name": "issue_refund", "arguments": {"order_number": "SU-40118"}}]},
    ),
    TurnData(
        3,
        "tool",
        "tool_result",
        '{"refund": "issued", "order": "SU-40118"}' * 4,
        {"call_id": "a", "name": "issue_refund"},
    ),
    TurnData(4, "agent", "message", "I refunded 40.00 USD for the table on SU-40118. " * 3),
    TurnData(5, "customer", "message", "When will the second parcel arrive?"),
]


def ctx(**over):
    history = "\n".join(t.text + json.dumps(t.payload) for t in TURNS)
    from sundry.context.idformats import find_id_shaped, find_ids

    base = dict(
        ledger_values=[e.value for e in LEDGER],
        roles=[e.role for e in LEDGER],
        history_ids=sorted({v for _, v in find_ids(history)}),
        history_shaped=sorted(find_id_shaped(history)),
        replaced_tokens=sm.replaced_tokens(TURNS, None, "offline"),
        covers_through_turn=5,
        model="offline",
    )
    base.update(over)
    return sm.ValidationContext(**base)


def out(**over):
    fields = {
        "decisions": ["partial refund, keep the table"],
        "actions_taken": ["issue_refund on [damaged_order]"],
        "constraints_not_pinned": ["I don't want a replacement."],
        "open_questions": ["second parcel ETA"],
        "narrative": "[garden_table] arrived scratched; refunded.",
    }
    fields.update(over)
    return json.dumps({k: v for k, v in fields.items() if v is not None})


def test_valid_output_passes():
    v = sm.validate(out(), ctx())
    assert v.ok, v.details
    assert "[damaged_order]" in v.text and v.tokens < ctx().replaced_tokens


@pytest.mark.parametrize("missing", sm.REQUIRED_FIELDS)
def test_missing_required_field_is_rejected(missing):
    v = sm.validate(out(**{missing: None}), ctx())
    assert not v.ok and v.reasons == ["schema"]


def test_not_json_is_rejected():
    assert sm.validate("The customer was refunded.", ctx()).reasons == ["schema"]


def test_identifier_value_instead_of_role_is_rejected():
    v = sm.validate(out(narrative="The table from SU-40118 was refunded."), ctx())
    assert v.reasons == ["id_value"] and "SU-40118" in v.details[0]


def test_history_id_not_in_ledger_is_still_a_value():
    # A known-format ID seen in history but not (or no longer) in the ledger is a value too.
    v = sm.validate(out(narrative="see SU-40118"), ctx(ledger_values=[]))
    assert v.reasons == ["id_value"]


def test_invented_id_shaped_token_is_rejected():
    v = sm.validate(out(narrative="Refund rfd_9z9z9z9z issued for [damaged_order]."), ctx())
    assert v.reasons == ["invented_id"] and "rfd_9z9z9z9z" in v.details[0]
    v = sm.validate(out(narrative="Ticket ORD-88213 handled."), ctx())
    assert v.reasons == ["invented_id"]


def test_id_shaped_token_seen_in_history_is_allowed():
    # QX77812 appears in the customer's message: not invented (and not a known ID format).
    assert sm.validate(out(narrative="Box batch QX77812 noted."), ctx()).ok


def test_unknown_bracketed_role_does_not_hide_an_invented_id():
    assert sm.validate(out(narrative="[XQ-99821] refunded"), ctx()).reasons == ["invented_id"]


def test_summary_not_shorter_than_what_it_replaces_is_rejected():
    v = sm.validate(out(), ctx(replaced_tokens=20))
    assert v.reasons == ["not_shorter"]


def test_offline_summariser_reads_only_its_request_and_validates():
    request = sm.build_request(
        model="offline",
        turns=TURNS,
        ledger=LEDGER,
        rules=[RuleData(1, "Phone only, never email me.", 1)],
        previous=None,
    )
    response = OfflineSummariser().complete(request)
    v = sm.validate(response.text, ctx())
    assert v.ok, v.details
    fields = json.loads(response.text)
    assert "SU-40118" not in response.text and "[damaged_order]" in " ".join(fields["actions_taken"])
    assert any("replacement" in c for c in fields["constraints_not_pinned"])
    assert fields["open_questions"] and "second parcel" in fields["open_questions"][0]
    # Its answer depends on the request alone: a ledger without the order leaves the order unnamed.
    bare = sm.build_request(model="offline", turns=TURNS, ledger=[], rules=[], previous=None)
    assert "[damaged_order]" not in OfflineSummariser().complete(bare).text


def _later_turns(start: int, count: int, *, reply: bool) -> list[TurnData]:
    turns = []
    for i in range(count):
        n = start + i
        if reply and i % 2:
            turns.append(TurnData(n, "agent", "message", f"Noted, step {n} is done for SU-40118. " * 3))
        else:
            turns.append(TurnData(n, "customer", "message", f"Still here at {n}, about SU-40118. " * 3))
    return turns


def test_offline_summariser_folds_the_previous_summary_without_nesting():
    from sundry.context.lanes import SummaryData

    first = json.loads(
        OfflineSummariser()
        .complete(sm.build_request(model="offline", turns=TURNS, ledger=LEDGER, rules=[], previous=None))
        .text
    )
    previous = SummaryData(5, sm.render_fields(sm.SummaryFields(**first)))
    summaries = [first]
    upto = 5
    for round_ in range(6):
        turns = _later_turns(upto + 1, 6, reply=round_ % 2 == 1)
        fields = json.loads(
            OfflineSummariser()
            .complete(sm.build_request(model="offline", turns=turns, ledger=LEDGER, rules=[], previous=previous))
            .text
        )
        upto = turns[-1].number
        context = ctx(covers_through_turn=upto, replaced_tokens=sm.replaced_tokens(turns, previous, "offline"))
        verdict = sm.validate(json.dumps(fields), context)
        assert verdict.ok, verdict.details
        # One "Earlier:" however long the chain, naming the span just before.
        assert fields["narrative"].count("Earlier:") == 1
        span_before = re.findall(r"Turns (\d+–\d+):", summaries[-1]["narrative"])[-1]
        assert fields["narrative"].startswith(f"Earlier: Turns {span_before}:")
        summaries.append(fields)
        previous = SummaryData(upto, sm.render_fields(sm.SummaryFields(**fields)))
    last = summaries[-1]
    # What the first span established is still in the sixth summary after it.
    assert "issue_refund on [damaged_order]" in " ".join(last["actions_taken"])
    assert any("replacement" in c for c in last["constraints_not_pinned"])
    assert len(last["decisions"]) <= 6


def test_offline_summariser_keeps_an_open_question_until_someone_replies():
    from sundry.context.lanes import SummaryData

    first = json.loads(
        OfflineSummariser()
        .complete(sm.build_request(model="offline", turns=TURNS, ledger=LEDGER, rules=[], previous=None))
        .text
    )
    assert first["open_questions"]
    previous = SummaryData(5, sm.render_fields(sm.SummaryFields(**first)))

    def after(turns):
        return json.loads(
            OfflineSummariser()
            .complete(sm.build_request(model="offline", turns=turns, ledger=LEDGER, rules=[], previous=previous))
            .text
        )

    silent = after([TurnData(6, "customer", "message", "Hello again about the table. " * 4)])
    assert silent["open_questions"] == first["open_questions"]
    answered = after([TurnData(6, "agent", "message", "The second parcel arrives Friday. " * 4)])
    assert answered["open_questions"] == []


@pytest.mark.django_db
def test_replay_command_reproduces_a_schema_valid_summary(capsys):
    from tests.compaction.helpers import long_ticket
    from tests.compaction.test_service import queued_run

    run = compaction_run(queued_run(long_ticket()).pk, gateway=Gateway(offline=OfflineSummariser()))
    assert run.status == "succeeded"
    call_command("replay_compaction", str(run.pk))
    printed = capsys.readouterr().out
    assert "VALID" in printed and "INVALID" not in printed
    # The replayed output is the recorded one: same input, deterministic summariser.
    assert json.loads(printed.split("output: ", 1)[1].split("\n", 1)[0]) == json.loads(run.summariser_output)


# --- amounts, dates, pleasantries and what really ran ---------------------------------------------


def _summarise(turns, ledger=LEDGER):
    return json.loads(
        OfflineSummariser()
        .complete(sm.build_request(model="offline", turns=turns, ledger=ledger, rules=[], previous=None))
        .text
    )


def test_amounts_and_dates_stay_as_written_only_identifiers_become_roles():
    turns = [
        TurnData(1, "customer", "message", "Please cancel SU-40118 and refund the 2,899.00 INR."),
        TurnData(
            2,
            "agent",
            "message",
            "I've refunded 11599.00 INR on order SU-40118 (rfd_9x8c7v6b) on 2025-03-04, and 40.00 USD before.",
        ),
        TurnData(3, "customer", "message", "It was delivered 2025-03-01; batch QX77812."),
    ]
    fields = _summarise(turns)
    text = json.dumps(fields, ensure_ascii=False)
    assert "11599.00 INR" in text and "2025-03-04" in text and "40.00 USD" in text and "[damaged_order]" in text
    assert "SU-40118" not in text and "rfd_9x8c7v6b" not in text and "QX77812" not in text
    assert "[unlisted id].00" not in text


def test_validation_takes_amounts_and_dates_for_what_they_are():
    fields = {
        "decisions": ["refunded 12899.00 INR on 2025-03-04 for [damaged_order]"],
        "actions_taken": [],
        "constraints_not_pinned": [],
        "open_questions": [],
        "narrative": "Refund of ₹12,899 agreed.",
    }
    assert sm.validate(json.dumps(fields), ctx()).ok
    # A five-digit number that is not an amount is still an invented identifier.
    fields["narrative"] = "Reference 12899 noted."
    assert sm.validate(json.dumps(fields), ctx()).reasons == ["invented_id"]


def test_pleasantries_and_questions_are_not_decisions():
    turns = [
        TurnData(1, "customer", "message", "Thanks, that's all."),
        TurnData(2, "agent", "message", "You're welcome! Is there anything else I can help with?"),
        TurnData(3, "agent", "message", "Which order do you mean: SU-40118 or the other one?"),
        TurnData(4, "agent", "message", "Thanks for waiting. I've booked a return for order SU-40118."),
    ]
    decisions = _summarise(turns)["decisions"]
    assert decisions == ["turn 4: I've booked a return for order [damaged_order]."]
    # A network summariser that lists a pleasantry as a decision has it dropped, not the summary refused.
    raw = out(decisions=["You're welcome! Is there anything else I can help with?", "partial refund, keep the table"])
    verdict = sm.validate(raw, ctx())
    assert verdict.ok and verdict.fields.decisions == ["partial refund, keep the table"]
    assert "welcome" not in verdict.text


def test_a_held_or_failed_call_is_never_recorded_as_an_action_taken():
    def call(n, cid, amount):
        return TurnData(
            n,
            "agent",
            "tool_call",
            "",
            {
                "calls": [
                    {
                        "id": cid,
                        "name": "issue_refund",
                        "arguments": {"order_number": "SU-40118", "amount": amount},
                    }
                ]
            },
        )

    turns = [
        call(1, "a", "44.99"),
        TurnData(
            2,
            "tool",
            "tool_result",
            json.dumps(
                {"held_for_staff_approval": True, "reason": "issue_refund needs staff approval; the call is held."}
            ),
            {"call_id": "a", "name": "issue_refund", "ok": False},
        ),
        call(3, "b", "10.00"),
        TurnData(
            4,
            "tool",
            "tool_result",
            "ERROR: payment provider unavailable",
            {"call_id": "b", "name": "issue_refund", "ok": False},
        ),
        call(5, "c", "40.00"),
        TurnData(
            6,
            "tool",
            "tool_result",
            json.dumps({"refund_id": "rfd_9x8c7v6b", "amount": "40.00", "amount_cents": 4000, "currency": "USD"}),
            {"call_id": "c", "name": "issue_refund", "ok": True},
        ),
    ]
    fields = _summarise(turns)
    assert fields["actions_taken"] == ["turn 5: issue_refund on [damaged_order] — 40.00 USD"]
    assert fields["open_questions"] == ["turn 1: issue_refund on [damaged_order] is held for staff approval (not done)"]


# --- roles substituted, claims checked, structured output -----------------------------


def test_a_ledger_value_written_instead_of_its_role_is_replaced_by_the_role():
    v = sm.validate(
        out(narrative="The table from SU-40118 was refunded.", open_questions=["itm_7k2m9q4x ok?"]),
        ctx(ledger_roles={e.value: e.role for e in LEDGER}, actions=["issue_refund"]),
    )
    assert v.ok, v.details
    assert v.substituted == ["itm_7k2m9q4x", "SU-40118"]
    assert "[damaged_order] was refunded" in v.text and "[garden_table] ok?" in v.text and "SU-40118" not in v.text


@pytest.mark.parametrize(
    "claim, tool",
    [
        ("Provided a refund of 40.00 USD to the customer.", "issue_refund"),
        ("The order was cancelled.", "cancel_order"),
        ("Booked a return for [garden_table].", "book_return"),
        ("Staff approved the refund.", "*approval"),
    ],
)
def test_a_claimed_action_the_actions_lane_lacks_is_rejected(claim, tool):
    v = sm.validate(out(actions_taken=[claim], narrative="[garden_table] arrived scratched."), ctx(actions=[]))
    assert v.reasons == ["unsupported_claim"] and claim[:30] in v.details[0]
    assert sm.validate(
        out(actions_taken=[claim], narrative="[garden_table] arrived scratched."), ctx(actions=[tool])
    ).ok


@pytest.mark.parametrize(
    "sentence",
    [
        "No refund has been issued yet.",
        "The customer asked whether a refund was issued.",
        "A refund is held for staff approval.",
    ],
)
def test_negated_or_pending_actions_claim_nothing(sentence):
    assert sm.validate(out(actions_taken=[], narrative=sentence), ctx(actions=[])).ok


def test_the_request_asks_for_the_fields_as_structured_output_and_the_retry_carries_the_errors():
    request = sm.build_request(model="openai:gpt-4.1-mini", turns=TURNS, ledger=LEDGER, rules=[], previous=None)
    assert request.output.name == sm.OUTPUT_NAME
    assert set(request.output.schema_["required"]) == set(sm.REQUIRED_FIELDS)
    assert request.output.schema_["additionalProperties"] is False
    verdict = sm.validate('{"narrative": "x"}', ctx())
    retry = sm.retry_request(request, '{"narrative": "x"}', verdict)
    assert [m.role for m in retry.messages] == ["system", "user", "assistant", "user"]
    assert "decisions: Field required" in retry.messages[-1].content and retry.output == request.output


def test_flagged_customer_sentences_are_quoted_word_for_word_and_validation_demands_it():
    long_one = (
        "I'd prefer a refund to my PayPal rather than store credit, and please keep the garden table "
        "from SU-40118 until the courier has collected the chairs."
    )
    turns = [
        *TURNS,
        TurnData(6, "customer", "message", f"Thanks. {long_one} When is pickup?"),
        TurnData(7, "agent", "message", "Pickup is on Monday. " * 20),
    ]
    request = sm.build_request(model="offline", turns=turns, ledger=LEDGER, rules=[], previous=None)
    quotes = sm.required_quotes(turns, rules=[], previous=None, roles={e.value: e.role for e in LEDGER})
    wanted = long_one.replace("SU-40118", "[damaged_order]")
    assert quotes == ["I don't want a replacement.", wanted]  # "arrived scratched" and the question are not limits
    fields = json.loads(OfflineSummariser().complete(request).text)
    assert fields["constraints_not_pinned"] == quotes  # whole, not shortened to 160 characters
    check = ctx(quotes=quotes, replaced_tokens=sm.replaced_tokens(turns, None, "offline"), covers_through_turn=7)
    assert sm.validate(json.dumps(fields), check).ok
    # Control: a paraphrase of the same constraint is refused with the sentence it lacks.
    fields["constraints_not_pinned"] = ["no replacement", "refund to PayPal, keep the table for now"]
    v = sm.validate(json.dumps(fields), check)
    assert "constraint_not_quoted" in v.reasons and wanted in " ".join(v.details)
    # The next compaction carries them forward; a rule already in the rules lane is not repeated.
    later = sm.required_quotes(
        _later_turns(8, 2, reply=True),
        rules=[RuleData(1, "I don't want a replacement.", 1)],
        previous=SummaryData(7, sm.render_fields(sm.SummaryFields(**{**fields, "constraints_not_pinned": quotes}))),
        roles={},
    )
    assert later == [wanted]
