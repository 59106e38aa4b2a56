"""Shapes real OpenAI-compatible and Anthropic servers send, through the real client to a local HTTP server.

Every server here is started by the test on 127.0.0.1 (see test_gateway's FakeServer and its network guard).
"""

from __future__ import annotations

import json

import pytest

from sundry.agent.provider.gateway import CallLimits, Gateway, ModelCallError, resolve_model
from sundry.tooling.messages import Message, ModelRequest, OutputSpec, ToolCall
from tests.agent.test_gateway import completion, fn_call, lane_request, no_internet, serve  # noqa: F401  (fixtures)

NO_RETRIES = CallLimits(max_retries=0)
MODEL = "openai-compatible:qwen2.5-1.5b"


@pytest.fixture
def compat(serve, monkeypatch):
    def start(respond):
        server = serve(respond)
        monkeypatch.setenv("SUNDRY_OPENAI_COMPAT_BASE_URL", server.url + "/v1")
        return server

    return start


def raw_call(**call):
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1,
        "model": "m",
        "choices": [
            {
                "index": 0,
                "finish_reason": "tool_calls",
                "message": {"role": "assistant", "content": None, "tool_calls": [call]},
            }
        ],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
    }


def test_arguments_sent_as_a_json_object_are_read(compat):
    compat(
        lambda p, b: (
            200,
            raw_call(
                id="c1", type="function", function={"name": "get_order", "arguments": {"order_number": "SU-20481"}}
            ),
        )
    )
    response = Gateway(limits=NO_RETRIES).complete(lane_request(MODEL))
    assert response.tool_calls == [ToolCall(id="c1", name="get_order", arguments={"order_number": "SU-20481"})]


def test_a_call_without_an_id_gets_one(compat):
    compat(lambda p, b: (200, raw_call(function={"name": "get_order", "arguments": '{"order_number": "SU-20481"}'})))
    [call] = Gateway(limits=NO_RETRIES).complete(lane_request(MODEL)).tool_calls
    assert call.id and call.name == "get_order" and call.arguments == {"order_number": "SU-20481"}


def test_an_empty_choices_list_is_a_retryable_error_the_sdk_retries(compat):
    answers = iter([(200, {**completion(content="x"), "choices": []}), (200, completion(content="second try"))])
    server = compat(lambda p, b: next(answers))
    assert Gateway(limits=CallLimits(max_retries=1)).complete(lane_request(MODEL)).text == "second try"
    assert len(server.requests) == 2

    compat(lambda p, b: (200, {**completion(content="x"), "choices": []}))
    with pytest.raises(ModelCallError) as info:
        Gateway(limits=NO_RETRIES).complete(lane_request(MODEL))
    assert info.value.retryable is True and "empty choices" in str(info.value)


def test_a_reply_cut_at_the_length_limit_says_so(compat):
    body = completion(content="Your refund of 40.00 USD for")
    body["choices"][0]["finish_reason"] = "length"
    compat(lambda p, b: (200, body))
    response = Gateway(limits=NO_RETRIES).complete(lane_request(MODEL))
    assert response.truncated and response.finish_reason == "length"


@pytest.mark.parametrize("arguments", ['{"order_number": NaN}', {"order_number": float("nan")}, '{"amount": Infinity}'])
def test_nan_or_infinity_in_arguments_stays_raw_text_for_the_guards(compat, arguments):
    if isinstance(arguments, dict):
        payload = json.dumps(raw_call(id="c1", type="function", function={"name": "get_order", "arguments": arguments}))
        compat(lambda p, b: (200, payload.encode()))
    else:
        compat(lambda p, b: (200, completion(tool_calls=[fn_call("c1", "get_order", arguments)])))
    [call] = Gateway(limits=NO_RETRIES).complete(lane_request(MODEL)).tool_calls
    assert isinstance(call.arguments, str) and ("NaN" in call.arguments or "Infinity" in call.arguments)
    json.dumps(call.model_dump(), allow_nan=False)  # storable in jsonb


def test_cached_input_tokens_are_read_from_usage(compat):
    body = completion(content="hi", usage=(1200, 10))
    body["usage"]["prompt_tokens_details"] = {"cached_tokens": 1024}
    compat(lambda p, b: (200, body))
    assert Gateway(limits=NO_RETRIES).complete(lane_request(MODEL)).usage.cached_input_tokens == 1024


# --- structured output ---------------------------------------------------------------

SCHEMA = {"type": "object", "properties": {"narrative": {"type": "string"}}, "required": ["narrative"]}


def structured_request(model):
    return ModelRequest(
        model=model,
        messages=[Message(role="system", content="Answer with JSON."), Message(role="user", content="Summarise.")],
        output=OutputSpec(name="summary", description="The summary fields.", schema=SCHEMA),
    )


def test_structured_output_through_an_output_tool_on_a_compatible_server(compat):
    server = compat(lambda p, b: (200, completion(tool_calls=[fn_call("o1", "summary", '{"narrative": "Asked."}')])))
    response = Gateway(limits=NO_RETRIES).complete(structured_request(MODEL))
    assert [t["function"]["name"] for t in server.bodies[0]["tools"]] == ["summary"]
    assert json.loads(response.text) == {"narrative": "Asked."}
    assert response.output_path == "tool" and response.tool_calls == []


def test_structured_output_natively_on_openai(serve, monkeypatch):
    server = serve(lambda p, b: (200, completion(content='{"narrative": "Asked."}')))
    monkeypatch.setenv("OPENAI_BASE_URL", server.url + "/v1")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    response = Gateway(limits=NO_RETRIES).complete(structured_request("openai:gpt-4.1-mini"))
    fmt = server.bodies[0]["response_format"]
    assert fmt["type"] == "json_schema" and fmt["json_schema"]["name"] == "summary"
    assert response.output_path == "native" and json.loads(response.text) == {"narrative": "Asked."}


def test_a_server_that_refuses_structured_output_is_asked_for_json_in_text(compat):
    def respond(path, body):
        if body.get("tools"):
            return 400, {"error": {"message": "tools are not supported", "type": "invalid_request_error"}}
        return 200, completion(content='{"narrative": "Asked."}')

    server = compat(respond)
    response = Gateway(limits=NO_RETRIES).complete(structured_request(MODEL))
    assert len(server.requests) == 2 and "tools" not in server.bodies[1]
    assert response.output_path == "text" and json.loads(response.text) == {"narrative": "Asked."}


def test_structured_output_through_a_tool_on_anthropic(serve, monkeypatch):
    def respond(path, body):
        return 200, {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": "claude-haiku-4-5",
            "content": [{"type": "tool_use", "id": "toolu_1", "name": "summary", "input": {"narrative": "Asked."}}],
            "stop_reason": "tool_use",
            "stop_sequence": None,
            "usage": {"input_tokens": 900, "output_tokens": 20, "cache_read_input_tokens": 700},
        }

    server = serve(respond)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    response = Gateway(limits=NO_RETRIES).complete(structured_request("anthropic:claude-haiku-4-5"))
    assert [t["name"] for t in server.bodies[0]["tools"]] == ["summary"]
    assert response.output_path == "tool" and json.loads(response.text) == {"narrative": "Asked."}
    assert response.usage.cached_input_tokens == 700


# --- no silent toy in production -------------------------------------------------------


def test_in_production_an_unconfigured_model_is_unavailable_not_offline(settings):
    settings.PRODUCTION = True
    resolved = resolve_model("openai:gpt-4.1-mini")
    assert not resolved.offline and "OPENAI_API_KEY not set" in resolved.unavailable
    with pytest.raises(ModelCallError) as info:
        Gateway().complete(lane_request("openai:gpt-4.1-mini"))
    assert info.value.unresolved and not info.value.retryable
    assert resolve_model("offline").offline  # a class configured as offline stays offline

    settings.PRODUCTION = False
    assert resolve_model("openai:gpt-4.1-mini").offline
