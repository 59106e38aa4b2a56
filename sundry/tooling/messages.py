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


class OutputSpec(BaseModel):
    """Structured output asked of the model: one JSON object matching `schema`.

    Providers with JSON-schema output get it natively; others through a tool
    named `name`; an in-process model reads the request's text and answers in
    text. The response says which path answered (`ModelResponse.output_path`).
    """

    name: str
    description: str = ""
    schema_: dict[str, Any] = Field(alias="schema")

    model_config = {"populate_by_name": True}


class ModelRequest(BaseModel):
    model: str
    messages: list[Message]
    tools: list[ToolSpec] = Field(default_factory=list)
    output: OutputSpec | None = None


class Usage(BaseModel):
    input_tokens: int = 0
    output_tokens: int = 0
    # Input tokens the provider read from its prompt cache (part of input_tokens).
    cached_input_tokens: int = 0
    # Input tokens the provider wrote to its prompt cache (part of input_tokens; Anthropic bills them above
    # the plain input price).
    cache_write_tokens: int = 0


class ModelResponse(BaseModel):
    text: str | None = None
    tool_calls: list[ToolCall] = Field(default_factory=list)
    usage: Usage = Field(default_factory=Usage)
    model: str = ""
    offline: bool = False
    # "length" when the answer was cut at max_tokens: never to be posted as if finished.
    finish_reason: str | None = None
    # How a structured output came back: "native" (JSON schema), "tool" (output tool), "text".
    output_path: str | None = None

    @property
    def truncated(self) -> bool:
        return self.finish_reason == "length"
