"""The Anthropic client the gateway builds (the SDK's client made with the call's retries, the model keeping
the tools' reworked schemas, `toolschemas.py`) sends what pydantic-ai's provider sends with the retries in
each request's settings: the same body, key for key in order, and the same headers, whole and streamed, on
a first call and on one after it."""

from __future__ import annotations

import json

import pytest

from sundry.agent.provider import gateway, toolschemas
from sundry.agent.provider.gateway import CallLimits, Gateway
from tests.agent.anthropic_server import Answer
from tests.agent.test_anthropic_server import MODEL, anthropic  # noqa: F401  (fixture)
from tests.agent.test_gateway import lane_request, no_internet  # noqa: F401  (fixture)
from tests.agent.test_streaming import Sink


def stock_anthropic(resolved, http_client, *, max_retries):
    """The model as the gateway built it before: pydantic-ai's provider making the SDK's client, the
    retries handed over with each request (the model's settings are merged into each request's)."""
    from pydantic_ai.models.anthropic import AnthropicModel
    from pydantic_ai.providers.anthropic import AnthropicProvider

    provider = AnthropicProvider(api_key=resolved.api_key, base_url=resolved.base_url, http_client=http_client)
    return AnthropicModel(resolved.model_name, provider=provider, settings={"max_retries": max_retries})


def _sent(monkeypatch, server, build, *, stream: bool) -> dict:
    monkeypatch.setattr(gateway, "_build_model", build)
    gateway._thread_loop()
    monkeypatch.setattr(gateway._per_thread, "models", {})  # a model of the builder under test
    call = Gateway(limits=CallLimits(max_retries=1)).call(lane_request(MODEL), stream=Sink() if stream else None)
    assert call.response.text == "Done."
    return server.requests[-1]


@pytest.mark.parametrize("stream", [False, True])
def test_the_server_receives_what_the_stock_provider_sends(monkeypatch, anthropic, stream):  # noqa: F811
    monkeypatch.setattr(toolschemas, "_SCHEMAS", {})
    server = anthropic(lambda path, body: Answer(blocks=["Done."]))
    real_build = gateway._build_model
    before = _sent(monkeypatch, server, stock_anthropic, stream=stream)
    for _ in range(2):
        after = _sent(monkeypatch, server, real_build, stream=stream)
        assert json.dumps(after["body"]) == json.dumps(before["body"])
        assert after["headers"] == before["headers"]
    assert before["body"]["tools"] and before["body"].get("stream", False) is stream
