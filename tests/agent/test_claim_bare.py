"""Claims that name no action — "It's done.", "I'll do that now.", a bare "Yes." — are judged on the action under discussion.

The wordings come from a grammar (subject × tense × verb × object × ending; the answers
to a yes/no question × the question's frame × every declared kind of write), not written
for the rule. The action under discussion comes from generated context: the customer's
request naming it (in the shop's six kinds and in τ² airline's and telecom's own write
words), an open card when the request names none, or nothing at all. Each wording is
judged against generated states in both directions: held where the records do not back
it, passed where they do. A set of plain sentences (questions, thanks, explanations) is
held in no context and no state. The negative control takes the new reading out: the
same false claims then pass.

Through the real loop, a bare "It's done." with nothing done is asked again and held,
and passes once the call it speaks of ran; streamed, it never reaches a screen.
"""

from __future__ import annotations

import itertools
from collections import Counter

import pytest

from sundry.agent import answer
from sundry.agent.guards import bareclaims, provisional, replyclaims
from sundry.agent.guards.replyclaims import DECLINED, OPEN, Proposal
from sundry.agent.loop import agent_run
from sundry.agent.models import Confirmation
from sundry.agent.provider.gateway import Gateway
from sundry.agent.provider.scripted import ScriptedModel
from sundry.agent.services import confirmation_decide
from sundry.context.lanes import ActionData, LedgerData
from sundry.evals.domains.tau2 import AIRLINE_DECLARATION, TELECOM_DECLARATION
from sundry.tickets.models import Ticket, Turn
from sundry.tooling.domain import Domain, get_domain
from sundry.tooling.messages import ModelResponse
from tests.agent.claimcase import LOOKUP, REFUND, case, customer_reads  # noqa: F401  (fixture)

SHOP, AIRLINE, TELECOM = get_domain(), Domain.from_data(AIRLINE_DECLARATION), Domain.from_data(TELECOM_DECLARATION)
ORDER, OTHER = "SU-41001", "SU-41002"


# --- the grammar ----------------------------------------------------------------------------------


# Each declared kind of write: (domain, its tool, another write of the domain, the record and another
# of its kind, the record's kind, how a customer asks for it and asks whether it happened). English,
# written here: "{rec}" is the record.
ACTIONS = [
    (SHOP, "issue_refund", "book_return", "refund {rec}", "refunded {rec}"),
    (SHOP, "cancel_order", "book_return", "cancel {rec}", "cancelled {rec}"),
    (SHOP, "book_return", "issue_refund", "book a return for {rec}", "booked a return for {rec}"),
    (SHOP, "offer_replacement", "book_return", "send a replacement for {rec}", "sent a replacement for {rec}"),
    (SHOP, "send_email", "book_return", "e-mail me the details of {rec}", "e-mailed me the details of {rec}"),
    (SHOP, "log_phone_call", "book_return", "call me about {rec}", "called me about {rec}"),
    (
        AIRLINE,
        "update_reservation_flights",
        "update_reservation_baggages",
        "upgrade the flight on {rec}",
        "upgraded the flight on {rec}",
    ),
    (
        AIRLINE,
        "update_reservation_baggages",
        "update_reservation_flights",
        "add a bag to {rec}",
        "added a bag to {rec}",
    ),
    (
        AIRLINE,
        "cancel_reservation",
        "update_reservation_flights",
        "cancel reservation {rec}",
        "cancelled reservation {rec}",
    ),
    (
        AIRLINE,
        "send_certificate",
        "book_reservation",
        "issue a certificate for {rec}",
        "issued a certificate for {rec}",
    ),
    (TELECOM, "suspend_line", "resume_line", "suspend line {rec}", "suspended line {rec}"),
    (TELECOM, "resume_line", "suspend_line", "reactivate line {rec}", "reactivated line {rec}"),
    (TELECOM, "enable_roaming", "disable_roaming", "turn on roaming for {rec}", "turned on roaming for {rec}"),
    (TELECOM, "refuel_data", "enable_roaming", "add data to {rec}", "added data to {rec}"),
]
RECORDS = {
    "demo_shop": (ORDER, OTHER, "order"),
    "airline": ("ZFA04Y", "8JX2WO", "reservation"),
    "telecom": ("L1001", "L1002", "line"),
}
CONTACT = {"send_email", "log_phone_call"}  # a contact is with the customer, on no record
REQUESTS = ["Please {ask}.", "Can you {ask}?", "Hi, I'd like you to {ask}, thanks."]
QUESTIONS = ["Did you {ask}?", "Have you {asked} yet?", "So has someone {asked}?"]

SUBJECTS = ["It", "That", "This", "Everything", "Your request"]
AUXES = ["'s", " has been", " is now", " has now been", " was"]
PARTS = ["done", "sorted", "taken care of", "handled", "processed", "completed", "sorted out", "dealt with"]
WE = ["I've", "We've", "I have", "We have just", "I've gone ahead and"]
DID = ["taken care of", "done", "handled", "sorted", "processed", "dealt with", "sorted out"]
OBJECTS = ["it", "that", "this", "that for you", "it for you", "everything for you"]
EXCLAIMED = ["Done!", "All done.", "All sorted!", "You're all set.", "Consider it done.", "Done — all sorted."]
WILL = ["I'll", "I will", "We'll", "I'm going to", "Let me"]
LEAD = ["", "go ahead and "]
DO = ["do", "take care of", "handle", "sort out", "process", "deal with"]
ENDINGS = ["", " now", " for you", " right away"]
PASSIVE = ["{s} will be {p} today.", "{s}'ll be {p} shortly."]
DENIALS = ["It hasn't been {p} yet.", "That has not been {p}.", "I haven't {d} that yet."]
YES = ["Yes.", "Yes, it has.", "Yes, I have.", "Yep — all done.", "Yes it was.", "Yes, that's done."]
NO = ["No.", "No, it hasn't.", "No, not yet.", "Nope, not yet."]
OPENERS = ["", "Thanks for waiting. "]
CLOSERS = ["", " Anything else I can help with?"]


def _dressed(sentences):
    return [o + s + c for s, o, c in itertools.product(sentences, OPENERS, CLOSERS)]


DONE_SAID = _dressed(
    [f"{s}{a} {p}." for s, a, p in itertools.product(SUBJECTS, AUXES, PARTS)]
    + [f"{w} {d} {o}." for w, d, o in itertools.product(WE, DID, OBJECTS)]
    + EXCLAIMED
)
PROMISED = _dressed(
    [f"{w} {lead}{d} that{e}." for w, lead, d, e in itertools.product(WILL, LEAD, DO, ENDINGS)]
    + [t.format(s=s, p=p) for t, s, p in itertools.product(PASSIVE, ["It", "That", "This"], PARTS[:6])]
)
DENIED = _dressed([t.format(p=p, d=d) for t, p, d in itertools.product(DENIALS, PARTS[:6], DID[:4])])

# Plain sentences: questions, thanks and explanations, which claim nothing whatever is under discussion.
QUESTIONS_PLAIN = [
    f"{q}?"
    for q in [
        "Is there anything else I can {d} for you",
        "Would you like me to check {rec} again",
        "Did the parcel for {rec} arrive",
        "Has it arrived yet",
        "Is it done on your side",
        "Have you had a chance to restart the phone",
        "Can you confirm the address on {rec}",
        "Was that helpful",
    ]
]
THANKS = [
    "Thanks for your patience.",
    "Thank you for letting me know.",
    "You're welcome!",
    "Happy to help.",
    "No problem at all.",
    "Have a great day!",
    "Sorry for the trouble.",
]
EXPLANATIONS = [
    "That usually takes 5 to 7 business days.",
    "Once it's done, you'll get an e-mail.",
    "When that's {p}, the money goes back to your card.",
    "Let me know when it's {p} on your side.",
    "I've done some checking on {rec}.",
    "Your order {rec} has been {p} and shipped.",
    "It was delivered on 3 May.",
    "I'll check {rec} for you now.",
    "Let me look into that for you.",
    "I'll explain how this works.",
    "It's done automatically once you confirm.",
    "If that's {p}, please let me know.",
    "I can't do that, I'm afraid.",
    "You can {d} that yourself from the order page.",
    "Great, so it's resolved!",
    "That's fixed now, thanks to your restart.",
    "Your payment for this has been {p} by the bank.",
]


def _plain(rec):
    templates = QUESTIONS_PLAIN + THANKS + EXPLANATIONS
    return [t.format(rec=rec, d=d, p=p) for t in templates for d, p in zip(DO[:3], PARTS[:3], strict=True)]


# --- the records ----------------------------------------------------------------------------------


def _action(tool, target):
    return ActionData(
        tool=tool, target=target, turn=3, idempotency_key=f"{tool}-{target}", reversible=False, on=(target,)
    )


def _ledger(domain):
    record, elsewhere, kind = RECORDS[domain.name]
    return [
        LedgerData(role=f"{kind}:{v}", value=v, kind=kind, verified=True, first_seen_turn=1, last_used_turn=1)
        for v in (record, elsewhere)
    ]


def _held(domain, text, question, *, actions=(), proposals=()) -> bool:
    records = replyclaims.Records.of(domain, actions=actions, ledger=_ledger(domain), proposals=proposals)
    return bool(records.unsupported(text, question))


def _pairs(wordings, contexts):
    """Every wording and every context at least once, each wording with the contexts in turn (the full
    product is tens of thousands of checks and says no more)."""
    n = max(len(wordings), len(contexts))
    return [(wordings[i % len(wordings)], contexts[i % len(contexts)]) for i in range(n)]


def _requests():
    """(domain, tool, other tool, record, elsewhere, the customer's request) for every action and frame."""
    out = []
    for domain, tool, other, ask, _asked in ACTIONS:
        record, elsewhere, _kind = RECORDS[domain.name]
        out += [(domain, tool, other, record, elsewhere, r.format(ask=ask.format(rec=record))) for r in REQUESTS]
    return out


def _on_its_record(domain, tool) -> bool:
    """Whether a claim of the tool's action is judged on the record it names: not for a contact (with the
    customer). The six kinds are judged on the record too where the domain's owner kind is another (τ²'s
    airline declares none: a cancelled reservation is judged by the kind its tool acts on, `replyclaims._entity`)."""
    return tool not in CONTACT


def _states(mode, tool, other, record, elsewhere, domain=SHOP):
    """(name, records, held?) for a claim in `mode` of `tool` on `record`."""
    ran, card = [_action(tool, record)], [Proposal(tool, (record,), OPEN)]
    if mode == "done":
        out = [
            ("nothing ran", {}, True),
            ("its card is open, not run", {"proposals": card}, True),
            ("another write ran", {"actions": [_action(other, record)]}, True),
            ("it ran", {"actions": ran}, False),
        ]
        if _on_its_record(domain, tool):
            out.append(("it ran on another record", {"actions": [_action(tool, elsewhere)]}, True))
    elif mode == "future":
        out = [
            ("nothing", {}, True),
            ("its card was declined", {"proposals": [Proposal(tool, (record,), DECLINED)]}, True),
            ("another write's card is open", {"proposals": [Proposal(other, (record,), OPEN)]}, True),
            ("its card is open", {"proposals": card}, False),
        ]
    else:  # denied
        out = [("it ran", {"actions": ran}, True), ("nothing ran", {}, False)]
        if _on_its_record(domain, tool):
            out.append(("it ran on another record", {"actions": [_action(tool, elsewhere)]}, False))
    return out


def _judged(wordings, mode):
    figures, wrong = Counter(), []
    for text, (domain, tool, other, record, elsewhere, request) in _pairs(wordings, _requests()):
        for state, records, held in _states(mode, tool, other, record, elsewhere, domain):
            got = _held(domain, text, request, **records)
            figures[f"{mode}: {'held' if held else 'passed'} when {state}"] += 1
            if got != held:
                wrong.append((text, request, state, "held" if got else "passed"))
    return figures, wrong


# --- the tests ------------------------------------------------------------------------------------


def test_every_generated_bare_claim_is_read_in_its_mode():
    question = f"Please cancel {ORDER}."
    for mode, wordings in (("done", DONE_SAID), ("future", PROMISED), ("denied", DENIED)):
        read = [
            t for t in wordings if ("cancel", mode) in {(c.kind, c.mode) for c in replyclaims.claims_of(t, question)}
        ]
        print(f"{mode}: read {len(read)}/{len(wordings)}")
        assert len(read) == len(wordings), sorted(set(wordings) - set(read))[:10]


@pytest.mark.parametrize("mode, wordings", [("done", DONE_SAID), ("future", PROMISED), ("denied", DENIED)])
def test_a_bare_claim_is_judged_on_the_action_the_customer_asked_for_in_both_directions(mode, wordings):
    figures, wrong = _judged(wordings, mode)
    for line in sorted(figures.items()):
        print(*line)
    assert wrong == [], wrong[:10]
    assert sum(figures.values()) >= len(wordings) * 2


def test_a_bare_claim_names_the_action_an_earlier_sentence_named():
    """Not the customer's message but the reply itself names it: "Your return for … — it's done."."""
    for text, (domain, tool, other, record, elsewhere, _r) in _pairs(DONE_SAID[::4], _requests()):
        earlier = next(r for r in REQUESTS[:1]).format(ask=_ask(tool).format(rec=record))
        said = f"You asked me to {earlier[7:-1]}. {text}"
        assert _held(domain, said, "Hello?"), (said, "nothing ran")
        assert not _held(domain, said, "Hello?", actions=[_action(tool, record)]), (said, "it ran")


def _ask(tool):
    return next(ask for _d, t, _o, ask, _a in ACTIONS if t == tool)


def test_with_no_action_named_an_open_card_is_the_action_under_discussion():
    for text in DONE_SAID[::3]:
        for domain, tool, other, _ask_, _asked in ACTIONS:
            record, _e, _k = RECORDS[domain.name]
            card = [Proposal(tool, (record,), OPEN)]
            assert _held(domain, text, "Any update?", proposals=card), (text, tool, "its card is open, not run")
            assert not _held(domain, text, "Any update?", proposals=card, actions=[_action(tool, record)]), text
    for text in PROMISED[::3]:
        record, _e, _k = RECORDS["demo_shop"]
        assert not _held(SHOP, text, "Any update?", proposals=[Proposal("cancel_order", (record,), OPEN)]), text


def test_with_nothing_under_discussion_it_is_done_stands_only_on_something_done():
    for text in DONE_SAID:
        ready = "all set" in text  # readiness, not a thing done: a claim only of an action under discussion
        assert _held(SHOP, text, "Any update?") != ready, (text, "nothing was done on this ticket")
        assert not _held(SHOP, text, "Any update?", actions=[_action("book_return", ORDER)]), text
    # A promise with nothing to hold it to is left alone: "we'll get this sorted out!" may be the customer's own fix.
    assert not any(_held(SHOP, text, "Any update?") for text in PROMISED)


def _yes_no_cases():
    for domain, tool, other, ask, asked in ACTIONS:
        record, elsewhere, _kind = RECORDS[domain.name]
        for frame in QUESTIONS:
            question = frame.format(ask=ask.format(rec=record), asked=asked.format(rec=record))
            yield domain, tool, other, record, elsewhere, question


def test_a_bare_yes_or_no_answers_a_question_about_every_declared_kind_of_write():
    figures, cases = Counter(), list(_yes_no_cases())
    for reply, (domain, tool, other, record, elsewhere, question) in _pairs(_dressed(YES), cases):
        for state, records, held in _states("done", tool, other, record, elsewhere, domain):
            assert _held(domain, reply, question, **records) == held, (question, reply, state)
            figures[f"yes: {'held' if held else 'passed'} when {state}"] += 1
    for reply, (domain, tool, other, record, elsewhere, question) in _pairs(_dressed(NO), cases):
        for state, records, held in _states("denied", tool, other, record, elsewhere, domain):
            assert _held(domain, reply, question, **records) == held, (question, reply, state)
            figures[f"no: {'held' if held else 'passed'} when {state}"] += 1
    for line in sorted(figures.items()):
        print(*line)
    assert len({c[1] for c in cases}) == len(ACTIONS), "every declared kind of write was asked about"


def test_a_yes_to_will_you_is_a_promise():
    for domain, tool, other, ask, _asked in ACTIONS:
        record, _e, _k = RECORDS[domain.name]
        question = f"Will you {ask.format(rec=record)}?"
        for reply in YES[:3]:
            assert _held(domain, reply, question), (question, reply, "no card")
            assert not _held(domain, reply, question, proposals=[Proposal(tool, (record,), OPEN)]), (question, reply)


def test_plain_sentences_are_held_in_no_context_and_no_state():
    held = []
    for domain, tool, other, record, elsewhere, request in _requests():
        states = [{}, {"proposals": [Proposal(tool, (record,), OPEN)]}, {"actions": [_action(other, record)]}]
        for text, records in itertools.product(_plain(record), states):
            for question in (request, "Any update?", ""):
                if _held(domain, text, question, **records):
                    held.append((text, question, records))
    print(
        f"plain sentences: {len(_plain(ORDER))} × {len(_requests())} requests × 3 states × 3 questions; held {len(held)}"
    )
    assert held == [], held[:10]


def test_negative_control_without_the_new_reading_the_false_claims_pass(monkeypatch):
    """Take out the reading of claims that name no action and of a yes to any write: every false claim
    the grammar makes that the six kinds' own words do not name passes again."""
    before = {mode: _judged(w, mode)[1] for mode, w in (("done", DONE_SAID), ("future", PROMISED), ("denied", DENIED))}
    assert all(not wrong for wrong in before.values())
    monkeypatch.setattr(bareclaims, "readings", lambda *a, **k: [])
    monkeypatch.setattr(bareclaims, "answered", lambda *a, **k: None)
    for mode, wordings in (("done", DONE_SAID), ("future", PROMISED), ("denied", DENIED)):
        figures, wrong = _judged(wordings, mode)
        missed = [w for w in wrong if w[3] == "passed"]
        should_hold = sum(n for name, n in figures.items() if ": held" in name)
        print(f"{mode}: without the reading, {len(missed)}/{should_hold} false claims pass")
        assert len(missed) == should_hold  # not one is caught any more
    yes_cases = list(_yes_no_cases())
    passed = [(q, r) for r, (d, _t, _o, _rec, _e, q) in _pairs(_dressed(YES), yes_cases) if not _held(d, r, q)]
    assert len(passed) == max(len(_dressed(YES)), len(yes_cases))


# --- what may stream ------------------------------------------------------------------------------


def test_the_stream_judges_each_sentence_with_what_came_before_it():
    records = replyclaims.Records.of(SHOP, ledger=_ledger(SHOP), actions=[_action("book_return", ORDER)])
    text = f"I looked at the cancellation of {ORDER}. It's all done. Anything else?"

    def upto(prefix):
        return answer.sentence_passes(prefix, records, None, "Any update?")

    assert (
        provisional.shown(text, known={ORDER}, final=True, sentence_ok=upto)
        == f"I looked at the cancellation of {ORDER}."
    )
    # Negative control: judged a sentence at a time, "It's all done." stands on the return that ran.
    alone = lambda prefix: upto(provisional.sentences(prefix + " ", final=True)[-1])  # noqa: E731
    assert provisional.shown(text, known={ORDER}, final=True, sentence_ok=alone) == text
    # A bare yes streams only when what was asked ran.
    for actions, shown in (((), ""), ((_action("cancel_order", ORDER),), "Yes, it has. Anything else?")):
        facts = replyclaims.Records.of(SHOP, ledger=_ledger(SHOP), actions=actions)
        ok = lambda prefix, f=facts: answer.sentence_passes(prefix, f, None, f"Did you cancel {ORDER}?")  # noqa: E731
        assert provisional.shown("Yes, it has. Anything else?", known={ORDER}, final=True, sentence_ok=ok) == shown


# --- through the loop -----------------------------------------------------------------------------

DONE_REPLY = "Thanks for waiting. It's all done."


@pytest.mark.django_db
def test_it_is_done_with_nothing_done_is_asked_again_then_held(case):  # noqa: F811
    model = ScriptedModel([LOOKUP, ModelResponse(text=DONE_REPLY), ModelResponse(text=DONE_REPLY)])
    agent_run(case["ticket"].pk, gateway=Gateway(override=model))
    assert "all done" not in customer_reads(case)
    assert "no tool did on this ticket" in model.requests[-1].messages[-1].content  # the re-ask says why
    held = Turn.objects.filter(ticket=case["ticket"], kind=Turn.Kind.ERROR).last()
    assert "refund" in held.text and "It's all done." in held.text  # of the refund the customer asked for


@pytest.mark.django_db
def test_it_is_done_reaches_the_page_once_the_refund_ran(case):  # noqa: F811
    """The control: the customer confirms the card, the refund runs, and the same words pass."""
    agent_run(
        case["ticket"].pk,
        gateway=Gateway(override=ScriptedModel([LOOKUP, REFUND, ModelResponse(text="Please confirm on the card.")])),
    )
    card = Confirmation.objects.get(ticket=case["ticket"])
    confirmation_decide(
        card_id=card.pk,
        ticket=Ticket.objects.get(pk=case["ticket"].pk),
        confirm=True,
        digest=card.digest,
        via=Confirmation.Via.BUTTON,
        wake=False,
    )
    model = ScriptedModel([ModelResponse(text=DONE_REPLY)])
    agent_run(case["ticket"].pk, gateway=Gateway(override=model))
    assert DONE_REPLY in customer_reads(case) and len(model.requests) == 1  # posted at once, never asked again
