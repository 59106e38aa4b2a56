"""A model reply already sent to another customer message: asked again once, a second copy posted, no third.

Real-model run 19 (docs/real-model.md §12) posted one reply word for word to seven different messages. The policy
(`guards/resent.py`) reads no meaning: a plain reply the check would post that is word for word one the model
sent to a message with other words is asked for again once, with a system notice that does not quote it; written
again, it is posted while the page shows it once, and held — the customer gets Sundry's hand-off — from the third
copy on. These run the agent's loop on PostgreSQL and Redis with a scripted model that receives the real request
(through the gateway, or over HTTP from the streaming server).

Negative controls: `resent.ASK_AGAIN` off posts every copy and streams it; `resent.MOST_COPIES = 1` hands off a
right answer given twice.
"""

from __future__ import annotations

import itertools
import json
import time

import pytest
from asgiref.sync import sync_to_async

from sundry.agent import answer as answering
from sundry.agent import handoff
from sundry.agent.guards import replycheck, resent
from sundry.agent.loop import agent_run
from sundry.agent.provider.gateway import Gateway
from sundry.agent.provider.scripted import ScriptedModel
from sundry.agent.services import customer_message_post
from sundry.context.lanes import TurnData
from sundry.context.render import HANDED_OFF, SYSTEM_NOTICE_PREFIX
from sundry.evals import scorecard
from sundry.portal.selectors import customer_turns
from sundry.tickets.models import Turn
from sundry.tickets.services import turn_append
from sundry.tooling.messages import Message, ModelRequest, ModelResponse, ToolCall
from tests.agent.claimcase import open_case
from tests.agent.sse import Streamed
from tests.agent.test_gateway import no_internet  # noqa: F401  (fixture)
from tests.agent.test_streaming import _run_watched, _streamed, streaming, watched  # noqa: F401  (fixtures)

ORDER = "SU-21487"
RUN_19 = (
    "\"Hello, Sundry! I apologize for the repetition. It's been ages. I never saw those. How can I assist you "
    'with this?"'
)
# Run 19's ticket 1: the customer's messages, in order (the first opens the ticket).
TICKET_1 = [
    f"Where is my order {ORDER}? It's been ages.",
    "So it's lost?",
    "What are my options?",
    "A full refund please.",
    "When will I see the money?",
    "And SU-20012?",
    "OK.",
    "Thanks.",
]


def _page(ticket) -> list[tuple[str, str | None]]:
    """The agent's turns the customer's page shows, with how each was made (None: the model's reply)."""
    return [(t.text, (t.payload or {}).get("via")) for t in customer_turns(ticket) if t.author == "agent"]


def _replay_ticket_1(django_user_model):
    """Run 19's ticket 1 replayed, the model answering every message with the same junk; (case, model)."""
    case = open_case(django_user_model, TICKET_1[0], order=ORDER, subject="Parcel")
    model = ScriptedModel([ModelResponse(text=RUN_19)] * 3 * len(TICKET_1))
    for i, said in enumerate(TICKET_1):
        if i:
            customer_message_post(ticket=case["ticket"], text=said, wake=False)
        agent_run(case["ticket"].pk, gateway=Gateway(override=model))
    return case, model


@pytest.mark.django_db
def test_run_19s_ticket_shows_the_junk_at_most_twice_then_the_hand_off(django_user_model):
    case, model = _replay_ticket_1(django_user_model)
    page = _page(case["ticket"])
    copies = [via for text, via in page if text == RUN_19]
    print(f"customer-visible agent turns: {len(page)}, copies of the junk: {len(copies)}")
    assert copies == [None, None]
    # Each message after the second copy is answered by Sundry's hand-off, nothing of the model's.
    after = page[2:]
    assert after and all(via == HANDED_OFF for _, via in after)
    assert after[0][0] == handoff.TEXT
    # One extra model call per repeat: the first message once, every later one asked again once.
    assert len(model.requests) == 1 + 2 * (len(TICKET_1) - 1)
    notices = [r.messages[-1] for r in model.requests[1:] if r.messages[-1].role == "system"]
    assert len(notices) == len(TICKET_1) - 1
    for notice in notices:
        assert notice.content == SYSTEM_NOTICE_PREFIX + resent.NOTICE
        assert "apologize" not in notice.content  # the notice never quotes the reply
    # The scorecard counts the copy that reached the page; the held ones are hand-offs.
    read = scorecard.read_by_customers(case["ticket"].pk)
    assert read["repeated"] == 1 and read["handed_off"] == len(TICKET_1) - 2


@pytest.mark.django_db
def test_negative_control_with_the_policy_off_every_copy_is_posted(django_user_model, monkeypatch):
    monkeypatch.setattr(resent, "ASK_AGAIN", False)
    case, model = _replay_ticket_1(django_user_model)
    page = _page(case["ticket"])
    assert [text for text, _ in page] == [RUN_19] * len(TICKET_1)
    assert len(model.requests) == len(TICKET_1)
    assert scorecard.read_by_customers(case["ticket"].pk)["repeated"] == len(TICKET_1) - 1


# --- the same question in other words, the same true answer --------------------------------------------------

FIRST = ["Where is my order {order}?", "Any news on {order}?", "Has {order} shipped yet?"]
AGAIN = [
    "Is {order} still in transit?",
    "Has my parcel moved at all?",
    "Sorry, where did you say it is?",
    "Any update on where it is now?",
]
ANSWERS = [
    "I have asked our team to look into it and will write as soon as I hear back.",
    "Could you tell me the postcode the parcel was sent to, so I can check where it is?",
]


def conversations() -> list[tuple[str, str, str]]:
    return list(itertools.product(FIRST, AGAIN, ANSWERS))


def _asked_twice(django_user_model, n: int, first: str, again: str, answer: str):
    order = f"SU-{30000 + n}"  # a ticket and an order of its own for each conversation
    case = open_case(django_user_model, first.format(order=order), order=order, subject="Parcel", username=f"c{n}")
    agent_run(case["ticket"].pk, gateway=Gateway(override=ScriptedModel([ModelResponse(text=answer)])))
    customer_message_post(ticket=case["ticket"], text=again.format(order=order), wake=False)
    # The model writes the same answer however often it is asked; the script allows far more calls than made.
    model = ScriptedModel([ModelResponse(text=answer)] * 5)
    agent_run(case["ticket"].pk, gateway=Gateway(override=model))
    return case, model


@pytest.mark.django_db
def test_the_same_true_answer_to_a_question_asked_again_is_posted_with_one_extra_call(django_user_model):
    wrong = []
    for n, (first, again, answer) in enumerate(conversations()):
        case, model = _asked_twice(django_user_model, n, first, again, answer)
        page = _page(case["ticket"])
        if page != [(answer, None), (answer, None)] or len(model.requests) > 2:
            wrong.append((first, again, answer, page, len(model.requests)))
        elif model.requests[-1].messages[-1].role != "system" or answer in model.requests[-1].messages[-1].content:
            wrong.append((first, again, "the re-ask's notice", model.requests[-1].messages[-1]))
    print(f"conversations: {len(conversations())}, wrong {len(wrong)}")
    assert len(conversations()) == 24 and not wrong, wrong[:3]


@pytest.mark.django_db
def test_negative_control_one_copy_allowed_hands_off_the_right_answer(django_user_model, monkeypatch):
    monkeypatch.setattr(resent, "MOST_COPIES", 1)
    first, again, answer = conversations()[0]
    case, _ = _asked_twice(django_user_model, 0, first, again, answer)
    assert _page(case["ticket"]) == [(answer, None), (handoff.TEXT, HANDED_OFF)]


def _after_two_hand_offs(django_user_model) -> tuple[list, ScriptedModel]:
    case = open_case(django_user_model, TICKET_1[0], order=ORDER, subject="Parcel")
    for said in ("So it's lost?", "Hello?"):
        turn_append(ticket=case["ticket"], author="agent", text=handoff.TEXT, payload={"via": HANDED_OFF})
        customer_message_post(ticket=case["ticket"], text=said, wake=False)
    model = ScriptedModel([ModelResponse(text=handoff.TEXT)] * 3)
    agent_run(case["ticket"].pk, gateway=Gateway(override=model))
    return _page(case["ticket"]), model


@pytest.mark.django_db
def test_sundrys_hand_off_is_not_a_model_repeat(django_user_model):
    """The hand-off said twice is Sundry's words: a model reply after it is judged on the model's replies only."""
    page, model = _after_two_hand_offs(django_user_model)
    assert len(model.requests) == 1 and page[-1] == (handoff.TEXT, None)


@pytest.mark.django_db
def test_negative_control_counting_the_hand_offs_as_the_models_the_reply_is_held(django_user_model, monkeypatch):
    monkeypatch.setattr(resent, "HANDED_OFF", "not the hand-off")
    page, model = _after_two_hand_offs(django_user_model)
    assert len(model.requests) == 2 and page[-1] == (handoff.TEXT, HANDED_OFF)


def _looked_up_then_said(order: str, text: str) -> ScriptedModel:
    lookup = ModelResponse(tool_calls=[ToolCall(id="g1", name="get_order", arguments={"order_number": order})])
    return ScriptedModel([lookup, *[ModelResponse(text=text)] * 3])


CLOSING = "Please check the order details on your page."


def _after_lookups(django_user_model) -> tuple[list, list[int]]:
    case = open_case(django_user_model, f"Where is {ORDER}?", order=ORDER, subject="Parcel")
    calls = []
    for i, said in enumerate(["", "And the receipt?", "Can you look again?"]):
        if said:
            customer_message_post(ticket=case["ticket"], text=said, wake=False)
        model = _looked_up_then_said(ORDER, CLOSING)
        agent_run(case["ticket"].pk, gateway=Gateway(override=model))
        calls.append(len(model.requests))
    return _page(case["ticket"]), calls


@pytest.mark.django_db
def test_a_reply_after_the_models_own_calls_for_the_message_is_neither_asked_again_nor_held(django_user_model):
    """What the model's calls found may read as last time's ("Please check the card." after each card)."""
    page, calls = _after_lookups(django_user_model)
    assert page == [(CLOSING, None)] * 3 and calls == [2, 2, 2]


@pytest.mark.django_db
def test_negative_control_without_the_exemption_the_third_copy_after_calls_is_held(django_user_model, monkeypatch):
    monkeypatch.setattr(resent, "AFTER_CALLS_EXEMPT", False)
    page, calls = _after_lookups(django_user_model)
    assert page == [(CLOSING, None), (CLOSING, None), (handoff.TEXT, HANDED_OFF)] and calls == [2, 3, 3]


# --- the step's time: the re-ask shares it ----------------------------------------------------------------

SAID = "Could you tell me the postcode the parcel was sent to, so I can check where it is?"


def _obtained(copies: int, *, deadline: float | None):
    """`answer.obtain` on a ticket whose page shows `SAID` `copies` times, each after another message, the
    model writing it again."""
    turns, n = [], 0
    for i in range(copies):
        turns += [
            TurnData(number=n + 1, author="customer", kind="message", text=f"Where is my parcel, take {i}?"),
            TurnData(number=n + 2, author="agent", kind="message", text=SAID),
        ]
        n += 2
    turns.append(TurnData(number=n + 1, author="customer", kind="message", text="Is it still in transit?"))
    request = ModelRequest(model="scripted", messages=[Message(role="user", content="Is it still in transit?")])
    model = ScriptedModel([ModelResponse(text=SAID)] * 2)
    got = answering.obtain(Gateway(override=model), request, model="scripted", turns=turns, deadline=deadline)
    return got, model


def test_with_no_time_left_to_ask_again_a_second_copy_posts_and_a_third_is_held(monkeypatch):
    monkeypatch.setattr(answering, "MIN_REASK_SECONDS", 1e6)  # whatever the step has left is too little
    second, model = _obtained(1, deadline=time.monotonic() + 60)
    assert second.verdict.action == replycheck.POST and len(model.requests) == 1
    assert second.checks[-1]["not_asked_again"] == "no_time"
    third, model = _obtained(2, deadline=time.monotonic() + 60)
    assert third.verdict.action == replycheck.HOLD and third.verdict.reasons == [resent.REASON]
    assert len(model.requests) == 1


def test_with_time_left_the_re_ask_is_made_within_the_step():
    second, model = _obtained(1, deadline=time.monotonic() + 60)
    assert second.verdict.action == replycheck.POST and len(model.requests) == 2
    third, model = _obtained(2, deadline=time.monotonic() + 60)
    assert third.verdict.action == replycheck.HOLD and len(model.requests) == 2


def test_negative_control_one_copy_allowed_the_second_is_held_when_not_asked_again(monkeypatch):
    monkeypatch.setattr(answering, "MIN_REASK_SECONDS", 1e6)
    monkeypatch.setattr(resent, "MOST_COPIES", 1)
    second, _ = _obtained(1, deadline=time.monotonic() + 60)
    assert second.verdict.action == replycheck.HOLD


# --- streamed ----------------------------------------------------------------------------------------------

CHUNKS = ["I have asked the courier ", "to look into it. ", "I will write as soon ", "as I hear back."]
SENT = "".join(CHUNKS)


async def _sent_before(watched) -> None:  # noqa: F811
    ticket = watched["ticket"]
    await sync_to_async(turn_append)(ticket=ticket, author="agent", text=SENT)
    await sync_to_async(turn_append)(ticket=ticket, author="customer", text="When will I see the money?")


async def _agent_said(watched) -> list[tuple[str, str | None]]:  # noqa: F811
    rows = Turn.objects.filter(ticket=watched["ticket"], author="agent", kind="message").order_by("number")
    return [(t.text, t.payload.get("via")) async for t in rows]


def _asked_again(body) -> bool:
    return resent.NOTICE in json.dumps(body)


async def test_a_reply_that_will_be_asked_again_never_streams(watched):  # noqa: F811
    await _sent_before(watched)
    customer, staff = await _run_watched(watched, lambda p, b: Streamed(chunks=CHUNKS, usage=(900, 12)))
    for got in (customer, staff):
        assert not [m for m in _streamed(got) if m["state"] == "text" and m["text"]]
    bodies = watched["server"].bodies
    assert len(bodies) == 2 and not _asked_again(bodies[0]) and _asked_again(bodies[1])
    notice = bodies[1]["messages"][-1]
    assert notice["role"] == "system" and "courier" not in notice["content"]
    # Written again after the notice: the second copy is posted, whole, once the step commits.
    assert await _agent_said(watched) == [(SENT, None), (SENT, None)]


NEW = ["Could you tell me ", "the postcode ", "it was sent to?"]


async def test_asked_again_a_model_that_moves_on_streams_and_posts_its_new_reply(watched):  # noqa: F811
    await _sent_before(watched)
    customer, _ = await _run_watched(
        watched, lambda p, b: Streamed(chunks=NEW if _asked_again(b) else CHUNKS, usage=(900, 12))
    )
    texts = [m["text"] for m in _streamed(customer) if m["state"] == "text" and m["text"]]
    assert texts and not [t for t in texts if "courier" in t]
    assert await _agent_said(watched) == [(SENT, None), ("".join(NEW), None)]


async def test_negative_control_with_the_policy_off_the_repeat_streams_and_posts_at_once(watched, monkeypatch):  # noqa: F811
    monkeypatch.setattr(resent, "ASK_AGAIN", False)
    await _sent_before(watched)
    customer, _ = await _run_watched(watched, lambda p, b: Streamed(chunks=CHUNKS, usage=(900, 12)))
    assert [m["text"] for m in _streamed(customer) if m["state"] == "text"][-1] == SENT
    assert len(watched["server"].bodies) == 1
    assert await _agent_said(watched) == [(SENT, None), (SENT, None)]
