"""Sundry's names for its own workings, said to a customer, are its own words: asked again, then held.

A real 0.5B model told a customer "As per the rules you have pinned for this ticket, you should not see
the money …" and "you should look up it on the customer's order ledger" (docs/real-model.md, run 12): the
pinned-rules lane's words and the ID ledger's. The terms are read from the texts the model is given
(`ownterms`: the sections' headings, the markers of Sundry's messages, what an empty section shows, the
tools that keep them), so a renamed section moves the check with it. The cases come from a grammar (a
term × a sentence around it); look-alikes use the same nouns in their everyday senses ("the state of your
parcel", "the rules of our returns policy"). The 882 recorded replies of a strong model (τ²-bench) are
the corpus of false flags. Through the real loop, neither a reply nor `reply_to_customer`'s message with
such words reaches the customer's page, and the stream never shows them. Negative control: with the
reading off, the same sentences are posted.
"""

from __future__ import annotations

import itertools
import re

import pytest

from sundry.agent import answer
from sundry.agent.guards import ownterms, provisional, replycheck
from sundry.agent.loop import agent_run
from sundry.agent.provider.gateway import Gateway
from sundry.agent.provider.scripted import ScriptedModel
from sundry.context import render
from sundry.tickets.models import Turn
from sundry.tooling.domain import GENERIC_PROMPT
from sundry.tooling.tools import REGISTRY
from tests.agent import recorded
from tests.agent.claimcase import customer_reads, open_case, reply_via

ORDER = "SU-21487"
# What reached a customer's page in run 12.
RUN = [
    f"To find your order {ORDER}, you should look up it on the customer's order ledger and confirm that it has "
    "not been modified since the last time you viewed the ticket.",
    f"As per the rules you have pinned for this ticket, you should not see the money for the order {ORDER} until "
    "it has been returned or cancelled.",
]

# Sundry's terms as a reply uses them: each section's name, its noun with the words its texts set beside it,
# the tools that keep it, and "in the state" where a fact goes.
TERMS = [
    "the rules you have pinned",
    "the rules pinned for this ticket",
    "the pinned rules",
    "your pinned constraints",
    "the constraints you pinned",
    "the rules in force",
    "the customer's order ledger",
    "your ledger",
    "the ID ledger",
    "a ledger entry",
    "the state fields",
    "the state field for the amount",
    "the established state",
    "the state lane",
    "the summary of earlier turns",
    "a system notice",
    "the staff note to the agent",
    "the tool result",
]
FRAMES = [
    "As per {t}, you should not see the money for {order} yet.",
    "I've checked {t} for your order {order}.",
    "You can look it up in {t}.",
    "{T} shows your order {order} as shipped.",
    "Thanks for waiting. According to {t}, a refund is not possible.",
]
# Where a fact goes, said as the instructions say it; the last two as real small models posted them (run 10's
# promise, tests/agent/test_claim_promises.py, and a reply for staff, tests/agent/test_reply_addressee.py).
PLACED = [
    "I'll record it in the state.",
    f"I've noted your order {ORDER} in the state, so nothing is lost.",
    "Let me save that in the state; then I'll check the parcel.",
    "Your delivery date is recorded in the state (as you asked).",
    "We will record the refund in the state. Please confirm the refund amount.",
    "If you need any information, you can record it in the state.",
]


def positives() -> list[str]:
    out = [f.format(t=t, T=t[0].upper() + t[1:], order=ORDER) for t, f in itertools.product(TERMS, FRAMES)]
    return out + PLACED + RUN


# The same nouns, and the words beside them, in their everyday senses.
EVERYDAY = [
    "the state of your parcel",
    "the state of your refund",
    "your state's consumer rules",
    "the rules of our returns policy",
    "our returns rules",
    "a summary of your order",
    "the summary above",
    "your PIN",
    "the pinned note on our help page",
    "the shipping address fields",
    "an established courier",
    "the money for your order",
    "the recorded delivery",
]
EVERYDAY_FRAMES = [
    "I've checked {t} for your order {order}.",
    "Here's what I can tell you about {t}.",
    "Thanks for waiting. According to {t}, a refund is possible.",
]
EVERYDAY_SAID = [
    "We can ship to any address in the state of California.",
    "Please include your street, city, state and zip code.",
    "Which state do you live in?",
    "The item must be returned in the state you received it.",
    "Our records state that your parcel was delivered on 3 August.",
    "Please check the state field of your address form.",
    "I've noted it.",
    "I've recorded the fact that you called, and a colleague will look into it.",
    "Under our rules, returns must be made within 30 days.",
    "Here's a summary of the changes you requested.",
    "I'm unable to make exceptions to this rule.",
    "Let's rule out a network problem first.",
    "Your SIM is locked with a PIN; please enter it to unlock it.",
]


def lookalikes() -> list[str]:
    out = [f.format(t=t, order=ORDER) for t, f in itertools.product(EVERYDAY, EVERYDAY_FRAMES)]
    return out + EVERYDAY_SAID


def check(text, **kw):
    return replycheck.check_reply(text, known={ORDER}, **kw)


def test_every_term_as_sundry_uses_it_is_asked_again_then_held():
    missed = []
    for text in positives():
        first = check(text)
        if first.action != replycheck.RETRY or first.reasons != ["notice"] or "Sundry's own words" not in first.quoted:
            missed.append((text, first.action, first.reasons))
        elif check(text, retried=True).action != replycheck.HOLD:
            missed.append((text, "not held"))
        elif replycheck.copied(text) != "notice":
            missed.append((text, "sent by reply_to_customer"))
    print(f"terms as Sundry uses them: {len(positives())} sentences, missed {len(missed)}")
    assert not missed, missed[:5]


def test_the_runs_sentences_name_the_ledger_and_the_pinned_rules():
    assert [ownterms.used(s) for s in RUN] == ["ledger", "rules you have pinned"]


def test_everyday_uses_of_the_same_nouns_are_posted():
    flagged = [(t, ownterms.used(t)) for t in lookalikes() if check(t).action != replycheck.POST]
    print(f"look-alikes: {len(lookalikes())}, flagged {len(flagged)}")
    assert not flagged, flagged


def test_negative_control_with_the_reading_off_the_terms_are_posted(monkeypatch):
    monkeypatch.setattr(replycheck.ownterms, "used", lambda text: "")
    posted = [t for t in positives() if check(t).action == replycheck.POST]
    # The rest speak of the customer in the third person ("the customer's order ledger"): held for that.
    about = [t for t in positives() if t not in posted and check(t).reasons == [replycheck.ABOUT_CUSTOMER]]
    print(f"with the reading off: {len(posted)} of {len(positives())} posted, {len(about)} held as about the customer")
    assert len(posted) + len(about) == len(positives()) and len(about) < 10
    assert all(replycheck.copied(t) == "" for t in posted)


def test_the_terms_come_from_the_texts_the_model_reads(monkeypatch):
    """Each section's name and noun is its heading's, each marker's name its own; a section added in render
    moves the check with it, and every word the terms set beside a noun is in Sundry's texts."""
    terms = ownterms.terms()
    for lane, heading in render.HEADINGS.items():
        if lane == "system":
            continue  # its words are the markers'
        name = re.split(r"\s+[\u2014(]", heading)[0].lower().replace(" for this ticket", "")
        if " " in name:
            assert terms.names.search(f"see the {name}"), name
    for prefix in render.NOT_CUSTOMER_PREFIXES:
        assert terms.names.search(prefix.strip("[] ")), prefix
    sources = " ".join(
        [*render.HEADINGS.values(), render.NO_RULES, *render.STATE_SECTIONS.values(), GENERIC_PROMPT]
        + [f"{t.name} {t.description}" for t in REGISTRY.values() if t.local]
    ).lower()
    for word in ("pinned", "fields", "established", "constraint", "in the state"):
        assert word in sources, word
    # A section added to the request: its noun is Sundry's at once, its name too.
    assert not ownterms.used("It's in your casebook.")
    monkeypatch.setattr(render, "HEADINGS", {**render.HEADINGS, "casebook": "CASEBOOK NOTES — what is known"})
    ownterms._terms.cache_clear()
    try:
        assert ownterms.used("It's in your casebook.") == "casebook"
        assert ownterms.used("See the casebook notes.") == "casebook notes"
    finally:
        monkeypatch.undo()
        ownterms._terms.cache_clear()
    assert not ownterms.used("It's in your casebook.")


@pytest.mark.django_db
def test_no_recorded_reply_uses_sundrys_terms():
    """The 882 replies GPT-4.1 wrote to τ²-bench's customers: none is flagged. Those that use a section's
    noun at all use it in its everyday sense (an address's state, "this rule", "Here's a summary")."""
    replies = recorded.replies()
    flagged = [r for _, r in replies if ownterms.used(r)]
    nouns = re.compile(r"\b(?:" + "|".join(render.LANES) + r"|pin\w*|constraints?)\b", re.I)
    using = [r for _, r in replies if nouns.search(r)]
    print(f"recorded replies: {len(replies)}; using a section's noun {len(using)}; flagged {len(flagged)}")
    assert len(replies) == 882 and len(using) > 20 and not flagged, flagged[:3]


def _streamed(text: str) -> str:
    def posts_as_is(upto: str) -> bool:
        verdict = check(upto)
        return verdict.action == replycheck.POST and answer._plain(verdict.text) == answer._plain(upto)

    return provisional.shown(
        text,
        known={ORDER},
        final=True,
        sentence_ok=lambda upto: answer.sentence_passes(upto, None, None, "", posts_as_is),
    )


def test_no_term_is_streamed():
    opener = "Thanks for waiting. "
    for text in positives():
        shown = _streamed(opener + text)
        assert not ownterms.used(shown) and shown and (opener + text).startswith(shown), (text, shown)
    for text in lookalikes():
        assert _streamed(text) == text


# --- through the loop ------------------------------------------------------------------------------------

FINAL = f"Your order {ORDER} is with the carrier; I've asked our team to look into it."


@pytest.fixture
def case(django_user_model):
    text, inr = f"When will I see the money for {ORDER}?", {"prices": (489900,), "currency": "INR"}
    return open_case(django_user_model, text, order=ORDER, subject="Lost", username="isha", **inr)


@pytest.mark.django_db
@pytest.mark.parametrize("via", ["reply", "reply_to_customer"])
@pytest.mark.parametrize("said", RUN)
def test_the_runs_sentences_never_reach_the_customer(case, via, said):
    agent_run(
        case["ticket"].pk,
        gateway=Gateway(override=ScriptedModel([reply_via(via, said)] * 2 + [reply_via("reply", FINAL)] * 3)),
    )
    reads = customer_reads(case)
    assert "ledger" not in reads and "you have pinned" not in reads
    if via == "reply_to_customer":
        assert Turn.objects.filter(ticket=case["ticket"], kind=Turn.Kind.REJECTION).first().payload["guard"] == "notice"
    else:
        held = Turn.objects.filter(ticket=case["ticket"], kind=Turn.Kind.ERROR).last()
        assert "notice" in held.text and "Sundry's own words" in held.text


@pytest.mark.django_db
@pytest.mark.parametrize("via", ["reply", "reply_to_customer"])
def test_negative_control_with_the_reading_off_the_pinned_rules_reach_the_customer(case, via, monkeypatch):
    monkeypatch.setattr(replycheck.ownterms, "used", lambda text: "")
    said = RUN[1].replace(" until it has been returned or cancelled", "")  # no claim of an action: its words alone
    agent_run(
        case["ticket"].pk,
        gateway=Gateway(override=ScriptedModel([reply_via(via, said)] * 2 + [reply_via("reply", FINAL)] * 3)),
    )
    assert "you have pinned" in customer_reads(case)
