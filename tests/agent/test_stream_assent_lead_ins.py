"""A word of assent alone ("Certainly!") is shown only with the sentence after it.

A real 0.5B model streamed "Certainly! Please provide the customer's request so I can assist you further."
(docs/real-model.md, run 18). "Certainly!" showed as a finished sentence; the check held the rest (it speaks of
"the customer") and kept what was shown, so the customer read "Certainly!" as the whole answer, and no hand-off
followed: a kept reply answers the message. Greetings and apologies already waited for what follows them
(`refusals.lead_in`); words of assent now do too. The cases come from a grammar (assent × punctuation × what
follows); through a real stream and real sockets, the customer reads the hand-off, never the assent alone.
Negative control: without the wait, "Certainly!" is kept as the reply and no hand-off follows.
"""

from __future__ import annotations

import itertools

from sundry.agent import handoff
from sundry.agent.guards import provisional, refusals
from sundry.tickets.models import Turn
from tests.agent.sse import Streamed
from tests.agent.test_gateway import no_internet  # noqa: F401  (fixture)
from tests.agent.test_reply_refusals import ORDER, _stream_judge
from tests.agent.test_streaming import _run_watched, _streamed, streaming, watched  # noqa: F401  (fixtures)

ASSENTS = [
    "Certainly",
    "Sure",
    "Sure thing",
    "Of course",
    "Absolutely",
    "Okay",
    "OK",
    "Alright",
    "No problem",
    "Gladly",
]
MARKS = ["!", ".", ",", " —"]
GREETINGS = ["", "Hi there! ", "Hello, "]
HELD = [
    "Please provide the customer's request so I can assist you further.",
    "The customer should contact the carrier.",
]
GOOD = f"Your order {ORDER} has shipped."
# Sentences that open the same way and say something: shown at once.
SAYING = ["Sure, I can check that for you.", "Certainly, your order has shipped.", "Of course I can help with that."]


def openers():
    return [g + a + m + " " for g, a, m in itertools.product(GREETINGS, ASSENTS, MARKS)]


def test_an_assent_before_a_held_sentence_shows_nothing():
    ok = _stream_judge()
    shown = [
        (o + h, provisional.shown(o + h, known={ORDER}, final=True, sentence_ok=ok)) for o in openers() for h in HELD
    ]
    wrong = [(t, s) for t, s in shown if s]
    print(f"assents before a held sentence: {len(shown)}, showing something: {len(wrong)}")
    assert not wrong, wrong[:5]


def test_an_assent_shows_with_the_sentence_after_it_or_when_the_reply_ends_on_it():
    ok = _stream_judge()
    for o in openers():
        assert refusals.lead_in(o), o
        assert provisional.shown(o + GOOD, known={ORDER}, final=True, sentence_ok=ok) == (o + GOOD).strip()
        assert provisional.shown(o + "Your ord", known={ORDER}, final=False, sentence_ok=ok) == ""
        assert provisional.shown(o, known={ORDER}, final=True, sentence_ok=ok) == o.strip()
    for text in SAYING:
        assert not refusals.lead_in(text)
        assert provisional.shown(text + " Anything", known={ORDER}, final=False, sentence_ok=ok) == text


def test_negative_control_without_the_wait_the_assent_shows_alone(monkeypatch):
    monkeypatch.setattr(refusals, "lead_in", lambda text: False)
    ok = _stream_judge()
    # An assent ended by "!" or "." is a sentence of its own; one before a comma or a dash is not.
    ended = [o for o in openers() if o.rstrip().endswith(("!", "."))]
    shown = [provisional.shown(o + HELD[0], known={ORDER}, final=True, sentence_ok=ok) for o in ended]
    print(f"without the wait: {sum(bool(s) for s in shown)} of {len(shown)} show the assent alone")
    assert len(ended) == 60 and all(s for s in shown)


# --- through a real stream ------------------------------------------------------------------------------

RUN_18 = ["Certainly! ", "Please provide the customer's ", "request so I can assist you further."]


async def _agent_said(watched) -> list[tuple[str, str | None]]:  # noqa: F811
    rows = Turn.objects.filter(ticket=watched["ticket"], author="agent", kind="message")
    return [(t.text, t.payload.get("via")) async for t in rows]


async def test_run_18s_assent_never_stands_as_the_answer(watched):  # noqa: F811
    customer, staff = await _run_watched(watched, lambda p, b: Streamed(chunks=RUN_18, usage=(900, 12)))
    for got in (customer, staff):
        assert all("Certainly" not in m["text"] for m in _streamed(got))
    assert await _agent_said(watched) == [(handoff.TEXT, "handoff")]


async def test_negative_control_without_the_wait_the_assent_is_kept_and_no_hand_off(watched, monkeypatch):  # noqa: F811
    monkeypatch.setattr(refusals, "lead_in", lambda text: False)
    await _run_watched(watched, lambda p, b: Streamed(chunks=RUN_18, usage=(900, 12)))
    assert await _agent_said(watched) == [("Certainly!", None)]
