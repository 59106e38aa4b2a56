"""A text that ends introducing what never follows is never a reply: asked again, then held; kept only up to
its last finished sentence when part of it streamed; and a sentence ending in a colon streams only with what
it introduces.

Issue 26, run 14: an answer cut off at the length limit had streamed "To restore your order SU-21487, you can
follow these steps: ⏎⏎ 1. **Check for Duplicate Orders:**", which was kept as the reply (the rest held), and
the model copied it whole as its next answers, each posted. The reading (`guards/unfinished.py`) is tested on
a generated grammar: leads × introductions × markup × colon × what trails them (nothing, an empty item, a
label alone, a heading, a list of headings with bodies whose last is a heading alone), each asked again, then
held, and trimmed to the text before the introduction. Look-alikes that must post: complete lists (inline and
by line, labels with text, labels alone), times, label-colon-content lines, URLs, ratios, a colon inside a
sentence, "the following" followed. Through the loop, scripted and streamed from a loopback server: the real
case never leaves an unfinished list on the customer's page, a complete list posts, and with the reading off
the incident comes back. The 882 recorded GPT-4.1 replies of τ²-bench: none read (recorded.py).
"""

from __future__ import annotations

import asyncio
import html
import itertools

import pytest
from django.test import Client

from sundry.agent import answer, handoff
from sundry.agent.guards import provisional, replycheck, resent, unfinished
from sundry.agent.loop import agent_run
from sundry.agent.models import AgentStep
from sundry.agent.provider.gateway import Gateway
from sundry.agent.provider.scripted import ScriptedModel
from sundry.agent.services import customer_message_post
from sundry.agent.streaming import ReplyStream
from sundry.context import internaltext
from sundry.context.lanes import TurnData
from sundry.portal.selectors import customer_turns
from sundry.tickets.models import Turn
from sundry.tooling.messages import Message, ModelRequest, ModelResponse
from tests.agent import recorded
from tests.agent.claimcase import customer_reads, open_case
from tests.agent.sse import Streamed
from tests.agent.test_gateway import no_internet  # noqa: F401  (fixture)
from tests.agent.test_streaming import MODEL, NO_RETRIES, _streamed, _until_done, _watch, streaming, watched_ticket  # noqa: F401

ORDER = "SU-21487"
# Run 14's kept part, word for word, and the same written on one line as the model's copies read.
ISSUE = f"To restore your order {ORDER}, you can follow these steps:\n\n1. **Check for Duplicate Orders:**"
ISSUE_ONE_LINE = f"To restore your order {ORDER}, you can follow these steps: 1. **Check for Duplicate Orders:**"

# --- the grammar of an unfinished ending -----------------------------------------------------------------------

# What may come before the introduction: nothing, or a finished sentence (what a trimmed reply keeps).
LEADS = ["", "Thanks for waiting. ", "I'm sorry your parcel is lost.\n\n", f"I looked at {ORDER} for you. "]
INTROS = [
    f"To restore your order {ORDER}, you can follow these steps",
    "Here are your options",
    "Here is what you can do",
    "You can do one of two things",
    "To get your money back, please send me",
    "The next steps are",
    "I found two orders on your account",
    "Next steps",
    "Please check the following",
    "There are a few things to try",
]
COLONS = [":", " :", "："]
# Markup around the introduction: plain, bold whole or before the colon, a heading, italics.
MARKUPS = ["{}{}", "**{}{}**", "**{}**{}", "### {}{}", "_{}{}_"]
# What trails the introduction, unfinished: (tail, the finished text it leaves after `finished_part`, or None
# for nothing of it — the lead alone is left).
TAILS = [
    ("", None),
    ("\n\n1.", None),
    (" 1.", None),
    ("\n- ", None),
    ("\n\n1. **Check for Duplicate Orders:**", None),
    ("\n\n- **Refund:**", None),
    ("\n\n### Step 1", None),
    ("\n\n1. Check for duplicate orders:", None),
    (
        "\n\n1. **Check your email**\n   The confirmation names the address.\n2. **Contact the carrier**",
        "\n\n1. **Check your email**\n   The confirmation names the address.",
    ),
    (
        "\n\n1. **Check your email:** the confirmation names the address.\n2. **Ask a neighbour:**",
        "\n\n1. **Check your email:** the confirmation names the address.",
    ),
    ("\n1. Wait two days.\n2.", "\n1. Wait two days."),
    (" 1. wait two days 2.", None),
]


def unfinished_texts() -> list[tuple[str, str]]:
    """(text, what `finished_part` must leave of it)."""
    out = []
    for lead, intro, colon, markup, (tail, kept) in itertools.product(LEADS, INTROS, COLONS, MARKUPS, TAILS):
        head = markup.format(intro, colon)
        out.append((lead + head + tail, (lead + head + kept) if kept else lead.strip()))
    # "the following" / "as follows" with nothing following, whatever ends it.
    for lead, said, end in itertools.product(
        LEADS,
        ["Please send me the following", "You will need the following", "The steps are as follows"],
        ["", ".", ":", "…"],
    ):
        out.append((lead + said + end, lead.strip()))
    return list(dict.fromkeys(out))


UNFINISHED = unfinished_texts()

# --- look-alikes that must post --------------------------------------------------------------------------------

COMPLETE_LISTS = [
    "You can: 1. ask for a refund 2. ask for a replacement.",
    "You can: 1. ask for a refund 2. ask for a replacement",
    "Here are your options:\n\n1. A refund to your card.\n2. A replacement lamp.",
    "Here are your options:\n- a refund to your card\n- a replacement lamp",
    "Here are your options:\n\n1. **Refund:** we pay it back to your card.\n2. **Replacement:** we send a new lamp.",
    "Here are your options:\n\n1. **Refund**\n   We pay it back to your card.\n2. **Replacement**\n   We send a new one.",
    "Here are your options:\n\n1. **Refund**\n2. **Replacement**",
    "Here are your options:\n\n- **Refund** – we pay it back.\n- **Replacement** – we send a new lamp.",
    "**Next steps:** wait for the carrier's email.",
    "### Next steps\nWait for the carrier's email.",
    "Please send me the following: your order number and your email address.",
    "Please send me the following details: your order number and your email address.",
    "It should arrive the following day.",
    "The steps are as follows: wait two days, then write to us.",
]
TIMES = ["10:30", "9:05", "14:00", "10:30am", "10:30 am"]
TIME_SENTENCES = ["Your parcel arrives at {}", "The courier comes at {} tomorrow.", "We open at {}."]
LABELS = [
    "Note: your parcel arrived.",
    f"Order {ORDER}: shipped on Monday.",
    "**Status:** shipped.",
    "Status: shipped",
    "**Note:** the refund takes five days.",
    "P.S.: the carrier texts you first.",
]
URLS = [
    "You can track it at https://example.com/track",
    "You can track it at https://example.com/track.",
    "See http://example.com:8080/help for the form.",
]
RATIOS = ["Most customers choose a refund, about 3:1.", "Mix it 2:1", "The odds were 1:2"]
INNER = [
    "One thing to note: the refund takes five days.",
    "Good news: your parcel arrived this morning.",
    "Here is the short answer: yes, you can return it.",
    "Choose option 1. Or option 2.",
    "You are number 2.",
    "We have 3 options for you: refund, replacement, or store credit.",
]


def look_alikes() -> list[str]:
    out = COMPLETE_LISTS + LABELS + URLS + RATIOS + INNER
    out += [s.format(t) for s, t in itertools.product(TIME_SENTENCES, TIMES)]
    # A finished sentence before each, and a closing one after the lists.
    out += [lead + text for lead, text in itertools.product(LEADS[1:], out)]
    out += [text + "\n\nLet me know which you prefer." for text in COMPLETE_LISTS]
    return list(dict.fromkeys(out))


LOOK_ALIKES = look_alikes()


def check(text, **kw):
    return replycheck.check_reply(text, known=replycheck.known_identifiers([ORDER]), **kw)


def held_as_unfinished(text) -> bool:
    first, second = check(text), check(text, retried=True)
    return (first.action, first.reasons, second.action, second.reasons) == (
        replycheck.RETRY,
        [replycheck.UNFINISHED],
        replycheck.HOLD,
        [replycheck.UNFINISHED],
    )


# --- pure ------------------------------------------------------------------------------------------------------


def test_the_issues_text_and_its_copy_are_asked_again_then_held():
    for text in (ISSUE, ISSUE_ONE_LINE):
        assert held_as_unfinished(text), text
        assert unfinished.finished_part(text) == ""
    assert "never gave" in check(ISSUE).prompt


def test_every_generated_unfinished_ending_is_asked_again_then_held_and_trimmed():
    missed = [t for t, _ in UNFINISHED if check(t).reasons != [replycheck.UNFINISHED]]
    missed += [t for t, _ in UNFINISHED[::10] if not held_as_unfinished(t)]
    trimmed = [(t, k, unfinished.finished_part(t)) for t, k in UNFINISHED]
    wrong = [x for x in trimmed if x[2] != x[1]]
    print(
        f"unfinished endings asked again: {len(UNFINISHED) - len(missed)}/{len(UNFINISHED)}; trimmed right: "
        f"{len(UNFINISHED) - len(wrong)}"
    )
    assert len(UNFINISHED) > 2000 and missed == [], missed[:10]
    assert wrong == [], wrong[:5]
    # What is left passes the check on its own, or is nothing.
    assert all(not k or check(k).action == replycheck.POST for _, k in UNFINISHED[::7])


def test_every_look_alike_posts_unchanged():
    flagged = [t for t in LOOK_ALIKES if check(t).action != replycheck.POST or unfinished.ending(t)]
    print(f"look-alikes posted: {len(LOOK_ALIKES) - len(flagged)}/{len(LOOK_ALIKES)}")
    assert len(LOOK_ALIKES) > 150 and flagged == [], [(t, check(t).reasons) for t in flagged[:10]]
    assert all(unfinished.finished_part(t) == t.rstrip() for t in LOOK_ALIKES)


def test_negative_control_with_the_reading_off_the_unfinished_endings_post(monkeypatch):
    monkeypatch.setattr(unfinished, "ending", lambda text: "")
    posted = [t for t, _ in UNFINISHED if check(t).action == replycheck.POST]
    print(f"with the reading off, unfinished endings posted: {len(posted)}/{len(UNFINISHED)}")
    assert len(posted) == len(UNFINISHED)


def test_a_false_claim_or_an_internal_quote_in_an_unfinished_reply_is_the_reason_given():
    """The form is read last: what an unfinished reply does say is judged as a posted one's would be."""
    note = "Chargeback history on this card: no goodwill credits without a manager."
    internal = internaltext.gather(internal=[("staff note", note)], public=[])
    reply = "Our notes say no goodwill credits without a manager. Here is what you can do:"
    assert check(reply).reasons == [replycheck.UNFINISHED]
    held = answer.held_if_internal(check(reply), internal)
    assert held.action == replycheck.HOLD and held.reasons == ["internal_text"]
    # Control: without the note it is only unfinished, and asked again.
    assert answer.held_if_internal(check(reply), internaltext.InternalText()).reasons == [replycheck.UNFINISHED]


# --- the stream ------------------------------------------------------------------------------------------------

# What the unfinished endings go on with, had the model not stopped: the first thing they introduce.
GOES_ON = " wait two days for the carrier.\n2. Write to us if it has not come."


def _stream_judge():
    stream = ReplyStream(0)
    request = ModelRequest(model="scripted", messages=[Message(role="user", content=f"Where is {ORDER}?")])
    turns = [TurnData(number=1, author="customer", kind="message", text=f"Where is {ORDER}?")]
    answer.obtain(
        Gateway(override=ScriptedModel([ModelResponse(text="Hi.")])),
        request,
        model="scripted",
        turns=turns,
        stream=stream,
    )
    return stream.sentence_ok


def test_the_stream_never_shows_an_unfinished_ending_while_it_is_written():
    """At every point of the text's writing what shows ends finished; at the end, a reply that ends
    unfinished shows only what comes before its introduction, and one that goes on shows the introduction
    with what it introduced."""
    ok = _stream_judge()
    for text, kept in UNFINISHED[::13]:
        for cut in range(1, len(text) + 1, 3):
            shown = provisional.shown(text[:cut], known={ORDER}, sentence_ok=ok)
            assert not unfinished.ending(shown), (text[:cut], shown)
        final = provisional.shown(text, known={ORDER}, final=True, sentence_ok=ok)
        assert final == kept, (text, final)
    whole = ISSUE + GOES_ON
    assert provisional.shown(whole, known={ORDER}, final=True, sentence_ok=ok) == whole


def test_a_colon_ended_sentence_waits_for_the_next_and_shows_with_it():
    intro = "Thanks for waiting. Here are your options:\n"
    assert provisional.shown(intro, known={ORDER}) == "Thanks for waiting."
    assert provisional.shown(intro + "1. A refund", known={ORDER}) == "Thanks for waiting."
    assert provisional.shown(intro + "1. A refund.\n", known={ORDER}) == intro + "1. A refund."


def test_negative_control_without_the_wait_the_introduction_shows_alone(monkeypatch):
    reading = unfinished.ending
    monkeypatch.setattr(unfinished, "ending", lambda text: "")
    # The endings with nothing finished after their lead (an empty "2." after a finished item is held back
    # without the reading: a list's number never shows alone).
    alone = [t for t, kept in UNFINISHED[::13] if kept in {lead.strip() for lead in LEADS}]
    shown = [provisional.shown(t, known={ORDER}, final=True) for t in alone]
    showing = [s for s in shown if reading(s)]
    print(f"without the wait, streams ending unfinished: {len(showing)}/{len(shown)}")
    assert len(showing) == len(shown)


def test_a_sentence_waiting_with_its_introduction_is_judged_with_it():
    """The stream judges the introduction and its first item as one: the claims of both are read."""
    parts = provisional.sentences(f"I looked at {ORDER}. It has been refunded as follows:\n1. 40 USD.", final=True)
    assert answer._since("".join(parts)) == 1  # from "It has been refunded …", not only "40 USD."


def _keep(shown: str, whole: str) -> answer.Answer | None:
    """`answer._keep_shown` on a reply cut at the length limit of which `shown` is on the screens."""
    verdict = check(whole, truncated=True)
    got = answer.Answer(call=None, verdict=verdict, checks=[verdict.as_json()])
    stream = type("Shown", (), {"shown_text": shown})()
    judge = lambda text, *, truncated, retried: check(text, truncated=truncated, retried=retried)  # noqa: E731
    return got if answer._keep_shown(got, verdict, whole, stream, judge) else None


def test_a_shown_part_that_ends_unfinished_is_kept_only_up_to_its_last_finished_sentence():
    """Whatever put it on the screens (a stream of an older build, a reading missed then): what is kept is the
    part before the introduction, if it passes on its own; nothing, if there is none — the reply is asked again."""
    wrong = []
    for text, kept in UNFINISHED[::5]:
        got = _keep(text, text + GOES_ON)
        if (got.verdict.text if got else "") != kept:
            wrong.append((text, kept, got and got.verdict.text))
        elif got and not (got.rest.startswith(text[len(kept) :].strip()[:20]) and got.held.action == "hold"):
            wrong.append((text, "rest", got.rest))
    print(f"shown parts ending unfinished kept right: {len(UNFINISHED[::5]) - len(wrong)}/{len(UNFINISHED[::5])}")
    assert wrong == [], wrong[:5]
    assert _keep(ISSUE, ISSUE + GOES_ON) is None


def test_negative_control_with_the_reading_off_the_unfinished_shown_part_is_kept_whole(monkeypatch):
    monkeypatch.setattr(unfinished, "ending", lambda text: "")
    kept = [t for t, _ in UNFINISHED[::5] if (got := _keep(t, t + GOES_ON)) and got.verdict.text == t.strip()]
    print(f"with the reading off, unfinished shown parts kept whole: {len(kept)}/{len(UNFINISHED[::5])}")
    assert len(kept) == len(UNFINISHED[::5])


# --- the recorded replies --------------------------------------------------------------------------------------


def test_no_real_agent_reply_of_the_tau2_traces_ends_unfinished():
    replies = [text for _domain, text in recorded.replies()]
    flagged = [t for t in replies if unfinished.ending(t)]
    print(f"real agent replies read as unfinished: {len(flagged)}/{len(replies)}")
    assert len(replies) > 800 and flagged == [], flagged[:5]
    # Streamed, each shows at its end what it showed without the wait; while written, a few wait a sentence.
    final = [t for t in replies if _shown(t, final=True) != _unwaited(t, final=True)]
    waited = [t for t in replies if any(_shown(t[:c]) != _unwaited(t[:c]) for c in _ends(t))]
    print(
        f"real replies streamed differently at their end: {len(final)}; with a sentence held back a while: "
        f"{len(waited)}/{len(replies)}"
    )
    assert final == [], final[:3]


def _shown(text, final=False):
    return provisional.shown(text, known=replycheck.id_tokens(text), final=final)  # its identifiers known


def _unwaited(text, final=False):
    reading, unfinished.ending = unfinished.ending, lambda text: ""
    try:
        return _shown(text, final=final)
    finally:
        unfinished.ending = reading


def _ends(text):
    return [m.end() for m in provisional._END.finditer(text)]


# --- through the loop, scripted --------------------------------------------------------------------------------

COPY = ModelResponse(text=ISSUE_ONE_LINE)
COMPLETE = (
    f"To restore your order {ORDER}, you can follow these steps:\n\n"
    "1. **Check your email:** the confirmation lists the delivery address.\n"
    "2. **Ask your neighbours:** carriers often leave parcels with them."
)


@pytest.fixture
def case(django_user_model):
    return open_case(
        django_user_model, f"Where is my order {ORDER}? It's been ages.", order=ORDER, subject="Lost", prices=(4000,)
    )


def _run(case, *answers, said=None) -> ScriptedModel:
    if said:
        customer_message_post(ticket=case["ticket"], text=said, wake=False)
    model = ScriptedModel(list(answers))
    agent_run(case["ticket"].pk, gateway=Gateway(override=model))
    return model


def _said(case) -> list[str]:
    return [t.text for t in customer_turns(case["ticket"]) if t.author != Turn.Author.CUSTOMER]


@pytest.mark.django_db
def test_through_the_loop_the_copied_unfinished_list_is_asked_again_then_held(case):
    """Run 14's four copies: each asked again, copied again, held; the customer reads the hand-off."""
    cut = ModelResponse(text=ISSUE + "\n   - Look up the order", finish_reason="length")
    _run(case, cut, COPY, said="So it's lost? What can you do for me?")
    for said in ("What are my options?", f"I'd like a full refund for {ORDER} please."):
        model = _run(case, COPY, COPY, said=said)
        assert model.requests[1].messages[-1].content.endswith(replycheck.UNFINISHED_PROMPT)
    assert _said(case) == [handoff.TEXT, handoff.STILL_WITH_TEAM, handoff.STILL_WITH_TEAM]
    held = Turn.objects.filter(ticket=case["ticket"], payload__has_key="held_reply")
    assert [h.payload["reply_check"]["reasons"] for h in held] == [["unfinished"]] * 3
    assert "Check for Duplicate Orders" not in customer_reads(case) and "follow these steps" not in customer_reads(case)


@pytest.mark.django_db
def test_through_the_loop_the_second_answer_after_the_re_ask_posts(case):
    _run(case, COPY, ModelResponse(text=COMPLETE))
    assert _said(case) == [COMPLETE]


@pytest.mark.django_db
def test_through_the_loop_a_complete_list_posts(case):
    for text in [COMPLETE, *COMPLETE_LISTS[:3]]:
        _run(case, ModelResponse(text=text), said="What can I do?")
    assert _said(case) == [COMPLETE, *COMPLETE_LISTS[:3]]
    assert not Turn.objects.filter(ticket=case["ticket"], payload__has_key="held_reply").exists()


@pytest.mark.django_db
def test_negative_control_with_the_reading_off_the_loop_posts_the_unfinished_list(case, monkeypatch):
    # The three copies are one reply sent to three messages, which the repeat policy would stop at the third
    # (`resent`): off too, to see this reading alone.
    monkeypatch.setattr(unfinished, "ending", lambda text: "")
    monkeypatch.setattr(resent, "ASK_AGAIN", False)
    for said in ("So it's lost? What can you do for me?", "What are my options?", "When will I see the money?"):
        _run(case, COPY, COPY, said=said)
    posted = [t for t in _said(case) if t == ISSUE_ONE_LINE]
    print(f"with the reading off, the unfinished list posted: {len(posted)}/3")
    assert len(posted) == 3 and "Check for Duplicate Orders" in customer_reads(case)


# --- through the loop, streamed to the customer's page ----------------------------------------------------------

# Run 14's answer, cut at the length limit: the list's first item's heading, then steps written for staff.
CUT = [
    f"To restore your order {ORDER}, ",
    "you can follow these steps:\n\n",
    "1. **Check for ",
    "Duplicate Orders:**\n",
    f"   - Look up the order {ORDER} ",
    "in the ID LEDGER.\n",
    "   - Contact the cust",
]
COPIED = [f"To restore your order {ORDER}, ", "you can follow these steps: ", "1. **Check for ", "Duplicate Orders:**"]
STREAMED_LIST = [COMPLETE[:40], COMPLETE[40:90], COMPLETE[90:150], COMPLETE[150:]]


@pytest.fixture
def lost(transactional_db, streaming):
    return watched_ticket(
        streaming, MODEL, order=ORDER, said=f"Where is my order {ORDER}? So it's lost? What can you do for me?"
    )


async def _conversation(watched, answers, later=()) -> tuple[list, str, list[str]]:
    """The ticket's runs, one per customer message (the first already posted, then `later`), the model
    answering `answers` in turn: what the customer's socket received, their page, and the agent's messages."""
    queue = list(answers)
    watched["start"](lambda p, b: queue.pop(0), pause=0.05)
    ticket = watched["ticket"]
    customer = await _watch(f"/ws/help/tickets/{ticket.pk}/", watched["alice"])
    got = []
    for i, said in enumerate(["", *later]):
        if i:
            await asyncio.to_thread(customer_message_post, ticket=ticket, text=said, wake=False)
        run = asyncio.ensure_future(asyncio.to_thread(agent_run, ticket.pk, gateway=Gateway(limits=NO_RETRIES)))
        got += await _until_done(customer)
        await run
    await customer.disconnect()

    def page():
        client = Client()
        client.force_login(watched["alice_user"])
        said = [t.text for t in customer_turns(ticket) if t.author != Turn.Author.CUSTOMER]
        return html.unescape(client.get(f"/help/tickets/{ticket.pk}/").content.decode()), said

    return (got, *await asyncio.to_thread(page))


def _texts(got) -> list[str]:
    return [m["text"] for m in _streamed(got) if m["state"] == "text"]


async def test_streamed_the_real_case_never_leaves_an_unfinished_list_on_the_customers_page(lost):
    """The introduction and its first heading wait for the first step, which is Sundry's words and never shows:
    nothing of the cut-off answer is kept, it is asked again, and its copy is held; the copies after it too."""
    got, page, said = await _conversation(
        lost, [Streamed(chunks=CUT, finish="length"), *[Streamed(chunks=COPIED)] * 3], later=["What are my options?"]
    )
    assert said == [handoff.TEXT, handoff.STILL_WITH_TEAM]
    assert all(not unfinished.ending(t) and "follow these steps" not in t for t in _texts(got))
    assert "Check for Duplicate Orders" not in page and "follow these steps" not in page
    steps = [s async for s in AgentStep.objects.filter(ticket=lost["ticket"]).order_by("number")]
    assert [s.checks["reply"][-1]["reasons"] for s in steps] == [["unfinished"], ["unfinished"]]
    assert [s.checks["reply"][0]["reasons"] for s in steps] == [["truncated"], ["unfinished"]]


async def test_streamed_a_complete_list_shows_as_written_and_posts(lost):
    got, page, said = await _conversation(lost, [Streamed(chunks=STREAMED_LIST)])
    assert said == [COMPLETE]
    texts = _texts(got)
    assert len(texts) >= 2 and all(not unfinished.ending(t) for t in texts)
    assert "Ask your neighbours" in texts[-1] and "Ask your neighbours" in page


async def test_negative_control_streamed_with_the_reading_off_the_page_shows_the_unfinished_list(lost, monkeypatch):
    """Run 14 again: the cut-off answer's shown part is kept as the reply and its copy posts."""
    monkeypatch.setattr(unfinished, "ending", lambda text: "")
    got, page, said = await _conversation(
        lost, [Streamed(chunks=CUT, finish="length"), Streamed(chunks=COPIED)], later=["What are my options?"]
    )
    assert said == [ISSUE, "".join(COPIED)]
    assert "Check for Duplicate Orders" in page and any(t.endswith("Duplicate Orders:**") for t in _texts(got))
