"""Tool calls a model wrote as text, read back as calls (opt-in per ticket class).

Servers without a tool-call parser for their model (or with the wrong one) hand
the call back as the reply's text. These shapes are recognised, and only when
they name a declared tool (the tolerant readers of llama.cpp's and vLLM's tool
parsers are the reference):

- hermes tags: `<tool_call>{"name": …, "arguments": {…}}</tool_call>` (Qwen, Hermes);
- a fenced block: ```json {"name": …, "arguments": …} ```;
- `<function=name>{…}</function>` (Llama 3.x, Functionary);
- JSON anywhere in the text: one object, a list of them, one per line (JSON
  lines), after `[TOOL_CALLS]` or a sentence of preamble, or with its braces
  doubled (`{{"name": …}}`, the shape some chat templates print).

`parameters` is accepted for `arguments`, and `{"function": {…}}` wrappers are
unwrapped. Pure: text in, calls and the leftover text out. `json_spans` finds
every JSON object or list in a text, which the reply check also uses: a reply
to a customer carries none.
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


def loads(raw: str):
    """JSON, or JSON with its braces doubled (`{{"a": 1}}`); ValueError otherwise."""
    try:
        return json.loads(raw)
    except ValueError:
        if "{{" not in raw:
            raise
    return json.loads(raw.replace("{{", "{").replace("}}", "}"))


def json_spans(text: str) -> list[tuple[int, int, object]]:
    """(start, end, value) of every JSON object or list in `text` that holds something (balanced,
    strings respected, doubled braces accepted), outermost first, left to right."""
    out, i, n = [], 0, len(text or "")
    while i < n:
        if text[i] not in "{[":
            i += 1
            continue
        end = _balanced_end(text, i)
        if end is not None:
            try:
                value = loads(text[i:end])
            except ValueError:
                value = None
            if isinstance(value, (dict, list)) and value and not _plain_list(value):
                out.append((i, end, value))
                i = end
                continue
        i += 1
    return out


def _plain_list(value) -> bool:
    # "[1, 2]" or "[see above]"-like lists of scalars are not data a reply must not carry.
    return isinstance(value, list) and all(not isinstance(v, (dict, list)) for v in value)


def _balanced_end(text: str, start: int) -> int | None:
    depth, in_string, escaped = 0, False, False
    for j in range(start, len(text)):
        ch = text[j]
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "{[":
            depth += 1
        elif ch in "}]":
            depth -= 1
            if depth == 0:
                return j + 1
    return None


def _calls_in(raw: str, tools: frozenset[str], start: int) -> list[ToolCall] | None:
    try:
        data = loads(raw)
    except ValueError:
        return None
    items = data if isinstance(data, list) else [data]
    calls = [_as_call(item, tools, start + i) for i, item in enumerate(items)]
    return calls if calls and all(calls) else None


_FUNCTION_TAG = re.compile(r"<function=([\w.-]+)>\s*(\{.*?\})\s*(?:</function>|$)", re.S)


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
    calls, spans = [], []
    for m in _FUNCTION_TAG.finditer(body):
        found = _calls_in(json.dumps({"name": m.group(1), "arguments": _object(m.group(2))}), tools, len(calls))
        if found:
            calls += found
            spans.append(m.span())
    if calls:
        return Parsed(calls, _without(body, spans), "function_tag")
    # JSON anywhere: bare, after preamble, one call per line, doubled braces.
    for start, end, _value in json_spans(body):
        found = _calls_in(body[start:end], tools, len(calls))
        if found:
            calls += found
            spans.append((start, end))
    if calls:
        left = re.sub(r"\[/?TOOL_CALLS\]", "", _without(body, spans)).strip()
        return Parsed(calls, left, "bare")
    return Parsed([], body, "")


def _object(raw: str):
    try:
        return loads(raw)
    except ValueError:
        return raw


def _without(body: str, spans: list[tuple[int, int]]) -> str:
    for a, b in reversed(spans):
        body = body[:a] + body[b:]
    return body.strip()


def apply(response: ModelResponse, tools: set[str] | frozenset[str]) -> tuple[ModelResponse, str]:
    """The response with calls written as text made into calls; and the shape read ("" if none)."""
    if response.tool_calls or not response.text:
        return response, ""
    parsed = parse(response.text, tools)
    if not parsed.calls:
        return response, ""
    return response.model_copy(update={"tool_calls": parsed.calls, "text": parsed.text or None}), parsed.shape
