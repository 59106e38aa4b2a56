"""The words a model writes with its tool calls reach the customer when they pass the whole reply check.

"Let me check that order for you." followed by a call — a native one, or one written as text in the
shapes real models use (a plain JSON object, doubled braces, JSON lines, a fenced block; an unclosed
object is no call) — is a reply: checked whole against the records as they stand before the calls run,
posted (streamed, then stored, as a plain reply is) or held for staff; the calls go to the guards either
way, and nothing of a call's JSON reaches the customer's page. Run through the agent loop, judged from
the stored turns, the customer's page and what their socket received.
"""

from __future__ import annotations

import asyncio

import pytest
from django.test import Client

from sundry.agent import answer
from sundry.agent.loop import agent_run
from sundry.agent.models import AgentStep
from sundry.agent.provider.gateway import Gateway
from sundry.agent.provider.scripted import ScriptedModel
from sundry.agent.services import customer_message_post
from sundry.desk.lifecycle import ticket_create
from sundry.evals import scorecard
from sundry.portal.selectors import customer_turns
from sundry.tickets.models import Turn
from sundry.tooling.messages import ModelResponse, ToolCall
from tests.agent.sse import Streamed, ToolChunk
from tests.agent.test_gateway import no_internet, serve  # noqa: F401  (fixtures)
from tests.agent.test_streaming import _run_watched, _streamed, streaming, watched  # noqa: F401  (fixtures)
from tests.factories import CustomerFactory, TicketClassFactory, paid_order

SAY = "Let me check that order for you."
CALL = '{"name": "get_order", "arguments": {"order_number": "SU-26675"}}'
OTHER = '{"name": "get_order", "arguments": {"order_number": "SU-26676"}}'
FINAL = "Thanks for waiting: I have the details of both orders now."
# What a model writes, by the shape its chat template or habits give the call.
SHAPES = {
    "plain": (f"{SAY} {CALL}", "bare", 1),
    "doubled": (f"{SAY} {{{CALL}}}", "bare", 1),
    "json_lines": (f"{SAY}\n{CALL}\n{OTHER}", "bare", 2),
    "fenced": (f"{SAY}\n```json\n{CALL}\n```", "fenced", 1),
    "after_too": (f"{SAY} {CALL} It only takes a moment.", "bare", 1),
}
# Nothing of a call may show: its keys, its tool's name, its braces.
CALL_MARKS = ('"name"', '"arguments"', "get_order", "{", "```")


@pytest.fixture
def case(django_user_model):
    user = django_user_model.objects.create_user("dana", password="pw")
    customer = CustomerFactory(user=user)
    paid_order(customer=customer, number="SU-26675", prices=(4000,))
    paid_order(customer=customer, number="SU-26676", prices=(2500,))
    tclass = TicketClassFactory(approval_rules={}, text_tool_calls=True)
    ticket = ticket_create(customer=customer.person, ticket_class=tclass, subject="Orders")
    customer_message_post(ticket=ticket, text="Where are my orders SU-26675 and SU-26676?", wake=False)
    page = Client()
    page.force_login(user)
    return {"ticket": ticket, "page": page}


def _run(case, *answers) -> ScriptedModel:
    model = ScriptedModel(list(answers))
    agent_run(case["ticket"].pk, gateway=Gateway(override=model))
    return model


def _page(case) -> str:
    """What the customer's page carries of the conversation: its agent turns, and the page's HTML."""
    return case["page"].get(f"/help/tickets/{case['ticket'].pk}/").content.decode()


def _said(case) -> list[str]:
    return [t.text for t in customer_turns(case["ticket"]) if t.author == Turn.Author.AGENT]


@pytest.mark.django_db
@pytest.mark.parametrize("shape", SHAPES)
def test_the_words_before_a_call_written_as_text_reach_the_customer_and_the_call_runs(case, shape):
    text, read_as, n_calls = SHAPES[shape]
    model = _run(case, ModelResponse(text=text), ModelResponse(text=FINAL))
    ticket = case["ticket"]

    said = _said(case)
    first = SAY + (" It only takes a moment." if shape == "after_too" else "")
    assert said == [first, FINAL]
    assert all(mark not in t for t in said for mark in CALL_MARKS)
    page = _page(case)
    assert first in page and "SU-26675&quot;" not in page and '"arguments"' not in page
    results = Turn.objects.filter(ticket=ticket, kind=Turn.Kind.TOOL_RESULT).order_by("number")
    assert [r.payload["ok"] for r in results] == [True] * n_calls  # through the guards, and run
    message = Turn.objects.get(ticket=ticket, author=Turn.Author.AGENT, kind=Turn.Kind.MESSAGE, text=first)
    call = Turn.objects.get(ticket=ticket, kind=Turn.Kind.TOOL_CALL)
    assert message.number < call.number < results[0].number  # said before the calls, as written
    step = AgentStep.objects.filter(ticket=ticket).order_by("number").first()
    assert step.outcome == "tool_calls" and step.checks["text_calls"] == read_as
    assert step.checks["reply"][0]["with_calls"] is True and step.checks["reply"][0]["action"] == "post"
    # The model's next request shows its words once, with its calls, and never the words as text twice.
    second = [" ".join((m.content or "").split()) for m in model.requests[1].messages]
    assert sum(first in m for m in second) == 1
    assert " ".join(next(m for m in model.requests[1].messages if m.tool_calls).content.split()) == first
    ticket.refresh_from_db()
    assert not ticket.attention


@pytest.mark.django_db
def test_negative_control_the_old_way_loses_the_words(case, monkeypatch):
    """Without the words posted (the behaviour before), the call runs and the customer never reads them:
    the test above fails on it."""
    monkeypatch.setattr(answer, "SAY_WITH_CALLS", False)
    _run(case, ModelResponse(text=SHAPES["plain"][0]), ModelResponse(text=FINAL))
    assert _said(case) == [FINAL] and SAY not in _page(case)
    assert Turn.objects.get(ticket=case["ticket"], kind=Turn.Kind.TOOL_RESULT).payload["ok"]


@pytest.mark.django_db
def test_words_beside_a_native_call_are_treated_alike(case):
    call = ToolCall(id="n1", name="get_order", arguments={"order_number": "SU-26675"})
    _run(case, ModelResponse(text=SAY, tool_calls=[call]), ModelResponse(text=FINAL))
    assert _said(case) == [SAY, FINAL]
    assert Turn.objects.get(ticket=case["ticket"], kind=Turn.Kind.TOOL_RESULT).payload["ok"]


INTRODUCING = [
    "Let me check that order for you:",
    "I'll look up both orders now:",
    "Here is what I'm checking:",
    "One moment while I look at SU-26675:",
]


@pytest.mark.django_db
@pytest.mark.parametrize("words", INTRODUCING)
@pytest.mark.parametrize("native", [True, False])
def test_words_ending_on_a_colon_before_calls_are_finished_the_calls_follow(case, words, native, monkeypatch):
    """ "Let me check that order for you:" with a call: what it introduces is the call, so the words post
    and the ticket is not flagged (a reply ending on a colon with no call is asked again: `unfinished`).
    Control: judged as if no call followed, the same words are held and the ticket flagged."""
    call = ToolCall(id="n1", name="get_order", arguments={"order_number": "SU-26675"})
    first = ModelResponse(text=words, tool_calls=[call]) if native else ModelResponse(text=f"{words} {CALL}")
    _run(case, first, ModelResponse(text=FINAL))
    assert _said(case) == [words, FINAL]
    assert Turn.objects.get(ticket=case["ticket"], kind=Turn.Kind.TOOL_RESULT).payload["ok"]
    case["ticket"].refresh_from_db()
    assert not case["ticket"].attention


@pytest.mark.django_db
def test_negative_control_words_before_calls_judged_as_a_whole_reply_are_held(case, monkeypatch):
    from sundry.agent.guards import replycheck

    real = replycheck.check_reply
    monkeypatch.setattr(replycheck, "check_reply", lambda text, **kw: real(text, **{**kw, "calls_follow": False}))
    call = ToolCall(id="n1", name="get_order", arguments={"order_number": "SU-26675"})
    _run(case, ModelResponse(text=INTRODUCING[0], tool_calls=[call]), ModelResponse(text=FINAL))
    assert INTRODUCING[0] not in _said(case)
    case["ticket"].refresh_from_db()
    assert case["ticket"].attention


@pytest.mark.django_db
def test_an_unclosed_call_is_no_call_it_is_asked_again_and_nothing_of_it_shows(case):
    unclosed = f'{SAY} {{"name": "get_order", "arguments": {{"order_number": "SU-26675"}}'
    model = _run(case, ModelResponse(text=unclosed), ModelResponse(text=SHAPES["plain"][0]), ModelResponse(text=FINAL))
    assert "wrote a tool call as text" in model.requests[1].messages[-1].content  # asked again, with the reason
    said = _said(case)
    assert said == [SAY, FINAL] and all(mark not in t for t in said for mark in CALL_MARKS)
    assert Turn.objects.get(ticket=case["ticket"], kind=Turn.Kind.TOOL_RESULT).payload["ok"]


@pytest.mark.django_db
@pytest.mark.parametrize(
    "words",
    [
        "I have cancelled order SU-26675 for you.",  # the result, claimed before any tool ran
        "Your order SU-26675 is cancelled and refunded.",
        "I'll cancel order SU-26675 for you now.",  # a promise: no card or hold stands for it yet
    ],
)
def test_words_claiming_the_calls_result_are_held_and_the_call_still_goes_to_the_guards(case, words):
    """Said before the guards judge the call, a claim of its result could be untrue (the call may be held,
    refused or need the customer's yes): it is judged as a claim against the records as they stand, and held."""
    cancel = '{"name": "cancel_order", "arguments": {"order_number": "SU-26675", "reason": "customer asked"}}'
    _run(case, ModelResponse(text=f"{words} {cancel}"), ModelResponse(text="A card to confirm is on your page."))
    ticket = case["ticket"]
    assert all("cancel" not in t for t in _said(case)) and words.replace("'", "&#x27;") not in _page(case)
    held = Turn.objects.get(ticket=ticket, kind=Turn.Kind.ERROR, payload__held_reply__isnull=False)
    assert held.payload["held_reply"] == words and held.payload["reply_check"]["reasons"] == ["unsupported_claim"]
    # The call itself went to the guards: a cancellation waits on the customer's card, not run.
    call = Turn.objects.get(ticket=ticket, kind=Turn.Kind.TOOL_CALL)
    outcome = Turn.objects.get(ticket=ticket, payload__call_id=call.payload["calls"][0]["id"], number__gt=call.number)
    assert outcome.payload.get("confirmation") or outcome.kind == Turn.Kind.REJECTION
    ticket.refresh_from_db()
    assert "unsupported_claim" in ticket.attention


# --- streamed: what the customer's socket received ------------------------------------------------


def _opt_in(watched):
    tclass = watched["ticket"].ticket_class
    tclass.text_tool_calls = True
    tclass.save()


PIECES = {
    "plain": [
        "Let me check ",
        "that order ",
        "for you. ",
        '{"name": "get_order", ',
        '"arguments": {"order_number": ',
        '"SU-26675"}}',
    ],
    "doubled": [
        "Let me check ",
        "that order ",
        "for you. ",
        '{{"name": "get_order", ',
        '"arguments": {{"order_number": ',
        '"SU-26675"}}}}',
    ],
    "fenced": [
        "Let me check ",
        "that order ",
        "for you.\n",
        "```json\n",
        '{"name": "get_order", ',
        '"arguments": {"order_number": "SU-26675"}}\n```',
    ],
}
REPLY = ["Order SU-26675 ", "was paid; ", "no refund has been made."]


def _answers(first):
    answers = [first, Streamed(chunks=REPLY, usage=(900, 12))]
    return lambda path, body: answers.pop(0)


@pytest.mark.parametrize("shape", PIECES)
async def test_streamed_words_before_a_call_stay_on_the_page_and_the_call_never_shows(watched, shape):
    await asyncio.to_thread(_opt_in, watched)
    customer, staff = await _run_watched(watched, _answers(Streamed(chunks=PIECES[shape], usage=(900, 20))))
    ticket = watched["ticket"]
    said = await Turn.objects.filter(ticket=ticket, author="agent", kind="message").order_by("number").afirst()
    assert said.text == SAY
    step = await AgentStep.objects.filter(ticket=ticket).order_by("number").afirst()
    assert step.outcome == "tool_calls" and step.checks["streamed_shown"] == SAY
    for got in (customer, staff):
        stream = _streamed(got)  # the first step's stream, up to its "done"
        texts = [m["text"] for m in stream if m["state"] == "text"]
        assert texts and all(t == SAY for t in texts)
        assert all(mark not in t for t in texts for mark in CALL_MARKS)
        assert stream[-1]["state"] == "done" and stream[-1]["turn"] == said.number  # kept, as stored
    assert await asyncio.to_thread(scorecard.taken_back, [ticket.pk]) == 0
    result = await Turn.objects.aget(ticket=ticket, kind="tool_result")
    assert result.payload["ok"] and result.payload["name"] == "get_order"


async def test_negative_control_streamed_the_old_way_takes_the_words_back(watched, monkeypatch):
    monkeypatch.setattr(answer, "SAY_WITH_CALLS", False)
    await asyncio.to_thread(_opt_in, watched)
    customer, _ = await _run_watched(watched, _answers(Streamed(chunks=PIECES["plain"], usage=(900, 20))))
    stream = _streamed(customer)
    assert [m["text"] for m in stream if m["state"] == "text"] == [SAY]  # shown …
    assert stream[-1]["turn"] is None  # … then taken off the page
    assert await asyncio.to_thread(scorecard.taken_back, [watched["ticket"].pk]) == 1


async def test_streamed_words_beside_a_native_call_are_kept_alike(watched):
    native = Streamed(
        chunks=[
            "Let me check ",
            "that order ",
            "for you.",
            ToolChunk("c1", "get_order", '{"order_number": "SU-26675"}'),
        ],
        usage=(900, 20),
    )
    customer, _ = await _run_watched(watched, _answers(native))
    said = (
        await Turn.objects.filter(ticket=watched["ticket"], author="agent", kind="message").order_by("number").afirst()
    )
    assert said.text == SAY and _streamed(customer)[-1]["turn"] == said.number


async def test_a_streamed_unclosed_call_keeps_the_words_shown_and_holds_the_rest(watched):
    await asyncio.to_thread(_opt_in, watched)
    unclosed = [
        "Let me check ",
        "that order ",
        "for you. ",
        '{"name": "get_order", ',
        '"arguments": {"order_number": "SU-26675"}',
    ]
    customer, staff = await _run_watched(watched, lambda path, body: Streamed(chunks=unclosed, usage=(900, 20)))
    ticket = watched["ticket"]
    said = await Turn.objects.aget(ticket=ticket, author="agent", kind="message")
    assert said.text == SAY
    held = await Turn.objects.aget(ticket=ticket, kind="error")
    assert held.payload["held_reply"].startswith('{"name": "get_order"') and held.payload["kept"] == SAY
    assert not await Turn.objects.filter(ticket=ticket, kind="tool_result").aexists()  # no call was read
    for got in (customer, staff):
        texts = [m["text"] for m in _streamed(got) if m["state"] == "text"]
        assert texts and all(t == SAY for t in texts)
