"""The IDs tool calls carry: they pair a call with its result and name nothing of the customer's.

Sundry makes some of them — a call read from text (`textcalls`), a call a server sent without one
(`wire`), a call renamed so its ID is unique in its request (`agent.calls.unique_call_ids`), a held call
staff approved or a card the customer confirmed, run under its own ID (`agent.services`) — and the
providers and their client make the rest. A model shown one in its request (a summary, a customer
pasting one, the call itself; a later result's notice names its tool, not its call) may copy it into what it writes to the customer: "call the text-call-0-2's
result instead". So none is ever one of the customer's identifiers (`answer.known_identifiers`), and the
reply check and the call guards read one written to the customer as invented.
"""

from __future__ import annotations

import re

from sundry.agent.provider.textcalls import TEXT_CALL_PREFIX
from sundry.agent.provider.wire import ASSIGNED_ID_PREFIX

UNNAMED = "call"  # the base `unique_call_ids` gives a call that came without an ID
UNIQUE_SEPARATOR = "-"  # … and what joins the number it adds to an ID already taken: "text-call-0-2"
APPROVED_SUFFIX = "-approved"  # a held call staff approved, run under its own ID
CONFIRMED_SUFFIX = "-confirmed"  # a call the customer confirmed on its card, run under its own ID
# pydantic-ai's ID for a call a provider sent without one (`pydantic_ai._utils.generate_tool_call_id`:
# the prefix and a uuid4's hex).
PYDANTIC_AI_PREFIX = "pyd_ai_"
# The providers' own forms: OpenAI's `call_…` (Ollama's and many OpenAI-compatible servers' too, and the
# importers' `call_<i>_<n>`), Anthropic's `toolu_…`, vLLM's `chatcmpl-tool-…`. Servers that give bare
# random strings (llama.cpp) have no form to read: the request's own call IDs cover those.
PROVIDER_PREFIXES = ("call_", "toolu_", "chatcmpl-tool-")

_BASE = "|".join(
    [
        rf"{re.escape(TEXT_CALL_PREFIX)}\d+",  # f"{TEXT_CALL_PREFIX}{n}"
        rf"{re.escape(ASSIGNED_ID_PREFIX)}\d+-\d+",  # f"{ASSIGNED_ID_PREFIX}{choice}-{n}"
        re.escape(UNNAMED),
        rf"{re.escape(PYDANTIC_AI_PREFIX)}[0-9a-f]+",
        *(rf"{re.escape(p)}[A-Za-z0-9_]+" for p in PROVIDER_PREFIXES),
    ]
)
# Renamed any number of times, in any order: unique in a request (`-2`), then approved or confirmed.
_SUFFIXES = rf"(?:{re.escape(UNIQUE_SEPARATOR)}\d+|{re.escape(APPROVED_SUFFIX)}|{re.escape(CONFIRMED_SUFFIX)})*"
GENERATED = re.compile(rf"(?:{_BASE}){_SUFFIXES}")


def generated(token: str) -> bool:
    """The token is wholly a call ID of a form Sundry or a provider makes."""
    return bool(GENERATED.fullmatch(token or ""))


def in_request(messages) -> set[str]:
    """The IDs of the calls and results a request's messages carry (whatever their form)."""
    out = {c.id for m in messages for c in m.tool_calls if c.id}
    return out | {m.tool_call_id for m in messages if m.tool_call_id}
