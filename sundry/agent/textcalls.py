"""Tool calls a model wrote as text, read back as calls (opt-in per ticket class).

Servers without a tool-call parser for their model (or with the wrong one) hand
the call back as the reply's text. Three common shapes are recognised, and only
when they name a declared tool:

- hermes tags: `<tool_call>{"name": …, "arguments": {…}}</tool_call>` (Qwen, Hermes);
- a fenced block: ```json {"name": …, "arguments": …} ```;
- bare JSON: the whole text (or its tail) is one such object, or a list of them.

`parameters` is accepted for `arguments`, and `{"function": {…}}` wrappers are
unwrapped. Pure: text in, calls and the leftover text out.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

from sundry.tooling.messages import ModelResponse, ToolCall

TEXT_CALL_PREFIX = "text-call-"
_HERMES = re.compile(r"<tool_call>\s*(.*?)\s*(?:</tool_call>|$)", re.S)
_FENCED = re.compile(r"```(?:json|tool_call|tool)?\s*(\{.*?\}|\[.*?\])\s*```", re.S)


@dataclass
class Parsed:
    calls: list[ToolCall] = field(default_factory=list)
    text: str = ""  # what is left once the calls are taken out
    shape: str = ""  # hermes, fenced, bare


def _as_call(obj, tools: frozenset[str], n: int) -> ToolCall | None:
    if not isinstance(obj, dict):
        return None
    if isinstance(obj.get("function"), dict):
        obj = obj["function"]
    name = obj.get("name")
    if not isinstance(name, str) or name not in tools:
        return None
    args = obj.get("arguments", obj.get("parameters", {}))
    if isinstance(args, str):
        try:
            parsed = json.loads(args, parse_constant=lambda c: (_ for _ in ()).throw(ValueError(c)))
            args = parsed if isinstance(parsed, dict) else args
        except ValueError:
            pass  # left as text: the guards reject it with the JSON error
    elif not isinstance(args, dict):
        args = json.dumps(args)
    return ToolCall(id=f"{TEXT_CALL_PREFIX}{n}", name=name, arguments=args)


def _calls_in(raw: str, tools: frozenset[str], start: int) -> list[ToolCall] | None:
    try:
        data = json.loads(raw)
    except ValueError:
        return None
    items = data if isinstance(data, list) else [data]
    calls = [_as_call(item, tools, start + i) for i, item in enumerate(items)]
    return calls if calls and all(calls) else None


def parse(text: str, tools: set[str] | frozenset[str]) -> Parsed:
    """The calls written in `text` naming one of `tools`; none if the text holds no such call."""
    tools = frozenset(tools)
    body = text or ""
    for shape, pattern in (("hermes", _HERMES), ("fenced", _FENCED)):
        calls, spans = [], []
        for m in pattern.finditer(body):
            found = _calls_in(m.group(1), tools, len(calls))
            if found:
                calls += found
                spans.append(m.span())
        if calls:
            left = body
            for a, b in reversed(spans):
                left = left[:a] + left[b:]
            return Parsed(calls, left.strip(), shape)
    stripped = body.strip()
    # Bare JSON: the whole text, or a JSON object that ends it after a sentence of preamble.
    candidates = [stripped]
    brace = stripped.find("{")
    if brace > 0 and stripped.endswith(("}", "]")):
        candidates.append(stripped[brace:])
    for candidate in candidates:
        found = _calls_in(candidate, tools, 0)
        if found:
            return Parsed(found, stripped[: len(stripped) - len(candidate)].strip(), "bare")
    return Parsed([], body, "")


def apply(response: ModelResponse, tools: set[str] | frozenset[str]) -> tuple[ModelResponse, str]:
    """The response with calls written as text made into calls; and the shape read ("" if none)."""
    if response.tool_calls or not response.text:
        return response, ""
    parsed = parse(response.text, tools)
    if not parsed.calls:
        return response, ""
    return response.model_copy(update={"tool_calls": parsed.calls, "text": parsed.text or None}), parsed.shape
