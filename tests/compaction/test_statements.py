"""A summary item that is no statement about its ticket is rejected: placeholders, the request's own
words, errors, JSON fragments, single words, text naming nothing of the ticket. Junk and good items
are generated from small grammars; the offline summariser's summaries still pass."""

from __future__ import annotations

import itertools
import json
import random

import pytest

from sundry.agent.provider.gateway import Gateway
from sundry.agent.provider.scripted import ScriptedModel
from sundry.compaction import statements
from sundry.compaction import summariser as sm
from sundry.compaction.models import CompactionRun
from sundry.compaction.services import compaction_consider, compaction_run
from sundry.context.models import Summary
from sundry.tooling.messages import ModelResponse
from tests.compaction.helpers import long_ticket
from tests.compaction.test_summariser import LEDGER, TURNS, ctx, out

FIELDS = ("decisions", "actions_taken", "constraints_not_pinned", "open_questions")
VOCAB = sm.ticket_vocabulary(TURNS, ledger=LEDGER, rules=[], previous=None)


def vctx(**over):
    return ctx(vocabulary=VOCAB, tools={"issue_refund": ["refunds"], "get_order": []}, **over)


def _json_errors() -> list[str]:
    """What a JSON reader says of broken text, and what the validator says of it (the retry shows both)."""
    found = []
    for broken in ('{"decisions": [', "not json", '{"a": 1,}', '{"a" 1}', '["x", "y"', '{"a": "b'):
        try:
            json.loads(broken)
        except ValueError as exc:
            found.append(str(exc))
        found.extend(sm.validate(broken, ctx()).details)
    return found


PLACEHOLDERS = ["N/A", "n/a", "none", "None.", "null", "string", "...", "…", "TODO", "TBD", "-", "?", "", "[]", "{}"]
SLOTS = ["<decision>", "<string>", "<action taken>", "{{reason}}", "<open question here>"]
# The request's own words about its form: field names, and how the template describes them.
SCHEMA = [
    *(f.replace("_", " ") for f in sm.REQUIRED_FIELDS),
    *sm.REQUIRED_FIELDS,
    "decisions already made",
    "Decisions already made.",
    "constraints not pinned",
    "no open questions",
    "the narrative",
    "Your summary was rejected for these reasons:",
    "Answer again with the corrected JSON object only",
    "list of strings",
    "a JSON object with the required keys",
]
FRAGMENTS = [
    '{"decisions": []}',
    '"decisions": ["x"]',
    '["not a JSON object"]',
    '{"name": "record_summary", "arguments": {',
    '}, "narrative": "',
    '["[damaged_order]"]',
]
# Sentences about nothing the ticket holds: no role, action, tool, amount, party, nor any word of its turns.
ELSEWHERE = [
    f"{a} {b} {c}."
    for a, b, c in itertools.product(
        ["The weather", "A football match", "The quarterly forecast", "My cat"],
        ["was lovely", "went badly", "looked promising"],
        ["in Paris", "on Tuesday", "for everyone"],
    )
]


def junk_items() -> list[str]:
    wraps = [lambda s: s, str.upper, str.lower, lambda s: f'"{s}"', lambda s: f"{s}.", lambda s: f"turn 4: {s}"]
    base = PLACEHOLDERS + SLOTS + SCHEMA + FRAGMENTS + _json_errors() + ["not a JSON object"]
    items = [w(s) for s in base for w in wraps]
    items += [w for w in ("refund", "table", "scratched", "parcel", "Done", "OK", "[damaged_order]")]
    return items + ELSEWHERE


# Statements about the ticket of `TURNS`: who, what, on which entity, for how much.
SUBJECTS = ["The customer", "Staff", "The agent", "We", "[garden_table]"]
PREDICATES = [
    "asked for a refund on [damaged_order]",
    "declined a replacement",
    "refunded 40.00 USD on [damaged_order]",
    "wants to know when the second parcel arrives",
    "reported the table arrived scratched",
    "agreed to keep the table",
    "is waiting on the batch code check",
    "called issue_refund for [damaged_order]",
]


def good_items() -> list[str]:
    items = [f"{s} {p}." for s, p in itertools.product(SUBJECTS, PREDICATES)]
    items += [f"turn {n}: {s} {p}" for n, (s, p) in enumerate(itertools.product(SUBJECTS[:2], PREDICATES), 1)]
    items += ["No refund yet.", "Second parcel ETA", "keep the table; partial refund agreed", "When will it arrive?"]
    return items


def test_generated_junk_in_any_field_rejects_the_summary_and_good_items_pass():
    rng = random.Random(7)
    junk, good = junk_items(), good_items()
    held = passed = 0
    for item in junk:
        # A question or a pleasantry among the decisions is dropped before judging (never stored): elsewhere.
        field = rng.choice(FIELDS if sm.decision_text(item) else FIELDS[1:])
        v = sm.validate(out(**{field: [item]}), vctx())
        assert not v.ok and "not_a_statement" in v.reasons, (field, item, v.details)
        held += 1
    for item in good:
        field = rng.choice(FIELDS)
        v = sm.validate(out(**{field: [item]}), vctx())
        assert "not_a_statement" not in v.reasons, (field, item, v.details)
        passed += 1
    print(f"junk held {held}/{len(junk)}, good passed {passed}/{len(good)}")
    assert held >= 150 and passed >= 40


def test_the_run_five_summary_is_rejected_and_says_why():
    """The summary run 5 of docs/real-model.md stored: every list "not a JSON object", the narrative
    the validator's own rejection said back."""
    raw = json.dumps(
        {
            **{f: ["not a JSON object"] for f in FIELDS},
            "narrative": "Your summary was rejected for these reasons: not a JSON object: Expecting value: "
            "line 1 column 1 (char 0)",
        }
    )
    v = sm.validate(raw, vctx())
    assert v.reasons == ["not_a_statement"], v.details
    assert all(f'{f} item "not a JSON object"' in v.details[0] for f in FIELDS)
    assert 'narrative item "Your summary was rejected' in v.details[0]
    # The retry shows the model which items and why.
    request = sm.build_request(model="m", turns=TURNS, ledger=LEDGER, rules=[], previous=None)
    assert v.details[0] in sm.retry_request(request, raw, v).messages[-1].content


def _quote_instruction() -> list[str]:
    """The summariser request's instruction for the customer's sentences, cut and recombined as a model
    copies it: its clauses alone, together, with the field's name spelt either way."""
    clauses = [c.strip() for c in sm.QUOTES_SECTION.split("—", 1)[1].split(",")]
    whole = ", ".join(clauses)
    field = "constraints_not_pinned"
    items = [*clauses, whole, whole.replace(field, field.replace("_", " ")), " ".join(clauses)]
    items += [f"{a} {b}" for a, b in itertools.combinations(clauses, 2)]
    return [w(i) for i in items for w in (lambda s: s, str.capitalize, lambda s: f"{s}.")]


def test_the_summariser_s_own_instruction_copied_as_an_item_is_rejected():
    """Run 10 of docs/real-model.md: a summary accepted with "copy each line, word for word, as one item of
    constraints_not_pinned" as its action taken and its constraint."""
    raw = json.dumps(
        {
            "decisions": [],
            "actions_taken": ["copy each line, word for word, as one item of constraints_not_pinned"],
            "constraints_not_pinned": ["copy each line, word for word, as one item of constraints_not_pinned"],
            "open_questions": [],
            "narrative": "The customer wants to know when the second parcel arrives.",
        }
    )
    assert sm.validate(raw, vctx()).reasons == ["not_a_statement"]
    for item in _quote_instruction():
        for field in FIELDS[1:]:
            v = sm.validate(out(**{field: [item]}), vctx())
            assert "not_a_statement" in v.reasons, (field, item, v.details)


@pytest.mark.parametrize(
    "item",
    [
        "The customer asked for a copy of the invoice for [damaged_order].",
        "Staff sent one replacement for [garden_table].",
        "One parcel is still missing.",
        "Copy of the refund confirmation sent to the customer.",
        "The customer wants each line of the order refunded, one by one.",
    ],
)
def test_items_about_a_copy_or_one_thing_of_the_ticket_pass(item):
    v = sm.validate(out(actions_taken=[item]), vctx())
    assert "not_a_statement" not in v.reasons, v.details


def test_a_narrative_of_nothing_is_rejected_but_an_account_passes():
    assert "not_a_statement" in sm.validate(out(narrative="N/A"), vctx()).reasons
    assert "not_a_statement" in sm.validate(out(narrative="The narrative."), vctx()).reasons
    assert sm.validate(out(narrative="The customer's table arrived scratched; refunded 40.00 USD."), vctx()).ok


def test_the_customer_s_own_sentence_to_quote_is_never_judged():
    quote = "TODO."  # whatever the customer wrote, word for word, is theirs
    v = sm.validate(out(constraints_not_pinned=[quote]), vctx(quotes=[quote]))
    assert "not_a_statement" not in v.reasons, v.details


def test_without_the_ticket_s_words_only_the_form_is_judged():
    """A run stored before the vocabulary was kept: text about elsewhere is not judged, placeholders are."""
    assert "not_a_statement" not in sm.validate(out(decisions=[ELSEWHERE[0]]), ctx()).reasons
    assert "not_a_statement" in sm.validate(out(decisions=["N/A"]), ctx()).reasons
    assert "not_a_statement" in sm.validate(out(decisions=[ELSEWHERE[0]]), vctx()).reasons


def test_the_vocabulary_is_the_ticket_s_own_text_not_the_request_s_instructions():
    vocab = set(VOCAB)
    assert {"scratch", "table", "parcel", "batch"} <= vocab  # the turns' words
    assert not {statements.stem(w) for w in ("decisions", "ledger", "narrative", "json")} & vocab


@pytest.mark.django_db
def test_junk_then_a_real_summary_is_retried_and_junk_twice_falls_back():
    good = {
        "decisions": ["keep the table; partial refund agreed"],
        "actions_taken": ["issue_refund on [damaged_order]"],
        "constraints_not_pinned": ["I don't want a replacement."],
        "open_questions": ["when does [second_parcel] arrive?"],
        "narrative": "The buyer's [garden_table] from [damaged_order] arrived scratched; refunded; parcel tracked.",
    }
    junk = json.dumps({**good, "decisions": ["not a JSON object"]})

    def queued(ticket):
        tc = ticket.ticket_class
        tc.token_budget, tc.trigger_fraction = 2000, 0.5
        tc.save()
        return compaction_consider(ticket_id=ticket.pk)

    ticket = long_ticket()
    model = ScriptedModel([ModelResponse(text=junk), ModelResponse(text=json.dumps(good))])
    run = compaction_run(queued(ticket).pk, gateway=Gateway(override=model))
    assert run.status == CompactionRun.Status.SUCCEEDED and run.attempts == 2
    assert run.attempt_log[0]["reasons"] == ["not_a_statement"]
    assert "not a JSON object" not in Summary.objects.get(ticket=ticket, is_current=True).text

    other = long_ticket()
    run = compaction_run(queued(other).pk, gateway=Gateway(override=ScriptedModel([ModelResponse(text=junk)] * 2)))
    assert run.status == CompactionRun.Status.FALLBACK
    summary = Summary.objects.get(ticket=other, is_current=True)
    assert summary.fallback and "not a JSON object" not in summary.text


@pytest.mark.parametrize("ack", ["Noted.", "Alright.", "All right!", "OK.", "Understood.", "Sounds good."])
def test_a_bare_acknowledgement_is_dropped_from_the_decisions_not_a_reason_to_reject(ack):
    """The offline agent answers "OK thanks" with "Alright. Is there anything else …?": the summariser
    keeps it as a decision; it decides nothing, like a pleasantry, and is dropped. Elsewhere it is junk."""
    v = sm.validate(out(decisions=[f"turn 84: {ack}", "keep the table; partial refund agreed"]), vctx())
    assert v.ok and v.fields.decisions == ["keep the table; partial refund agreed"], v.details
    assert "not_a_statement" in sm.validate(out(open_questions=[ack]), vctx()).reasons
