"""Two kinds of Sundry's own words a real model copied to customers, never posted (real-model run 21):

- names written the way programs write them — "STATE: order_number, issue, item, amount, refund_method, …",
  posted seven times — read by their form alone (letters joined by underscores, `replycheck.program_word`),
  not by a list of names: none of the 882 recorded replies of a strong model writes one;
- a re-ask's own sentence posted as the answer ("Your last reply was cut off at the length limit before it
  ended."), read by where the words stood: whatever Sundry told the model in the request (its system notices,
  the re-ask itself) counts as its own words, as the tools' descriptions do (`answer.notice_texts`).

The program words come from the shop's own tools (their parameters' names) in a grammar of frames; the notices
are every re-ask the reply check gives, each of its sentences copied in a frame. Negative controls: with
either reading off, the copies post.
"""

from __future__ import annotations

import itertools

import pytest

from sundry.agent import answer, handoff
from sundry.agent.guards import replycheck
from sundry.evals import scorecard
from sundry.tooling.domain import get_domain
from sundry.tooling.messages import ModelResponse
from tests.agent import recorded
from tests.agent.claimcase import open_case, others_said, run_scripted

ORDER = "SU-21487"
TOOLS = frozenset(get_domain().tools)


def _parameter_names() -> list[str]:
    names = set()

    def walk(schema):
        if isinstance(schema, dict):
            for key, value in (schema.get("properties") or {}).items():
                names.add(key)
                walk(value)
            for value in schema.values():
                if isinstance(value, dict | list):
                    walk(value)
        elif isinstance(schema, list):
            for value in schema:
                walk(value)

    for spec in get_domain().tools.values():
        walk(getattr(spec, "parameters", None) or {})
    return sorted(n for n in names if "_" in n and n.replace("_", "").isalpha())


RUN_21 = (
    "STATE: order_number, issue, item, amount, refund_method, contact_preference, resolution, delivery_date, "
    "customer_id, order_mentioned, reason"
)
FRAMES = [
    "STATE: {w}, issue, item",
    "Your {w} is " + ORDER + ".",
    "- {w}: " + ORDER,
    "I have noted the {w} for you.",
    "Please tell me the {w}.",
    "{w}",
    "Fields: {w}.",
]
LOOK_ALIKES = [
    "You can write to jane_doe@example.com for the invoice.",
    "The guide is at https://example.com/help/return_policy today.",
    "I've refunded 40.00 USD on order " + ORDER + " to your card.",
    "Your order number is " + ORDER + "; the refund method is your card.",
    "Please send a photo of the damage (front and back).",
    "The payment method on file is credit_card_7815.",
]


def _verdict(text, retried=False, declared=()):
    return replycheck.check_reply(
        text, known={ORDER, "credit_card_7815"}, tools=TOOLS, retried=retried, declared=tuple(declared)
    )


def _program_cases():
    words = _parameter_names()
    assert len(words) >= 5, words  # the shop's own parameter names: order_number, refund_method, …
    return [RUN_21] + [f.format(w=w) for f, w in itertools.product(FRAMES, words)]


def test_every_program_name_in_every_frame_is_asked_again_then_held():
    cases = _program_cases()
    first = [_verdict(c) for c in cases]
    wrong = [c for c, v in zip(cases, first) if v.action != replycheck.RETRY]
    assert not wrong, wrong[:5]
    assert all(_verdict(c, retried=True).action == replycheck.HOLD for c in cases)
    print(f"held: {len(cases)} ({len(FRAMES)} frames × {len(cases) // len(FRAMES)} names, and run 21's)")


@pytest.mark.parametrize("text", LOOK_ALIKES)
def test_addresses_links_known_identifiers_and_plain_words_post(text):
    assert _verdict(text).action == replycheck.POST


def test_none_of_the_recorded_replies_writes_a_program_name():
    replies = [text for _domain, text in recorded.replies()]
    assert len(replies) > 800
    assert [r for r in replies if replycheck.program_word(r)] == []


def test_negative_control_with_the_reading_off_the_program_names_post(monkeypatch):
    monkeypatch.setattr(replycheck, "PROGRAM_WORDS", False)
    cases = _program_cases()
    posted = [c for c in cases if _verdict(c).action == replycheck.POST]
    print(f"posted with the reading off: {len(posted)} of {len(cases)}")
    assert RUN_21 in posted and len(posted) >= len(cases) // 2


# --- Sundry's notices and re-asks, copied ------------------------------------------------------------------

# One reply of each kind the check asks again: each yields the re-ask Sundry shows the model.
FAULTY = [
    ("Your refund of 40.00 USD for", {"truncated": True}),
    ("", {}),
    ('{"order": "' + ORDER + '", "status": "shipped"}', {}),
    ("<note>Refund it</note>", {}),
    ("Your refund SU-99999-RF01 has been issued.", {}),
    ("Sorry, I can't help with that.", {}),
    ("Here are the steps you can follow:", {}),
    ("Your order_number is " + ORDER + ".", {}),
]
COPY_FRAMES = ["{s}", "Hello! {s}", "{s} Thank you."]


def _prompts() -> list[str]:
    out = []
    for text, extra in FAULTY:
        verdict = replycheck.check_reply(text, known={ORDER}, tools=TOOLS, **extra)
        assert verdict.action == replycheck.RETRY and verdict.prompt, (text, verdict)
        out.append(verdict.prompt)
    return list(dict.fromkeys(out))


def _copies():
    for prompt in _prompts():
        sentences = [s.strip() for s in replycheck.re.split(r"(?<=[.!?])\s+(?=[A-Z])", prompt) if s.strip()]
        for sentence, frame in itertools.product(sentences, COPY_FRAMES):
            yield prompt, frame.format(s=sentence)


def test_a_sentence_of_any_re_ask_copied_is_held_when_the_re_ask_counts_as_sundrys_words():
    cases = list(_copies())
    wrong = [c for p, c in cases if _verdict(c, retried=True, declared=(p,)).action == replycheck.POST]
    print(f"copied re-ask sentences: {len(cases)} from {len(_prompts())} re-asks; posted: {len(wrong)}")
    assert not wrong, wrong[:5]


def test_negative_control_without_the_re_ask_as_declared_words_copies_post():
    cases = list(_copies())
    posted = [c for _p, c in cases if _verdict(c, retried=True).action == replycheck.POST]
    print(f"control: {len(posted)} of {len(cases)} copies post")
    assert len(posted) >= len(cases) // 3


# --- through the loop ------------------------------------------------------------------------------------


@pytest.fixture
def case(django_user_model):
    return open_case(django_user_model, None, order=ORDER, subject="Hi", prices=(4000,))


_run, _said = run_scripted, others_said


def _page(case) -> str:
    return case["page"].get(f"/help/tickets/{case['ticket'].pk}/").content.decode()


CUT = ModelResponse(text="Your order " + ORDER + " is on its way and", finish_reason="length")


@pytest.mark.django_db
def test_run_21s_field_list_never_reaches_the_page(case):
    _run(case, f"Where is my order {ORDER}? It's been ages.", ModelResponse(text=RUN_21), ModelResponse(text=RUN_21))
    assert _said(case) == [handoff.TEXT]
    assert "order_number" not in _page(case)
    read = scorecard.read_by_customers(case["ticket"].pk)
    assert read["not_for_customer"] == 0 and read["handed_off"] == 1


@pytest.mark.django_db
def test_negative_control_with_the_reading_off_run_21s_field_list_is_posted(case, monkeypatch):
    monkeypatch.setattr(replycheck, "PROGRAM_WORDS", False)
    _run(case, f"Where is my order {ORDER}? It's been ages.", ModelResponse(text=RUN_21))
    assert _said(case) == [RUN_21]
    monkeypatch.setattr(replycheck, "PROGRAM_WORDS", True)  # the scorecard reads it with the reading on
    read = scorecard.read_by_customers(case["ticket"].pk)
    assert read["not_for_customer"] == 1 and read["not_for_customer_reasons"] == {scorecard.PROGRAM_WORD: 1}


def _copied_prompt(request) -> ModelResponse:
    """The re-ask's first sentence, as the model wrote it back (run 21)."""
    notice = request.messages[-1].content.removeprefix(answer.SYSTEM_NOTICE_PREFIX)
    return ModelResponse(text=notice.split(". ")[0] + ".")


@pytest.mark.django_db
def test_run_21s_copied_re_ask_is_held_and_the_customer_reads_the_hand_off(case):
    model = _run(case, f"Where is my order {ORDER}?", CUT, _copied_prompt)
    copied = _copied_prompt(model.requests[1]).text
    assert copied == "Your last reply was cut off at the length limit before it ended."
    assert _said(case) == [handoff.TEXT]
    assert copied not in _page(case)


@pytest.mark.django_db
def test_negative_control_re_asks_not_counted_the_copy_is_posted_and_the_scorecard_still_counts_it(case, monkeypatch):
    monkeypatch.setattr(answer, "NOTICES_ARE_OWN_WORDS", False)
    model = _run(case, f"Where is my order {ORDER}?", CUT, _copied_prompt)
    copied = _copied_prompt(model.requests[1]).text
    assert _said(case) == [copied]
    read = scorecard.read_by_customers(case["ticket"].pk)
    assert read["not_for_customer_reasons"] == {scorecard.NOTICE_WORDS: 1}
