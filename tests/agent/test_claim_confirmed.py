"""A reply that says the customer confirmed an action is judged on the confirmation cards.

The statements come from a grammar (subject × verb × tense × action × record named or
not × amount or not), not written for the rule; each is judged against generated
states: nothing, an open card, a declined card, the action run with no card, a
confirmed card of another kind, on another record or for another figure — held — and
a confirmed card for it, by the customer or by staff on their behalf — passed.
Questions, requests and conditions claim nothing. Negative control: with the reading
taken out, every generated false claim passes. Through the real loop with the scripted
model, a plain reply and a `reply_to_customer` message that claim a confirmation no
card shows never reach the customer's page; with the card confirmed by staff they do,
and `model_check`'s reading of what the customer read counts them true (false once the
card is made unconfirmed).
"""

from __future__ import annotations

import itertools
from collections import Counter
from datetime import timedelta

import pytest
from django.utils import timezone

from sundry.agent import proposals
from sundry.agent.guards import confirmclaims, replyclaims
from sundry.agent.guards.replyclaims import CONFIRMED, DECLINED, OPEN, Proposal
from sundry.agent.loop import agent_run
from sundry.agent.models import Confirmation
from sundry.agent.provider.gateway import Gateway
from sundry.agent.provider.scripted import ScriptedModel
from sundry.context.lanes import ActionData
from sundry.evals import scorecard
from sundry.tickets.models import Turn
from sundry.tooling.domain import get_domain
from sundry.tooling.messages import ModelResponse, ToolCall
from tests.agent.claimcase import customer_reads, open_case, reply_via
from tests.agent.test_claim_modes import ledger_of

ORDER, OTHER = "SU-41001", "SU-41002"
KINDS = replyclaims.kinds_of(get_domain().tools)
TOOL = {"refund": "issue_refund", "cancel": "cancel_order", "return": "book_return", "replace": "offer_replacement"}

# (subject, its perfect auxiliary)
SUBJECTS = [("You", "have"), ("You", "'ve"), ("The customer", "has"), ("The customer", "'s")]
VERBS = ["confirmed", "agreed to", "approved", "accepted", "authorised"]
TENSES = ["{s} {v}", "{s}{a} {v}", "{s} {a} already {v}"]
OBJECTS = {
    "refund": ["the refund{amt}{on}", "your refund{amt}{on}"],
    "cancel": ["the cancellation of {rec}", "cancelling {rec}"],
    "return": ["the return{on}"],
    "replace": ["the replacement{on}", "the exchange{on}"],
}
# Other shapes of the same claim: the noun ("your confirmation of …"), thanks, the passive.
OTHER_SHAPES = [
    "Your confirmation of {obj} was received.",
    "The customer's approval of {obj} has been recorded.",
    "Thank you for confirming {obj}.",
    "Thanks for agreeing to {obj}.",
]
PASSIVE = {
    "refund": "The refund{amt}{on} was confirmed by you.",
    "cancel": "The cancellation{on} has been approved by the customer.",
}


def _objects(kind):
    for template, named, amount in itertools.product(OBJECTS[kind], (True, False), (True, False)):
        if amount and kind != "refund":
            continue
        if not named and "{rec}" in template:
            continue
        yield (
            named,
            amount,
            template.format(
                amt=" of 13.00 USD" if amount else "", on=f" on {ORDER}" if named else "", rec=ORDER if named else "it"
            ),
        )


def _cases():
    for kind in OBJECTS:
        for named, amount, obj in _objects(kind):
            for (subject, aux), verb, tense in itertools.product(SUBJECTS, VERBS, TENSES):
                if aux.startswith("'") and "already" in tense:
                    continue
                if not aux.startswith("'") and tense == "{s}{a} {v}":
                    continue
                head = tense.format(s=subject, a=aux if aux.startswith("'") else aux, v=verb)
                yield kind, named, amount, f"{head} {obj}."
            for shape in OTHER_SHAPES:
                yield kind, named, amount, shape.format(obj=obj)
        for named, amount in itertools.product((True, False), (True, False)):
            if kind in PASSIVE and (kind == "refund" or not amount):
                yield (
                    kind,
                    named,
                    amount,
                    PASSIVE[kind].format(amt=" of 13.00 USD" if amount else "", on=f" on {ORDER}" if named else ""),
                )


CASES = list(dict.fromkeys(_cases()))

# Asking for a confirmation, or one to come, claims none.
NOT_CLAIMS = [
    f"Can you confirm the refund on {ORDER}?",
    "Have you confirmed the cancellation yet?",
    "Did you approve the return?",
    f"Please confirm the refund on {ORDER} on the card.",
    "Please confirm the cancellation using the button above.",
    "Once you confirm, the refund of 13.00 USD will be issued.",
    f"Once you have confirmed the cancellation of {ORDER}, it will go through.",
    "If you have agreed to the refund, press Confirm.",
    "As soon as you've approved the return, I'll book it.",
    "You haven't confirmed the refund yet.",
    "You have not confirmed the cancellation.",
    "You confirmed you want a refund to your card.",
    "You confirmed that the refund should go to your original card.",
    "You confirmed your address, thank you.",
    "You will need to confirm the refund on the card.",
    "I'll issue the refund when you confirm it.",
    "The refund is awaiting your confirmation.",
    "We need your confirmation of the refund before it goes ahead.",
]


def _ledger():
    return ledger_of(ORDER, OTHER)


def _agreed(text, **state) -> list:
    return [
        c
        for c in replyclaims.unsupported(text, kinds=KINDS, ledger=_ledger(), **{"actions": [], **state})
        if c.mode == replyclaims.AGREED
    ]


def _card(kind, status=CONFIRMED, on=ORDER, cents=1300, confirmed=True):
    return Proposal(TOOL[kind], (on, "13.00", "USD"), status, cents if kind == "refund" else None, "USD", confirmed)


def _states(kind, named, amount):
    other = next(k for k in TOOL if kind not in KINDS[TOOL[k]])  # a cancellation that refunds backs a refund
    held = {
        "nothing": {},
        "an open card": dict(proposals=[_card(kind, OPEN, confirmed=False)]),
        "a declined card": dict(proposals=[_card(kind, DECLINED, confirmed=False)]),
        "a confirmed card of another kind": dict(proposals=[_card(other)]),
        "the action ran with no card": dict(
            actions=[
                ActionData(
                    tool=TOOL[kind],
                    target=ORDER,
                    turn=3,
                    idempotency_key="k1",
                    reversible=False,
                    amount_cents=1300,
                    currency="USD",
                )
            ]
        ),
    }
    passed = {
        "its confirmed card": dict(proposals=[_card(kind)]),
        "its card confirmed, then refused on re-check": dict(proposals=[_card(kind, DECLINED)]),
    }
    if named:
        held["a confirmed card on another order"] = dict(proposals=[_card(kind, on=OTHER)])
    if amount:
        held["a confirmed card for another figure"] = dict(proposals=[_card(kind, cents=2500)])
    return held, passed


def test_every_generated_confirmation_is_read_as_one_of_its_action():
    read = [t for kind, _n, _a, t in CASES if (kind, "agreed") in {(c.kind, c.mode) for c in replyclaims.claims_of(t)}]
    print(f"confirmation statements read: {len(read)}/{len(CASES)}; by kind: {dict(Counter(k for k, *_ in CASES))}")
    assert len(read) == len(CASES), [t for *_, t in CASES if t not in read]
    claimed = [t for t in NOT_CLAIMS if any(c.mode == "agreed" for c in replyclaims.claims_of(t))]
    assert claimed == [], claimed
    print(f"questions, requests and conditions read as no confirmation: {len(NOT_CLAIMS)}/{len(NOT_CLAIMS)}")


def test_a_confirmation_claim_is_held_without_its_confirmed_card_and_passes_with_it():
    figures = Counter()
    for kind, named, amount, text in CASES:
        held, passed = _states(kind, named, amount)
        for state, records in held.items():
            assert _agreed(text, **records), (text, state)
            figures[f"held on {state}"] += 1
        for state, records in passed.items():
            assert not _agreed(text, **records), (text, state)
            figures[f"passed on {state}"] += 1
    for line in sorted(figures.items()):
        print(*line)


def test_negative_control_without_the_reading_every_generated_false_claim_passes(monkeypatch):
    monkeypatch.setattr(confirmclaims, "confirmed_actions", lambda sentence: [])
    through = [
        t for kind, _n, _a, t in CASES if not replyclaims.unsupported(t, kinds=KINDS, ledger=_ledger(), actions=[])
    ]
    print(f"false confirmation claims passed with the reading removed: {len(through)}/{len(CASES)}")
    # The rest say "… of the refund has been recorded", which the done-claims read already (`replyclaims`).
    rest = [t for *_, t in CASES if t not in through]
    assert all("has been recorded" in t for t in rest), rest
    assert len(through) >= len(CASES) - len(rest) and len(rest) < len(CASES) // 20


# --- from the database, through the loop -------------------------------------------------------------


@pytest.fixture
def case(django_user_model):
    text = f"The lamp on {ORDER} arrived broken, can I get 13.00 back?"
    return open_case(django_user_model, text, order=ORDER, subject="Refund", prices=(12999,))


def _staff_confirmed_card(ticket, status=Confirmation.Status.CONFIRMED, via=Confirmation.Via.STAFF):
    return Confirmation.objects.create(
        ticket=ticket,
        tool="issue_refund",
        arguments={"order_number": ORDER, "amount": "13.00", "currency": "USD", "reason": "damaged"},
        digest="d1",
        call_id="r1",
        card={"amount": "13.00 USD"},
        turn=2,
        status=status,
        via=via,
        outcome="held" if status == Confirmation.Status.CONFIRMED else "",
        expires_at=timezone.now() + timedelta(hours=1),
    )


# Said to the customer, as "you": "The customer has confirmed …" is held whatever the cards (`addressee`).
SAID = f"You have confirmed the refund of 13.00 USD on {ORDER}. A colleague will review it shortly."
LOOKUP = ModelResponse(tool_calls=[ToolCall(id="g1", name="get_order", arguments={"order_number": ORDER})])


@pytest.mark.django_db
def test_cards_confirmed_by_staff_on_the_customers_behalf_are_read_as_confirmed(case):
    ticket = case["ticket"]
    card = _staff_confirmed_card(ticket)
    assert [(p.tool, p.status, p.confirmed, p.amount_cents) for p in proposals.read(ticket.pk)] == [
        ("issue_refund", CONFIRMED, True, 1300)
    ]
    Confirmation.objects.filter(pk=card.pk).update(status=Confirmation.Status.PENDING)
    assert [(p.status, p.confirmed) for p in proposals.read(ticket.pk)] == [(OPEN, False)]


@pytest.mark.django_db
@pytest.mark.parametrize("via", ["reply", "reply_to_customer"])
def test_a_confirmation_no_card_shows_never_reaches_the_customer(case, via):
    reply = reply_via(via, SAID)
    after = ModelResponse(text=f"A colleague will look at the lamp on {ORDER}.")
    agent_run(case["ticket"].pk, gateway=Gateway(override=ScriptedModel([LOOKUP, reply, reply, after])))
    assert "have confirmed the refund" not in customer_reads(case)
    if via == "reply_to_customer":
        rejection = Turn.objects.filter(ticket=case["ticket"], kind=Turn.Kind.REJECTION).last()
        assert rejection.payload["guard"] == "unsupported_claim"


@pytest.mark.django_db
@pytest.mark.parametrize("via", ["reply", "reply_to_customer"])
def test_negative_control_with_the_card_confirmed_on_their_behalf_the_same_words_are_posted(case, via):
    _staff_confirmed_card(case["ticket"])
    reply = reply_via(via, SAID)
    after = ModelResponse(text=f"A colleague will look at the lamp on {ORDER}.")
    agent_run(case["ticket"].pk, gateway=Gateway(override=ScriptedModel([LOOKUP, reply, after])))
    assert "have confirmed the refund of 13.00 USD" in customer_reads(case)
    # model_check reads the posted words again from the stored records: true with the card confirmed …
    assert scorecard.read_by_customers(case["ticket"].pk)["false_claims"] == 0
    # … and a false claim posted had the card only been shown, never confirmed.
    Confirmation.objects.filter(ticket=case["ticket"]).update(status=Confirmation.Status.PENDING)
    assert scorecard.read_by_customers(case["ticket"].pk)["false_claims"] == 1
