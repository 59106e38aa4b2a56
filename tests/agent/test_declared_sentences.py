"""A reply that carries any sentence of a declared tool's or parameter's description is Sundry's own words.

A real 0.5B model posted "Here are your options:\n\n1. Refund money on an order to its original payment
method. Irreversible." — the first two sentences of `issue_refund`'s description under a lead-in and a
number — and the check read it as the model's own (docs/real-model.md, run 12): only a whole description,
or one sentence of one alone, was Sundry's words. The cases come from the declarations themselves: every
description the shop's domain offers the model and every one of the example tool server's, cut into
sentences, recombined one to three at a time, under lead-ins, numbers and bullets. Each is asked again,
then held, in a reply and in `reply_to_customer`; none streams. Look-alikes that share a description's
words without being one of its sentences are posted, and so are the 882 recorded replies of a strong model
that read such descriptions (τ²-bench). Negative control: with the sentence reading off, the same
combinations are posted.
"""

from __future__ import annotations

import re

import pytest

from sundry.agent import answer
from sundry.agent.guards import addressee, declaredwords, ownterms, provisional, replycheck
from sundry.agent.loop import agent_run
from sundry.agent.provider.gateway import Gateway
from sundry.agent.provider.scripted import ScriptedModel
from sundry.agent.toolbox import domain_specs
from sundry.tickets.models import Turn
from tests.agent import recorded
from tests.agent.claimcase import customer_reads, open_case, reply_via
from tests.agent.test_declared_words import server_specs

ORDER = "SU-21487"
# What reached a customer's page in run 12, and its two sentences without the lead-in.
RUN = "Here are your options:\n\n1. Refund money on an order to its original payment method. Irreversible."
RUN_PLAIN = "Refund money on an order to its original payment method. Irreversible."

LEADS = ["", "Here are your options:\n\n", "Here are your options: ", "You can: ", "Sure! ", "Okay, "]
MARKS = ["", "1. ", "- "]


def declared() -> tuple[str, ...]:
    """The shop's declared descriptions and the example tool server's."""
    return replycheck.declared_texts([*domain_specs(), *server_specs()])


def _cut(text: str) -> list[str]:
    return [s for s in re.split(r"(?<=[.!?])\s+(?=[A-Z])", text) if s.strip()]


def _counts(i: int, sentence: str) -> bool:
    """A sentence that counts: three words or more, or the description's first."""
    return i == 0 or len(declaredwords.words(sentence)) >= declaredwords.MIN_WORDS


def positives(texts) -> list[str]:
    """Every run of one to three sentences of a description holding one that counts, under each lead-in,
    as one paragraph or as a list (numbered or bulleted, a sentence an item)."""
    out = []
    for text in texts:
        cut = _cut(text)
        for start in range(len(cut)):
            for n in (1, 2, 3):
                run = cut[start : start + n]
                if len(run) < n or not any(_counts(start + j, s) for j, s in enumerate(run)):
                    continue
                for lead in LEADS:
                    for mark in MARKS:
                        if mark:
                            body = "\n".join(f"{j + 1}. {s}" if mark == "1. " else f"- {s}" for j, s in enumerate(run))
                        else:
                            body = " ".join(run)
                        out.append(lead + body)
    return list(dict.fromkeys(out))


def check(text, declared_=None, **kw):
    return replycheck.check_reply(text, known={ORDER}, declared=declared() if declared_ is None else declared_, **kw)


@pytest.mark.django_db
def test_every_sentence_of_a_description_under_any_lead_in_is_asked_again_then_held():
    texts = declared()
    cases = positives(texts)
    assert len(texts) > 40 and len(cases) > 3000
    missed = []
    for text in cases:
        first = check(text, texts)
        if first.action != replycheck.RETRY or first.reasons != ["notice"]:
            missed.append((text, first.action, first.reasons))
        elif check(text, texts, retried=True).action != replycheck.HOLD:
            missed.append((text, "not held"))
        elif replycheck.copied(text, (), texts) != "notice":
            missed.append((text, "sent by reply_to_customer"))
    print(f"declared sentences recombined: {len(cases)} from {len(texts)} descriptions, missed {len(missed)}")
    assert not missed, missed[:5]


@pytest.mark.django_db
def test_the_runs_reply_and_its_sentences_are_sundrys_words():
    texts = declared()
    for text in (RUN, RUN_PLAIN, "Here are your options: 1. Refund money on an order to its original payment method."):
        assert replycheck.declares(text, texts), text
        verdict = check(text, texts)
        assert verdict.reasons == ["notice"] and "refund money on an order" in verdict.quoted, verdict
    # "Irreversible." is the description's second sentence, one word: no copy on its own.
    assert not replycheck.declares("Irreversible.", texts)


GENUINE = [
    f"Thanks for your patience — your order {ORDER} has shipped and should reach you this week.",
    "The refund will go back to the original payment method once it is confirmed.",
    f"I can refund money on {ORDER} once you confirm the amount.",
    "Please tell me the exact order number and I'll check it for you.",
    "You can reply to this chat any time.",
    "Refunds go to the original payment method, usually within 5 days.",
    f"I'll ask our team why the order {ORDER} was cancelled and reply here.",
    "Could you tell me which items you'd like to return from that order?",
    "Irreversible changes need your confirmation first, so nothing has been done yet.",
    "Your parcel's tracking number is on the order page.",
]


def lookalikes(texts) -> list[str]:
    """Replies that share a description's words without carrying one of its sentences: five words in a row of
    a longer sentence, or a short sentence inside one of the reply's own."""
    out = list(GENUINE)
    for text in texts:
        for i, sentence in enumerate(_cut(text)):
            ws = declaredwords.words(sentence)
            if len(ws) >= declaredwords.RUN_WORDS:
                part = " ".join(ws[: declaredwords.RUN_WORDS - 1])
                out.append(f"Before I {part} for you, could you confirm {ORDER} is the right order?")
            elif _counts(i, sentence):
                out.append(f"I'll look into {' '.join(ws)} and reply here soon.")
    # A look-alike that names Sundry's own workings ("the ID ledger") or speaks of "the customer" is refused for
    # that: not this check's.
    return [t for t in dict.fromkeys(out) if not ownterms.used(t) and not addressee.about_customer(t)]


@pytest.mark.django_db
def test_lookalikes_sharing_words_with_descriptions_are_posted():
    texts = declared()
    cases = lookalikes(texts)
    flagged = [t for t in cases if check(t, texts).action != replycheck.POST or replycheck.copied(t, (), texts)]
    print(f"look-alikes: {len(cases)}, flagged {len(flagged)}")
    assert len(cases) > 60 and not flagged, flagged[:5]


@pytest.mark.django_db
def test_no_recorded_reply_carries_a_sentence_of_its_tools_descriptions():
    """The 882 replies GPT-4.1 wrote with τ²-bench's tools in its request: none carries a sentence of their
    descriptions (nor of the shop's or the example server's)."""
    replies = recorded.replies()
    base = declared()
    flagged = []
    for domain in sorted({d for d, _ in replies}):
        texts = base + replycheck.declared_texts(recorded.tool_specs(domain))
        flagged += [(domain, r) for d, r in replies if d == domain and replycheck.declares(r, texts)]
    print(f"recorded replies: {len(replies)}, carrying a declared sentence: {len(flagged)}")
    assert len(replies) == 882 and not flagged, flagged[:3]


@pytest.mark.django_db
def test_negative_control_without_the_sentence_reading_the_combinations_are_posted(monkeypatch):
    texts = declared()
    cases = positives(texts)
    monkeypatch.setattr(replycheck.declaredwords, "carried", lambda text, declared: "")
    monkeypatch.setattr(replycheck, "PROGRAM_WORDS", False)  # the fact tool's field list ("order_number") is one
    posted = [t for t in cases if check(t, texts).action == replycheck.POST]
    # The others are still held by the earlier reading (a whole description, or one sentence of one alone),
    # because they name Sundry's own workings ("… from a tool result", "in the state": `ownterms`), for a
    # description's example identifier, or for speaking of "the customer" (`addressee`).
    left = [t for t in cases if t not in set(posted)]
    earlier = [t for t in left if replycheck.echoes(t, texts)]
    named = [t for t in left if t not in set(earlier) and ownterms.used(t)]
    why = {t: check(t, texts).reasons for t in left if t not in {*earlier, *named}}
    ids = [t for t, reasons in why.items() if reasons == ["invented_id"]]
    about = [t for t, reasons in why.items() if reasons == [replycheck.ABOUT_CUSTOMER]]
    print(
        f"with the sentence reading off: {len(posted)} of {len(cases)} combinations posted; still held "
        f"{len(earlier)} by the whole-description reading, {len(named)} for naming Sundry's workings, "
        f'{len(ids)} for an example identifier ("sara_doe_496") the request never showed, {len(about)} for '
        'speaking of "the customer"'
    )
    assert len(posted) + len(earlier) + len(named) + len(ids) + len(about) == len(cases)
    assert len(posted) > len(cases) / 3 and RUN_PLAIN in posted
    assert check(RUN, texts).action == replycheck.POST  # the run's reply, as it was posted


def _streamed(text: str, texts) -> str:
    """What a stream shows of `text`, each sentence judged as `answer.obtain` judges it."""

    def posts_as_is(upto: str) -> bool:
        verdict = check(upto, texts)
        return verdict.action == replycheck.POST and answer._plain(verdict.text) == answer._plain(upto)

    return provisional.shown(
        text,
        known={ORDER},
        final=True,
        sentence_ok=lambda upto: answer.sentence_passes(upto, None, None, "", posts_as_is),
    )


@pytest.mark.django_db
def test_no_declared_sentence_is_streamed():
    texts = declared()
    cases = positives(texts)[::7]  # every seventh: each sentence is judged with all before it
    shown = [(t, s) for t in cases if declaredwords.carried(s := _streamed(t, texts), texts)]
    assert not shown, shown[:3]
    # "Here are your options:" waits for its first option, Sundry's words: nothing shows (alone, it would be
    # a list announced and not given, `unfinished`).
    assert _streamed(RUN, texts) == ""
    assert _streamed(f"Your order {ORDER} has shipped.", texts) == f"Your order {ORDER} has shipped."


# --- through the loop ------------------------------------------------------------------------------------

FINAL = f"Your order {ORDER} is with the carrier; I've asked our team to look into it."


@pytest.fixture
def case(django_user_model):
    inr = {"prices": (489900,), "currency": "INR"}
    return open_case(django_user_model, "What are my options?", order=ORDER, subject="Lost", username="isha", **inr)


@pytest.mark.django_db
@pytest.mark.parametrize("via", ["reply", "reply_to_customer"])
def test_the_runs_options_never_reach_the_customer(case, via):
    agent_run(
        case["ticket"].pk,
        gateway=Gateway(override=ScriptedModel([reply_via(via, RUN)] * 2 + [reply_via("reply", FINAL)] * 3)),
    )
    assert "Refund money on an order" not in customer_reads(case)
    if via == "reply_to_customer":
        assert Turn.objects.filter(ticket=case["ticket"], kind=Turn.Kind.REJECTION).first().payload["guard"] == "notice"
    else:
        held = Turn.objects.filter(ticket=case["ticket"], kind=Turn.Kind.ERROR).last()
        assert "notice" in held.text and "Sundry's own words" in held.text


@pytest.mark.django_db
@pytest.mark.parametrize("via", ["reply", "reply_to_customer"])
def test_negative_control_without_the_sentence_reading_the_options_are_posted(case, via, monkeypatch):
    monkeypatch.setattr(replycheck.declaredwords, "carried", lambda text, declared: "")
    agent_run(
        case["ticket"].pk,
        gateway=Gateway(override=ScriptedModel([reply_via(via, RUN)] * 2 + [reply_via("reply", FINAL)] * 3)),
    )
    assert "Refund money on an order" in customer_reads(case)
