"""The OpenAI SDK's client, sending a chat request's messages and tools as they are when they are plain JSON.

Before it sends a request, the SDK walks every parameter against its declared type
(`openai._utils._transform`): it renames keys the API spells otherwise and formats dates and
files. A chat request's messages and tools as pydantic-ai builds them are plain JSON already
(dicts with string keys, lists, strings, numbers, booleans, null), and no key of the chat
message and tool types is renamed, so the walk gives back what it was given — and on a
ticket's request of about forty messages it cost 8 ms a call on a quiet machine, 20-28 ms on a
busy one (docs/benchmarks.md), more than everything Sundry does before the call. Here those two parameters go to the SDK through
its own `extra_body` (JSON added to the request's body after the walk), in the places they
had; any other parameter, and messages or tools that are not plain JSON, take the walk as
before. The body sent is byte for byte the one the stock client sends
(`tests/agent/test_plain_body.py`).
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cached_property
from typing import Any

from openai import AsyncOpenAI, omit
from openai._utils import is_given
from openai.resources.chat import AsyncChat
from openai.resources.chat.completions import AsyncCompletions

_SCALARS = frozenset({str, int, float, bool, type(None)})


def plain_json(value: Any) -> bool:
    """Whether `value` is made only of dicts with string keys, lists and JSON scalars (exact types:
    a subclass, a tuple, a date, a model or the SDK's "omit" marker is not)."""
    stack = [value]
    while stack:
        item = stack.pop()
        kind = type(item)
        if kind is dict:
            for key, inner in item.items():
                if type(key) is not str:
                    return False
                if type(inner) not in _SCALARS:
                    stack.append(inner)
        elif kind is list:
            stack.extend(x for x in item if type(x) not in _SCALARS)
        elif kind not in _SCALARS:
            return False
    return True


class _Completions(AsyncCompletions):
    async def create(self, *, messages: Any, tools: Any = omit, extra_body: Any = None, **params: Any) -> Any:
        plain: dict[str, Any] = {"messages": messages}
        if is_given(tools):
            plain["tools"] = tools
        if (extra_body is not None and not isinstance(extra_body, Mapping)) or not all(
            type(v) is list and plain_json(v) for v in plain.values()
        ):
            return await super().create(messages=messages, tools=tools, extra_body=extra_body, **params)
        # Empty lists hold the keys' places in the walked body; `extra_body`'s values replace them
        # there, and a key the caller's own `extra_body` sets still wins, as it did.
        return await super().create(
            messages=[],
            tools=[] if "tools" in plain else omit,
            extra_body={**plain, **(extra_body or {})},
            **params,
        )


class _Chat(AsyncChat):
    @cached_property
    def completions(self) -> AsyncCompletions:
        return _Completions(self._client)


class PlainBodyClient(AsyncOpenAI):
    """`AsyncOpenAI` whose chat completions skip the SDK's walk of plain-JSON messages and tools."""

    @cached_property
    def chat(self) -> AsyncChat:
        return _Chat(self)
