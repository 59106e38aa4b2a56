"""A class on an `anthropic:` model, against a local server shaped like Anthropic's Messages API.

The server (tests/agent/anthropic_server.py) is real HTTP on 127.0.0.1 and streams server-sent events as the
API does; the client is pydantic-ai's AnthropicModel over the Anthropic SDK, as in production. The watchers
are real websockets on the ASGI application, over the Redis channel layer.
"""

from __future__ import annotations

import asyncio
import json
import time

import pytest
from django.conf import settings

from sundry.agent import handoff
from sundry.agent.loop import agent_run
from sundry.agent.models import AgentStep
from sundry.agent.provider.gateway import CallLimits, Gateway, ModelCallError
from sundry.agent.services import customer_message_post
from sundry.desk.lifecycle import ticket_create
from sundry.portal.wording import customer_wording
from sundry.shop.models import Refund
from sundry.tickets.models import Ticket, Turn
from tests.agent.anthropic_server import Answer, AnthropicServer, ToolUse, events
from tests.agent.test_gateway import lane_request, no_internet  # noqa: F401  (fixture)
from tests.agent.test_streaming import Sink, _streamed, _until_done, _watch, watched_ticket
from tests.factories import CustomerFactory, TicketClassFactory, paid_order

MODEL = "anthropic:claude-haiku-4-5"
NO_RETRIES = CallLimits(max_retries=0)


@pytest.fixture
def anthropic(no_internet, monkeypatch):  # noqa: F811
    servers = []

    def start(script, pause=0.0, count=None):
        servers.append(AnthropicServer(script, pause=pause, count=count))
        monkeypatch.setenv("ANTHROPIC_BASE_URL", servers[-1].url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
        return servers[-1]

    yield start
    for s in servers:
        s.close()


# --- the gateway streams ----------------------------------------------------------------------


def test_a_streamed_reply_reaches_the_sink_as_it_is_written_and_the_call_returns_the_whole(anthropic):
    pieces = ["Your order ", "SU-20481 ", "has ", "shipped ", "today."]
    server = anthropic(
        lambda p, b: Answer(blocks=pieces, input_tokens=200, cache_read=1000, output_tokens=9), pause=0.2
    )
    sink = Sink()
    call = Gateway(limits=NO_RETRIES).call(lane_request(MODEL), stream=sink)

    assert server.requests[0]["path"] == "/v1/messages" and server.bodies[0]["stream"] is True
    assert call.response.text == "".join(pieces) and call.response.finish_reason == "stop"
    # Anthropic reports uncached input apart from the cache read; the call's input is the whole request.
    assert call.response.usage.input_tokens == 1200 and call.response.usage.cached_input_tokens == 1000
    assert call.response.usage.output_tokens == 9
    kinds = [k for k, _, _ in sink.events]
    assert kinds[0] == "typing" and kinds[-1] == "final" and kinds.count("text") >= 3
    texts = [t for k, t, _ in sink.events if k == "text"]
    assert texts == sorted(texts, key=len) and texts[0] == "Your order "
    first_text = next(at for k, _, at in sink.events if k == "text")
    final_at = next(at for k, _, at in sink.events if k == "final")
    # While the model was still writing: the server spends 0.8 s on the pieces after the first, so the
    # first text lands well before the end even when a busy machine delays everything alike.
    assert final_at - first_text >= 0.3


def test_a_tool_use_streamed_as_input_json_deltas_is_one_whole_call(anthropic):
    use = ToolUse("toolu_1", "get_order", {"order_number": "SU-20481"}, pieces=4)
    anthropic(lambda p, b: Answer(blocks=[use]))
    assert [e["delta"]["type"] for n, e in events(Answer(blocks=[use])) if n == "content_block_delta"] == [
        "input_json_delta"
    ] * 4  # the arguments really arrive in pieces
    sink = Sink()
    call = Gateway(limits=NO_RETRIES).call(lane_request(MODEL), stream=sink)
    assert [(c.id, c.name, c.arguments) for c in call.response.tool_calls] == [
        ("toolu_1", "get_order", {"order_number": "SU-20481"})
    ]
    assert call.response.finish_reason == "tool_call"
    assert [k for k, _, _ in sink.events] == ["typing"]  # a call shows nothing but typing


def test_negative_control_malformed_streamed_arguments_stay_raw_text_for_the_guards(anthropic):
    # The pieces make no JSON object: the call is kept, its arguments as text, for the loop to reject visibly.
    broken = ToolUse("toolu_1", "get_order", {}, raw='{"order_number": "SU-20481"', pieces=3)
    anthropic(lambda p, b: Answer(blocks=[broken]))
    [call] = Gateway(limits=NO_RETRIES).call(lane_request(MODEL), stream=Sink()).response.tool_calls
    assert call.name == "get_order" and isinstance(call.arguments, str) and "SU-20481" in call.arguments


# --- 429 with Retry-After ---------------------------------------------------------------------

RATE_LIMITED = (
    429,
    {"type": "error", "error": {"type": "rate_limit_error", "message": "slow down"}},
    {"retry-after": "1"},
)


@pytest.mark.parametrize("streamed", [False, True])
def test_a_429_is_retried_after_the_servers_retry_after_and_the_latency_spans_both(anthropic, streamed):
    # The SDK's own first backoff is at most 0.5 s: a gap of a second is the server's Retry-After.
    answers = iter([RATE_LIMITED, Answer(blocks=["Recovered."])])
    server = anthropic(lambda p, b: next(answers))
    call = Gateway(limits=CallLimits(max_retries=2)).call(lane_request(MODEL), stream=Sink() if streamed else None)
    assert call.response.text == "Recovered."
    assert len(server.requests) == 2 and server.requests[1]["at"] - server.requests[0]["at"] >= 0.95
    assert call.latency_ms >= 950


def test_negative_control_without_retries_the_429_is_a_retryable_error_after_one_attempt(anthropic):
    server = anthropic(lambda p, b: RATE_LIMITED)
    with pytest.raises(ModelCallError) as info:
        Gateway(limits=NO_RETRIES).complete(lane_request(MODEL))
    assert info.value.retryable is True and info.value.status_code == 429 and len(server.requests) == 1


# --- through the loop -------------------------------------------------------------------------


@pytest.fixture
def desk(anthropic):
    """A ticket whose class runs an `anthropic:` model behind the local server, answering from `answers`."""
    answers: list = []
    server = anthropic(lambda path, body: answers.pop(0)(body) if callable(answers[0]) else answers.pop(0), pause=0.15)
    customer = CustomerFactory()
    paid_order(customer=customer, number="SU-26675", prices=(4000,))
    tclass = TicketClassFactory(approval_rules={}, working_model=MODEL, summariser_model="offline")
    ticket = ticket_create(customer=customer.person, ticket_class=tclass, subject="Refund?")
    customer_message_post(ticket=ticket, text="Did my refund for SU-26675 go through?")
    return {"server": server, "answers": answers, "ticket": ticket}


def run(desk):
    return agent_run(desk["ticket"].pk, gateway=Gateway(limits=NO_RETRIES))


def agent_messages(ticket):
    return list(Turn.objects.filter(ticket=ticket, author="agent", kind="message").values_list("text", flat=True))


@pytest.mark.django_db
def test_a_streamed_tool_use_runs_as_a_tool_call_and_cached_tokens_are_recorded(desk):
    desk["answers"] += [
        Answer(
            blocks=["Let me look.", ToolUse("toolu_1", "get_order", {"order_number": "SU-26675"})],
            input_tokens=300,
            cache_read=2500,
            cache_write=0,
            output_tokens=30,
        ),
        Answer(
            blocks=["Order SU-26675 ", "was paid; ", "no refund has been made."],
            input_tokens=500,
            cache_read=2500,
            output_tokens=12,
        ),
    ]
    assert settings.MODEL_STREAM
    run(desk)
    ticket = desk["ticket"]
    result = Turn.objects.get(ticket=ticket, kind="tool_result")
    assert result.payload["ok"] and result.payload["name"] == "get_order"
    # The next request answered that call by its id, as Anthropic requires.
    second = desk["server"].bodies[1]
    assert second["stream"] is True
    results = [
        c
        for m in second["messages"]
        if isinstance(m["content"], list)
        for c in m["content"]
        if c.get("type") == "tool_result"
    ]
    assert [r["tool_use_id"] for r in results] == ["toolu_1"]
    # The words written beside the call passed the reply check: the customer has them too.
    assert agent_messages(ticket) == ["Let me look.", "Order SU-26675 was paid; no refund has been made."]
    steps = list(AgentStep.objects.filter(ticket=ticket).order_by("number"))
    assert [s.outcome for s in steps] == ["tool_calls", "reply"]
    assert [(s.input_tokens, s.cached_input_tokens, s.reported_request_tokens) for s in steps] == [
        (2800, 2500, 2800),
        (3000, 2500, 3000),
    ]
    assert all(s.checks.get("streamed") for s in steps)


@pytest.mark.django_db
def test_an_invented_refund_reference_in_an_unstreamed_reply_is_asked_again_then_held(desk, settings):
    settings.MODEL_STREAM = False
    desk["answers"] += [
        Answer(blocks=["Your refund SU-26675-RF01 for 40.00 USD has been issued."]),
        Answer(blocks=["Refund reference SU-26675-refund-1 is on its way."]),
    ]
    run(desk)
    ticket = Ticket.objects.get(pk=desk["ticket"].pk)
    assert "stream" not in desk["server"].bodies[0] or desk["server"].bodies[0]["stream"] is False
    assert agent_messages(ticket) == [handoff.TEXT]  # the customer reads only Sundry's hand-off
    # The re-ask showed the model its reply and why it was not sent, as the last user content.
    last = desk["server"].bodies[1]["messages"][-1]
    assert last["role"] == "user" and "SU-26675-RF01" in str(last["content"])
    held = Turn.objects.get(ticket=ticket, kind="error")
    assert "held for staff" in held.text and held.payload["held_reply"].startswith("Refund reference")
    assert ticket.attention.startswith("Reply held for staff: invented_id")
    assert AgentStep.objects.get(ticket=ticket).outcome == "held_reply"
    assert not Refund.objects.exists()


@pytest.mark.django_db
def test_negative_control_a_reply_naming_only_known_identifiers_is_posted(desk, settings):
    settings.MODEL_STREAM = False
    desk["answers"] += [Answer(blocks=["I can see order SU-26675; no refund has been made yet."])]
    run(desk)
    assert agent_messages(desk["ticket"]) == ["I can see order SU-26675; no refund has been made yet."]
    assert not Ticket.objects.get(pk=desk["ticket"].pk).attention


@pytest.mark.django_db
def test_a_hallucinated_tool_response_in_an_anthropic_reply_is_stripped(desk):
    desk["answers"] += [
        Answer(
            blocks=[
                '<tool_response>{"status": "paid"}</tool_response>\n',
                "Order SU-26675 was paid; no refund has been made.",
            ]
        )
    ]
    run(desk)
    [message] = Turn.objects.filter(ticket=desk["ticket"], author="agent", kind="message")
    assert message.text == "Order SU-26675 was paid; no refund has been made."
    assert message.payload["reply_check"]["notes"] == ["tool-protocol markup removed"]


@pytest.mark.django_db
def test_a_call_written_as_text_in_an_anthropic_reply_never_reaches_the_customer(desk):
    hermes = '<tool_call>\n{"name": "get_order", "arguments": {"order_number": "SU-26675"}}\n</tool_call>'
    desk["answers"] += [Answer(blocks=[hermes]), Answer(blocks=[hermes])]
    run(desk)
    ticket = Ticket.objects.get(pk=desk["ticket"].pk)
    assert (
        agent_messages(ticket) == [handoff.TEXT] and not Turn.objects.filter(ticket=ticket, kind="tool_result").exists()
    )
    assert "call_as_text" in ticket.attention


def _slow(seconds):
    def answer(body):
        time.sleep(seconds)
        return Answer(blocks=["Too late."])

    return answer


@pytest.mark.django_db
@pytest.mark.parametrize("failure", ["rate_limited", "timeout"])
def test_a_call_that_fails_every_attempt_leaves_an_error_turn_a_flag_and_every_attempts_latency(desk, failure):
    # Two attempts: a 429 asking for a second's wait, then another; or two reads that time out at 0.5 s.
    desk["answers"] += [RATE_LIMITED] * 2 if failure == "rate_limited" else [_slow(3)] * 2
    limits = CallLimits(max_retries=1, read_timeout=0.5, call_timeout=20)
    agent_run(desk["ticket"].pk, gateway=Gateway(limits=limits))
    ticket = Ticket.objects.get(pk=desk["ticket"].pk)
    assert len(desk["server"].requests) == 2
    error = Turn.objects.get(ticket=ticket, kind="error")
    # No model text reached the customer: only Sundry's hand-off, posted as the run stopped (`handoff`).
    assert "could not be reached" in error.text and agent_messages(ticket) == [handoff.TEXT]
    assert ticket.attention.startswith("Model unavailable")
    step = AgentStep.objects.get(ticket=ticket)
    assert step.outcome == "model_error"
    # The step's latency spans both attempts and the wait between them, not the last attempt alone.
    assert step.latency_ms >= (1000 if failure == "timeout" else 950)
    gap = desk["server"].requests[1]["at"] - desk["server"].requests[0]["at"]
    assert step.latency_ms >= 1000 * gap


# --- through the live channel to the customer page and the desk ---------------------------------


@pytest.fixture
def watched(transactional_db, anthropic):
    return watched_ticket(anthropic, MODEL)


async def test_customer_and_desk_see_the_anthropic_stream_then_the_stored_turn(watched):
    pieces = ["I checked ", "order ", "SU-26675. ", "No refund ", "of 40 USD ", "has been made ", "yet."]
    server = watched["start"](
        lambda p, b: Answer(blocks=pieces, input_tokens=120, cache_read=800, output_tokens=12), pause=0.15
    )
    ticket = watched["ticket"]
    customer = await _watch(f"/ws/help/tickets/{ticket.pk}/", watched["alice"])
    staff = await _watch(f"/ws/desk/tickets/{ticket.pk}/", watched["staff"])
    run = asyncio.ensure_future(asyncio.to_thread(agent_run, ticket.pk, gateway=Gateway(limits=NO_RETRIES)))
    seen = await asyncio.gather(_until_done(customer), _until_done(staff))
    await run
    for socket in (customer, staff):
        await socket.disconnect()

    assert server.bodies[0]["stream"] is True
    stored = await Turn.objects.filter(ticket=ticket, author="agent", kind="message").aget()
    assert stored.text == "".join(pieces)
    step = await AgentStep.objects.aget(ticket=ticket)
    assert step.checks.get("streamed") is True and (step.cached_input_tokens, step.reported_request_tokens) == (
        800,
        920,
    )
    for got, whole in ((seen[0], customer_wording(stored.text)), (seen[1], stored.text)):
        stream = _streamed(got)
        assert stream[0]["state"] == "typing" and stream[0]["text"] == ""
        texts = [m["text"] for m in stream if m["state"] == "text"]
        assert len(texts) >= 2 and texts[-1] == whole and all(whole.startswith(t) for t in texts)
        assert stream[-1]["state"] == "done" and stream[-1]["turn"] == stored.number
        frames = [i for i, m in enumerate(got) if isinstance(m, str) and "has been made yet." in m]
        first_text = next(i for i, m in enumerate(got) if isinstance(m, dict) and m["state"] == "text")
        assert frames and frames[0] > first_text  # the stored turn came after the provisional text


async def test_negative_control_with_streaming_off_the_anthropic_reply_is_not_streamed(watched, settings):
    settings.MODEL_STREAM = False
    server = watched["start"](lambda p, b: Answer(blocks=["Nothing ", "to report."]))
    ticket = watched["ticket"]
    customer = await _watch(f"/ws/help/tickets/{ticket.pk}/", watched["alice"])
    await asyncio.to_thread(agent_run, ticket.pk, gateway=Gateway(limits=NO_RETRIES))
    frame = await customer.receive_from(timeout=10)
    assert not frame.startswith("{") and "Nothing to report." in frame
    assert await customer.receive_nothing(timeout=0.5)
    await customer.disconnect()
    assert not server.bodies[0].get("stream")


# --- the provider's token count ------------------------------------------------------------------


def test_with_counting_on_the_request_is_counted_by_the_providers_endpoint_as_it_would_be_sent(anthropic, settings):
    settings.MODEL_PROVIDER_TOKEN_COUNT = True
    server = anthropic(lambda p, b: Answer(blocks=["Hello."]), count=lambda body: 4321)
    gateway = Gateway(limits=NO_RETRIES)
    assert gateway.count_tokens(lane_request(MODEL)) == 4321
    gateway.call(lane_request(MODEL))
    [count] = [r for r in server.requests if r["path"] == "/v1/messages/count_tokens"]
    sent = server.bodies[0]
    # The same system blocks, tool schemas and messages as the request itself: the count is of what goes out.
    assert {k: count["body"][k] for k in ("model", "system", "tools", "messages")} == {
        k: sent[k] for k in ("model", "system", "tools", "messages")
    }


def test_negative_control_counting_off_or_a_provider_without_the_endpoint_asks_nothing(anthropic, settings):
    server = anthropic(lambda p, b: Answer(blocks=["Hello."]), count=lambda body: 4321)
    settings.MODEL_PROVIDER_TOKEN_COUNT = False
    assert Gateway(limits=NO_RETRIES).count_tokens(lane_request(MODEL)) is None
    settings.MODEL_PROVIDER_TOKEN_COUNT = True
    assert Gateway(limits=NO_RETRIES).count_tokens(lane_request("openai-compatible:qwen")) is None
    assert server.requests == []


@pytest.mark.parametrize(
    "failure",
    [
        (500, {"type": "error", "error": {"type": "api_error", "message": "boom"}}),
        None,  # a server without the endpoint: 404
    ],
)
def test_a_failed_count_is_none_after_one_attempt(anthropic, settings, failure):
    settings.MODEL_PROVIDER_TOKEN_COUNT = True
    server = anthropic(lambda p, b: Answer(blocks=["Hello."]), count=(lambda body: failure) if failure else None)
    assert Gateway(limits=CallLimits(max_retries=2)).count_tokens(lane_request(MODEL)) is None
    assert len(server.requests) == 1


@pytest.mark.django_db
def test_the_compaction_trigger_weighs_the_request_by_the_providers_count_or_else_the_calibration(anthropic, settings):
    from sundry.agent import calibration
    from sundry.agent.step import tool_specs
    from sundry.compaction.models import CompactionRun
    from sundry.compaction.services import compaction_consider
    from sundry.context.assembly import assemble
    from sundry.context.selectors import lane_snapshot
    from tests.compaction.helpers import long_ticket

    def setup():
        tclass = TicketClassFactory(approval_rules={}, working_model=MODEL, recent_turns_kept=4, trigger_fraction=0.8)
        ticket = long_ticket(tclass=tclass)
        total = assemble(lane_snapshot(ticket), model=MODEL, tools=tool_specs()).accounting.total_tokens
        # The trigger sits just above Sundry's count of the request: not over it by Sundry's own count,
        # but near enough that the exact check runs (not "clearly under" by the step's own figures).
        tclass.token_budget = int((total + 8) / 0.8)
        tclass.save()
        step = AgentStep.objects.create(
            ticket=ticket,
            number=1,
            model=MODEL,
            request_tokens=total,
            outcome="reply",
            is_resolution=True,
            first_turn=ticket.last_turn_number,
            last_turn=ticket.last_turn_number,
        )
        return ticket, step, total

    calibration.clear()
    counts: list[int] = []
    server = anthropic(lambda p, b: Answer(blocks=["unused"]), count=lambda body: counts.pop(0))
    # The provider counts 25% more than Sundry: over the trigger.
    ticket, step, total = setup()
    counts.append(int(total * 1.25))
    settings.MODEL_PROVIDER_TOKEN_COUNT = True
    run = compaction_consider(ticket_id=ticket.pk, step_id=step.pk)
    assert run is not None and run.status == CompactionRun.Status.QUEUED
    assert [r["path"] for r in server.requests] == ["/v1/messages/count_tokens"]

    # Negative control: counting off, the calibrated factor (1, no evidence yet) decides; nothing is asked.
    ticket, step, total = setup()
    settings.MODEL_PROVIDER_TOKEN_COUNT = False
    assert compaction_consider(ticket_id=ticket.pk, step_id=step.pk) is None
    assert len(server.requests) == 1

    # Counting on but the count fails: the calibrated factor decides, as if counting were off.
    settings.MODEL_PROVIDER_TOKEN_COUNT = True
    server.count = lambda body: (500, {"type": "error", "error": {"type": "api_error", "message": "boom"}})
    assert compaction_consider(ticket_id=ticket.pk, step_id=step.pk) is None
    assert len(server.requests) == 2
    # ... and with evidence that the provider counts 25% more, the calibration alone queues it.
    for n in range(2, 6):
        AgentStep.objects.create(
            ticket=ticket, number=n, model=MODEL, request_tokens=1000, reported_request_tokens=1250, outcome="reply"
        )
    calibration.clear()
    assert compaction_consider(ticket_id=ticket.pk, step_id=step.pk) is not None
    calibration.clear()


# --- a compaction's summary through Anthropic's tool-style structured output -----------------------


@pytest.mark.django_db
@pytest.mark.parametrize("as_tool", [True, False])
def test_a_compaction_on_an_anthropic_summariser_records_the_path_its_summary_came_by(anthropic, as_tool):
    from sundry.compaction.services import compaction_run
    from sundry.compaction.summariser import OUTPUT_NAME
    from sundry.context.models import Summary
    from tests.compaction.helpers import long_ticket
    from tests.compaction.test_service import good, queued_run

    fields = json.loads(good().text)
    # The summary as the output tool's input, or (the negative control) as JSON in text, ignoring the tool.
    block = ToolUse("toolu_s", OUTPUT_NAME, fields) if as_tool else json.dumps(fields)
    server = anthropic(lambda p, b: Answer(blocks=[block], input_tokens=3000, output_tokens=200))
    ticket = long_ticket(tclass=TicketClassFactory(approval_rules={}, recent_turns_kept=8, summariser_model=MODEL))
    run = compaction_run(queued_run(ticket).pk, gateway=Gateway(limits=NO_RETRIES))
    assert [t["name"] for t in server.bodies[0]["tools"]] == [OUTPUT_NAME]
    assert not server.bodies[0].get("stream")  # a summary is for Sundry, not for a watcher
    assert run.status == "succeeded" and run.output_path == ("tool" if as_tool else "text")
    assert "[damaged_order]" in Summary.objects.get(ticket=ticket, is_current=True).text
