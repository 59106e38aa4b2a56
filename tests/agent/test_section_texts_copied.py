"""A section's own text copied as a reply is Sundry's words: asked again, then held.

A real 0.5B model answered a customer seven times with the state section's heading, "STATE — established
facts; they override the summary below if the two disagree" (docs/real-model.md, run 17), and the reply
check posted it: the terms reading (`ownterms`) looked for the section's noun beside a word of its heading,
and the heading's dash stood between them. Now every section's own text — headings, what an empty section
shows, the ledger's columns, a candidate rule's mark (`ownterms.section_texts`) — is read as a tool's
description is (`declaredwords`), and a heading's dash counts as the space between a noun and its word.

The cases come from a grammar (a section text × a lead-in × a case × what follows); look-alikes use the
same words in a customer's sense. The 882 recorded replies of a strong model (τ²-bench) are the corpus of
false flags. Through the real loop, neither a reply nor `reply_to_customer`'s message carrying one reaches
the customer's page. Negative control: with the reading off, the same replies are posted.
"""

from __future__ import annotations

import itertools
import re

import pytest

from sundry.agent.guards import ownterms, replycheck
from sundry.agent.loop import agent_run
from sundry.agent.provider.gateway import Gateway
from sundry.agent.provider.scripted import ScriptedModel
from sundry.context import render
from sundry.evals import scorecard
from sundry.tickets.models import Turn
from tests.agent import ownwords, recorded
from tests.agent.claimcase import customer_reads, open_case, reply_via

ORDER = "SU-21487"
RUN_17 = render.STATE_HEADING  # what the customer read, word for word, seven times

LEADS = ["", "Sure! ", "Here is what I have:\n", "- "]
CASES = [str, str.lower, str.upper]
# What follows on a line of its own: a short text (under `declaredwords.RUN_WORDS` words, "SUNDRY SUPPORT
# AGENT — INSTRUCTIONS") counts only as a line or sentence of its own, never run into one of the reply's.
AFTER = ["", f"\nLet me check your order {ORDER}.", "\n\nThanks for waiting."]


def heads() -> list[str]:
    """A heading's name and the first words after its dash, as a model cuts it short."""
    out = []
    for heading in render.HEADINGS.values():
        name, dash, rest = heading.partition(" \u2014 ")
        if dash:
            out.append(f"{name} \u2014 {' '.join(rest.split()[:2]).rstrip(';,')}")
    return out


def positives() -> list[str]:
    texts = [*ownterms.section_texts(), *heads()]
    return [f"{lead}{case(text)}{after}" for text, lead, case, after in itertools.product(texts, LEADS, CASES, AFTER)]


# The sections' words in a customer's sense, and sentences that share most of a section text's words.
LOOKALIKES = [
    "The state of your parcel — established by the carrier — is 'in transit'.",
    "These facts are established: your order shipped on 3 May.",
    "Nothing has been established yet about why the parcel is late.",
    "If the two amounts disagree, the one on your receipt is right.",
    "The summary below lists your orders.",
    "Here is a summary of the earlier messages about your refund.",
    "Our rules for returns are on the help page.",
    "I've checked the status of your order; it is verified as delivered.",
    "Your identifiers: order number and e-mail.",
    "The value and the kind of item you returned are on the label.",
    "No rules apply to gift orders.",
    "Your state — California — charges sales tax.",
    "Please check the shipping instructions on the box.",
    "Our support agent will reply here shortly.",
]


def check(text, **kw):
    return replycheck.check_reply(text, known={ORDER}, **kw)


def test_every_section_text_copied_is_asked_again_then_held():
    missed = ownwords.missed(positives(), known={ORDER}, counted=scorecard.OWN_TERMS)
    print(f"section texts copied: {len(positives())} replies, missed {len(missed)}")
    assert len(positives()) > 300 and not missed, missed[:5]


def test_the_scorecard_counts_a_posted_copy_as_not_for_the_customer():
    assert scorecard.not_for_customer(RUN_17) == [scorecard.OWN_TERMS]
    assert all(scorecard.not_for_customer(t) == [] for t in LOOKALIKES)


def test_the_sections_words_in_a_customers_sense_are_posted():
    flagged = [(t, ownterms.used(t)) for t in LOOKALIKES if check(t).action != replycheck.POST]
    print(f"look-alikes: {len(LOOKALIKES)}, flagged {len(flagged)}")
    assert not flagged, flagged


def test_the_texts_are_the_sections_own():
    """Every heading and every empty section's text is read; a section added in render is read at once."""
    texts = ownterms.section_texts()
    assert set(render.HEADINGS.values()) <= set(texts)
    assert {render.NO_RULES, render.NO_IDS, render.NO_STATE, render.LEDGER_COLUMNS} <= set(texts)


def _off(monkeypatch):
    """The reading before: no section texts, and only words (no dash) between a noun and its word."""
    monkeypatch.setattr(ownterms, "section_texts", lambda: ())
    monkeypatch.setattr(ownterms, "_BETWEEN", r"(?:\s+[\w'\u2019-]+){0,%d}?\s+" % ownterms.NEAR)
    ownterms._terms.cache_clear()


def test_negative_control_with_the_reading_off_the_copies_are_posted(monkeypatch):
    cases = positives()
    _off(monkeypatch)
    try:
        posted = [t for t in cases if check(t).action == replycheck.POST]
        print(f"with the reading off: {len(posted)} of {len(cases)} posted")
        # Those still held name a section as its heading does ("rules in force", "ID ledger", "summary of
        # earlier turns"): the terms reading had them already.
        assert RUN_17 in posted and len(posted) > len(cases) // 2
        assert all(not re.search(r"rules in force|ledger|summary of earlier", t, re.I) for t in posted)
    finally:
        monkeypatch.undo()
        ownterms._terms.cache_clear()


@pytest.mark.django_db
def test_no_recorded_reply_carries_a_section_text():
    replies = recorded.replies()
    flagged = [r for _, r in replies if ownterms.used(r)]
    print(f"recorded replies: {len(replies)}, flagged {len(flagged)}")
    assert len(replies) == 882 and not flagged, flagged[:3]


# --- through the loop ------------------------------------------------------------------------------------

FINAL = f"Your order {ORDER} is with the carrier; I've asked our team to look into it."


@pytest.fixture
def case(django_user_model):
    return open_case(django_user_model, f"Where is my order {ORDER}?", order=ORDER, subject="Late", username="ines")


def _run(case, via):
    model = ScriptedModel([reply_via(via, RUN_17)] * 2 + [reply_via("reply", FINAL)] * 3)
    agent_run(case["ticket"].pk, gateway=Gateway(override=model))
    return customer_reads(case)


@pytest.mark.django_db
@pytest.mark.parametrize("via", ["reply", "reply_to_customer"])
def test_run_17s_reply_never_reaches_the_customer(case, via):
    reads = _run(case, via)
    assert "established facts" not in reads.lower()
    assert Turn.objects.filter(ticket=case["ticket"], kind=Turn.Kind.MESSAGE, author="agent").exists()


@pytest.mark.django_db
def test_negative_control_through_the_loop_the_heading_is_posted(case, monkeypatch):
    _off(monkeypatch)
    try:
        assert "established facts" in _run(case, "reply")
    finally:
        monkeypatch.undo()
        ownterms._terms.cache_clear()
    assert Turn.objects.filter(ticket=case["ticket"], kind=Turn.Kind.MESSAGE, author="agent").exists()
