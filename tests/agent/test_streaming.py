"""A reply streams to the customer page and the desk as it is written; the stored turn is the checked whole.

The model is a local OpenAI-compatible server that streams server-sent events (tests/agent/sse.py); the
watchers are real websockets on the ASGI application, over the Redis channel layer.
"""

from __future__ import annotations

import asyncio
import json
import time

import pytest
from django.conf import settings
from django.contrib.auth import get_user_model
from django.test import Client

from sundry.agent import answer, handoff
from sundry.agent.guards import declaredwords, ownterms, presentclaims, provisional, refusals, unfinished
from sundry.agent.guards.replycheck import id_tokens
from sundry.agent.loop import agent_run
from sundry.agent.models import AgentStep
from sundry.agent.provider.gateway import CallLimits, Gateway
from sundry.agent.provider.wire import completion_as_events
from sundry.desk.lifecycle import ticket_create
from sundry.evals import scorecard
from sundry.portal.wording import customer_wording
from sundry.tickets.models import Turn
from sundry.tickets.services import turn_append
from tests.agent.sse import Streamed, StreamingServer, ToolChunk
from tests.agent.test_gateway import completion, lane_request, no_internet, serve  # noqa: F401  (fixtures)
from tests.factories import CustomerFactory, TicketClassFactory, paid_order

MODEL = "openai-compatible:streamer"
NO_RETRIES = CallLimits(max_retries=0)


# --- what may show before the check ----------------------------------------------------------


@pytest.mark.parametrize(
    "text, known, final, expected",
    [
        # Only whole sentences show: the one still being written waits.
        ("Your order SU-20481 has shi", {"SU-20481"}, False, ""),
        ("Thanks for waiting. Your order SU-20481 has shi", {"SU-20481"}, False, "Thanks for waiting."),
        ("Your order SU-20481 has shipped.", {"SU-20481"}, True, "Your order SU-20481 has shipped."),
        ("It costs 40.00 USD. It ships", set(), False, "It costs 40.00 USD."),  # a decimal point ends nothing
        # An identifier the request never showed: nothing from its sentence on, complete or not.
        ("Your refund SU-26675-RF01 has been issued.", {"SU-26675"}, True, ""),
        ("I checked. Your refund SU-26675-RF01 has been issued. Anything else?", {"SU-26675"}, True, "I checked."),
        ("Your refund SU-2667", {"SU-26675"}, False, ""),
        # Tool protocol, JSON and guard text: cut before their first character.
        ('Let me look. <tool_call>{"name": "get_order"', set(), False, "Let me look."),
        ('{"name": "get_order", "arguments": {}}', set(), True, ""),
        # An apology before the cut waits for what follows it, and a cut is not a finished reply: nothing.
        ("Sorry. ERROR (guard: schema) order_number", set(), True, ""),
        ("I checked. Sorry. ERROR (guard: schema) order_number", set(), True, "I checked."),
        ("Here it is.\n```json\n{}", set(), False, "Here it is."),
        ("Here:\n```json\n{}", set(), False, ""),  # cut there, "Here:" introduces nothing (`unfinished`)
        ("Thanks", set(), False, ""),
        ("Thanks", set(), True, "Thanks"),
    ],
)
def test_provisional_text_stops_before_anything_the_check_would_not_let_through(text, known, final, expected):
    assert provisional.shown(text, known=known, final=final) == expected


def test_a_sentence_the_judge_refuses_ends_what_is_shown():
    text = "I looked at SU-26675. It has been cancelled. Anything else?"
    refuse_claims = lambda sentence: "cancelled" not in sentence  # noqa: E731
    assert provisional.shown(text, known={"SU-26675"}, final=True, sentence_ok=refuse_claims) == "I looked at SU-26675."
    assert provisional.shown(text, known={"SU-26675"}, final=True) == text  # control: no judge, all of it


def test_negative_control_without_the_cut_the_invented_reference_would_show():
    # The check that makes the cut above able to fail: the same text with the reference known shows it whole.
    text = "Your refund SU-26675-RF01 has been issued."
    assert provisional.shown(text, known=id_tokens("SU-26675-RF01"), final=True) == text
    assert "SU-26675-RF01" not in provisional.shown(text, known={"SU-26675"}, final=True)


# --- the gateway streams --------------------------------------------------------------------


class Sink:
    def __init__(self):
        self.events: list[tuple[str, str, float]] = []

    async def typing(self):
        self.events.append(("typing", "", time.monotonic()))

    async def written(self, text, *, final=False):
        self.events.append(("final" if final else "text", text, time.monotonic()))


@pytest.fixture
def streaming(no_internet, monkeypatch):  # noqa: F811
    servers = []

    def start(script, pause=0.0):
        servers.append(StreamingServer(script, pause=pause))
        monkeypatch.setenv("SUNDRY_OPENAI_COMPAT_BASE_URL", servers[-1].url + "/v1")
        return servers[-1]

    yield start
    for s in servers:
        s.close()


def test_the_text_reaches_the_sink_as_it_is_written_and_the_call_returns_the_whole_reply(streaming):
    pieces = ["Your order ", "SU-20481 ", "has ", "shipped ", "today."]
    server = streaming(lambda p, b: Streamed(chunks=pieces, usage=(1200, 9), cached=1024), pause=0.2)
    sink = Sink()
    call = Gateway(limits=NO_RETRIES).call(lane_request(MODEL), stream=sink)

    assert server.bodies[0]["stream"] is True and server.bodies[0]["stream_options"] == {"include_usage": True}
    assert call.response.text == "".join(pieces) and call.response.finish_reason == "stop"
    assert call.response.usage.input_tokens == 1200 and call.response.usage.cached_input_tokens == 1024
    kinds = [k for k, _, _ in sink.events]
    assert kinds[0] == "typing" and kinds[-1] == "final" and kinds.count("text") >= 3
    texts = [t for k, t, _ in sink.events if k == "text"]
    assert texts == sorted(texts, key=len) and texts[0] == "Your order "
    # The first words arrived while the model was still writing, not at the end: the server spends
    # 0.8 s on the pieces after the first, and a busy machine delays both ends alike.
    first_text = next(at for k, _, at in sink.events if k == "text")
    final_at = next(at for k, _, at in sink.events if k == "final")
    assert final_at - first_text >= 0.3


def test_a_streamed_tool_call_shows_only_typing(streaming):
    streaming(lambda p, b: Streamed(chunks=[ToolChunk("c1", "get_order", '{"order_number": "SU-20481"}')]))
    sink = Sink()
    call = Gateway(limits=NO_RETRIES).call(lane_request(MODEL), stream=sink)
    assert [c.name for c in call.response.tool_calls] == ["get_order"]
    assert [k for k, _, _ in sink.events] == ["typing"]


def test_a_server_that_ignores_stream_true_is_read_as_a_stream(serve, monkeypatch):  # noqa: F811
    # It answers one JSON completion (with arguments as an object, as llama.cpp did): repaired, then replayed.
    server = serve(lambda p, b: (200, completion(content="All done.", usage=(300, 4))))
    monkeypatch.setenv("SUNDRY_OPENAI_COMPAT_BASE_URL", server.url + "/v1")
    sink = Sink()
    call = Gateway(limits=NO_RETRIES).call(lane_request(MODEL), stream=sink)
    assert server.bodies[0]["stream"] is True
    assert call.response.text == "All done." and call.response.usage.input_tokens == 300
    assert [(k, t) for k, t, _ in sink.events] == [("typing", ""), ("text", "All done."), ("final", "All done.")]


def test_completion_as_events_carries_calls_and_usage():
    body = completion(
        tool_calls=[{"id": "c1", "type": "function", "function": {"name": "get_order", "arguments": "{}"}}],
        usage=(7, 2),
    )
    lines = [
        json.loads(line[6:]) for line in completion_as_events(body).decode().split("\n\n") if line.startswith("data: {")
    ]
    assert lines[1]["choices"][0]["delta"]["tool_calls"][0]["function"]["name"] == "get_order"
    assert lines[2]["choices"][0]["finish_reason"] == "tool_calls" and lines[-1]["usage"]["prompt_tokens"] == 7
    assert completion_as_events(body).endswith(b"data: [DONE]\n\n")


# --- through the live channel to the customer page and the desk -------------------------------


def _cookie(user) -> bytes:
    client = Client()
    client.force_login(user)
    return f"{settings.SESSION_COOKIE_NAME}={client.cookies[settings.SESSION_COOKIE_NAME].value}".encode()


def watched_ticket(
    start, model: str, *, order: str = "SU-26675", said: str = "Did my refund for SU-26675 go through?"
) -> dict:
    """A customer's refund question (`said`, on their paid order `order`) on a ticket whose class works with
    `model`, and the cookies of its customer and a staff member, for sockets that watch it; `start` serves
    the model."""
    if not settings.REDIS_URL:
        pytest.skip("the stream travels from the run's thread to the sockets over the Redis channel layer")
    users = get_user_model().objects
    staff = users.create_user("sam", password="x", is_staff=True)
    alice = users.create_user("alice", password="x")
    customer = CustomerFactory(user=alice)
    paid_order(customer=customer, number=order, prices=(4000,))
    tclass = TicketClassFactory(approval_rules={}, working_model=model, summariser_model="offline")
    ticket = ticket_create(customer=customer.person, ticket_class=tclass, subject="Refund?")
    turn_append(ticket=ticket, author="customer", text=said)
    return {"ticket": ticket, "staff": _cookie(staff), "alice": _cookie(alice), "start": start, "alice_user": alice}


@pytest.fixture
def watched(transactional_db, streaming):
    return watched_ticket(streaming, MODEL)


async def _watch(path: str, cookie: bytes):
    from channels.testing import WebsocketCommunicator

    from sundry.asgi import application

    socket = WebsocketCommunicator(application, path, headers=[(b"origin", b"http://localhost"), (b"cookie", cookie)])
    connected, _ = await socket.connect()
    assert connected
    assert "live-version" in await socket.receive_from(timeout=5)  # the snapshot
    return socket


async def _until_done(socket, timeout=60.0) -> list:
    """Everything the socket receives until the stream's "done": JSON stream messages and panel frames."""
    got = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        raw = await socket.receive_from(timeout=deadline - time.monotonic())
        if raw.startswith("{"):
            message = json.loads(raw)
            got.append(message)
            if message["state"] == "done":
                return got
        else:
            got.append(raw)
    raise AssertionError(f"no done in {timeout} s: {got}")


async def _run_watched(watched, script, pause=0.15):
    watched["server"] = watched["start"](script, pause=pause)
    ticket = watched["ticket"]
    customer = await _watch(f"/ws/help/tickets/{ticket.pk}/", watched["alice"])
    staff = await _watch(f"/ws/desk/tickets/{ticket.pk}/", watched["staff"])
    run = asyncio.ensure_future(asyncio.to_thread(agent_run, ticket.pk, gateway=Gateway(limits=NO_RETRIES)))
    seen = await asyncio.gather(_until_done(customer), _until_done(staff))
    await run
    for socket in (customer, staff):
        await socket.disconnect()
    return seen


def _streamed(got) -> list[dict]:
    return [m for m in got if isinstance(m, dict)]


async def test_customer_and_desk_see_typing_then_the_text_then_the_stored_turn(watched):
    pieces = ["I checked ", "order ", "SU-26675. ", "No refund ", "of 40 USD ", "has been made ", "yet."]
    customer, staff = await _run_watched(watched, lambda p, b: Streamed(chunks=pieces, usage=(900, 12)))

    stored = await Turn.objects.filter(ticket=watched["ticket"], author="agent", kind="message").aget()
    assert stored.text == "".join(pieces)
    step = await AgentStep.objects.aget(ticket=watched["ticket"])
    assert step.checks.get("streamed") is True and step.reported_request_tokens == 900
    # The customer reads the provisional text in their own wording, as their stored messages read.
    for got, whole in ((customer, customer_wording(stored.text)), (staff, stored.text)):
        stream = _streamed(got)
        assert stream[0]["state"] == "typing" and stream[0]["text"] == ""
        texts = [m["text"] for m in stream if m["state"] == "text"]
        assert len(texts) >= 2 and texts[-1] == whole  # grew in steps, ended whole
        assert all(whole.startswith(t) for t in texts)
        assert stream[-1]["state"] == "done" and stream[-1]["turn"] == stored.number
        assert len({m["stream"] for m in stream}) == 1 and [m["seq"] for m in stream] == sorted(
            m["seq"] for m in stream
        )
        # The stored turn came as a panel frame, after the provisional text.
        frames = [i for i, m in enumerate(got) if isinstance(m, str) and "has been made yet." in m]
        first_text = next(i for i, m in enumerate(got) if isinstance(m, dict) and m["state"] == "text")
        assert frames and frames[0] > first_text


async def test_a_held_reply_streams_nothing_invented_and_ends_with_no_turn(watched):
    invented = ["Your refund ", "SU-26675-RF01 ", "for 40.00 USD ", "has been issued."]
    customer, staff = await _run_watched(watched, lambda p, b: Streamed(chunks=invented, usage=(900, 12)))

    # No turn of the model's: the only agent message is Sundry's hand-off (`agent/handoff.py`).
    said = [t async for t in Turn.objects.filter(ticket=watched["ticket"], author="agent", kind="message")]
    assert [(t.text, t.payload.get("via")) for t in said] == [(handoff.TEXT, "handoff")]
    step = await AgentStep.objects.aget(ticket=watched["ticket"])
    assert step.outcome == "held_reply"
    assert step.checks.get("streamed") is True and "streamed_text" not in step.checks  # only "is writing…"
    for got in (customer, staff):
        stream = _streamed(got)
        assert all("SU-26675-RF01" not in m["text"] for m in stream)
        assert [m["state"] for m in stream].count("typing") == 2  # the re-ask streamed afresh
        assert stream[-1] == {**stream[-1], "state": "done", "turn": None}


async def test_the_hand_off_after_a_held_reply_reaches_the_customers_socket(watched):
    """The hand-off is a turn like any reply: the step's push carries it to the customer's open page."""
    invented = ["Your refund ", "SU-26675-RF01 ", "for 40.00 USD ", "has been issued."]
    watched["server"] = watched["start"](lambda p, b: Streamed(chunks=invented, usage=(900, 12)), pause=0.15)
    ticket = watched["ticket"]
    customer = await _watch(f"/ws/help/tickets/{ticket.pk}/", watched["alice"])
    run = asyncio.ensure_future(asyncio.to_thread(agent_run, ticket.pk, gateway=Gateway(limits=NO_RETRIES)))
    frames = [m for m in await _until_done(customer) if isinstance(m, str)]
    await run
    deadline = time.monotonic() + 30
    while not any("passed your message to our team" in f for f in frames):
        frames.append(await customer.receive_from(timeout=max(0.1, deadline - time.monotonic())))
    await customer.disconnect()
    assert all("SU-26675-RF01" not in f for f in frames)


async def test_a_true_sentence_then_a_false_claim_posts_the_sentence_and_holds_the_rest(watched):
    """ "I checked order SU-26675." streams (true, checked); "It has been cancelled and refunded." would
    be held. The customer keeps what they read: the stored reply is exactly the shown sentence, the
    rest is held for staff and never reaches a screen, and the model is not asked again (that would
    take the shown sentence back)."""
    false = ["I checked ", "order SU-26675. ", "It has been ", "cancelled ", "and refunded."]
    customer, staff = await _run_watched(watched, lambda p, b: Streamed(chunks=false, usage=(900, 12)))

    ticket = watched["ticket"]
    stored = await Turn.objects.filter(ticket=ticket, author="agent", kind="message").aget()
    assert stored.text == "I checked order SU-26675."
    held = await Turn.objects.filter(ticket=ticket, kind="error").aget()
    assert held.payload["held_reply"] == "It has been cancelled and refunded."
    assert held.payload["kept"] == stored.text and held.payload["reply_check"]["reasons"] == ["unsupported_claim"]
    assert "cancel" in held.payload["reply_check"]["unsupported"] and "held for staff" in held.text
    step = await AgentStep.objects.aget(ticket=ticket)
    assert step.outcome == "reply" and step.checks["held_rest"] is True
    assert step.checks["streamed_shown"] == stored.text and "stream_withdrawn" not in step.checks
    assert len(watched["server"].bodies) == 1  # not asked again
    assert await asyncio.to_thread(scorecard.taken_back, [ticket.pk]) == 0
    for got, whole in ((customer, customer_wording(stored.text)), (staff, stored.text)):
        stream = _streamed(got)
        texts = [m["text"] for m in stream if m["state"] == "text"]
        assert texts and all(t == whole for t in texts)  # the first sentence only, and it stays
        assert [m["state"] for m in stream].count("typing") == 1
        assert stream[-1]["state"] == "done" and stream[-1]["turn"] == stored.number
    # The customer's page never carries the held sentence, streamed or stored.
    assert all("cancelled" not in (m if isinstance(m, str) else m["text"]) for m in customer)


async def test_negative_control_holding_the_whole_reply_takes_shown_text_back(watched, monkeypatch):
    """The old way (the whole reply asked again, then held): the shown sentence is withdrawn, nothing is
    stored, and the scorecard's figure counts it."""
    monkeypatch.setattr(answer, "KEEP_SHOWN", False)
    false = ["I checked ", "order SU-26675. ", "It has been ", "cancelled ", "and refunded."]
    customer, staff = await _run_watched(watched, lambda p, b: Streamed(chunks=false, usage=(900, 12)))

    ticket = watched["ticket"]
    said = [t async for t in Turn.objects.filter(ticket=ticket, author="agent", kind="message")]
    assert [t.payload.get("via") for t in said] == ["handoff"]  # Sundry's hand-off only, no reply stored
    step = await AgentStep.objects.aget(ticket=ticket)
    assert step.outcome == "held_reply" and step.checks["stream_withdrawn"] is True
    assert await asyncio.to_thread(scorecard.taken_back, [ticket.pk]) == 1
    for got in (customer, staff):
        texts = [m["text"] for m in _streamed(got) if m["state"] == "text"]
        assert texts and all(t.strip() == "I checked order SU-26675." for t in texts)  # still never the claim
        assert _streamed(got)[-1]["turn"] is None


async def test_a_bare_it_is_done_about_the_refund_asked_never_reaches_a_screen(watched):
    """The customer asked whether their refund went through; "It's all sorted." names no action but
    claims that refund, which never ran: nothing from that sentence on is ever shown, and what was
    shown before it is what they keep."""
    false = ["Thanks for ", "asking. ", "It's all ", "sorted. ", "Anything else?"]
    customer, staff = await _run_watched(watched, lambda p, b: Streamed(chunks=false, usage=(900, 12)))

    step = await AgentStep.objects.aget(ticket=watched["ticket"])
    assert step.outcome == "reply" and step.checks["reply"][-1]["reasons"] == ["unsupported_claim"]
    assert "refund" in step.checks["reply"][-1]["unsupported"]
    stored = await Turn.objects.filter(ticket=watched["ticket"], author="agent", kind="message").aget()
    assert stored.text == "Thanks for asking."
    for got in (customer, staff):
        texts = [m["text"] for m in _streamed(got) if m["state"] == "text"]
        assert texts and all(t.strip() == "Thanks for asking." for t in texts)
        assert all("sorted" not in t and "Anything" not in t for t in texts)


# Issue 26: a small model's whole reply, its apology a sentence of its own.
REFUSAL = ["I'm sorry. ", "I can't ", "assist ", "with that."]


async def test_a_bare_refusal_and_its_apology_never_reach_a_screen_and_the_customer_reads_the_hand_off(watched):
    """The apology alone waits for the sentence after it (shown, it would be kept as the reply, the refusal
    held and no hand-off posted); the refusal is never shown. Asked again, refused again: held, and the
    customer reads Sundry's hand-off."""
    customer, staff = await _run_watched(watched, lambda p, b: Streamed(chunks=REFUSAL, usage=(900, 12)))

    said = [t async for t in Turn.objects.filter(ticket=watched["ticket"], author="agent", kind="message")]
    assert [(t.text, t.payload.get("via")) for t in said] == [(handoff.TEXT, "handoff")]
    step = await AgentStep.objects.aget(ticket=watched["ticket"])
    assert step.outcome == "held_reply" and step.checks["reply"][-1]["reasons"] == ["bare_refusal"]
    assert len(watched["server"].bodies) == 2  # asked again once
    for got in (customer, staff):
        assert not [m for m in _streamed(got) if m["state"] == "text"]  # only "is writing…"


async def test_negative_control_shown_alone_the_apology_is_kept_and_no_hand_off_follows(watched, monkeypatch):
    monkeypatch.setattr(refusals, "lead_in", lambda text: False)
    await _run_watched(watched, lambda p, b: Streamed(chunks=REFUSAL, usage=(900, 12)))
    said = [t async for t in Turn.objects.filter(ticket=watched["ticket"], author="agent", kind="message")]
    assert [t.text for t in said] == ["I'm sorry."]  # all the customer reads; staff hold the rest
    held = await Turn.objects.filter(ticket=watched["ticket"], kind="error").aget()
    assert held.payload["held_reply"] == "I can't assist with that."


async def test_negative_control_with_streaming_off_no_stream_reaches_the_watchers(watched, settings):
    settings.MODEL_STREAM = False
    watched["start"](lambda p, b: Streamed(chunks=["Nothing ", "to report."]))
    ticket = watched["ticket"]
    customer = await _watch(f"/ws/help/tickets/{ticket.pk}/", watched["alice"])
    await asyncio.to_thread(agent_run, ticket.pk, gateway=Gateway(limits=NO_RETRIES))
    frame = await customer.receive_from(timeout=10)
    assert not frame.startswith("{") and "Nothing to report." in frame
    assert await customer.receive_nothing(timeout=0.5)
    await customer.disconnect()


async def test_after_a_kept_reply_a_later_wake_takes_no_step(watched):
    """The held rest is staff's, not unfinished work: a run woken later (any input, a sweep) neither
    calls the model nor answers the already answered message again."""
    false = ["I checked ", "order SU-26675. ", "It has been ", "cancelled ", "and refunded."]
    await _run_watched(watched, lambda p, b: Streamed(chunks=false, usage=(900, 12)))
    steps = await asyncio.to_thread(agent_run, watched["ticket"].pk, gateway=Gateway(limits=NO_RETRIES))
    assert steps == 0 and len(watched["server"].bodies) == 1
    assert await Turn.objects.filter(ticket=watched["ticket"], author="agent", kind="message").acount() == 1


# Run 12's replies (docs/real-model.md): a declared description's sentences under a lead-in, Sundry's name for
# its pinned rules, and a refund handed over that no tool gave. Each follows a sentence that may show.
SUNDRYS_OWN = {
    "declared sentences": (
        [
            "Thanks for asking. ",
            "Here are your options:\n\n",
            "1. Refund money on an order ",
            "to its original ",
            "payment method. ",
            "Irreversible.",
        ],
        "Refund money",
    ),
    "pinned rules": (
        ["Thanks for asking. ", "As per the rules ", "you have pinned ", "for this ticket, ", "you should wait."],
        "pinned",
    ),
    "refund handed over": (
        ["Thanks for asking. ", "Sure, here is ", "your full refund ", "for SU-26675:\n"],
        "full refund",
    ),
}


@pytest.mark.parametrize("reply", list(SUNDRYS_OWN))
async def test_sundrys_own_words_and_a_refund_handed_over_never_reach_a_screen(watched, reply):
    """The stream judges each sentence as the reply check and the claims check would: none of these is ever
    shown, the sentence before it is, and the stored reply is what was shown."""
    chunks, words = SUNDRYS_OWN[reply]
    customer, staff = await _run_watched(watched, lambda p, b: Streamed(chunks=chunks, usage=(900, 12)))

    said = [t async for t in Turn.objects.filter(ticket=watched["ticket"], author="agent", kind="message")]
    assert said and all(words not in t.text for t in said)
    assert said[0].text.startswith("Thanks for asking.")
    held = await Turn.objects.filter(ticket=watched["ticket"], kind="error").aget()
    assert words in held.payload["held_reply"]
    for got in (customer, staff):
        texts = [m["text"] for m in _streamed(got) if m["state"] == "text"]
        assert texts and all(words not in t for t in texts)
    # The customer's page never carries it, streamed or stored (staff's shows the held rest, marked held).
    assert all(words not in m for m in customer if isinstance(m, str))


@pytest.mark.parametrize("reply", list(SUNDRYS_OWN))
async def test_negative_control_with_those_readings_off_they_stream(watched, reply, monkeypatch):
    monkeypatch.setattr(declaredwords, "carried", lambda text, declared: "")
    monkeypatch.setattr(ownterms, "used", lambda text: "")
    monkeypatch.setattr(presentclaims, "kinds", lambda sentence: [])
    monkeypatch.setattr(unfinished, "ending", lambda text: "")  # "… your full refund for SU-26675:" introduces
    chunks, words = SUNDRYS_OWN[reply]
    customer, _staff = await _run_watched(watched, lambda p, b: Streamed(chunks=chunks, usage=(900, 12)))
    assert any(words in m["text"] for m in _streamed(customer) if m["state"] == "text")


@pytest.mark.parametrize(
    "pieces, true",
    [
        (["Order SU-26675 ", "has been delivered."], True),
        (["Order SU-26675 ", "is still being ", "processed."], False),
    ],
)
async def test_a_status_is_judged_on_the_records_read_beside_the_call(watched, pieces, true):
    """The order's record is read while the model writes (`recordstates.Ahead`, over the step's
    connection): its sentence streams when the record says it (delivered) and never when it does not."""
    from asgiref.sync import sync_to_async

    from sundry.context.services import ledger_record_system_id

    # The order is the ticket's (in its ledger, as a lookup leaves it): its record is the one read.
    await sync_to_async(ledger_record_system_id)(
        ticket=watched["ticket"], kind="order", value="SU-26675", role="order:SU-26675", turn=1
    )
    customer, staff = await _run_watched(watched, lambda p, b: Streamed(chunks=pieces, usage=(900, 12)))

    said = [t.text async for t in Turn.objects.filter(ticket=watched["ticket"], author="agent", kind="message")]
    step = await AgentStep.objects.filter(ticket=watched["ticket"]).order_by("number").afirst()
    for got in (customer, staff):
        shown = " ".join(m["text"] for m in _streamed(got))
        assert ("delivered" in shown) is true and "processed" not in shown
    if true:
        assert said == ["".join(pieces)] and step.outcome != "held_reply"
    else:
        assert said == [handoff.TEXT] and step.outcome == "held_reply"
