"""Summaries that contradict the customer or the lanes are refused, retried with the exact errors, or
fall back; a faithful summary is accepted. Through the real compaction run with a scripted summariser."""

from __future__ import annotations

import itertools
import json

import pytest

from sundry.agent.provider.gateway import Gateway
from sundry.agent.provider.scripted import ScriptedModel
from sundry.compaction import faithful
from sundry.compaction import summariser as sm
from sundry.compaction.models import CompactionRun
from sundry.compaction.services import compaction_consider, compaction_run
from sundry.context import services as lanes
from sundry.context.models import Summary
from sundry.tickets.models import Turn
from sundry.tooling.messages import ModelResponse
from tests.compaction.helpers import long_ticket

pytestmark = pytest.mark.django_db

FAITHFUL = {
    "decisions": ["keep the table; partial refund agreed"],
    "actions_taken": ["issue_refund on [damaged_order]"],
    "constraints_not_pinned": [],
    "open_questions": ["when does [second_parcel] arrive?"],
    "narrative": "The buyer's [garden_table] from [damaged_order] arrived scratched; refunded; parcel tracked.",
}

# Each kind of contradiction, the field it sits in, the reasons the validation gives and words of its error.
REFUSED = {
    # The seeds' own failure: refused by the customer, and offered in no turn either.
    "a decision the customer refused": (
        "decisions",
        ["Customer agreed to a replacement of [garden_table]"],
        "contradicts_customer ungrounded_decision",
        "which the customer refused",
    ),
    "a constraint for what the customer refused": (
        "constraints_not_pinned",
        ["Customer wants an exchange"],
        "contradicts_customer",
        "I don't want a replacement.",
    ),
    "an action no tool result shows ran": (
        "actions_taken",
        ["cancel_order on [damaged_order]"],
        "unsupported_claim",
        "holds no such action (a cancellation)",
    ),
    "an action on another entity than the lane's": (
        "actions_taken",
        ["Refund issued on [spare_order]"],
        "unsupported_claim",
        "not [spare_order]",
    ),
    "a decision no turn contains": (
        "decisions",
        ["A return of [garden_table] was agreed"],
        "ungrounded_decision",
        "which no turn offered",
    ),
}


def ticket_with_the_customers_refusal():
    """The seeds' case: the customer wrote "I don't want a replacement" (a candidate rule, by the real
    classifier), a refund ran on one order, and the ticket knows a second order nothing was done on."""
    ticket = long_ticket()
    first = Turn.objects.get(ticket=ticket, number=1)
    lanes.rule_flag_candidates(ticket=ticket, turn=1, text=first.text, source="customer")
    lanes.ledger_record_system_id(ticket=ticket, kind="order", value="SU-40977", role="spare_order", turn=1)
    tc = ticket.ticket_class
    tc.trigger_fraction, tc.token_budget = 0.5, 2000
    tc.save()
    return ticket


def answer(**over) -> ModelResponse:
    return ModelResponse(text=json.dumps({**FAITHFUL, **over}))


def run_with(ticket, *answers):
    run = compaction_consider(ticket_id=ticket.pk)
    assert run is not None
    model = ScriptedModel(list(answers))
    return compaction_run(run.pk, gateway=Gateway(override=model)), model


def test_a_faithful_summary_is_accepted_at_once():
    ticket = ticket_with_the_customers_refusal()
    run, _ = run_with(ticket, answer())
    assert run.status == "succeeded" and run.attempts == 1, run.attempt_log
    assert Summary.objects.get(ticket=ticket, is_current=True).fields["decisions"] == FAITHFUL["decisions"]


@pytest.mark.parametrize("kind", REFUSED)
def test_each_contradiction_is_refused_and_the_retry_sees_the_exact_error(kind):
    field, value, reason, said = REFUSED[kind]
    ticket = ticket_with_the_customers_refusal()
    run, model = run_with(ticket, answer(**{field: value}), answer())
    assert run.status == "succeeded" and run.attempts == 2, run.attempt_log
    first = run.attempt_log[0]
    assert first["ok"] is False and first["reasons"] == reason.split(), first
    detail = next(d for d in first["details"] if said in d)
    assert detail in model.requests[1].messages[-1].content  # the retry carries the error word for word
    assert Summary.objects.get(ticket=ticket, is_current=True).fields[field] == FAITHFUL[field]
    # Negative control: the same output against the same run's facts without the lanes' judgement passes.
    ctx = sm.ValidationContext.from_dict({**CompactionRun.objects.get(pk=run.pk).validation_context, "lanes": None})
    assert sm.validate(first["output"], ctx).ok


def test_a_summary_that_contradicts_twice_falls_back():
    ticket = ticket_with_the_customers_refusal()
    refused = answer(decisions=["Replace the [garden_table]"])
    run, _ = run_with(ticket, refused, refused)
    assert run.status == "fallback"
    summary = Summary.objects.get(ticket=ticket, is_current=True)
    assert summary.fallback and "replace" not in summary.text.lower()


def test_what_was_done_is_true_even_where_a_rule_forbids_it():
    """A replacement staff had run regardless: recording it contradicts no one (the lane shows it)."""
    ticket = ticket_with_the_customers_refusal()
    lanes.action_record(
        ticket=ticket,
        tool="offer_replacement",
        target="SU-40118",
        arguments={},
        result={},
        turn=2,
        idempotency_key="key-replace-1",
        reversible=False,
    )
    run, _ = run_with(
        ticket, answer(actions_taken=["offer_replacement on [damaged_order]"], decisions=["a replacement was sent"])
    )
    assert run.status == "succeeded" and run.attempts == 1, run.attempt_log


# --- reading decisions: a small grammar, reads and misreads --------------------------------------

OBJECTS = {
    "replaces": ["a replacement", "an exchange", "a replacement [garden_table]", "to replace the lamp"],
    "refunds": ["a refund", "a partial refund of 10.00 USD", "their money back"],
    "cancels": ["a cancellation of [damaged_order]", "to cancel the order"],
    "returns": ["a return", "to return the item"],
}
SUBJECTS = ["Customer", "The customer", "The buyer"]
FOR = ["{s} agreed to {o}", "{s} accepted {o}", "{s} chose {o}", "{s} wants {o}", "Agreed with {s}: {o}"]
AGAINST = [
    "{s} refused {o}",
    "{s} does not want {o}",
    "{s} doesn't want {o}",
    "{s} declined {o}",
    "{s} turned down {o}",
    "{o} ruled out by {s}",
    "{s} said no to {o}",
    "{s} will never accept {o}",
]
# The other capability in the same sentence, against: "a refund instead of a replacement".
MIXED = ["{s} agreed to {o} instead of {x}", "{s} refused {x} and agreed to {o}", "{s} wants {o}, not {x}"]


def cases():
    caps = list(OBJECTS)
    for cap, s in itertools.product(caps, SUBJECTS):
        other = caps[(caps.index(cap) + 1) % len(caps)]
        for o in OBJECTS[cap]:
            for f in FOR:
                yield f.format(s=s, o=o), {cap}, set()
            for f in AGAINST:
                yield f.format(s=s, o=o), set(), {cap}
            for f in MIXED:
                yield f.format(s=s, o=o, x=OBJECTS[other][0]), {cap}, {other}


def test_decisions_from_a_grammar_are_read_for_and_against_their_actions(capsys):
    reads, misreads = 0, []
    for text, want_for, want_against in cases():
        got = faithful.reading(text)
        if got == (want_for, want_against):
            reads += 1
        else:
            misreads.append((text, got))
    with capsys.disabled():
        print(f"\ndecision reading: {reads} read, {len(misreads)} misread of {reads + len(misreads)}")
    assert reads > 500 and not misreads, misreads[:10]


# Phrasings outside the grammar, kept as written (not tuned to): the figure is reported, not fitted.
HELD_OUT = [
    ("Customer is happy with a replacement", {"replaces"}, set()),
    ("Going ahead with a replacement", {"replaces"}, set()),
    ("Customer would rather not have a replacement", set(), {"replaces"}),
    ("Customer isn't interested in a replacement", set(), {"replaces"}),
    ("A replacement is out of the question", set(), {"replaces"}),
    ("Customer prefers to keep the item over a replacement", set(), {"replaces"}),
    ("Refund approved for [damaged_order]", {"refunds"}, set()),
    ("Customer opted for store credit, no refund", set(), {"refunds"}),
    ("We'll send a new one", {"replaces"}, set()),
    ("Customer asked us to hold off on cancelling", set(), {"cancels"}),
    ("Customer is fine with a return label by e-mail", {"returns", "contacts_customer:email"}, set()),
    ("Customer does not want to be e-mailed", set(), {"contacts_customer:email"}),
]


def test_held_out_phrasings_reads_and_misreads(capsys):
    misread = [t for t, f, a in HELD_OUT if faithful.reading(t) != (f, a)]
    with capsys.disabled():
        print(f"\nheld-out decision reading: {len(HELD_OUT) - len(misread)} read, {len(misread)} misread: {misread}")
    # A misread refusal refuses a faithful summary (retried, or trimmed): the safe side, but counted.
    assert len(misread) <= 3


def test_negative_control_a_reader_blind_to_refusals_misreads_the_grammar(monkeypatch):
    monkeypatch.setattr(faithful, "_AGAINST", faithful.re.compile(r"(?!)"))  # matches nothing
    misread = sum(faithful.reading(t) != (f, a) for t, f, a in cases())
    assert misread >= 300, misread  # every refusal read as a decision for it
