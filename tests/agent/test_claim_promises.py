"""An action promised as the object of another verb, and a request to confirm it on a card that is not there.

A real model posted, twice, "We will record the refund in the state. Please confirm the refund amount."
where no card, hold or refund existed (docs/real-model.md, run 10). The promises are generated from a
grammar — subjects × auxiliaries × verbs that carry an action out × determiners × action nouns (the six
kinds' and declared writes' nouns for their doing) — and each must be read as a promise of its action,
held with nothing on the ticket (or a declined card, a card of another kind, on another record or for
another figure), and passed on an open card, a staff hold or the action having run. The look-alikes —
the same subjects and auxiliaries with verbs that leave the action undone, objects whose head is not the
action ("the refund amount"), negations, offers, the customer's own doing, requests to confirm that name
no card — pass on an empty ticket. The negative controls take the readings out and count the promises
that pass again, and put back the old future patterns under which a write's verb after a determiner
("I'll explain the upgrade options") was promised. The real loop with the scripted model holds the
run-10 reply and posts it once its card is open.
"""

from __future__ import annotations

import itertools
import json
from collections import Counter

import pytest

from sundry.agent.guards import confirmclaims, objectpromises, replycheck, replyclaims
from sundry.agent.guards.provisional import sentences
from sundry.agent.guards.replyclaims import DECLINED, OPEN, Proposal
from sundry.agent.loop import agent_run
from sundry.agent.models import Confirmation
from sundry.agent.provider.gateway import Gateway
from sundry.agent.provider.scripted import ScriptedModel
from sundry.context.lanes import ActionData, LedgerData
from sundry.evals.domains import tau2
from sundry.tickets.models import Turn
from sundry.tooling.domain import get_domain
from sundry.tooling.messages import ModelResponse, ToolCall
from tests.agent import recorded
from tests.agent.claimcase import customer_reads, open_case

ORDER, OTHER = "SU-41001", "SU-41002"
SHOP = get_domain()
KINDS = replyclaims.kinds_of(SHOP.tools)
TOOL = {"refund": "issue_refund", "cancel": "cancel_order", "return": "book_return", "replace": "offer_replacement"}
RUN_10 = "We will record the refund in the state. Please confirm the refund amount."

# --- the grammar ------------------------------------------------------------------------------------

# (how the subject and its auxiliary open the sentence, whether the verb that follows is at work now: -ing)
OPENINGS = [
    (f"{subject} {aux}", progressive)
    for subject, forms in (
        ("I", [("will", 0), ("'ll", 0), ("am going to", 0), ("shall", 0), ("'m", 1), ("am now", 1)]),
        ("We", [("will", 0), ("'ll", 0), ("are going to", 0), ("shall", 0), ("'re", 1), ("are now", 1)]),
        ("Let", [("me", 0), ("us", 0)]),
    )
    for aux, progressive in forms
]
# Verbs that carry the action out: (base, -ing, words before the object, words after it).
DOING = [
    ("record", "recording", "", ""),
    ("log", "logging", "", ""),
    ("process", "processing", "", ""),
    ("issue", "issuing", "", ""),
    ("submit", "submitting", "", ""),
    ("arrange", "arranging", "", ""),
    ("initiate", "initiating", "", ""),
    ("complete", "completing", "", ""),
    ("finalise", "finalising", "", ""),
    ("handle", "handling", "", ""),
    ("book", "booking", "", ""),
    ("file", "filing", "", ""),
    ("prepare", "preparing", "", ""),
    ("start", "starting", "", ""),
    ("action", "actioning", "", ""),
    ("execute", "executing", "", ""),
    ("schedule", "scheduling", "", ""),
    ("lodge", "lodging", "", ""),
    ("expedite", "expediting", "", ""),
    ("kick", "kicking", " off", ""),
    ("set", "setting", " up", ""),
    ("put", "putting", "", " through"),
    ("push", "pushing", "", " through"),
    ("get", "getting", "", " sent out"),
    ("get", "getting", "", " going"),
    ("sort", "sorting", " out", ""),
    ("take", "taking", " care of", ""),
    ("go", "going", " ahead with", ""),
    ("proceed", "proceeding", " with", ""),
]
DETERMINERS = ["the", "your", "a", "that"]
NOUNS = {
    "refund": "refund",
    "cancellation": "cancel",
    "return": "return",
    "replacement": "replace",
    "exchange": "replace",
}
TAILS = ["", " now", " for you", " in the state", " right away", " today"]


def _np(det: str, noun: str) -> str:
    return f"{'an' if det == 'a' and noun[0] in 'aeiou' else det} {noun}"


def _said(opening, progressive, verb, det, noun, tail, *, named=False, amount=False) -> str:
    base, ing, before, after = verb
    amt = " of 15.00 USD" if amount else ""
    on = f" for {ORDER}" if named else ""
    return f"{opening} {ing if progressive else base}{before} {_np(det, noun)}{amt}{after}{on}{tail}.".replace(
        " '", "'"
    )


def _promises():
    """(kind, named, amount, text): every opening × verb × determiner × noun, the tails taken in turn."""
    tails = itertools.cycle(TAILS)
    for (opening, progressive), verb, det, (noun, kind) in itertools.product(
        OPENINGS, DOING, DETERMINERS, NOUNS.items()
    ):
        yield kind, False, False, _said(opening, progressive, verb, det, noun, next(tails))


def _judged_promises():
    """A sample of the grammar each with and without a record named and (refunds) a figure: judged on states."""
    for i, ((opening, progressive), verb, (noun, kind)) in enumerate(itertools.product(OPENINGS, DOING, NOUNS.items())):
        if i % 7:  # every seventh: 7 is prime to the counts of nouns and verbs, so each comes in turn
            continue
        det = DETERMINERS[i % len(DETERMINERS)]
        for named, amount in itertools.product((False, True), (False, True)):
            if amount and kind != "refund":
                continue
            yield kind, named, amount, _said(opening, progressive, verb, det, noun, "", named=named, amount=amount)


PROMISES = list(_promises())
JUDGED = list(_judged_promises())

# Verbs that leave the action undone: looking, asking, telling, passing it on.
NOT_DOING = [
    ("check", "checking", ""),
    ("double-check", "double-checking", ""),
    ("look", "looking", " into"),
    ("review", "reviewing", ""),
    ("explain", "explaining", ""),
    ("ask", "asking", " about"),
    ("tell", "telling", " you about"),
    ("verify", "verifying", ""),
    ("investigate", "investigating", ""),
    ("follow", "following", " up on"),
    ("update", "updating", " you on"),
    ("escalate", "escalating", ""),
    ("forward", "forwarding", ""),
    ("reach", "reaching", " out about"),
    ("chase", "chasing", ""),
    ("discuss", "discussing", ""),
]
# Objects whose head is not the action, after a verb that carries actions out.
HEADS = [
    "the refund amount you mentioned",
    "the refund status",
    "the return policy",
    "the refund process",
    "your preference for a refund",
    "the cancellation reason",
    "the exchange rate",
    "the replacement options",
    "the return window",
    "the refund details",
    "your reason for the return",
]
HEAD_VERBS = ["note", "record", "log", "write down", "enter"]
OTHER_LOOKALIKES = [
    "I won't process the refund.",
    "I will not record the refund.",
    "We are not processing your cancellation.",
    "We'll never log the return without you.",
    "If you'd like, I'll record the refund.",
    "Would you like me to log the refund?",
    "You'll need to put the return through yourself.",
    "Once you submit the return, we'll let you know.",
    "Your bank will process the refund.",
    "I'm sorry the refund took so long.",
    "I'll explain the refund process and the return window.",
    "Let me know if you'd like the replacement.",
    "I will record your preference for a refund.",
    "I'll note the refund amount you mentioned.",
    "I'll look into the return policy.",
    "I'll send you an update about the exchange.",
    "I'll use your e-mail for the refund.",
    "I'll use the e-mail on file.",
    "I'll confirm whether the refund went through.",
    # A request to confirm that names no card: the customer answers in the chat.
    "Please confirm the refund amount.",
    "Can you confirm the amount you want refunded?",
    "Please confirm that you want to return the lamp.",
    "Please confirm you want the refund on the card ending in 1234.",
    "Please confirm the refund to your credit card.",
    "If you see a card, please confirm the refund on it.",
]


def _lookalikes():
    for (opening, progressive), (base, ing, rest), det, noun in itertools.product(
        OPENINGS, NOT_DOING, DETERMINERS, NOUNS
    ):
        yield f"{opening} {ing if progressive else base}{rest} {_np(det, noun)}.".replace(" '", "'")
    for (opening, progressive), verb, head in itertools.product(OPENINGS, HEAD_VERBS, HEADS):
        first, _, rest = verb.partition(" ")
        if progressive:
            first = first[:-1] + "ing" if first.endswith("e") else first + ("ging" if first == "log" else "ing")
        yield f"{opening} {first}{' ' + rest if rest else ''} {head}.".replace(" '", "'")
    yield from OTHER_LOOKALIKES


LOOKALIKES = list(_lookalikes())

# Requests to confirm the action on a card (or its button): they tell the customer the card is there.
ON_CARD = [
    "Please confirm the {noun}{on} on the card.",
    "Please press Confirm on the card to approve the {noun}{on}.",
    "Please check the card to confirm the {noun}{on}.",
    "Please use the confirmation card to approve the {noun}{on}.",
    "Click Confirm to go ahead with the {noun}{on}.",
    "Could you confirm the {noun}{on} using the button below?",
]


def _on_card():
    for t, (noun, kind), named in itertools.product(ON_CARD, NOUNS.items(), (False, True)):
        yield kind, named, t.format(noun=noun, on=f" for {ORDER}" if named else "")


CARD_REQUESTS = list(_on_card())


# --- the records ------------------------------------------------------------------------------------


def _action(tool, target=ORDER, cents=None):
    return ActionData(
        tool=tool,
        target=target,
        turn=3,
        idempotency_key=f"{tool}-{target}",
        reversible=False,
        amount_cents=cents,
        currency="USD" if cents else "",
    )


def _ledger():
    return [
        LedgerData(
            role=f"order:{v}",
            value=v,
            kind="order",
            verified=True,
            first_seen_turn=1,
            last_used_turn=1,
            description="Desk lamp · delivered",
        )
        for v in (ORDER, OTHER)
    ]


def _held(text, **state) -> list:
    return replyclaims.unsupported(text, kinds=KINDS, ledger=_ledger(), **{"actions": [], **state})


def _states(kind, named, amount):
    """(states the promise must be held on, states it must pass on)."""
    tool = TOOL[kind]
    other = next(t for t in TOOL.values() if kind not in KINDS[t])
    cents = 1500 if kind == "refund" else None
    held = {
        "nothing": {},
        "a declined card": dict(proposals=[Proposal(tool, (ORDER,), DECLINED, cents, "USD")]),
        "a card of another kind": dict(proposals=[Proposal(other, (ORDER,), OPEN)]),
    }
    if named:
        held["a card on another order"] = dict(proposals=[Proposal(tool, (OTHER,), OPEN, cents, "USD")])
    if amount:
        held["a card for another figure"] = dict(proposals=[Proposal(tool, (ORDER,), OPEN, 2500, "USD")])
    passed = {
        # A confirmation card and a call held for staff are both open proposals of the call (`proposals`).
        "its open card": dict(proposals=[Proposal(tool, (ORDER, "15.00", "USD"), OPEN, cents, "USD")]),
        "its staff hold": dict(proposals=[Proposal(tool, (ORDER,), OPEN, cents, "USD")]),
        "the action ran": dict(actions=[_action(tool, cents=cents)]),
    }
    return held, passed


# --- reading and judging ----------------------------------------------------------------------------


def test_every_generated_promise_is_read_as_a_promise_of_its_action():
    missed = [
        (kind, text)
        for kind, _n, _a, text in PROMISES
        if (kind, "future") not in {(c.kind, c.mode) for c in replyclaims.claims_of(text)}
    ]
    new = sum(1 for kind, *_r, text in PROMISES if kind in objectpromises.promised_kinds(text))
    print(
        f"generated promises read as promised: {len(PROMISES) - len(missed)}/{len(PROMISES)}; by the new reading {new}"
    )
    assert missed == [], missed[:10]


def test_each_generated_promise_is_held_without_backing_and_passes_on_its_card_hold_or_action():
    figures = Counter()
    for kind, named, amount, text in JUDGED:
        held, passed = _states(kind, named, amount)
        for state, records in held.items():
            assert _held(text, **records), (text, state)
            figures[f"held on {state}"] += 1
        for state, records in passed.items():
            assert not _held(text, **records), (text, state, _held(text, **records))
            figures[f"passed on {state}"] += 1
    print(f"judged promises: {len(JUDGED)}", dict(sorted(figures.items())))


def test_the_run_10_reply_is_held_without_a_card_and_passes_with_one():
    held = _held(RUN_10)
    assert [(c.kind, c.mode, c.sentence) for c in held] == [
        ("refund", "future", "We will record the refund in the state.")
    ]
    assert held[0].why == "no card or staff hold is open for it"
    card = Proposal("issue_refund", (ORDER, "129.99", "USD"), OPEN, 12999, "USD")
    assert not _held(RUN_10, proposals=[card])


def test_generated_lookalikes_pass_on_an_empty_ticket():
    held = [(t, replyclaims.describe(h)) for t in LOOKALIKES if (h := _held(t))]
    print(f"look-alikes: {len(LOOKALIKES)}; held {len(held)}")
    assert held == [], held[:10]


# The declared writes' own nouns for their doing, with a noun the write acts on (τ² airline and telecom).
DECLARED = {
    "airline": [
        ("I'll process your flight upgrade.", "upgrade flight"),
        ("We're putting the upgrade of your flight through now.", "upgrade flight"),
        ("Let me arrange the cabin downgrade for you.", "downgrade cabin"),
        ("I will make the change to your seat.", "change seat"),
    ],
    "telecom": [
        ("I'll process the suspension of your line.", "suspend line"),
        ("We are now arranging the roaming activation.", "activate roaming"),
        ("I'm going to apply the data top-up today.", "top up data"),
        ("Let me put the reactivation of your line through.", "reactivate line"),
    ],
}
DECLARED_LOOKALIKES = {
    "airline": [
        "I'll look into the issue with your voucher.",
        "I'll resolve the issue with your certificate.",
        "I'll explain the upgrade options for your flight.",
        "I'll check the change fee for your seat.",
        "I'll note the upgrade price.",
    ],
    "telecom": [
        "I'll check the suspension status of your line.",
        "I'll explain the roaming activation process.",
        "I'll review the top-up options.",
    ],
}


def test_a_declared_writes_noun_for_its_doing_is_promised_and_judged_on_that_writes_tools():
    for name, said in DECLARED.items():
        tools = {"airline": tau2.AIRLINE, "telecom": tau2.TELECOM}[name].domain.tools
        kinds, vocab = replyclaims.kinds_of(tools), replyclaims.vocabulary_of(tools)

        def held(text, actions=()):
            return replyclaims.unsupported(text, actions=list(actions), kinds=kinds, vocab=vocab)

        for text, kind in said:
            assert (kind, "future") in {(c.kind, c.mode) for c in replyclaims.claims_of(text, vocab=vocab)}, text
            assert held(text), text
            tool = sorted(vocab.tools_by_kind[kind])[0]
            assert not held(text, [_action(tool, target="line-1")]), (text, tool)
        for text in DECLARED_LOOKALIKES[name]:
            assert objectpromises.promised_kinds(text, vocab) == [], text
            assert not held(text), text


def test_a_request_to_confirm_on_a_card_is_held_when_no_card_is_open():
    figures = Counter()
    for kind, named, text in CARD_REQUESTS:
        assert (kind, "pending") in {(c.kind, c.mode) for c in replyclaims.claims_of(text)}, text
        held, passed = _states(kind, named, False)
        for state, records in held.items():
            assert _held(text, **records), (text, state)
            figures[f"held on {state}"] += 1
        for state, records in passed.items():
            assert not _held(text, **records), (text, state)
            figures[f"passed on {state}"] += 1
    print(f"requests on a card: {len(CARD_REQUESTS)}", dict(sorted(figures.items())))


def test_negative_control_without_the_readings_the_promises_and_card_requests_pass(monkeypatch):
    monkeypatch.setattr(objectpromises, "promised_kinds", lambda sentence, vocab=None: [])
    monkeypatch.setattr(confirmclaims, "requested_on_card", lambda sentence: [])
    unread = [
        text
        for kind, _n, _a, text in PROMISES
        if (kind, "future") not in {(c.kind, c.mode) for c in replyclaims.claims_of(text)}
    ]
    through = [text for *_k, text in JUDGED if not _held(text)]
    cards = [text for *_k, text in CARD_REQUESTS if not _held(text)]
    print(
        f"with the readings out: {len(unread)}/{len(PROMISES)} generated promises not read as promised, "
        f"{len(through)}/{len(JUDGED)} judged ones pass on an empty ticket, "
        f"{len(cards)}/{len(CARD_REQUESTS)} requests on a card pass"
    )
    assert _held(RUN_10) == []
    # The rest are said with verbs the promise readings knew already ("I'll process the refund", "let me
    # take care of the return").
    assert len(unread) > len(PROMISES) // 2 and len(through) > len(JUDGED) // 2 and len(cards) == len(CARD_REQUESTS)


def test_negative_control_a_verbs_noun_after_any_verb_was_read_as_the_verb_itself(monkeypatch):
    """Before, a write's verb or "e-mail" up to two words after "will" was read as promised, a determiner
    between them or not: "I'll explain the upgrade options for your flight" promised an upgrade. Put the
    old patterns back and those look-alikes are held again."""
    import re

    from sundry.agent.guards import claimmodes, claimverbs

    tools = tau2.AIRLINE.domain.tools
    kinds, vocab = replyclaims.kinds_of(tools), replyclaims.vocabulary_of(tools)
    lookalikes = [t for t in DECLARED_LOOKALIKES["airline"] if t.startswith("I'll") and "the" in t.split()]
    email = ["I'll use your e-mail for the refund.", "I'll use the e-mail on file."]
    for text in lookalikes:
        assert not replyclaims.unsupported(text, actions=[], kinds=kinds, vocab=vocab), text
    assert not any(_held(t) for t in email)
    monkeypatch.setattr(claimverbs, "_FUTURE", r"(?:\b(?:will|shall)|'ll|\bgoing\s+to)\s+(?:be\s+)?(?:[\w-]+\s+){0,2}?")
    claimverbs._vocabulary.cache_clear()
    old = r"\b(?:i|we)(?:'ll|\s+will|\s+shall|(?:\s+am|'m|\s+are|'re)\s+going\s+to)\s+(?:\w+\s+){0,2}?"
    monkeypatch.setitem(
        claimmodes._CONTACT_FUTURE,
        claimmodes.EMAIL,
        re.compile(old + r"(?:e-?mail\b|send\s+you\s+(?:an?\s+|the\s+)?(?:\w+\s+)?e-?mail)", re.I),
    )
    vocab = replyclaims.vocabulary_of(tools)
    held = [t for t in lookalikes if replyclaims.unsupported(t, actions=[], kinds=kinds, vocab=vocab)]
    print(f"with the old patterns: {len(held)}/{len(lookalikes)} declared look-alikes held, e-mail ones", email)
    claimverbs._vocabulary.cache_clear()
    assert len(held) >= 3 and all(_held(t) for t in email)


# --- the real replies ---------------------------------------------------------------------------------


def test_the_real_agent_replies_of_the_tau2_traces_read_as_promises_are_promises():
    """Replies a strong model wrote to real users (τ²-bench traces, beside the checkout when present): the
    sentences the reading takes for a promise of an action, counted and each one a promise (said before the
    customer confirms, or as the call is made); none is taken for a request to confirm on a card."""

    traces = recorded.traces()
    domains = {"retail": tau2.RETAIL, "airline": tau2.AIRLINE, "telecom": tau2.TELECOM}
    replies, read, on_card = 0, [], []
    for path in sorted(traces.glob("*.json")):
        vocab = replyclaims.vocabulary_of(domains[path.name.split("_")[1]].domain.tools)
        data = json.loads(path.read_text())
        for sim in data.get("simulations", data) if isinstance(data, dict) else data:
            for m in sim.get("messages") or []:
                if m.get("role") != "assistant" or not m.get("content") or m.get("tool_calls"):
                    continue
                replies += 1
                for s in (s.strip().replace("\u2019", "'") for s in sentences(m["content"], final=True)):
                    on_card += [s] if confirmclaims.requested_on_card(s) else []
                    if s.endswith("?") or replyclaims.claimmodes.offer_rest(s) is not None:
                        continue
                    if not replyclaims.claimmodes.asks_or_offers(s) and objectpromises.promised_kinds(s, vocab):
                        read.append(s)
    print(f"real replies {replies}; sentences read as a promise of an action {len(read)}:", *read, sep="\n  ")
    assert replies > 500 and on_card == []
    # Every one promises the action itself: "I'll process the return", "I'll proceed with the cancellation".
    assert 0 < len(read) <= 12 and all(" I'll " in f" {s} " or " I will " in f" {s} " for s in read), read


# --- through the loop, judged from what the customer reads ------------------------------------------


@pytest.fixture
def case(django_user_model):
    text = f"I'd like a full refund for {ORDER} please."
    return open_case(django_user_model, text, order=ORDER, subject="Refund", prices=(12999,))


LOOKUP = ModelResponse(tool_calls=[ToolCall(id="g1", name="get_order", arguments={"order_number": ORDER})])
REFUND = ModelResponse(
    tool_calls=[
        ToolCall(
            id="r1",
            name="issue_refund",
            arguments={"order_number": ORDER, "amount": "129.99", "currency": "USD", "reason": "customer request"},
        )
    ]
)


@pytest.fixture
def promise_alone(monkeypatch):
    """Run 10's reply also names a section of Sundry's ("record the refund in the state"), its own words, held
    for that on their own (`ownterms`, tests/agent/test_internal_vocabulary.py): off here, to judge the promise."""
    monkeypatch.setattr(replycheck.ownterms, "used", lambda text: "")


@pytest.mark.django_db
def test_the_run_10_reply_is_asked_again_then_held_through_the_loop(case, promise_alone):
    model = ScriptedModel([LOOKUP, ModelResponse(text=RUN_10), ModelResponse(text=RUN_10)])
    agent_run(case["ticket"].pk, gateway=Gateway(override=model))
    assert "record the refund" not in customer_reads(case)
    assert "card or staff hold" in model.requests[-1].messages[-1].content  # the re-ask says why
    held = Turn.objects.filter(ticket=case["ticket"], kind=Turn.Kind.ERROR).last()
    assert "refund (promised)" in held.text


@pytest.mark.django_db
def test_the_run_10_reply_reaches_the_page_once_its_card_is_open(case, promise_alone):
    model = ScriptedModel([LOOKUP, REFUND, ModelResponse(text=RUN_10)])
    agent_run(case["ticket"].pk, gateway=Gateway(override=model))
    assert Confirmation.objects.get(ticket=case["ticket"]).status == Confirmation.Status.PENDING
    assert "We will record the refund in the state." in customer_reads(case) and len(model.requests) == 3
