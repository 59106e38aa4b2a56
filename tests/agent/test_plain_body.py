"""The OpenAI client the gateway builds sends plain-JSON messages and tools without the SDK's walk of
them (`sundry/agent/provider/plainbody.py`), its models keep the tools' reworked schemas between calls
(`toolschemas.py`) and its client carries the call's retries (no copy a call), and the model receives
exactly what the stock client sends: the same body, byte for byte, and the same headers, for each
OpenAI-shaped provider, whole, streamed and asking for structured output, on the first call and on one
that reuses the schemas kept."""

from __future__ import annotations

import json
import typing

import openai.resources.chat.completions.completions as sdk_completions
import pytest
from openai._utils._transform import PropertyInfo
from openai.types.chat import ChatCompletionMessageParam, ChatCompletionToolUnionParam

from sundry.agent.provider import gateway, toolschemas
from sundry.agent.provider.gateway import CallLimits, Gateway
from sundry.agent.provider.plainbody import PlainBodyClient, plain_json
from sundry.tooling.messages import Message, ModelRequest, OutputSpec, ToolCall, ToolSpec
from tests.agent.loopback import JsonHandler, LoopbackServer

PROVIDERS = {
    # name: (model string, environment)
    "openai-compatible": (
        "openai-compatible:wire-model",
        {"SUNDRY_OPENAI_COMPAT_BASE_URL": "{url}/v1", "SUNDRY_OPENAI_COMPAT_API_KEY": "compat-key"},
    ),
    "openai-compatible, no key": ("openai-compatible:wire-model", {"SUNDRY_OPENAI_COMPAT_BASE_URL": "{url}/v1"}),
    "openai": ("openai:gpt-4.1-mini", {"OPENAI_API_KEY": "sk-test", "OPENAI_BASE_URL": "{url}/v1"}),
    "ollama": ("ollama:llama3", {"OLLAMA_BASE_URL": "{url}/v1"}),
}
ENV_KEYS = (
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "OLLAMA_BASE_URL",
    "OLLAMA_API_KEY",
    "SUNDRY_OPENAI_COMPAT_BASE_URL",
    "SUNDRY_OPENAI_COMPAT_API_KEY",
)
ORDER_SCHEMA = {
    "type": "object",
    "properties": {
        "order_number": {"type": "string", "description": "copied verbatim", "x-id-kind": "order"},
        "items": {"type": "array", "items": {"type": "object", "properties": {"sku": {"type": "string"}}}},
        "amount": {"type": ["number", "null"], "minimum": 0, "maximum": 1e6},
        "urgent": {"type": "boolean", "default": False},
    },
    "required": ["order_number"],
    "additionalProperties": False,
}
STATE_SCHEMA = {
    "type": "object",
    "properties": {"field": {"type": "string", "enum": ["issue", "amount"]}, "value": {"type": "string"}},
    "required": ["field", "value"],
}


def scenario(*, output: bool = False) -> ModelRequest:
    """A fixed request with every kind of message the gateway sends: lanes, an inline notice, the
    customer's text (non-ASCII included), a call with its result, a reply, and two tools."""
    call = ToolCall(id="call_7Qx", name="get_order", arguments={"order_number": "SU-20481", "amount": 12.5})
    return ModelRequest(
        model="unused",
        messages=[
            Message(role="system", lane="system", content="You are the support agent — be brief."),
            Message(role="system", lane="ledger", content="order SU-20481 (verified, turn 3)"),
            Message(role="user", content='Où est ma commande SU-20481 ? 📦 "quoted" \\ back\nslash'),
            Message(role="assistant", content="", tool_calls=[call]),
            Message(role="tool", tool_call_id="call_7Qx", tool_name="get_order", content='{"status": "shipped"}'),
            Message(role="assistant", content="It shipped on 2026-12-01."),
            Message(role="system", content="The run stopped; staff were told."),
            Message(role="user", content="Thanks! And the refund of 12.50 USD?"),
        ],
        tools=[
            ToolSpec(name="get_order", description="Look up one order by its number.", parameters=ORDER_SCHEMA),
            ToolSpec(name="record_fact", description="Record a state field.", parameters=STATE_SCHEMA),
        ],
        output=OutputSpec(name="verdict", description="The verdict.", schema_=STATE_SCHEMA) if output else None,
    )


class RawServer(LoopbackServer):
    """Records each request's raw body and headers; answers a short text, streamed when asked."""

    def __init__(self):
        super().__init__()
        server = self

        class Handler(JsonHandler):
            def do_POST(self):
                raw = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                server.requests.append({"raw": raw, "headers": {k.lower(): v for k, v in self.headers.items()}})
                body = json.loads(raw)
                if not body.get("stream"):
                    self.send_json(200, _completion())
                    return
                self.start_events()
                for delta, finish in (({"role": "assistant", "content": "Done"}, None), ({}, "stop")):
                    chunk = {**_completion(), "object": "chat.completion.chunk"}
                    chunk["choices"] = [{"index": 0, "delta": delta, "finish_reason": finish}]
                    del chunk["usage"]
                    self.wfile.write(b"data: " + json.dumps(chunk).encode() + b"\n\n")
                self.wfile.write(b"data: [DONE]\n\n")
                self.wfile.flush()
                self.close_connection = True

        self.serve(Handler)


def _completion() -> dict:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": "wire-model",
        "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "Done"}}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12},
    }


def stock_model(resolved, http_client, *, max_retries):
    """The model as the gateway built it before: pydantic-ai's providers making the SDK's own client, its
    own models reworking the tools' schemas on every call, and the retries handed over with each request
    (the model's settings are merged into each request's)."""
    from pydantic_ai.models.openai import OpenAIChatModel

    retries = {"max_retries": max_retries}

    if resolved.provider == "openai":
        from pydantic_ai.providers.openai import OpenAIProvider

        provider = OpenAIProvider(api_key=resolved.api_key, base_url=resolved.base_url, http_client=http_client)
    elif resolved.provider == "ollama":
        from pydantic_ai.models.ollama import OllamaModel
        from pydantic_ai.providers.ollama import OllamaProvider

        return OllamaModel(
            resolved.model_name,
            provider=OllamaProvider(base_url=resolved.base_url, api_key=resolved.api_key, http_client=http_client),
            settings=retries,
        )
    else:
        from pydantic_ai.providers.openai_compatible import OpenAICompatibleProvider

        provider = OpenAICompatibleProvider(
            "openai-compatible", base_url=resolved.base_url, api_key=resolved.api_key, http_client=http_client
        )
    return OpenAIChatModel(resolved.model_name, provider=provider, settings=retries)


class Sink:
    def __init__(self):
        self.texts: list[str] = []

    async def typing(self) -> None:
        pass

    async def written(self, text: str, *, final: bool = False) -> None:
        self.texts.append(text)


@pytest.fixture
def server(monkeypatch):
    for key in ENV_KEYS:
        monkeypatch.delenv(key, raising=False)
    s = RawServer()
    yield s
    s.close()


def _sent(monkeypatch, server, provider: str, build, *, output=False, stream=False, calls=1, retries=0) -> dict:
    """The last of `calls` requests sent through one model the builder under test made."""
    name, env = PROVIDERS[provider]
    for key, value in env.items():
        monkeypatch.setenv(key, value.format(url=server.url))
    monkeypatch.setattr(gateway, "_build_model", build)
    gateway._thread_loop()
    monkeypatch.setattr(gateway._per_thread, "models", {})  # a model of the builder under test
    request = scenario(output=output).model_copy(update={"model": name})
    for _ in range(calls):
        got = Gateway(limits=CallLimits(max_retries=retries)).call(request, stream=Sink() if stream else None)
        assert got.response.text == "Done" or output
    return server.requests[-1]


@pytest.fixture
def fresh_schemas(monkeypatch):
    """No tool schema kept from an earlier test: the first call reworks them, the next reuses them."""
    monkeypatch.setattr(toolschemas, "_SCHEMAS", {})


@pytest.fixture
def walked(monkeypatch) -> list[dict]:
    """What the SDK's walk of a chat request's parameters is given, call by call."""
    seen: list[dict] = []
    real = sdk_completions.async_maybe_transform

    async def recording(data, expected_type):
        seen.append(data)
        return await real(data, expected_type)

    monkeypatch.setattr(sdk_completions, "async_maybe_transform", recording)
    return seen


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("shape", ["whole", "streamed", "structured"])
def test_the_model_receives_the_same_bytes_and_headers_as_from_the_stock_client(
    monkeypatch, server, walked, fresh_schemas, provider, shape
):
    real_build = gateway._build_model
    kw = {"output": shape == "structured", "stream": shape == "streamed"}
    before = _sent(monkeypatch, server, provider, stock_model, **kw)
    assert len(walked[-1]["messages"]) == 8
    after = _sent(monkeypatch, server, provider, real_build, **kw)
    assert walked[-1]["messages"] == []  # the walk was skipped
    assert after["raw"] == before["raw"]
    assert after["headers"] == before["headers"]
    # Again, on a model of its own: the tools' schemas are the ones kept from the call before.
    kept = dict(toolschemas._SCHEMAS)
    again = _sent(monkeypatch, server, provider, real_build, **kw)
    assert toolschemas._SCHEMAS == kept and (kept or provider == "openai" and shape == "structured")
    assert again["raw"] == before["raw"]
    assert again["headers"] == before["headers"]
    body = json.loads(after["raw"])
    names = [t["function"]["name"] for t in body["tools"]]
    assert len(body["messages"]) == 8 and names[:2] == ["get_order", "record_fact"]
    assert body.get("stream", False) is (shape == "streamed")


def test_the_sdk_walks_none_of_the_messages_and_tools(monkeypatch, server, walked):
    """What the SDK's walk is given: the stock client hands it the eight messages and the two tools;
    the gateway's client, the empty lists that hold their places (the values go in `extra_body`)."""
    real_build = gateway._build_model
    _sent(monkeypatch, server, "openai-compatible", stock_model)
    assert (len(walked[-1]["messages"]), len(walked[-1]["tools"])) == (8, 2)
    _sent(monkeypatch, server, "openai-compatible", real_build)
    assert (walked[-1]["messages"], walked[-1]["tools"]) == ([], [])


async def test_messages_that_are_not_plain_json_take_the_sdks_walk(monkeypatch):
    """A message holding anything but plain JSON (here a tuple, which the walk turns into a list) is
    given to the walk as it is, and the body is what the walk makes of it."""
    import httpx2

    bodies: list[bytes] = []

    def answer(request):
        bodies.append(request.content)
        return httpx2.Response(200, json=_completion())

    client = PlainBodyClient(
        api_key="k",
        base_url="http://127.0.0.1:9/v1",
        http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(answer)),
    )
    tuple_content = ({"type": "text", "text": "hi"},)
    await client.chat.completions.create(model="m", messages=[{"role": "user", "content": tuple_content}])
    await client.chat.completions.create(model="m", messages=[{"role": "user", "content": list(tuple_content)}])
    assert bodies[0] == bodies[1]
    assert json.loads(bodies[0])["messages"] == [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]
    # The caller's own extra_body still wins over the messages it moves there.
    await client.chat.completions.create(
        model="m", messages=[{"role": "user", "content": "a"}], extra_body={"messages": [], "seed": 3}
    )
    assert json.loads(bodies[-1]) == {"model": "m", "messages": [], "seed": 3}


@pytest.mark.parametrize(
    "value, plain",
    [
        ([{"a": [1, 2.5, True, None, "x", {"b": []}]}], True),
        ({"a": "é"}, True),
        ([(1, 2)], False),
        ({"a": {1: "x"}}, False),
        ([{"a": {"b": b"bytes"}}], False),
        ([{"a": [__import__("datetime").date(2026, 1, 1)]}], False),
        ([type("S", (str,), {})("sub")], False),
        ([__import__("openai").omit], False),
    ],
)
def test_plain_json_is_exact_types_only(value, plain):
    assert plain_json(value) is plain


def _property_infos(tp, seen: set) -> list:
    """Every PropertyInfo (a renamed key, a format) in the types reachable from `tp`."""
    if id(tp) in seen:
        return []
    seen.add(id(tp))
    found = [a for a in getattr(tp, "__metadata__", ()) if isinstance(a, PropertyInfo)]
    for arg in typing.get_args(tp):
        found += _property_infos(arg, seen)
    if typing.is_typeddict(tp):
        for hint in typing.get_type_hints(tp, include_extras=True).values():
            found += _property_infos(hint, seen)
    return found


def test_the_sdk_renames_and_formats_nothing_in_chat_messages_and_tools():
    """Why skipping the walk changes nothing: no key of the message and tool types is renamed and no
    value formatted. An SDK that starts to (a PropertyInfo appears) fails here."""
    assert _property_infos(ChatCompletionMessageParam, set()) == []
    assert _property_infos(ChatCompletionToolUnionParam, set()) == []
    # The reader finds one where there is one.
    probe = typing.TypedDict("Probe", {"card_id": typing.Annotated[str, PropertyInfo(alias="cardID")]})
    assert len(_property_infos(probe, set())) == 1


@pytest.fixture
def reworked(monkeypatch) -> list[str]:
    """The tools whose schemas pydantic-ai reworks for the provider, call by call."""
    from pydantic_ai.models import Model

    seen: list[str] = []
    real = Model.customize_request_parameters

    def recording(self, params):
        seen.extend(t.name for t in [*params.function_tools, *params.output_tools])
        return real(self, params)

    monkeypatch.setattr(Model, "customize_request_parameters", recording)
    return seen


@pytest.mark.parametrize("provider", ["openai-compatible", "ollama"])
def test_the_tools_schemas_are_reworked_once_a_process_not_once_a_call(
    monkeypatch, server, fresh_schemas, reworked, provider
):
    """The stock models rework both tools' schemas on each of three calls; the gateway's on the first call
    only, though each `_sent` builds a new model: what is kept is the process's."""
    real_build = gateway._build_model
    _sent(monkeypatch, server, provider, stock_model, calls=3)
    assert reworked == ["get_order", "record_fact"] * 3
    reworked.clear()
    for _ in range(3):
        _sent(monkeypatch, server, provider, real_build)
    assert reworked == ["get_order", "record_fact"]
    # A schema no longer kept (here dropped; a changed schema is a new key) is reworked again, once.
    monkeypatch.setattr(toolschemas, "_SCHEMAS", {k: v for k, v in toolschemas._SCHEMAS.items() if "enum" not in k[2]})
    _sent(monkeypatch, server, provider, real_build)
    assert reworked == ["get_order", "record_fact", "record_fact"]


def test_one_client_serves_every_call_carrying_the_calls_retries(monkeypatch, server):
    """pydantic-ai copies the SDK's client for a request whose settings carry `max_retries`, and each copy asks
    for the platform again on a worker thread. The gateway's client is built with the retries: three calls,
    no copy, the platform asked once. The stock model (the retries in each request's settings) is the control."""
    import openai._base_client as base_client
    from openai import AsyncOpenAI

    real_build = gateway._build_model
    copies: list[int] = []
    real_copy = AsyncOpenAI.with_options
    monkeypatch.setattr(
        AsyncOpenAI, "with_options", lambda self, **kw: copies.append(kw.get("max_retries")) or real_copy(self, **kw)
    )
    asked: list[int] = []
    real_platform = base_client.get_platform
    monkeypatch.setattr(base_client, "get_platform", lambda: asked.append(1) or real_platform())

    _sent(monkeypatch, server, "openai-compatible", stock_model, calls=3, retries=3)
    assert (copies, len(asked)) == ([3, 3, 3], 3)
    copies.clear(), asked.clear()
    _sent(monkeypatch, server, "openai-compatible", real_build, calls=3, retries=3)
    assert (copies, len(asked)) == ([], 1)
    (model,) = gateway._per_thread.models.values()
    assert model.client.max_retries == 3


def test_an_openai_shaped_model_does_not_import_the_anthropic_sdk():
    """Importing Anthropic's SDK takes 1-2 s: a worker process whose first call is to an OpenAI-shaped model
    must not pay it inside that call's latency (it did while the schema-keeping models were all made at import)."""
    import subprocess
    import sys

    code = (
        "import sys; from sundry.agent.provider import gateway as g; g._import_client('openai-compatible'); "
        "r = g.ResolvedModel('openai-compatible:m', provider='openai-compatible', model_name='m', "
        "base_url='http://127.0.0.1:9/v1'); g._build_model(r, None, max_retries=0); "
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'anthropic' or m.endswith('models.anthropic')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
