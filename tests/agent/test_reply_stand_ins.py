"""A reply that is nothing but a stand-in for an answer ("no reply", "[empty]") is never posted, and the model
is never shown one of Sundry's.

A re-ask used to show an empty answer to the model as "(no reply)"; a real 0.5B model copied it back, and once
the parenthesised form was read, it wrote "no reply" instead — posted four times on one ticket (docs/real-model.md,
run 17). Two changes: the re-ask shows an empty answer as nothing (the notice says what was missing), so the
placeholder never reaches the model; and a whole reply that is a placeholder — "no"/"empty" + reply, response,
answer …, or a bracketed none, null, empty, n/a — is Sundry's own words (`replycheck.own_words`): asked again,
then held, counted by the scorecard. The cases come from a grammar; look-alikes are answers that begin the same
way. The 882 recorded GPT-4.1 replies are the corpus of false flags. Negative controls: with the reading off the
stand-ins post; with the old re-ask the model reads "(no reply)".
"""

from __future__ import annotations

import itertools

import pytest

from sundry.agent.guards import replycheck
from sundry.agent.loop import agent_run
from sundry.agent.provider.gateway import Gateway
from sundry.agent.provider.scripted import ScriptedModel
from sundry.evals import scorecard
from sundry.portal.selectors import customer_turns
from sundry.tooling.messages import ModelResponse
from tests.agent import ownwords, recorded
from tests.agent.claimcase import open_case, reply_via

ORDER = "SU-21339"
HEADS = ["no", "empty"]
NOUNS = ["reply", "response", "answer", "message", "text", "content", "output"]
SUFFIXES = ["", " given", " provided"]
WRAPS = ["{}", "({})", "[{}]", "*{}*"]
CASES = [str.lower, str.capitalize, str.upper]
ENDS = ["", "."]
BRACKETED = ["none", "null", "nil", "empty", "blank", "nothing", "n/a", "na", "no text"]
BRACKETS = ["({})", "[{}]", "{{{}}}", "< {} >"]


def positives() -> list[str]:
    spoken = [
        w.format(c(f"{h} {n}{s}")) + e
        for h, n, s, w, c, e in itertools.product(HEADS, NOUNS, SUFFIXES, WRAPS, CASES, ENDS)
    ]
    marked = [b.format(c(x)) for x, b, c in itertools.product(BRACKETED, BRACKETS, CASES)]
    return spoken + marked + ["null", "NULL"]


# Answers that begin the same way, and the bare words a stand-in uses, said as answers.
LOOK_ALIKES = [
    "No reply yet from the courier; I've asked them again.",
    "There's no response from the carrier yet, so I've asked our team to chase it.",
    "No answer is needed: your refund went through on 3 May.",
    "No message was left on your phone, but I can call you back.",
    "Empty boxes can go in your recycling.",
    "None.",
    "Nothing.",
    "Nothing to pay on order SU-21339.",
    "No.",
    "None of your orders is late.",
    "The voucher is null and void after 30 days.",
    "Your reply came through — thanks!",
    "Reply STOP to opt out of text messages.",
    "N/A",
]


def check(text, **kw):
    return replycheck.check_reply(text, known={ORDER}, **kw)


def test_every_stand_in_is_asked_again_then_held_and_refused_as_tool_text():
    # "[no reply]", "<empty>": a bracket a markup reading holds first; never posted either way.
    missed = ownwords.missed(
        positives(), known={ORDER}, reasons_ok=lambda r: r in (["notice"], ["markup"]), counted=scorecard.OWN_WORDS
    )
    print(f"stand-ins: {len(positives())}, missed {len(missed)}")
    assert len(positives()) > 1000 and not missed, missed[:5]


def test_answers_that_begin_the_same_way_post():
    flagged = [t for t in LOOK_ALIKES if check(t).action != replycheck.POST or replycheck.own_words(t)]
    print(f"look-alikes: {len(LOOK_ALIKES)}, flagged {len(flagged)}")
    assert not flagged, flagged


def test_negative_control_with_the_reading_off_the_stand_ins_post(monkeypatch):
    monkeypatch.setattr(replycheck, "READS_STAND_INS", False)
    cases = positives()
    posted = [t for t in cases if check(t).action == replycheck.POST]
    # Still held: the parenthesised "(no reply)" itself (the re-ask's own words), and the square- and
    # angle-bracketed ones a markup reading holds.
    held = [t for t in cases if t not in set(posted)]
    print(f"with the reading off: {len(posted)} of {len(cases)} posted")
    assert "no reply" in posted and "No response." in posted and "(none)" in posted
    assert all(t.lower().startswith(("(no reply)", "[", "<")) for t in held), held[:5]


@pytest.mark.django_db
def test_no_recorded_reply_is_a_stand_in():
    replies = recorded.replies()
    flagged = [r for _, r in replies if replycheck.own_words(r)]
    print(f"recorded replies: {len(replies)}, read as Sundry's words or a stand-in: {len(flagged)}")
    assert len(replies) == 882 and not flagged, flagged[:3]


# --- through the loop ------------------------------------------------------------------------------------

FINAL = f"I'm checking order {ORDER} now; a colleague will confirm the refund."


@pytest.fixture
def case(django_user_model):
    return open_case(
        django_user_model, f"Please refund 13.00 USD on {ORDER}.", order=ORDER, subject="Refund", username="kai"
    )


def _agent_said(case) -> list[str]:
    return [t.text for t in customer_turns(case["ticket"]) if t.author == "agent"]


@pytest.mark.django_db
def test_an_empty_answer_is_re_asked_without_a_stand_in(case):
    model = ScriptedModel([ModelResponse(text=""), ModelResponse(text=FINAL)])
    agent_run(case["ticket"].pk, gateway=Gateway(override=model))
    again = model.requests[1].messages
    assert not any("no reply" in (m.content or "").lower() for m in again)
    assert again[-1].role == "user" and "no message for the customer" in again[-1].content
    assert again[-2].role != "assistant"  # the empty answer is shown as nothing
    assert _agent_said(case) == [FINAL]


@pytest.mark.django_db
@pytest.mark.parametrize("via", ["reply", "reply_to_customer"])
def test_run_17s_no_reply_never_reaches_the_customer(case, via):
    model = ScriptedModel([reply_via(via, "no reply")] * 2 + [reply_via("reply", FINAL)] * 3)
    agent_run(case["ticket"].pk, gateway=Gateway(override=model))
    said = _agent_said(case)
    assert said and not any(t.strip().lower() == "no reply" for t in said)


@pytest.mark.django_db
def test_negative_control_through_the_loop_no_reply_is_posted(case, monkeypatch):
    monkeypatch.setattr(replycheck, "READS_STAND_INS", False)
    model = ScriptedModel([reply_via("reply", "no reply")] * 2 + [reply_via("reply", FINAL)] * 3)
    agent_run(case["ticket"].pk, gateway=Gateway(override=model))
    assert "no reply" in _agent_said(case)
