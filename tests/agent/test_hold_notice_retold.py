"""A hold's notice told over to the customer is Sundry's words: asked again, then held.

A real 0.5B model read "The rest of a reply was held for staff (about_customer); it was not sent: …" and wrote
to the customer "I'm sorry, but I don't have any information …, as the rest of the reply was held for staff
(markup)." — twice (docs/real-model.md, run 18). Sundry holds *replies*, and names its reasons as codes in
brackets; neither is anything a customer's request can be. The reading (`replycheck.own_words`) takes a reply,
answer, response or message said to be held, and "held for staff" with a reason code after it. The cases come
from a grammar; look-alikes hold other things (a refund held for approval, a parcel held at customs) or hold
a reply up. The 882 recorded GPT-4.1 replies are the corpus of false flags. Negative control: with the reading
off, the same sentences post.
"""

from __future__ import annotations

import itertools
import re

import pytest

from sundry.agent.guards import replycheck
from sundry.evals import scorecard
from tests.agent import ownwords, recorded

ORDER = "SU-20595"
DETS = ["the", "a", "my", "this", "our"]
MODS = ["", "rest of the ", "last ", "previous "]
NOUNS = ["reply", "answer", "response", "message"]
VERBS = ["was held", "has been held", "is being held", "got held"]
TAILS = ["", " for staff", " for staff (markup)", " for staff (call_as_text)", " and not sent"]
FRAMES = [
    "I'm sorry, but I don't have any information about order {o}, as {s}.",
    "{S}.",
    "Sure! {S}; someone will reply here.",
]
CODES = ["markup", "notice", "about_customer", "invented_id", "unsupported_claim", "bare_refusal"]


def _sentence(det, mod, noun, verb, tail) -> str:
    # "the rest of the reply": the determiner stands before "rest", and "the" before the noun.
    return f"{det} {mod}{noun} {verb}{tail}" if not mod.startswith("rest") else f"{det} rest of the {noun} {verb}{tail}"


def positives() -> list[str]:
    out = []
    for (det, mod, noun, verb, tail), frame in itertools.product(
        itertools.product(DETS, MODS, NOUNS, VERBS, TAILS), FRAMES
    ):
        s = _sentence(det, mod, noun, verb, tail)
        out.append(frame.format(o=ORDER, s=s, S=s[0].upper() + s[1:]))
    return out + [f"Your request was held for staff ({code})." for code in CODES]


LOOK_ALIKES = [
    f"Your refund for {ORDER} was held for staff approval; a colleague will look at it today.",
    "Your refund is held for staff (manual) review.",
    "Your parcel was held at customs for two days.",
    "The parcel has been held at the depot.",
    "Our reply was held up by a system outage, sorry for the wait.",
    "The reply from the carrier was delayed.",
    "Your message has been received and a colleague will reply here.",
    "Your order is on hold until the payment clears.",
    "The courier's response was that the address was incomplete.",
    "I've held the item for you until Friday.",
    "Your reply was very helpful, thank you.",
    "The answer is held in our records: your order shipped on 3 May.",
]


def check(text, **kw):
    return replycheck.check_reply(text, known={ORDER}, **kw)


def test_every_retelling_of_a_hold_is_asked_again_then_held():
    missed = ownwords.missed(
        positives(), known={ORDER}, reasons_ok=lambda r: "notice" in r, counted=scorecard.OWN_WORDS
    )
    print(f"holds retold: {len(positives())}, missed {len(missed)}")
    assert len(positives()) > 1000 and not missed, missed[:5]


@pytest.mark.parametrize("text", LOOK_ALIKES)
def test_other_things_held_post(text):
    assert not replycheck.own_words(text) and check(text).action == replycheck.POST


def test_negative_control_with_the_reading_off_the_retellings_post(monkeypatch):
    before = replycheck._OWN_WORDS.pattern.split(r"|\b(?:a|the|this|that|my|our)\s+(?:last")[0]
    monkeypatch.setattr(replycheck, "_OWN_WORDS", re.compile(before, re.I))
    monkeypatch.setattr(replycheck, "PROGRAM_WORDS", False)  # a reason code retold ("call_as_text") is one too
    cases = positives()
    posted = [t for t in cases if check(t).action == replycheck.POST]
    print(f"with the reading off: {len(posted)} of {len(cases)} posted")
    assert len(posted) > len(cases) * 9 // 10


@pytest.mark.django_db
def test_no_recorded_reply_retells_a_hold():
    replies = recorded.replies()
    flagged = [r for _, r in replies if replycheck.own_words(r)]
    print(f"recorded replies: {len(replies)}, read: {len(flagged)}")
    assert len(replies) == 882 and not flagged, flagged[:3]
