"""What OpenAI-compatible servers really send, made into the shape the SDK reads.

llama.cpp's server, vLLM, Ollama and others drift from the Chat Completions
schema in ways the OpenAI SDK refuses outright (one bad field fails the whole
response): tool-call arguments as a JSON object instead of a string, a call
without an `id`, an empty `choices` list. `normalise_completion` repairs the
first two in the body; the last is turned into a 502 so the SDK retries it like
any other server failure, within the call's deadline. `NormalisingTransport`
applies this to every non-streamed chat completion, through httpx's documented
transport interface; streamed bodies pass untouched. A server that answers a
request for a stream with one whole JSON completion (it ignores `"stream": true`)
has its answer repaired the same way and handed to the SDK as the stream of
events it asked for (`completion_as_events`).
"""

from __future__ import annotations

import json
from typing import Any

import httpx2

# Prefix of the IDs Sundry gives calls that came without one; the loop makes them unique.
ASSIGNED_ID_PREFIX = "sundry-call-"
EMPTY_CHOICES = "the server answered with an empty choices list"


class EmptyChoices(ValueError):
    pass


def normalise_completion(body: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """The body with its tool calls in the SDK's shape, and what was changed (for the log).

    Raises EmptyChoices when there is no choice to read.
    """
    changes: list[str] = []
    choices = body.get("choices")
    if choices == []:
        raise EmptyChoices(EMPTY_CHOICES)
    if not isinstance(choices, list):
        return body, changes  # not a completion's shape at all: the SDK reports it as malformed
    for c, choice in enumerate(choices):
        message = choice.get("message") if isinstance(choice, dict) else None
        calls = message.get("tool_calls") if isinstance(message, dict) else None
        if not isinstance(calls, list):
            continue
        for n, call in enumerate(calls):
            if not isinstance(call, dict):
                continue
            if not call.get("id"):
                call["id"] = f"{ASSIGNED_ID_PREFIX}{c}-{n}"
                changes.append("call without id")
            call.setdefault("type", "function")
            fn = call.get("function")
            if isinstance(fn, dict) and not isinstance(fn.get("arguments"), str):
                args = fn.get("arguments")
                # allow_nan keeps a NaN visible as text, so the guards reject it rather than the SDK.
                fn["arguments"] = "" if args is None else json.dumps(args, ensure_ascii=False)
                changes.append("arguments as an object")
    return body, changes


def _event(body: dict[str, Any]) -> bytes:
    return b"data: " + json.dumps(body, ensure_ascii=False).encode() + b"\n\n"


def completion_as_events(body: dict[str, Any]) -> bytes:
    """A whole (normalised) chat completion as the server-sent events of a streamed one:
    the message, its tool calls, the finish reason, the usage, then [DONE]."""
    head = {k: body[k] for k in ("id", "created", "model") if k in body}
    head["object"] = "chat.completion.chunk"
    out = []
    for choice in body.get("choices") or []:
        index = choice.get("index", 0)
        message = choice.get("message") or {}
        delta: dict[str, Any] = {"role": message.get("role") or "assistant", "content": message.get("content") or ""}
        out.append(_event({**head, "choices": [{"index": index, "delta": delta, "finish_reason": None}]}))
        for n, call in enumerate(message.get("tool_calls") or []):
            delta = {"tool_calls": [{"index": n, **call}]}
            out.append(_event({**head, "choices": [{"index": index, "delta": delta, "finish_reason": None}]}))
        out.append(
            _event(
                {
                    **head,
                    "choices": [{"index": index, "delta": {}, "finish_reason": choice.get("finish_reason") or "stop"}],
                }
            )
        )
    if body.get("usage"):
        out.append(_event({**head, "choices": [], "usage": body["usage"]}))
    out.append(b"data: [DONE]\n\n")
    return b"".join(out)


def _asked_to_stream(request: httpx2.Request) -> bool:
    try:
        return json.loads(request.content).get("stream") is True
    except (ValueError, AttributeError, httpx2.RequestNotRead):
        return False


def _is_completion(request: httpx2.Request, response: httpx2.Response) -> bool:
    return (
        request.method == "POST"
        and request.url.path.endswith("/chat/completions")
        and response.status_code == 200
        and response.headers.get("content-type", "").split(";")[0].strip() == "application/json"
    )


class NormalisingTransport(httpx2.AsyncBaseTransport):
    """Wraps a transport; rewrites non-streamed chat completion bodies (see the module doc)."""

    def __init__(self, wrapped: httpx2.AsyncBaseTransport):
        self.wrapped = wrapped

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        response = await self.wrapped.handle_async_request(request)
        if not _is_completion(request, response):
            return response
        raw = await response.aread()
        await response.aclose()
        headers = [
            (k, v) for k, v in response.headers.items() if k.lower() not in ("content-length", "content-encoding")
        ]
        try:
            body = json.loads(raw)
        except ValueError:
            return httpx2.Response(response.status_code, headers=headers, content=raw, request=request)
        try:
            body, changes = normalise_completion(body) if isinstance(body, dict) else (body, [])
        except EmptyChoices as exc:
            error = {"error": {"message": str(exc), "type": "server_error"}}
            return httpx2.Response(
                502, headers=[("content-type", "application/json")], content=json.dumps(error).encode(), request=request
            )
        if isinstance(body, dict) and _asked_to_stream(request):
            headers = [(k, v) for k, v in headers if k.lower() != "content-type"] + [
                ("content-type", "text/event-stream")
            ]
            return httpx2.Response(
                response.status_code, headers=headers, content=completion_as_events(body), request=request
            )
        content = json.dumps(body).encode() if changes else raw
        return httpx2.Response(response.status_code, headers=headers, content=content, request=request)

    async def aclose(self) -> None:
        await self.wrapped.aclose()
