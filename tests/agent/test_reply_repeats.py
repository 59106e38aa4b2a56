"""A reply the agent already sent to another message is asked for again once, and never streamed first.

Real-model run 19 (docs/real-model.md) posted one reply — '"Hello, Sundry! I apologize for the repetition.
It's been ages. I never saw those. How can I assist you with this?"' — to seven different customer messages in
a row. Nothing in it is false about the records, so no claim reading held it. The reading needs no grasp of the
words: the reply is word for word (case and punctuation aside) one the agent sent earlier on the ticket while
the customer has written something else since (`replycheck.repeats`). It is asked again once, with the reason;
what the model writes then is judged as any reply, and posted even if the same, since the same answer to a
question asked again in other words is right (the offline agent's scenarios ask a parcel's status twice). The
stream shows nothing while the reply is still the start of an earlier one (`replycheck.repeats_so_far`). A short
reply ("You're welcome!") may be said twice; the same words asked again get no re-ask. The scorecard shows the
repeats posted. Cases come from a grammar; the 882 recorded GPT-4.1 replies are the corpus of false flags.
Negative control: with the reading off (`replycheck.REPEATS`), every case posts at once and streams.
"""

from __future__ import annotations

import itertools
import json

import pytest
from asgiref.sync import sync_to_async

from sundry.agent import answer
from sundry.agent.guards import provisional, replycheck
from sundry.agent.provider.gateway import Gateway
from sundry.agent.provider.scripted import ScriptedModel
from sundry.agent.streaming import ReplyStream
from sundry.context.lanes import TurnData
from sundry.evals import scorecard, sources
from sundry.evals.importers import tau2_results
from sundry.tickets.models import Turn
from sundry.tickets.services import turn_append
from sundry.tooling.messages import Message, ModelRequest, ModelResponse
from tests.agent import recorded
from tests.agent.sse import Streamed
from tests.agent.test_gateway import no_internet  # noqa: F401  (fixture)
from tests.agent.test_streaming import _run_watched, _streamed, streaming, watched  # noqa: F401  (fixtures)

ORDER = "SU-26675"
RUN_19 = (
    "\"Hello, Sundry! I apologize for the repetition. It's been ages. I never saw those. How can I assist you "
    'with this?"'
)

OPENERS = ["", "Hello! ", "Hi there, ", "Thanks for waiting. ", "I'm sorry. "]
BODIES = [
    f"Your order {ORDER} is on its way and should arrive on Friday.",
    f"I can see order {ORDER}; the refund of 40.00 USD is with our team for approval.",
    "I have asked the courier to look into it and will write as soon as I hear back.",
    "It's been ages. I never saw those. How can I assist you with this?",
    "Could you tell me which item arrived damaged?",
    "Please send a photo of the label so we can check the parcel.",
]
CLOSINGS = ["", " Anything else?", " Is there anything else I can help you with?", " Have a good day."]
# How the same reply comes back: as it was, quoted, upper-cased, its punctuation changed.
AGAIN = [
    lambda t: t,
    lambda t: f'"{t}"',
    str.upper,
    lambda t: t.replace(".", "!").replace(",", ""),
    lambda t: t.replace("'", "\u2019"),
]


def replies() -> list[str]:
    return [(o + b + c).strip() for o, b, c in itertools.product(OPENERS, BODIES, CLOSINGS)] + [RUN_19]


def cases() -> list[tuple[str, str]]:
    """(earlier reply, the reply now)."""
    return [(r, again(r)) for r, again in itertools.product(replies(), AGAIN)]


def check(text, earlier, **kw):
    return replycheck.check_reply(text, known={ORDER}, earlier_replies=earlier, **kw)


def test_a_reply_sent_before_is_asked_again_once_then_posted():
    missed = []
    for before, now in cases():
        first = check(now, [before])
        if first.action != replycheck.RETRY or first.reasons != ["repeat"] or "already sent" not in first.prompt:
            missed.append((now, first.action, first.reasons))
        elif check(now, [before], retried=True).action != replycheck.POST:
            missed.append((now, "not posted when asked again"))
    print(f"repeats: {len(cases())}, missed {len(missed)}")
    assert len(cases()) > 500 and not missed, missed[:5]


def test_negative_control_with_the_reading_off_every_repeat_posts(monkeypatch):
    monkeypatch.setattr(replycheck, "REPEATS", False)
    posted = [now for before, now in cases() if check(now, [before]).action == replycheck.POST]
    print(f"with the reading off: {len(posted)} of {len(cases())} posted")
    assert len(posted) == len(cases())


# Replies that share words with an earlier one and say something of their own, and short ones said twice.
LOOK_ALIKES = [
    (BODIES[0], f"Your order {ORDER} is on its way and should arrive on Monday."),
    (BODIES[0], BODIES[0] + " The courier is DPD."),
    (BODIES[4], "Could you tell me which item arrived broken?"),
    (BODIES[5], "Thanks for the photo. " + BODIES[5]),
    ("You're welcome!", "You're welcome!"),
    ("Happy to help.", "Happy to help."),
    ("Glad it arrived.", "Glad it arrived!"),
]


def test_replies_that_say_something_new_and_short_ones_post():
    flagged = [(b, n) for b, n in LOOK_ALIKES if check(n, [b]).action != replycheck.POST]
    print(f"look-alikes: {len(LOOK_ALIKES)}, flagged {len(flagged)}")
    assert not flagged, flagged


def _t(n, author, text):
    return TurnData(number=n, author=author, kind="message", text=text)


def test_the_replies_not_to_send_again_are_those_to_other_messages():
    turns = [
        _t(1, "customer", "Where is my order?"),
        _t(2, "agent", BODIES[0]),
        _t(3, "customer", "Thanks! And the refund?"),
        _t(4, "agent", BODIES[1]),
        _t(5, "customer", "where is my order"),  # asked again: the same answer may follow
    ]
    assert answer.earlier_replies(turns) == [BODIES[1]]
    assert answer.earlier_replies(turns[:3]) == [BODIES[0]]
    assert answer.earlier_replies(turns[:1]) == []


@pytest.mark.django_db
def test_no_recorded_reply_repeats_one_sent_to_another_message():
    conversations = [t for path in sorted(recorded.traces().glob("*.json")) for t in tau2_results(path)]
    assert sources.tau2_traces_dir() is not None
    count = flagged = 0
    for ticket in conversations:
        turns = [_t(i, t.author, t.text) for i, t in enumerate(ticket.turns) if t.kind == "message" and t.text.strip()]
        for i, turn in enumerate(turns):
            if turn.author == "agent":
                count += 1
                flagged += replycheck.repeats(turn.text, answer.earlier_replies(turns[:i]))
    print(f"recorded replies: {count}, repeating one sent to another message: {flagged}")
    assert count == 882 and flagged == 0


# --- the stream ---------------------------------------------------------------------------------------------


def _stream_judge(sent: str):
    """The stream's checks on a ticket where `sent` answered an earlier message."""
    stream = ReplyStream(0)
    turns = [_t(1, "customer", f"Where is {ORDER}?"), _t(2, "agent", sent), _t(3, "customer", "And the refund?")]
    request = ModelRequest(model="scripted", messages=[Message(role="user", content="And the refund?")])
    answer.obtain(Gateway(override=ScriptedModel([ModelResponse(text="Hi.")])), request, model="scripted",
                  turns=turns, stream=stream)  # fmt: skip
    return {"sentence_ok": stream.sentence_ok, "waits": stream.waits}


def test_the_stream_shows_nothing_of_a_reply_sent_before_and_one_that_moves_on_as_if_new():
    moved = 0
    for sent in [r for r in replies() if len(replycheck.plain_words(r)) >= replycheck.ECHO_MIN_WORDS]:
        ok = _stream_judge(sent)
        assert provisional.shown(sent, known={ORDER}, final=True, **ok) == "", sent
        moved_on = sent + " Could you tell me the postcode it was sent to?"
        # Shown whole where a reply never sent would be (the sentence checks decide that); else at most what
        # that would show: the repeated start only with a sentence after it that passes.
        fresh = provisional.shown(moved_on, known={ORDER}, final=True, sentence_ok=ok["sentence_ok"])
        waited = provisional.shown(moved_on, known={ORDER}, final=True, **ok)
        assert waited == fresh if fresh == moved_on else fresh.startswith(waited), sent
        moved += waited == moved_on
    print(f"replies moving on from one sent before, shown whole: {moved}")
    assert moved >= 40


def test_negative_control_with_the_reading_off_the_stream_shows_the_repeat(monkeypatch):
    monkeypatch.setattr(replycheck, "REPEATS", False)
    ok = _stream_judge(BODIES[2])
    assert provisional.shown(BODIES[2], known={ORDER}, final=True, **ok) == BODIES[2]


# --- through a real stream, the page and the scorecard -------------------------------------------------------

CHUNKS = ["I have asked the courier ", "to look into it. ", "I will write as soon ", "as I hear back."]
SENT = "".join(CHUNKS)


async def _sent_before(watched) -> None:  # noqa: F811
    ticket = watched["ticket"]
    await sync_to_async(turn_append)(ticket=ticket, author="agent", text=SENT)
    await sync_to_async(turn_append)(ticket=ticket, author="customer", text="When will I see the money?")


async def _agent_said(watched) -> list[tuple[str, str | None]]:  # noqa: F811
    rows = Turn.objects.filter(ticket=watched["ticket"], author="agent", kind="message").order_by("number")
    return [(t.text, t.payload.get("via")) async for t in rows]


NEW = ["Could you tell me ", "the postcode ", "it was sent to?"]


def _repeats_then(after):
    """The model's script: the reply sent before, then (asked again) `after`."""
    return lambda p, b: Streamed(chunks=after if "already sent" in json.dumps(b) else CHUNKS)


async def test_asked_again_a_model_that_moves_on_posts_its_new_reply_and_the_repeat_never_shows(watched):  # noqa: F811
    await _sent_before(watched)
    customer, staff = await _run_watched(watched, _repeats_then(NEW))
    for got in (customer, staff):
        texts = [m["text"] for m in _streamed(got) if m["state"] == "text" and m["text"]]
        assert texts and not [t for t in texts if "courier" in t]
    assert await _agent_said(watched) == [(SENT, None), ("".join(NEW), None)]
    assert len(watched["server"].bodies) == 2


async def test_asked_again_the_same_reply_is_posted_unstreamed_and_shown_on_the_card(watched):  # noqa: F811
    await _sent_before(watched)
    customer, _ = await _run_watched(watched, _repeats_then(CHUNKS))
    assert not [m for m in _streamed(customer) if m["state"] == "text" and m["text"]]
    assert await _agent_said(watched) == [(SENT, None), (SENT, None)]
    assert len(watched["server"].bodies) == 2
    read = await sync_to_async(scorecard.read_by_customers)(watched["ticket"].pk)
    assert read["repeated"] == 1 and read["unanswered"] == 0 and read["handed_off"] == 0


async def test_negative_control_with_the_reading_off_the_repeat_streams_and_is_posted_at_once(watched, monkeypatch):  # noqa: F811
    monkeypatch.setattr(replycheck, "REPEATS", False)
    await _sent_before(watched)
    customer, _ = await _run_watched(watched, _repeats_then(NEW))
    assert [m["text"] for m in _streamed(customer) if m["state"] == "text"][-1] == SENT
    assert await _agent_said(watched) == [(SENT, None), (SENT, None)]
    assert len(watched["server"].bodies) == 1
