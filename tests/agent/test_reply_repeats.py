"""The reading of a reply the agent had already sent, word for word, to another message, and the scorecard's count.

Real-model run 19 (docs/real-model.md) posted one reply — '"Hello, Sundry! I apologize for the repetition.
It's been ages. I never saw those. How can I assist you with this?"' — to seven different customer messages in
a row, and the scorecard read nothing: no claim, no Sundry words, no message left without a reply. The reading
needs no grasp of the words: the reply is word for word (case and punctuation aside) one the agent sent earlier
on the ticket to a customer message with other words (`replycheck.repeats`). What the agent does about it is
`guards/resent.py`'s (asked again once, a second copy posted, a third held: tests/agent/test_reply_resent.py);
the scorecard counts the copies that reached the page. Cases come from a grammar; the 882 recorded GPT-4.1
replies are the false flags' corpus. Negative control: one word changed, a reply to the same words asked again,
a short reply."""

from __future__ import annotations

import itertools

import pytest

from sundry.agent.guards import replycheck
from sundry.evals import scorecard
from sundry.evals.importers import tau2_results
from sundry.tickets.services import turn_append
from tests.agent import recorded
from tests.agent.claimcase import open_case

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


def cases() -> list[tuple[str, str]]:
    """(earlier reply, the reply now)."""
    replies = [(o + b + c).strip() for o, b, c in itertools.product(OPENERS, BODIES, CLOSINGS)] + [RUN_19]
    return [(r, again(r)) for r, again in itertools.product(replies, AGAIN)]


def test_a_reply_sent_before_is_read_in_any_case_or_punctuation():
    missed = [now for before, now in cases() if not replycheck.repeats(now, [before])]
    print(f"repeats: {len(cases())}, missed {len(missed)}")
    assert len(cases()) > 400 and not missed, missed[:5]


# Replies that share words with an earlier one and say something of their own, and short ones said twice.
LOOK_ALIKES = [
    (BODIES[0], f"Your order {ORDER} is on its way and should arrive on Monday."),
    (BODIES[0], BODIES[0] + " The courier is DPD."),
    (BODIES[4], "Could you tell me which item arrived broken?"),
    (BODIES[4], "Thanks for the photo. " + BODIES[4]),
    ("You're welcome!", "You're welcome!"),
    ("Glad it arrived.", "Glad it arrived!"),
]


def test_negative_control_replies_that_say_something_new_and_short_ones_are_not_read():
    flagged = [(b, n) for b, n in LOOK_ALIKES if replycheck.repeats(n, [b])]
    assert not flagged, flagged


@pytest.mark.django_db
def test_no_recorded_reply_repeats_one_sent_to_another_message():
    count = flagged = 0
    for path in sorted(recorded.traces().glob("*.json")):
        for ticket in tau2_results(path):
            sent, asked = [], None
            for t in ticket.turns:
                if t.kind != "message" or not t.text.strip():
                    continue
                if t.author == "customer":
                    asked = replycheck.plain_words(t.text)
                elif t.author == "agent":
                    count += 1
                    flagged += replycheck.repeats(t.text, [r for r, to in sent if to != asked])
                    sent.append((t.text, asked))
    print(f"recorded replies: {count}, repeating one sent to another message: {flagged}")
    assert count == 882 and flagged == 0


# --- the scorecard -------------------------------------------------------------------------------------------


@pytest.fixture
def case(django_user_model):
    return open_case(django_user_model, f"Where is {ORDER}? It's been ages.", order=ORDER, subject="Parcel")


def _agent(case, text):
    turn_append(ticket=case["ticket"], author="agent", text=text)


def _customer(case, text):
    turn_append(ticket=case["ticket"], author="customer", text=text)


@pytest.mark.django_db
def test_run_19s_ticket_shows_six_replies_sent_before(case):
    _agent(case, f"The order {ORDER} has been ages.")
    for said in [
        "So it's lost?",
        "What are my options?",
        "A full refund please.",
        "When?",
        "And SU-20012?",
        "OK.",
        "Thanks.",
    ]:
        _customer(case, said)
        _agent(case, RUN_19)
    read = scorecard.read_by_customers(case["ticket"].pk)
    assert read["repeated"] == 6 and read["unanswered"] == 0


@pytest.mark.django_db
def test_negative_control_the_same_answer_to_the_same_words_is_not_counted(case):
    _agent(case, BODIES[0])
    _customer(case, f"where is {ORDER}?? it's been ages")
    _agent(case, BODIES[0])
    assert scorecard.read_by_customers(case["ticket"].pk)["repeated"] == 0
