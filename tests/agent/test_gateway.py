"""The model gateway: real client path against local fake servers, errors, offline fallback, pricing.

Every HTTP call here goes to a server this file starts on 127.0.0.1; a socket
guard makes any other host an error, so no test can reach a network model.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from decimal import Decimal

import pytest

from sundry.agent.provider import pricing
from sundry.agent.provider.gateway import (
    CallLimits,
    Gateway,
    ModelCallError,
    ResolvedModel,
    from_pai_response,
    resolve_model,
    to_pai_messages,
    validate_model_name,
)
from sundry.agent.provider.scripted import ScriptedModel, ScriptExhausted
from sundry.tooling.messages import Message, ModelRequest, ModelResponse, ToolCall, ToolSpec, Usage
from tests.agent.loopback import JsonHandler, LoopbackServer

LOOPBACK = {"127.0.0.1", "::1", "localhost"}
NO_RETRIES = CallLimits(max_retries=0)
ENV_KEYS = [
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_BASE_URL",
    "OLLAMA_BASE_URL",
    "OLLAMA_API_KEY",
    "SUNDRY_OPENAI_COMPAT_BASE_URL",
    "SUNDRY_OPENAI_COMPAT_API_KEY",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "ALL_PROXY",
    "http_proxy",
    "https_proxy",
    "all_proxy",
]


@pytest.fixture(autouse=True)
def no_internet(monkeypatch):
    """Refuse DNS and connections to anything but loopback; start from a clean model environment."""
    blocked: list[str] = []
    real_getaddrinfo, real_connect = socket.getaddrinfo, socket.socket.connect

    def getaddrinfo(host, *args, **kwargs):
        if isinstance(host, bytes):  # anyio passes IDNA-encoded names
            host = host.decode()
        if host not in LOOPBACK:
            blocked.append(host)
            raise OSError(f"test network guard: {host} is not loopback")
        return real_getaddrinfo(host, *args, **kwargs)

    def connect(self, address):
        if isinstance(address, tuple) and address[0] not in LOOPBACK:
            blocked.append(address[0])
            raise OSError(f"test network guard: {address[0]} is not loopback")
        return real_connect(self, address)

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    monkeypatch.setattr(socket.socket, "connect", connect)
    for key in ENV_KEYS:
        monkeypatch.delenv(key, raising=False)
    # Even a provider that ignores our base URL would land on a closed local port.
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:9")
    return blocked


class FakeServer(LoopbackServer):
    """A real HTTP server on an ephemeral loopback port; `respond(path, body)` -> (status, payload[, headers])."""

    def __init__(self, respond):
        super().__init__()
        self.respond = respond
        server = self

        class Handler(JsonHandler):
            def do_POST(self):
                body = self.read_json()
                server.requests.append(
                    {
                        "path": self.path,
                        "headers": {k.lower(): v for k, v in self.headers.items()},
                        "body": body,
                        "at": time.monotonic(),
                        "client": self.client_address,
                    }
                )
                status, payload, *extra = server.respond(self.path, body)
                self.send_json(status, payload, extra[0] if extra else None)

        self.serve(Handler)

    @property
    def bodies(self) -> list[dict]:
        return [r["body"] for r in self.requests]


@pytest.fixture
def serve():
    servers = []

    def start(respond):
        servers.append(FakeServer(respond))
        return servers[-1]

    yield start
    for s in servers:
        s.close()


def completion(*, content=None, tool_calls=None, usage=(10, 5), model="test-model"):
    message = {"role": "assistant", "content": content}
    if tool_calls:
        message["tool_calls"] = tool_calls
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": model,
        "choices": [{"index": 0, "finish_reason": "tool_calls" if tool_calls else "stop", "message": message}],
        "usage": {"prompt_tokens": usage[0], "completion_tokens": usage[1], "total_tokens": sum(usage)},
    }


def fn_call(call_id, name, arguments: str):
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


LANES = [
    ("system", "You are the support agent of Sundry's demo shop."),
    ("rules", "RULE 1 (turn 2): never refund to a different payment method."),
    ("ledger", "order SU-20481 (verified, turn 3); customer cus_7k2m9q4x (verified)"),
    ("state", "intent: where-is-my-order; order_number: SU-20481 (confirmed)"),
]
GET_ORDER_SCHEMA = {
    "type": "object",
    "properties": {
        "order_number": {"type": "string", "description": "order identifier, copied verbatim", "x-id-kind": "order"}
    },
    "required": ["order_number"],
}
FIND_ORDERS_SCHEMA = {
    "type": "object",
    "properties": {
        "customer_id": {"type": "string", "x-id-kind": "customer"},
        "status": {"type": "string", "enum": ["open", "shipped", "delivered"]},
    },
    "required": ["customer_id"],
}
TOOLS = [
    ToolSpec(name="get_order", description="Look up one order by its number.", parameters=GET_ORDER_SCHEMA),
    ToolSpec(name="find_orders", description="List a customer's orders.", parameters=FIND_ORDERS_SCHEMA),
]
USER_TEXT = "Hi, where is my order SU-20481?"
TOOL_RESULT = json.dumps({"order_number": "SU-20481", "status": "shipped", "tracking": "1Z999AA10123456784"})


def lane_request(model: str) -> ModelRequest:
    messages = [Message(role="system", lane=lane, content=text) for lane, text in LANES]
    messages.append(Message(role="user", content=USER_TEXT, turns=[4]))
    return ModelRequest(model=model, messages=messages, tools=TOOLS)


def openai_round_trip(path, body):
    """First a tool call; a text reply only once the tool result answers that exact call."""
    assert path == "/v1/chat/completions"
    tool_messages = [m for m in body["messages"] if m["role"] == "tool"]
    if not tool_messages:
        return 200, completion(
            tool_calls=[fn_call("call_SU1", "get_order", '{"order_number": "SU-20481"}')], usage=(812, 23)
        )
    if tool_messages[-1]["tool_call_id"] != "call_SU1":
        return 400, {"error": {"message": "tool message does not answer call_SU1", "type": "invalid_request_error"}}
    return 200, completion(content="Your order SU-20481 has shipped.", usage=(950, 12))


# --- the real client path ------------------------------------------------------


@pytest.mark.parametrize(
    "model, wire_model, env, auth, costs",
    [
        # An OPENAI_API_KEY is present but must never be sent to another service.
        (
            "openai-compatible:test-model",
            "test-model",
            {"SUNDRY_OPENAI_COMPAT_API_KEY": "compat-key", "OPENAI_API_KEY": "sk-openai-must-not-leak"},
            "Bearer compat-key",
            (Decimal("0"), Decimal("0")),
        ),
        (
            "openai:gpt-4.1-mini",
            "gpt-4.1-mini",
            {"OPENAI_API_KEY": "sk-test"},
            "Bearer sk-test",
            # (812*0.40 + 23*1.60)/1e6 and (950*0.40 + 12*1.60)/1e6, to six places
            (Decimal("0.000362"), Decimal("0.000399")),
        ),
    ],
)
def test_tool_call_round_trip_through_real_client(serve, monkeypatch, model, wire_model, env, auth, costs):
    server = serve(openai_round_trip)
    monkeypatch.setenv("SUNDRY_OPENAI_COMPAT_BASE_URL", server.url + "/v1")
    monkeypatch.setenv("OPENAI_BASE_URL", server.url + "/v1")
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    gateway = Gateway()

    request = lane_request(model)
    first = gateway.call(request)

    sent = server.requests[0]
    assert sent["headers"]["authorization"] == auth
    body = sent["body"]
    assert body["model"] == wire_model
    # Lane blocks go out as system content, one message each, in lane order, before the conversation.
    assert body["messages"] == [{"role": "system", "content": text} for _, text in LANES] + [
        {"role": "user", "content": USER_TEXT}
    ]
    # Tools go out with their schemas as written (identifier annotations included), not rewritten for strict mode.
    assert body["tools"] == [
        {"type": "function", "function": {"name": t.name, "description": t.description, "parameters": t.parameters}}
        for t in TOOLS
    ]
    assert first.response == ModelResponse(
        text=None,
        tool_calls=[ToolCall(id="call_SU1", name="get_order", arguments={"order_number": "SU-20481"})],
        usage=Usage(input_tokens=812, output_tokens=23),
        model=model,
        offline=False,
        finish_reason="tool_call",
    )
    assert (first.cost_usd, first.priced) == (costs[0], costs[0] > 0)
    assert first.resolved.offline is False and first.latency_ms >= 0

    # Second step: the assistant's call and the tool's result go back with the same id.
    call = first.response.tool_calls[0]
    followup = request.model_copy(deep=True)
    followup.messages += [
        Message(role="assistant", tool_calls=[call]),
        Message(role="tool", tool_call_id=call.id, tool_name=call.name, content=TOOL_RESULT),
    ]
    second = gateway.call(followup)

    assert server.bodies[1]["messages"][-2:] == [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [fn_call("call_SU1", "get_order", '{"order_number":"SU-20481"}')],
        },
        {"role": "tool", "tool_call_id": "call_SU1", "content": TOOL_RESULT},
    ]
    assert second.response.text == "Your order SU-20481 has shipped."
    assert second.response.tool_calls == []
    assert second.response.usage == Usage(input_tokens=950, output_tokens=12)
    assert second.cost_usd == costs[1]
    assert len(server.requests) == 2


def test_anthropic_round_trip_through_real_client(serve, monkeypatch):
    def respond(path, body):
        assert path.startswith("/v1/messages")
        results = [
            c
            for m in body["messages"]
            for c in (m["content"] if isinstance(m["content"], list) else [])
            if c.get("type") == "tool_result"
        ]
        if not results:
            content = [
                {"type": "text", "text": "Let me check."},
                {"type": "tool_use", "id": "toolu_1", "name": "get_order", "input": {"order_number": "SU-20481"}},
            ]
            stop = "tool_use"
        else:
            assert results[-1]["tool_use_id"] == "toolu_1"
            content, stop = [{"type": "text", "text": "It has shipped."}], "end_turn"
        return 200, {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": "claude-sonnet-4-20250514",
            "content": content,
            "stop_reason": stop,
            "stop_sequence": None,
            "usage": {"input_tokens": 1000, "output_tokens": 100},
        }

    server = serve(respond)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    gateway = Gateway()
    request = lane_request("anthropic:claude-sonnet-4-20250514")

    first = gateway.call(request)

    body = server.bodies[0]
    # Anthropic has one system field: the lanes, in order, with a cache breakpoint after them,
    # and another after the tool schemas (the stable prefix is read from cache).
    assert body["system"] == [
        {
            "type": "text",
            "text": "\n\n".join(text for _, text in LANES),
            "cache_control": {"type": "ephemeral", "ttl": "5m"},
        }
    ]
    assert [t["input_schema"] for t in body["tools"]] == [GET_ORDER_SCHEMA, FIND_ORDERS_SCHEMA]
    assert body["tools"][-1]["cache_control"] == {"type": "ephemeral", "ttl": "5m"}
    assert first.response.text == "Let me check."
    assert first.response.tool_calls == [
        ToolCall(id="toolu_1", name="get_order", arguments={"order_number": "SU-20481"})
    ]
    assert first.cost_usd == Decimal("0.004500")  # (1000*3 + 100*15)/1e6

    call = first.response.tool_calls[0]
    followup = request.model_copy(deep=True)
    followup.messages += [
        Message(role="assistant", content="Let me check.", tool_calls=[call]),
        Message(role="tool", tool_call_id=call.id, tool_name=call.name, content=TOOL_RESULT),
    ]
    second = gateway.call(followup)

    tool_use, tool_result = server.bodies[1]["messages"][-2:]
    assert tool_use["role"] == "assistant"
    assert {
        "type": "tool_use",
        "id": "toolu_1",
        "name": "get_order",
        "input": {"order_number": "SU-20481"},
    } in tool_use["content"]
    assert tool_result["role"] == "user" and tool_result["content"][0]["tool_use_id"] == "toolu_1"
    assert second.response.text == "It has shipped."


async def test_async_call_from_a_running_loop(serve, monkeypatch):
    server = serve(lambda path, body: (200, completion(content="hello", usage=(3, 1))))
    monkeypatch.setenv("SUNDRY_OPENAI_COMPAT_BASE_URL", server.url + "/v1")
    gateway = Gateway()

    response = await gateway.acomplete(lane_request("openai-compatible:test-model"))

    assert response.text == "hello" and response.usage == Usage(input_tokens=3, output_tokens=1)
    # The sync entry point refuses to block a running loop instead of failing obscurely.
    with pytest.raises(RuntimeError, match="acall"):
        gateway.call(lane_request("openai-compatible:test-model"))


@pytest.mark.parametrize(
    "raw, expected",
    [
        ('{"order_number": "SU-2048', '{"order_number": "SU-2048'),  # truncated JSON stays raw
        ('["SU-20481"]', '["SU-20481"]'),  # valid JSON but not an object stays raw
        ("", {}),  # some servers send "" for a call without arguments
        ('{"order_number": "SU-20481"}', {"order_number": "SU-20481"}),
    ],
)
def test_tool_call_arguments_kept_raw_unless_a_json_object(serve, monkeypatch, raw, expected):
    server = serve(lambda path, body: (200, completion(tool_calls=[fn_call("call_x", "get_order", raw)])))
    monkeypatch.setenv("SUNDRY_OPENAI_COMPAT_BASE_URL", server.url + "/v1")

    response = Gateway().complete(lane_request("openai-compatible:test-model"))

    assert response.tool_calls == [ToolCall(id="call_x", name="get_order", arguments=expected)]


# --- failures become ModelCallError --------------------------------------------


@pytest.mark.parametrize(
    "status, retryable",
    [(500, True), (502, True), (503, True), (429, True), (400, False), (401, False), (404, False)],
)
def test_http_errors_are_typed_and_marked_retryable(serve, monkeypatch, status, retryable):
    server = serve(lambda path, body: (status, {"error": {"message": f"failure {status}", "type": "server_error"}}))
    monkeypatch.setenv("SUNDRY_OPENAI_COMPAT_BASE_URL", server.url + "/v1")

    with pytest.raises(ModelCallError) as info:
        Gateway(limits=NO_RETRIES).complete(lane_request("openai-compatible:test-model"))

    assert info.value.retryable is retryable
    assert info.value.status_code == status
    assert info.value.model == "openai-compatible:test-model"
    assert len(server.requests) == 1  # retries off: one attempt


def test_the_call_retries_honouring_retry_after_and_its_latency_spans_every_attempt(serve, monkeypatch):
    # The SDK's own first backoff is at most 0.5 s: a gap of a second is the server's Retry-After.
    answers = iter(
        [(429, {"error": {"message": "slow down"}}, {"Retry-After": "1"}), (200, completion(content="recovered"))]
    )
    server = serve(lambda path, body: next(answers))
    monkeypatch.setenv("SUNDRY_OPENAI_COMPAT_BASE_URL", server.url + "/v1")

    call = Gateway(limits=CallLimits(max_retries=2)).call(lane_request("openai-compatible:test-model"))

    assert call.response.text == "recovered"
    assert len(server.requests) == 2
    assert server.requests[1]["at"] - server.requests[0]["at"] >= 0.95
    assert call.latency_ms >= 950


def test_retries_are_bounded_and_a_failed_call_reports_its_latency(serve, monkeypatch):
    server = serve(lambda path, body: (503, {"error": {"message": "down"}}, {"retry-after-ms": "200"}))
    monkeypatch.setenv("SUNDRY_OPENAI_COMPAT_BASE_URL", server.url + "/v1")

    with pytest.raises(ModelCallError) as info:
        Gateway(limits=CallLimits(max_retries=2)).complete(lane_request("openai-compatible:test-model"))

    assert len(server.requests) == 3  # the first attempt and two retries, no more
    assert info.value.retryable is True and info.value.status_code == 503
    assert info.value.latency_ms >= 400  # both waits the server asked for are in it


def test_max_tokens_and_limits_come_from_settings(serve, monkeypatch, settings):
    settings.MODEL_MAX_TOKENS, settings.MODEL_MAX_RETRIES, settings.MODEL_READ_TIMEOUT = 321, 0, 7.5
    server = serve(lambda path, body: (200, completion(content="short")))
    monkeypatch.setenv("SUNDRY_OPENAI_COMPAT_BASE_URL", server.url + "/v1")
    gateway = Gateway()

    assert gateway.complete(lane_request("openai-compatible:test-model")).text == "short"

    assert (gateway.limits.max_retries, gateway.limits.read_timeout) == (0, 7.5)
    body = server.bodies[0]
    assert body.get("max_completion_tokens", body.get("max_tokens")) == 321


@pytest.mark.parametrize(
    "payload, fragment",
    [(b"{not json", "JSON"), (json.dumps({"unexpected": "shape"}).encode(), "malformed")],
)
def test_malformed_response_is_a_model_call_error(serve, monkeypatch, payload, fragment):
    server = serve(lambda path, body: (200, payload))
    monkeypatch.setenv("SUNDRY_OPENAI_COMPAT_BASE_URL", server.url + "/v1")

    with pytest.raises(ModelCallError) as info:
        Gateway().complete(lane_request("openai-compatible:test-model"))

    assert fragment in str(info.value)
    assert info.value.retryable is False
    assert len(server.requests) == 1


def test_timeout_is_retryable_and_bounded(serve, monkeypatch):
    def slow(path, body):
        time.sleep(3)
        return 200, completion(content="too late")

    server = serve(slow)
    monkeypatch.setenv("SUNDRY_OPENAI_COMPAT_BASE_URL", server.url + "/v1")
    # The client library's first import takes seconds: do it before the clock starts.
    import pydantic_ai.direct  # noqa: F401
    import pydantic_ai.models.openai  # noqa: F401

    started = time.monotonic()
    with pytest.raises(ModelCallError) as info:
        # Retries allowed: the deadline still ends the call, whatever the SDK would retry.
        Gateway(limits=CallLimits(max_retries=5)).complete(lane_request("openai-compatible:test-model"), timeout=0.3)

    assert time.monotonic() - started < 2
    assert 300 <= info.value.latency_ms < 2000
    assert info.value.retryable is True
    assert "timed out" in str(info.value)


def test_connection_refused_is_retryable(monkeypatch):
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()  # nothing listens here now
    monkeypatch.setenv("SUNDRY_OPENAI_COMPAT_BASE_URL", f"http://127.0.0.1:{port}/v1")

    with pytest.raises(ModelCallError) as info:
        Gateway(limits=NO_RETRIES).complete(lane_request("openai-compatible:test-model"), timeout=5)

    assert info.value.retryable is True


def test_guard_stops_a_call_to_the_real_openai(no_internet, monkeypatch):
    # With a key and no base URL the client would go to api.openai.com: the guard refuses,
    # which also shows the gateway reports an unreachable provider as retryable.
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.delenv("OPENAI_BASE_URL")

    with pytest.raises(ModelCallError) as info:
        Gateway(limits=NO_RETRIES).complete(lane_request("openai:gpt-4.1-mini"), timeout=5)

    assert info.value.retryable is True
    assert "api.openai.com" in no_internet


# --- resolving names, offline fallback -----------------------------------------


@pytest.mark.parametrize(
    "name, reason",
    [
        ("openai:gpt-4.1", "OPENAI_API_KEY not set; using the offline model"),
        ("anthropic:claude-sonnet-4-0", "ANTHROPIC_API_KEY not set; using the offline model"),
        ("openai-compatible:llama3", "SUNDRY_OPENAI_COMPAT_BASE_URL not set; using the offline model"),
    ],
)
def test_missing_configuration_resolves_to_offline_with_reason(name, reason):
    assert resolve_model(name) == ResolvedModel(name, offline=True, reason=reason)


def test_blank_key_counts_as_missing(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "   ")
    assert resolve_model("openai:gpt-4.1").offline


def test_configured_providers_resolve(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-a")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-b")
    monkeypatch.setenv("SUNDRY_OPENAI_COMPAT_BASE_URL", "http://127.0.0.1:8000/v1")

    assert resolve_model("openai:gpt-4.1").offline is False
    assert resolve_model("anthropic:claude-sonnet-4-0").model_name == "claude-sonnet-4-0"
    compat = resolve_model("openai-compatible:Qwen/Qwen3-8B")
    assert (compat.provider, compat.model_name, compat.base_url) == (
        "openai-compatible",
        "Qwen/Qwen3-8B",
        "http://127.0.0.1:8000/v1",
    )
    ollama = resolve_model("ollama:llama3.2")
    assert (ollama.offline, ollama.base_url) == (False, "http://127.0.0.1:11434/v1")
    assert "sk-a" not in repr(resolve_model("openai:gpt-4.1"))


def test_unknown_names_fall_back_offline_and_fail_validation():
    resolved = resolve_model("mistral:large")
    assert resolved.offline and "unknown model 'mistral:large'" in resolved.reason
    for bad in ("mistral:large", "gpt-4.1", "openai:", ""):
        with pytest.raises(ValueError):
            validate_model_name(bad)
    for good in ("offline", "openai:gpt-4.1", "ollama:llama3.2", "openai-compatible:org/model"):
        validate_model_name(good)


def test_missing_key_runs_the_offline_model_and_labels_it():
    offline = ScriptedModel([ModelResponse(text="offline answer", usage=Usage(input_tokens=50, output_tokens=5))])
    request = lane_request("openai:gpt-4.1")

    call = Gateway(offline=offline).call(request)

    assert offline.requests == [request]  # the offline model sees exactly the assembled request
    assert call.response.text == "offline answer"
    assert (call.response.offline, call.response.model) == (True, "offline")
    assert call.resolved.reason == "OPENAI_API_KEY not set; using the offline model"
    assert (call.cost_usd, call.priced) == (Decimal("0"), True)


def test_builtin_offline_model_is_loaded_lazily():
    offline_module = pytest.importorskip("sundry.shop.offline")
    assert isinstance(Gateway()._offline(), offline_module.OfflineModel)


# --- override and the scripted model ---------------------------------------------


def test_override_receives_every_request_whatever_the_name(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")  # would otherwise reach the network
    scripted = ScriptedModel(
        [
            ModelResponse(
                tool_calls=[ToolCall(id="c1", name="get_order", arguments={"order_number": "SU-20481"})],
                usage=Usage(input_tokens=1_000_000, output_tokens=0),
                model="openai:gpt-4.1-mini",
            ),
            ModelResponse(text="done"),
        ]
    )
    gateway = Gateway(override=scripted)

    first = gateway.call(lane_request("openai:gpt-4.1-mini"))
    second = gateway.call(lane_request("openai:gpt-4.1-mini"), model="anthropic:claude-sonnet-4-0")

    assert [r.model for r in scripted.requests] == ["openai:gpt-4.1-mini", "openai:gpt-4.1-mini"]
    assert first.response.tool_calls[0].arguments == {"order_number": "SU-20481"}
    assert first.cost_usd == Decimal("0.400000")
    assert (second.response.text, second.response.model, second.priced) == ("done", "scripted", False)


def test_scripted_model_records_copies_and_runs_callables_and_errors():
    def echo_last_call(request: ModelRequest) -> ModelResponse:
        return ModelResponse(text=f"saw {request.messages[-1].tool_call_id}")

    scripted = ScriptedModel([echo_last_call, ModelCallError("boom", retryable=True)])
    request = lane_request("scripted")
    request.messages.append(Message(role="tool", tool_call_id="call_7", tool_name="get_order", content="{}"))

    assert scripted.complete(request).text == "saw call_7"
    request.messages.clear()  # the caller mutating its request later must not rewrite the record
    assert scripted.requests[0].messages[-1].tool_call_id == "call_7"
    with pytest.raises(ModelCallError):
        scripted.complete(lane_request("scripted"))
    with pytest.raises(ScriptExhausted):
        scripted.complete(lane_request("scripted"))
    assert len(scripted.requests) == 3 and scripted.remaining == -1


# --- conversion ----------------------------------------------------------------


def test_conversion_hoists_system_lanes_and_pairs_tool_results():
    from pydantic_ai import messages as m

    request = ModelRequest(
        model="x",
        messages=[
            Message(role="system", lane="rules", content="R"),
            Message(role="user", content="hi"),
            Message(
                role="assistant",
                content="checking",
                tool_calls=[
                    ToolCall(id="c1", name="get_order", arguments='{"bad'),
                ],
            ),
            Message(role="tool", tool_call_id="c1", content="error: arguments are not JSON"),  # no tool_name given
            Message(role="system", lane="summary", content="S"),  # a late system block still goes first
            Message(role="user", content="thanks"),
        ],
    )

    out = to_pai_messages(request)

    first, response, last = out
    assert [type(p) for p in first.parts] == [m.SystemPromptPart, m.SystemPromptPart, m.UserPromptPart]
    assert [(p.content, p.metadata) for p in first.parts[:2]] == [("R", {"lane": "rules"}), ("S", {"lane": "summary"})]
    assert isinstance(response, m.ModelResponse)
    assert [type(p) for p in response.parts] == [m.TextPart, m.ToolCallPart]
    assert response.parts[1].args == '{"bad'
    tool_return, user = last.parts
    assert (tool_return.tool_name, tool_return.tool_call_id) == ("get_order", "c1")
    assert user.content == "thanks"


def test_response_conversion_keeps_text_and_calls_and_drops_thinking():
    from pydantic_ai import messages as m
    from pydantic_ai.usage import RequestUsage

    result = m.ModelResponse(
        parts=[
            m.ThinkingPart("hmm"),
            m.TextPart("a"),
            m.TextPart("b"),
            m.ToolCallPart(tool_name="get_order", args={"order_number": "SU-20481"}, tool_call_id="c9"),
        ],
        usage=RequestUsage(input_tokens=7, output_tokens=3),
    )

    assert from_pai_response(result, "openai:gpt-4o") == ModelResponse(
        text="ab",
        tool_calls=[ToolCall(id="c9", name="get_order", arguments={"order_number": "SU-20481"})],
        usage=Usage(input_tokens=7, output_tokens=3),
        model="openai:gpt-4o",
    )


# --- pricing -------------------------------------------------------------------


def test_pricing_comes_from_genai_prices():
    assert pricing.cost("openai:gpt-4.1-mini", 1000, 500) == pricing.Cost(Decimal("0.001200"), priced=True)
    # Dated snapshots find their family's price.
    assert pricing.cost("openai:gpt-4.1-mini-2025-04-14", 1000, 500).usd == Decimal("0.001200")
    assert pricing.cost("anthropic:claude-sonnet-4-20250514", 1_000_000, 1_000_000).usd == Decimal("18.000000")
    # A name that merely starts with a known one is not that model.
    assert pricing.cost("openai:gpt-4.1x", 1000, 500) == pricing.Cost(Decimal("0"), priced=False)
    # Self-hosted servers bill nobody per token: unpriced unless the URL is a provider genai-prices knows.
    assert pricing.cost("openai-compatible:llama3", 10_000, 10_000, base_url="http://127.0.0.1:8000/v1").priced is False
    assert pricing.cost("ollama:llama3", 10_000, 10_000).priced is False
    hosted = pricing.cost(
        "openai-compatible:llama-3.3-70b-versatile", 1000, 1000, base_url="https://api.groq.com/openai/v1"
    )
    assert hosted.priced and hosted.usd > 0
    assert pricing.cost("offline", 10_000, 10_000) == pricing.Cost(Decimal("0"), priced=True)


def test_calls_from_one_thread_reuse_one_connection(serve, monkeypatch):
    """Consecutive steps talk to the model over the connection already open: a new client,
    loop and TLS handshake per call cost more than the rest of a step (docs/benchmarks.md)."""
    server = serve(openai_round_trip)
    monkeypatch.setenv("SUNDRY_OPENAI_COMPAT_BASE_URL", server.url + "/v1")
    gateway = Gateway()
    for _ in range(3):
        gateway.call(lane_request("openai-compatible:qwen"))
    assert len(server.requests) == 3
    assert len({r["client"] for r in server.requests}) == 1  # one TCP connection, kept alive

    # Another thread has a loop and a connection of its own (a client is bound to its loop).
    other = threading.Thread(target=lambda: gateway.call(lane_request("openai-compatible:qwen")))
    other.start()
    other.join(30)
    assert len({r["client"] for r in server.requests}) == 2
