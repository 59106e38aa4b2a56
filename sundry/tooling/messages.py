"""The model request and response, as plain validated data.

Every model — a provider behind the gateway, the offline model, a scripted test
model — receives exactly a `ModelRequest` and returns a `ModelResponse`.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field


class ToolCall(BaseModel):
    id: str
    name: str
    # Raw arguments as the model produced them: a JSON object, or a string that
    # may not parse. Validation happens in the loop, where a failure becomes an
    # error turn the model can see and correct.
    arguments: dict[str, Any] | str = Field(default_factory=dict)


class Message(BaseModel):
    role: Literal["system", "user", "assistant", "tool"]
    content: str = ""
    # Which lane a system block came from (system, rules, ledger, state, summary);
    # None for conversation messages.
    lane: str | None = None
    tool_calls: list[ToolCall] = Field(default_factory=list)
    tool_call_id: str | None = None
    tool_name: str | None = None
    # Turn numbers this message was rendered from, for accounting and audits.
    turns: list[int] = Field(default_factory=list)


class ToolSpec(BaseModel):
    name: str
    description: str
    parameters: dict[str, Any]


class ModelRequest(BaseModel):
    model: str
    messages: list[Message]
    tools: list[ToolSpec] = Field(default_factory=list)


class Usage(BaseModel):
    input_tokens: int = 0
    output_tokens: int = 0


class ModelResponse(BaseModel):
    text: str | None = None
    tool_calls: list[ToolCall] = Field(default_factory=list)
    usage: Usage = Field(default_factory=Usage)
    model: str = ""
    offline: bool = False

