"""A declared tool's identifier in a reply is a call written out in a shape no reader knows (real-model
run 16: "TOOL (type: function, function: issue_refund)", "offer_replacement (type: function, …)"), and
"(no reply)" is what a re-ask shows as the model's own empty answer: neither is ever posted."""

import itertools

import pytest

from sundry.agent.guards import replycheck
from sundry.tooling.domain import get_domain
from tests.agent import recorded

TOOLS = frozenset(get_domain().tools)  # the declared tools, by name
NAMED = sorted(t for t in TOOLS if "_" in t)
FRAMES = [
    "TOOL (type: function, function: {t})",
    "{t} (type: function, function: {t})",
    "ORDER (status: shipped) {t}",
    "I will use {t} for your order SU-21487.",
    "Calling {t} now.",
    "- {t}",
    "{t}",
    "Result of {t}: done.",
    "Next step: {t}(order_number=SU-21487)",
]
LOOK_ALIKES = [
    "I can issue a refund for order SU-21487 once you confirm.",
    "Your order SU-21487 has been located; I'll check the parcel.",
    "Would you like a replacement or a refund?",
    "I've noted that you prefer phone calls.",
    "The tracking shows your parcel is on its way.",
    "Let me look up the order for you.",
    "Please send the order number, e.g. SU-21487.",
]
NO_REPLY = ["(no reply)", "(No reply)", "(no reply) ", "Sorry: (no reply)"]


def _verdict(text, retried=False):
    return replycheck.check_reply(text, known={"SU-21487"}, tools=TOOLS, retried=retried)


def _cases():
    return [f.format(t=t) for f, t in itertools.product(FRAMES, NAMED)]


def test_every_tool_name_in_every_frame_is_asked_again_then_held():
    assert len(NAMED) >= 5
    cases = _cases()
    first = [_verdict(c) for c in cases]
    assert all(v.action == replycheck.RETRY and "call_as_text" in v.reasons for v in first), [
        c for c, v in zip(cases, first) if v.action != replycheck.RETRY
    ]
    assert all(_verdict(c, retried=True).action == replycheck.HOLD for c in cases)
    print(f"held: {len(cases)} ({len(FRAMES)} frames × {len(NAMED)} tool names)")


@pytest.mark.parametrize("text", LOOK_ALIKES)
def test_the_tools_said_in_english_post(text):
    assert _verdict(text).action == replycheck.POST


@pytest.mark.parametrize("text", NO_REPLY)
def test_the_re_asks_no_reply_copied_back_is_never_posted(text):
    assert _verdict(text).action != replycheck.POST
    assert _verdict(text, retried=True).action == replycheck.HOLD


def test_negative_control_with_the_reading_off_the_names_post(monkeypatch):
    monkeypatch.setattr(replycheck, "NAMES_TOOLS", False)
    plain = [c for c in _cases() if "(" not in c and ":" not in c and not c.startswith("-")]
    posted = sum(_verdict(c).action == replycheck.POST for c in plain)
    print(f"posted with the reading off: {posted} of {len(plain)}")
    assert posted == len(plain)


def test_none_of_the_recorded_replies_names_a_tool():
    """The 882 real GPT-4.1 replies, read with the shop's declared tools: none is read."""
    replies = [text for _domain, text in recorded.replies()]
    assert len(replies) > 800
    ours = [r for r in replies if replycheck.names_a_tool(r, TOOLS)]
    assert ours == []
