"""The model gateway: the one place that picks a model and talks to it.

Model names are "<provider>:<model>":

- "offline" — the built-in offline model (sundry.agent.offline).
- "openai:<model>" — OpenAI; key OPENAI_API_KEY (OPENAI_BASE_URL is honoured).
- "anthropic:<model>" — Anthropic; key ANTHROPIC_API_KEY (ANTHROPIC_BASE_URL is honoured).
- "openai-compatible:<model>" — vLLM, llama.cpp server, … at
  SUNDRY_OPENAI_COMPAT_BASE_URL, optional key SUNDRY_OPENAI_COMPAT_API_KEY.
- "ollama:<model>" — Ollama at OLLAMA_BASE_URL (default http://127.0.0.1:11434/v1).

A provider that is not configured resolves to the offline model with a reason,
so a missing key never stops the desk. Calls go through pydantic-ai's `direct`
API; our ModelRequest/ModelResponse are converted at this edge and provider
failures become a typed `ModelCallError`.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import time
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Protocol

from sundry.agent import pricing
from sundry.agent.schemas import ModelRequest, ModelResponse, ToolCall, Usage

log = logging.getLogger(__name__)

OFFLINE = "offline"
PROVIDERS = ("openai", "anthropic", "openai-compatible", "ollama")
OLLAMA_DEFAULT_BASE_URL = "http://127.0.0.1:11434/v1"
CONFIGURED_OFFLINE = "configured as offline"
_warned: set[str] = set()


class ModelCallError(Exception):
    """A model call failed. `retryable` says whether the same request may succeed later."""

    def __init__(self, message: str, *, retryable: bool, status_code: int | None = None, model: str = ""):
        super().__init__(message)
        self.message = message
        self.retryable = retryable
        self.status_code = status_code
        self.model = model


class ChatModel(Protocol):
    """What the gateway needs from an in-process model (offline, scripted)."""

    def complete(self, request: ModelRequest) -> ModelResponse: ...


@dataclass(frozen=True)
class ResolvedModel:
    name: str  # as configured, e.g. "openai:gpt-4.1-mini"
    offline: bool = False
    reason: str = ""  # why it runs offline, for the UI label
    provider: str = ""
    model_name: str = ""
    base_url: str | None = None
    api_key: str | None = None

    def __repr__(self) -> str:  # never print a key
        return f"ResolvedModel(name={self.name!r}, offline={self.offline}, reason={self.reason!r})"


def _env(key: str) -> str | None:
    return os.environ.get(key, "").strip() or None


def _offline(name: str, reason: str) -> ResolvedModel:
    return ResolvedModel(name, offline=True, reason=f"{reason}; using the offline model")


def validate_model_name(name: str) -> None:
    """Raise ValueError unless `name` is a model string the gateway understands (for admin forms)."""
    if name == OFFLINE:
        return
    provider, sep, model = name.partition(":")
    if not sep or provider not in PROVIDERS or not model.strip():
        raise ValueError(f"unknown model {name!r}: use 'offline' or '<provider>:<model>' with provider one of {', '.join(PROVIDERS)}")


def resolve_model(name: str) -> ResolvedModel:
    """Decide which model `name` means here, reading keys and URLs from the environment."""
    if name == OFFLINE:
        return ResolvedModel(OFFLINE, offline=True, reason=CONFIGURED_OFFLINE)
    try:
        validate_model_name(name)
    except ValueError as exc:
        return _offline(name, str(exc))
    provider, _, model = name.partition(":")
    if provider == "openai":
        key = _env("OPENAI_API_KEY")
        if not key:
            return _offline(name, "OPENAI_API_KEY not set")
        return ResolvedModel(name, provider=provider, model_name=model, api_key=key, base_url=_env("OPENAI_BASE_URL"))
    if provider == "anthropic":
        key = _env("ANTHROPIC_API_KEY")
        if not key:
            return _offline(name, "ANTHROPIC_API_KEY not set")
        return ResolvedModel(name, provider=provider, model_name=model, api_key=key, base_url=_env("ANTHROPIC_BASE_URL"))
    if provider == "openai-compatible":
        url = _env("SUNDRY_OPENAI_COMPAT_BASE_URL")
        if not url:
            return _offline(name, "SUNDRY_OPENAI_COMPAT_BASE_URL not set")
        return ResolvedModel(name, provider=provider, model_name=model, base_url=url, api_key=_env("SUNDRY_OPENAI_COMPAT_API_KEY"))
    # ollama: local and keyless, so it is always "configured".
    url = _env("OLLAMA_BASE_URL") or OLLAMA_DEFAULT_BASE_URL
    return ResolvedModel(name, provider=provider, model_name=model, base_url=url, api_key=_env("OLLAMA_API_KEY"))


@dataclass(frozen=True)
class GatewayCall:
    """Everything a step records about one model call."""

    response: ModelResponse
    resolved: ResolvedModel
    cost_usd: Decimal
    priced: bool
    latency_ms: int


class Gateway:
    """Sends a ModelRequest to the configured model and returns our ModelResponse.

    `override` substitutes an in-process model (a ScriptedModel in tests) for
    every name; `offline` substitutes the offline model. In production leave
    both unset: only the gateway picks a model.
    """

    def __init__(self, *, override: ChatModel | None = None, offline: ChatModel | None = None, max_retries: int = 0):
        self.override = override
        self._offline_model = offline
        # Retries the provider SDK makes inside one call (it backs off on
        # 429/5xx/connection errors), all within `timeout`. Off by default: the
        # caller owns retrying (the step loop's attempts, Celery for tasks), so
        # attempts don't multiply and each one is visible to it.
        self.max_retries = max_retries

    def complete(self, request: ModelRequest, *, model: str | None = None, timeout: float = 60) -> ModelResponse:
        return self.call(request, model=model, timeout=timeout).response

    def call(self, request: ModelRequest, *, model: str | None = None, timeout: float = 60) -> GatewayCall:
        """Like `complete`, plus the cost and latency a step stores. Synchronous: run it off the event loop."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            pass
        else:
            raise RuntimeError("Gateway.call is synchronous; use `await Gateway.acall(...)` inside an event loop")
        name = model or request.model
        resolved = self._resolve(name)
        if self.override is not None or resolved.offline:
            return self._local(request, name, resolved)  # no network: no event loop to start
        return asyncio.run(self.acall(request, model=model, timeout=timeout))

    async def acomplete(self, request: ModelRequest, *, model: str | None = None, timeout: float = 60) -> ModelResponse:
        return (await self.acall(request, model=model, timeout=timeout)).response

    async def acall(self, request: ModelRequest, *, model: str | None = None, timeout: float = 60) -> GatewayCall:
        name = model or request.model
        resolved = self._resolve(name)
        if self.override is not None or resolved.offline:
            return self._local(request, name, resolved)
        _import_client(resolved.provider)  # not the model's latency
        started = time.monotonic()
        response = await _provider_request(resolved, request, timeout=timeout, max_retries=self.max_retries)
        return _priced(response, resolved, name, started)

    def _resolve(self, name: str) -> ResolvedModel:
        return ResolvedModel(name, provider="override") if self.override is not None else resolve_model(name)

    def _local(self, request: ModelRequest, name: str, resolved: ResolvedModel) -> GatewayCall:
        """The override or the offline model: answered in this thread."""
        started = time.monotonic()
        if self.override is not None:
            response = self.override.complete(request)
        else:
            if resolved.reason != CONFIGURED_OFFLINE and name not in _warned:
                _warned.add(name)  # once per name, not once per step
                log.warning("model %s: %s", name, resolved.reason)
            response = self._offline().complete(request)
            response = response.model_copy(update={"offline": True, "model": OFFLINE})
        return _priced(response, resolved, name, started)

    def _offline(self) -> ChatModel:
        if self._offline_model is None:
            from sundry.agent.offline import OfflineModel  # lazy: the gateway must import without it

            self._offline_model = OfflineModel()
        return self._offline_model


def _priced(response: ModelResponse, resolved: ResolvedModel, name: str, started: float) -> GatewayCall:
    latency_ms = int((time.monotonic() - started) * 1000)
    c = pricing.cost(response.model or name, response.usage.input_tokens, response.usage.output_tokens)
    return GatewayCall(response=response, resolved=resolved, cost_usd=c.usd, priced=c.priced, latency_ms=latency_ms)


# --- pydantic-ai edge -------------------------------------------------------


def _import_client(provider: str) -> None:
    # pydantic-ai is imported lazily so Django starts without it (~1-3 s once).
    import pydantic_ai.direct  # noqa: F401

    if provider == "anthropic":
        import pydantic_ai.models.anthropic  # noqa: F401
    else:
        import pydantic_ai.models.openai  # noqa: F401


def _build_model(resolved: ResolvedModel):
    """A fresh pydantic-ai model for one call. Its HTTP client is closed after the call."""
    if resolved.provider == "anthropic":
        from pydantic_ai.models.anthropic import AnthropicModel
        from pydantic_ai.providers.anthropic import AnthropicProvider

        return AnthropicModel(resolved.model_name, provider=AnthropicProvider(api_key=resolved.api_key, base_url=resolved.base_url))
    from pydantic_ai.models.openai import OpenAIChatModel

    if resolved.provider == "openai":
        from pydantic_ai.providers.openai import OpenAIProvider

        provider = OpenAIProvider(api_key=resolved.api_key, base_url=resolved.base_url)
    elif resolved.provider == "ollama":
        from pydantic_ai.models.ollama import OllamaModel
        from pydantic_ai.providers.ollama import OllamaProvider

        return OllamaModel(resolved.model_name, provider=OllamaProvider(base_url=resolved.base_url, api_key=resolved.api_key))
    else:
        from pydantic_ai.providers.openai_compatible import OpenAICompatibleProvider

        provider = OpenAICompatibleProvider("openai-compatible", base_url=resolved.base_url, api_key=resolved.api_key)
    return OpenAIChatModel(resolved.model_name, provider=provider)


async def _provider_request(resolved: ResolvedModel, request: ModelRequest, *, timeout: float, max_retries: int) -> ModelResponse:
    from pydantic_ai.direct import model_request

    messages = to_pai_messages(request)
    parameters = to_pai_parameters(request)
    # `timeout` bounds each HTTP attempt; `request_timeout` the whole call, SDK retries included.
    settings: dict[str, Any] = {"timeout": timeout, "request_timeout": timeout, "max_retries": max_retries}
    try:
        # A fresh model per call, entered so its HTTP client is closed on the
        # loop that opened it: calls come from worker threads, each with its own loop.
        model = _build_model(resolved)
        async with model:
            result = await model_request(
                model, messages, model_settings=settings, model_request_parameters=parameters, instrument=False
            )
    except Exception as exc:
        error = map_error(exc, resolved.name)
        if error is None:
            raise
        raise error from exc
    return from_pai_response(result, resolved.name)


def to_pai_messages(request: ModelRequest) -> list:
    """Our messages as pydantic-ai ModelMessages.

    Every system message (one per lane block) becomes a SystemPromptPart at the
    start, in order; user and tool messages gather into ModelRequests;
    assistant messages become ModelResponses with text and tool calls.
    """
    from pydantic_ai import messages as m

    system = [
        m.SystemPromptPart(msg.content, metadata={"lane": msg.lane} if msg.lane else None)
        for msg in request.messages
        if msg.role == "system"
    ]
    out: list = []
    pending: list = list(system)
    call_names: dict[str, str] = {}
    for msg in request.messages:
        if msg.role == "system":
            continue
        if msg.role == "user":
            pending.append(m.UserPromptPart(msg.content))
        elif msg.role == "tool":
            name = msg.tool_name or call_names.get(msg.tool_call_id or "", "unknown_tool")
            pending.append(m.ToolReturnPart(tool_name=name, content=msg.content, tool_call_id=msg.tool_call_id or ""))
        else:  # assistant
            if pending:
                out.append(m.ModelRequest(parts=pending))
                pending = []
            parts: list = [m.TextPart(msg.content)] if msg.content or not msg.tool_calls else []
            for call in msg.tool_calls:
                call_names[call.id] = call.name
                parts.append(m.ToolCallPart(tool_name=call.name, args=call.arguments, tool_call_id=call.id))
            out.append(m.ModelResponse(parts=parts))
    if pending:
        out.append(m.ModelRequest(parts=pending))
    return out


def to_pai_parameters(request: ModelRequest):
    from pydantic_ai.models import ModelRequestParameters
    from pydantic_ai.tools import ToolDefinition

    tools = [ToolDefinition(name=t.name, description=t.description, parameters_json_schema=t.parameters, strict=False) for t in request.tools]
    return ModelRequestParameters(function_tools=tools, allow_text_output=True)


def _arguments(args: Any) -> dict[str, Any] | str:
    """Arguments as a dict when they are a JSON object; otherwise the raw text, for the loop to reject visibly."""
    if isinstance(args, dict):
        return args
    if args is None or (isinstance(args, str) and not args.strip()):
        return {}  # a call with no arguments; some servers send "" for it
    try:
        parsed = json.loads(args)
    except (TypeError, ValueError):
        return str(args)
    return parsed if isinstance(parsed, dict) else str(args)


def from_pai_response(result, name: str) -> ModelResponse:
    from pydantic_ai import messages as m

    texts: list[str] = []
    calls: list[ToolCall] = []
    for part in result.parts:
        if isinstance(part, m.TextPart):
            texts.append(part.content)
        elif isinstance(part, m.ToolCallPart):
            calls.append(ToolCall(id=part.tool_call_id, name=part.tool_name, arguments=_arguments(part.args)))
        # thinking and provider-native parts are not part of our conversation
    text = "".join(texts)
    usage = Usage(input_tokens=result.usage.input_tokens or 0, output_tokens=result.usage.output_tokens or 0)
    return ModelResponse(text=text or None, tool_calls=calls, usage=usage, model=name)


# --- errors -------------------------------------------------------------------

_RETRYABLE_STATUS = {408, 409, 425, 429}


def map_error(exc: BaseException, name: str) -> ModelCallError | None:
    """A provider failure as a ModelCallError, or None for an error that is a bug of ours."""
    from pydantic_ai import exceptions as x

    if isinstance(exc, ModelCallError):
        return exc
    status = getattr(exc, "status_code", None)
    if isinstance(exc, x.ModelHTTPError):
        retryable = exc.status_code >= 500 or exc.status_code in _RETRYABLE_STATUS
        if isinstance(exc, x.ModelQuotaExceededError):
            retryable = False  # waiting does not top up an account
        return ModelCallError(f"{name}: {exc.message}", retryable=retryable, status_code=exc.status_code, model=name)
    if isinstance(exc, (x.ModelRequestTimeout, x.ModelConnectionError, x.ModelRateLimitError, x.ModelUnavailableError, x.ModelServerError)):
        return ModelCallError(f"{name}: {exc.message}", retryable=True, status_code=status, model=name)
    if isinstance(exc, x.ModelAPIError):
        return ModelCallError(f"{name}: {exc.message}", retryable=False, status_code=status, model=name)
    if isinstance(exc, x.UnexpectedModelBehavior):
        # A body we could not read: the server answered, just not in the API's shape.
        return ModelCallError(f"{name}: malformed response: {exc.message}", retryable=False, model=name)
    if isinstance(exc, x.UserError):
        return ModelCallError(f"{name}: {exc}", retryable=False, model=name)
    if isinstance(exc, TimeoutError):
        return ModelCallError(f"{name}: timed out", retryable=True, model=name)
    return None
