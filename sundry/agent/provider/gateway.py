"""The model gateway: the one place that picks a model and talks to it.

Model names are "<provider>:<model>":

- "offline" — the built-in offline model of the default domain (`Domain.offline_model`).
- "openai:<model>" — OpenAI; key OPENAI_API_KEY (OPENAI_BASE_URL is honoured).
- "anthropic:<model>" — Anthropic; key ANTHROPIC_API_KEY (ANTHROPIC_BASE_URL is honoured).
- "openai-compatible:<model>" — vLLM, llama.cpp server, … at
  SUNDRY_OPENAI_COMPAT_BASE_URL, optional key SUNDRY_OPENAI_COMPAT_API_KEY.
- "ollama:<model>" — Ollama at OLLAMA_BASE_URL (default http://127.0.0.1:11434/v1).

A provider that is not configured resolves to the offline model with a reason,
so a missing key never stops the embedded demo. In production (SUNDRY_ENV=production)
it never does: the model resolves as unavailable, the call fails with
`ModelCallError(unresolved=True)` and the ticket goes to staff with the reason. Calls go through pydantic-ai's `direct`
API; our ModelRequest/ModelResponse are converted at this edge and provider
failures become a typed `ModelCallError`.

One `call` is the whole of talking to the model, retries included: the provider
SDK retries connection errors, timeouts, 408/409/429 and 5xx itself, backing off
and honouring the server's `Retry-After`, within a deadline for the whole call
(`CallLimits`, from settings). The caller calls once; the latency it records
spans every attempt, failed ones too (`ModelCallError.latency_ms`).

Token counts: where a provider has a token counting endpoint (Anthropic's
/v1/messages/count_tokens) and MODEL_PROVIDER_TOKEN_COUNT is on, `count_tokens`
asks it for a request's input tokens, built exactly as the request itself would
be sent; it answers None for every other model, or when the count fails, and
the caller keeps its calibrated estimate (`agent.calibration`).

Streaming: a call given a `ReplySink` is made with pydantic-ai's
`model_request_stream` where the provider is a network one; the sink hears
"typing" before the request goes out and the text written so far as it
arrives. The call still returns the complete response, read from the stream
(`StreamedResponse.get()`): what is stored is never the partial text. The
offline and scripted models answer at once and do not stream.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import os
import threading
import time
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Protocol

from sundry.agent.provider import pricing, strictjson
from sundry.agent.provider.wire import NormalisingTransport
from sundry.tooling.domain import offline_model
from sundry.tooling.messages import ModelRequest, ModelResponse, OutputSpec, ToolCall, Usage

log = logging.getLogger(__name__)

OFFLINE = "offline"
PROVIDERS = ("openai", "anthropic", "openai-compatible", "ollama")
OLLAMA_DEFAULT_BASE_URL = "http://127.0.0.1:11434/v1"
CONFIGURED_OFFLINE = "configured as offline"
COUNTING_PROVIDERS = ("anthropic",)  # providers with a token counting endpoint
# A count is a small request made before budgeting a step's request: a slow one must not hold it up.
COUNT_TIMEOUT = 10.0
_warned: set[str] = set()


class ModelCallError(Exception):
    """A model call failed after the retries the gateway makes.

    `retryable` says whether the same request may succeed later; `latency_ms` is
    how long the call took, every attempt included.
    """

    def __init__(
        self,
        message: str,
        *,
        retryable: bool,
        status_code: int | None = None,
        model: str = "",
        latency_ms: int = 0,
        unresolved: bool = False,
    ):
        super().__init__(message)
        self.message = message
        self.retryable = retryable
        # The model could not be resolved here (production never falls back to the offline model).
        self.unresolved = unresolved
        self.status_code = status_code
        self.model = model
        self.latency_ms = latency_ms


@dataclass(frozen=True)
class CallLimits:
    """How long a model call may take, how often it is retried, and how long its answer may be."""

    connect_timeout: float = 5.0  # seconds to open a connection, per attempt
    read_timeout: float = 60.0  # seconds to wait for the answer, per attempt
    call_timeout: float = 150.0  # seconds for the whole call, every attempt and backoff included
    max_retries: int = 2  # attempts after the first, made by the provider SDK
    max_tokens: int = 2048  # longest answer the model may give

    @classmethod
    def from_settings(cls) -> CallLimits:
        from django.conf import settings

        defaults = cls()
        return cls(
            connect_timeout=getattr(settings, "MODEL_CONNECT_TIMEOUT", defaults.connect_timeout),
            read_timeout=getattr(settings, "MODEL_READ_TIMEOUT", defaults.read_timeout),
            call_timeout=getattr(settings, "MODEL_CALL_TIMEOUT", defaults.call_timeout),
            max_retries=getattr(settings, "MODEL_MAX_RETRIES", defaults.max_retries),
            max_tokens=getattr(settings, "MODEL_MAX_TOKENS", defaults.max_tokens),
        )


class ReplySink(Protocol):
    """Hears a streamed call as it happens (sundry.agent.streaming.ReplyStream)."""

    async def typing(self) -> None: ...

    async def written(self, text: str, *, final: bool = False) -> None: ...


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
    unavailable: str = ""  # production only: why this model cannot be used (no offline fallback)

    def __repr__(self) -> str:  # never print a key
        return f"ResolvedModel(name={self.name!r}, offline={self.offline}, reason={self.reason!r})"


def _env(key: str) -> str | None:
    return os.environ.get(key, "").strip() or None


def _production() -> bool:
    try:
        from django.conf import settings

        return bool(getattr(settings, "PRODUCTION", False))
    except Exception:  # settings not configured (a script without Django)
        return os.environ.get("SUNDRY_ENV", "") == "production"


def _offline(name: str, reason: str) -> ResolvedModel:
    if _production():
        # No silent toy in production: the class's tickets go to staff instead.
        return ResolvedModel(name, reason=reason, unavailable=f"model {name} cannot be used: {reason}")
    return ResolvedModel(name, offline=True, reason=f"{reason}; using the offline model")


def validate_model_name(name: str) -> None:
    """Raise ValueError unless `name` is a model string the gateway understands (for admin forms)."""
    if name == OFFLINE:
        return
    provider, sep, model = name.partition(":")
    if not sep or provider not in PROVIDERS or not model.strip():
        raise ValueError(
            f"unknown model {name!r}: use 'offline' or '<provider>:<model>' with provider one of {', '.join(PROVIDERS)}"
        )


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
        return ResolvedModel(
            name, provider=provider, model_name=model, api_key=key, base_url=_env("ANTHROPIC_BASE_URL")
        )
    if provider == "openai-compatible":
        url = _env("SUNDRY_OPENAI_COMPAT_BASE_URL")
        if not url:
            return _offline(name, "SUNDRY_OPENAI_COMPAT_BASE_URL not set")
        return ResolvedModel(
            name, provider=provider, model_name=model, base_url=url, api_key=_env("SUNDRY_OPENAI_COMPAT_API_KEY")
        )
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

    def __init__(
        self, *, override: ChatModel | None = None, offline: ChatModel | None = None, limits: CallLimits | None = None
    ):
        self.override = override
        self._offline_model = offline
        self.limits = limits or CallLimits.from_settings()

    def complete(
        self, request: ModelRequest, *, model: str | None = None, timeout: float | None = None
    ) -> ModelResponse:
        return self.call(request, model=model, timeout=timeout).response

    def call(
        self,
        request: ModelRequest,
        *,
        model: str | None = None,
        timeout: float | None = None,
        stream: ReplySink | None = None,
    ) -> GatewayCall:
        """Like `complete`, plus the cost and latency a step stores. Synchronous: run it off the event loop.

        `timeout`, if given, replaces the limits' deadline for the whole call (attempts included);
        `stream`, if given, hears the reply as it is written (a network provider only).
        """
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            pass
        else:
            raise RuntimeError("Gateway.call is synchronous; use `await Gateway.acall(...)` inside an event loop")
        name = model or request.model
        resolved = self._resolve(name)
        _refuse_unavailable(resolved)
        if self.override is not None or resolved.offline:
            return self._local(request, name, resolved)  # no network: no event loop to start
        return _thread_loop().run_until_complete(self.acall(request, model=model, timeout=timeout, stream=stream))

    def is_local(self, model: str) -> bool:
        """The call is answered in this thread without an event loop (a scripted or offline model)."""
        return self.override is not None or self._resolve(model).offline

    async def acomplete(
        self, request: ModelRequest, *, model: str | None = None, timeout: float | None = None
    ) -> ModelResponse:
        return (await self.acall(request, model=model, timeout=timeout)).response

    async def acall(
        self,
        request: ModelRequest,
        *,
        model: str | None = None,
        timeout: float | None = None,
        stream: ReplySink | None = None,
    ) -> GatewayCall:
        name = model or request.model
        resolved = self._resolve(name)
        _refuse_unavailable(resolved)
        if self.override is not None or resolved.offline:
            return self._local(request, name, resolved)
        _import_client(resolved.provider)  # not the model's latency
        limits = (
            self.limits
            if timeout is None
            else dataclasses.replace(
                self.limits,
                call_timeout=timeout,
                read_timeout=min(self.limits.read_timeout, timeout),
                connect_timeout=min(self.limits.connect_timeout, timeout),
            )
        )
        started = time.monotonic()
        try:
            response = await _provider_request(resolved, request, limits, stream=stream)
        except ModelCallError as exc:
            exc.latency_ms = _elapsed_ms(started)
            raise
        return _priced(response, resolved, name, started)

    def count_tokens(self, request: ModelRequest, *, model: str | None = None) -> int | None:
        """The provider's count of the request's input tokens, or None where it has none to give (see the
        module doc): not enabled, not a counting provider, not configured, or the count failed."""
        name = model or request.model
        if self.override is not None or not provider_counting(name):
            return None
        resolved = resolve_model(name)
        if resolved.offline or resolved.unavailable:
            return None
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            pass
        else:
            return None  # synchronous only: a caller on an event loop keeps its estimate
        try:
            return _thread_loop().run_until_complete(_provider_count(resolved, request, self.limits))
        except Exception as exc:  # any failure: the calibrated estimate serves
            log.warning("%s: token count failed (%s); using the calibrated estimate", name, exc)
            return None

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
            self._offline_model = offline_model()
        return self._offline_model


def provider_counting(name: str) -> bool:
    """Whether requests for the model `name` are counted by its provider (opt-in: MODEL_PROVIDER_TOKEN_COUNT)."""
    from django.conf import settings
    from django.core.exceptions import ImproperlyConfigured

    if name.partition(":")[0] not in COUNTING_PROVIDERS:
        return False
    try:
        return bool(getattr(settings, "MODEL_PROVIDER_TOKEN_COUNT", False))
    except ImproperlyConfigured:  # a script without Django settings: off
        return False


def _refuse_unavailable(resolved: ResolvedModel) -> None:
    if resolved.unavailable:
        raise ModelCallError(resolved.unavailable, retryable=False, model=resolved.name, unresolved=True)


def _elapsed_ms(started: float) -> int:
    return int((time.monotonic() - started) * 1000)


def _priced(response: ModelResponse, resolved: ResolvedModel, name: str, started: float) -> GatewayCall:
    latency_ms = _elapsed_ms(started)
    u = response.usage
    c = pricing.cost(
        response.model or name,
        u.input_tokens,
        u.output_tokens,
        base_url=resolved.base_url,
        cached_input_tokens=u.cached_input_tokens,
        cache_write_tokens=u.cache_write_tokens,
    )
    return GatewayCall(response=response, resolved=resolved, cost_usd=c.usd, priced=c.priced, latency_ms=latency_ms)


# --- pydantic-ai edge -------------------------------------------------------


def _import_client(provider: str) -> None:
    # pydantic-ai is imported lazily so Django starts without it (~1-3 s once); the modules a call
    # needs are imported here, before its latency is timed, and only the provider's own.
    import pydantic_ai.direct  # noqa: F401

    import sundry.agent.provider.toolschemas  # noqa: F401

    if provider == "anthropic":
        import pydantic_ai.models.anthropic  # noqa: F401
    else:
        import pydantic_ai.models.openai  # noqa: F401

        import sundry.agent.provider.plainbody  # noqa: F401


def _http_client(limits: CallLimits):
    """An HTTP client with our connect and read timeouts, through a transport that repairs real servers'
    drift from the API's shape before the SDK reads it (see wire.py)."""
    import httpx2
    from pydantic_ai.models import create_async_httpx2_client

    timeout = httpx2.Timeout(limits.read_timeout, connect=limits.connect_timeout, pool=limits.connect_timeout)
    # The transport owns the pool (the client's limits no longer apply): a thread makes one call
    # at a time, so a few kept-alive connections are plenty.
    transport = NormalisingTransport(httpx2.AsyncHTTPTransport(limits=httpx2.Limits(max_connections=10)))
    return create_async_httpx2_client(timeout=timeout, transport=transport)


def _build_model(resolved: ResolvedModel, http_client, *, max_retries: int):
    """A pydantic-ai model for one call, talking through `http_client`.

    The SDK's client is built with the retries it makes: handed them in each request's settings,
    pydantic-ai would copy the client for every call, and each copy asks for the platform again
    on a worker thread (a thread hand-off a call, docs/benchmarks.md). The models keep the tools'
    reworked schemas between calls (toolschemas.py)."""
    from sundry.agent.provider.toolschemas import keeping_schemas

    if resolved.provider == "anthropic":
        from anthropic import AsyncAnthropic
        from pydantic_ai.models.anthropic import AnthropicModel
        from pydantic_ai.providers.anthropic import AnthropicProvider

        # The client AnthropicProvider would build from the key, URL and HTTP client, plus its retries.
        client = AsyncAnthropic(
            api_key=resolved.api_key, base_url=resolved.base_url, http_client=http_client, max_retries=max_retries
        )
        return keeping_schemas(AnthropicModel)(resolved.model_name, provider=AnthropicProvider(anthropic_client=client))
    from pydantic_ai.models.openai import OpenAIChatModel

    from sundry.agent.provider.plainbody import PlainBodyClient  # imports the SDK: on first use, as above

    # The client pydantic-ai's provider would build, but sending plain-JSON messages and tools
    # without the SDK's walk of them (plainbody.py); the key placeholders are the providers' own.
    placeholder = "api-key-not-set"
    if resolved.provider == "openai":
        from pydantic_ai.providers.openai import OpenAIProvider

        client = PlainBodyClient(
            api_key=resolved.api_key, base_url=resolved.base_url, http_client=http_client, max_retries=max_retries
        )
        provider = OpenAIProvider(openai_client=client)
    elif resolved.provider == "ollama":
        from pydantic_ai.models.ollama import OllamaModel
        from pydantic_ai.providers.ollama import OllamaProvider

        key = resolved.api_key or os.getenv("OLLAMA_API_KEY") or placeholder
        client = PlainBodyClient(
            api_key=key, base_url=resolved.base_url, http_client=http_client, max_retries=max_retries
        )
        return keeping_schemas(OllamaModel)(resolved.model_name, provider=OllamaProvider(openai_client=client))
    else:
        from pydantic_ai.providers.openai_compatible import OpenAICompatibleProvider

        client = PlainBodyClient(
            api_key=resolved.api_key or placeholder,
            base_url=resolved.base_url,
            http_client=http_client,
            max_retries=max_retries,
        )
        provider = OpenAICompatibleProvider("openai-compatible", openai_client=client)
    return keeping_schemas(OpenAIChatModel)(resolved.model_name, provider=provider)


# One event loop per thread and, on it, one HTTP client and model per configured model:
# connections are kept alive between calls. Building them afresh for every call (a new
# loop, TLS handshake and SDK client each time) cost 160-270 ms a step in the realistic
# benchmark, more than everything else Sundry does in a step (docs/benchmarks.md).
_per_thread = threading.local()


def _thread_loop() -> asyncio.AbstractEventLoop:
    loop = getattr(_per_thread, "loop", None)
    if loop is None or loop.is_closed():
        loop = asyncio.new_event_loop()
        _per_thread.loop = loop
        _per_thread.models = {}
    return loop


def _model_for(resolved: ResolvedModel, limits: CallLimits):
    """This thread's model for `resolved` with `limits`' timeouts; made on first use."""
    models = getattr(_per_thread, "models", None)
    if models is None:
        models = _per_thread.models = {}
    key = (
        resolved.provider,
        resolved.model_name,
        resolved.base_url,
        resolved.api_key,
        limits.connect_timeout,
        limits.read_timeout,
        limits.max_retries,
    )
    model = models.get(key)
    if model is None:
        model = models[key] = _build_model(resolved, _http_client(limits), max_retries=limits.max_retries)
    return model


async def _send(model, messages, settings, parameters, stream: ReplySink | None):
    """One request: streamed to `stream` when there is one (a plain reply may come), else whole."""
    from pydantic_ai import messages as m
    from pydantic_ai.direct import model_request, model_request_stream

    if stream is None:
        return await model_request(
            model, messages, model_settings=settings, model_request_parameters=parameters, instrument=False
        )
    await stream.typing()
    texts: dict[int, str] = {}  # text parts by index, as the model writes them
    async with model_request_stream(
        model, messages, model_settings=settings, model_request_parameters=parameters, instrument=False
    ) as streamed:
        async for event in streamed:
            if isinstance(event, m.PartStartEvent) and isinstance(event.part, m.TextPart):
                texts[event.index] = event.part.content
            elif isinstance(event, m.PartDeltaEvent) and isinstance(event.delta, m.TextPartDelta):
                texts[event.index] = texts.get(event.index, "") + event.delta.content_delta
            else:
                continue
            await stream.written("".join(texts[i] for i in sorted(texts)))
        result = streamed.get()
    if texts:
        # A reply cut off at the length limit ends mid-sentence: its unfinished end is not a sentence to show.
        cut = getattr(result, "finish_reason", None) == "length"
        await stream.written("".join(texts[i] for i in sorted(texts)), final=not cut)
    return result


def _request_settings(resolved: ResolvedModel, limits: CallLimits) -> dict[str, Any]:
    # The client's timeouts bound each attempt (connect, read); `request_timeout` the whole
    # call, the SDK's retries and their Retry-After waits included. The retries themselves are
    # the client's own (`_build_model`).
    settings: dict[str, Any] = {"request_timeout": limits.call_timeout, "max_tokens": limits.max_tokens}
    if resolved.provider == "anthropic":
        # Breakpoints after the tool schemas and after the system blocks: the stable prefix is read from cache.
        settings.update(anthropic_cache_tool_definitions=True, anthropic_cache_instructions=True)
    return settings


async def _provider_count(resolved: ResolvedModel, request: ModelRequest, limits: CallLimits) -> int:
    """The provider's count of `request` as `_provider_request` would send it: one attempt, within COUNT_TIMEOUT."""
    _import_client(resolved.provider)
    settings = {**_request_settings(resolved, limits), "max_retries": 0, "timeout": COUNT_TIMEOUT}
    parameters = to_pai_parameters(request, output_mode=structured_mode(resolved.provider))
    usage = await asyncio.wait_for(
        _model_for(resolved, limits).count_tokens(to_pai_messages(request), settings, parameters), COUNT_TIMEOUT
    )
    return usage.input_tokens


async def _provider_request(
    resolved: ResolvedModel,
    request: ModelRequest,
    limits: CallLimits,
    *,
    original_output: bool = False,
    stream: ReplySink | None = None,
) -> ModelResponse:
    messages = to_pai_messages(request)
    mode = structured_mode(resolved.provider)
    parameters = to_pai_parameters(request, output_mode=mode)
    settings = _request_settings(resolved, limits)
    if request.output is not None:
        stream = None  # structured output is for Sundry, not for a watcher
    try:
        # Our client, passed in: the provider does not own it, so nothing closes it between
        # calls. It belongs to the loop that runs this call (see `_thread_loop`); a call made
        # on another running loop (`acall` from async code) gets a client of its own.
        if asyncio.get_running_loop() is getattr(_per_thread, "loop", None):
            result = await _send(_model_for(resolved, limits), messages, settings, parameters, stream)
        else:
            async with _http_client(limits) as http_client:
                model = _build_model(resolved, http_client, max_retries=limits.max_retries)
                result = await _send(model, messages, settings, parameters, stream)
    except Exception as exc:
        error = map_error(exc, resolved.name)
        if error is None:
            raise
        if request.output is not None and not error.retryable and error.status_code in (400, 404, 422):
            # The server refuses structured output: ask again for JSON in text (the prompt asks for it too).
            log.info("%s: structured output refused (%s); asking for JSON in text", resolved.name, error)
            return await _provider_request(
                resolved, request.model_copy(update={"output": None}), limits, original_output=True
            )
        raise error from exc
    response = from_pai_response(result, resolved.name, output=request.output, output_mode=mode)
    if request.output is None and original_output:
        response = response.model_copy(update={"output_path": "text"})
    return response


def to_pai_messages(request: ModelRequest) -> list:
    """Our messages as pydantic-ai ModelMessages.

    Every system message of the lanes (one per lane block, or any before the conversation) becomes
    a SystemPromptPart at the start, in order; a system message inside the conversation (Sundry's
    notice of a run that stopped or failed) stays where it is, in Sundry's voice rather than the
    customer's; user and tool messages gather into ModelRequests; assistant messages become
    ModelResponses with text and tool calls.
    """
    from pydantic_ai import messages as m

    first = next((i for i, msg in enumerate(request.messages) if msg.role != "system"), len(request.messages))
    inline = {i for i, msg in enumerate(request.messages) if msg.role == "system" and not msg.lane and i > first}
    system = [
        m.SystemPromptPart(msg.content, metadata={"lane": msg.lane} if msg.lane else None)
        for i, msg in enumerate(request.messages)
        if msg.role == "system" and i not in inline
    ]
    out: list = []
    pending: list = list(system)
    call_names: dict[str, str] = {}
    for i, msg in enumerate(request.messages):
        if i in inline:
            pending.append(m.SystemPromptPart(msg.content))
            continue
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


def structured_mode(provider: str) -> str:
    """How a provider is asked for structured output: OpenAI's JSON schema natively; the rest
    (Anthropic, and servers whose JSON-schema support varies) through an output tool."""
    return "native" if provider == "openai" else "tool"


def to_pai_parameters(request: ModelRequest, *, output_mode: str = "tool"):
    from pydantic_ai.models import ModelRequestParameters
    from pydantic_ai.output import OutputObjectDefinition
    from pydantic_ai.tools import ToolDefinition

    tools = [
        ToolDefinition(name=t.name, description=t.description, parameters_json_schema=t.parameters, strict=False)
        for t in request.tools
    ]
    out: OutputSpec | None = request.output
    if out is None:
        return ModelRequestParameters(function_tools=tools, allow_text_output=True)
    if output_mode == "native":
        return ModelRequestParameters(
            function_tools=tools,
            output_mode="native",
            allow_text_output=False,
            output_object=OutputObjectDefinition(
                json_schema=out.schema_, name=out.name, description=out.description, strict=True
            ),
        )
    output_tool = ToolDefinition(
        name=out.name, description=out.description, parameters_json_schema=out.schema_, kind="output"
    )
    # Text stays allowed: a model that ignores the tool and writes JSON in text is read that way.
    return ModelRequestParameters(
        function_tools=tools, output_mode="tool", output_tools=[output_tool], allow_text_output=True
    )


def _arguments(args: Any) -> dict[str, Any] | str:
    """Arguments as a dict when they are a standard JSON object; otherwise the raw text, for the loop
    to reject visibly. NaN and infinities are not JSON (and jsonb refuses them): kept as text."""
    if isinstance(args, dict):
        if strictjson.non_finite_path(args):
            return json.dumps(args, ensure_ascii=False)  # writes NaN/Infinity, which the guards refuse
        return args
    if args is None or (isinstance(args, str) and not args.strip()):
        return {}  # a call with no arguments; some servers send "" for it
    try:
        parsed = strictjson.loads(args)
    except (TypeError, ValueError):
        return str(args)
    return parsed if isinstance(parsed, dict) else str(args)


def from_pai_response(
    result, name: str, *, output: OutputSpec | None = None, output_mode: str = "tool"
) -> ModelResponse:
    from pydantic_ai import messages as m

    texts: list[str] = []
    calls: list[ToolCall] = []
    structured: str | None = None
    for part in result.parts:
        if isinstance(part, m.TextPart):
            texts.append(part.content)
        elif isinstance(part, m.ToolCallPart):
            if output is not None and part.tool_name == output.name and structured is None:
                args = part.args if isinstance(part.args, str) else json.dumps(part.args, ensure_ascii=False)
                structured = args
                continue
            calls.append(ToolCall(id=part.tool_call_id, name=part.tool_name, arguments=_arguments(part.args)))
        # thinking and provider-native parts are not part of our conversation
    text = "".join(texts)
    path = None
    if output is not None:
        if structured is not None:
            text, path = structured, "tool"
        else:
            path = "native" if output_mode == "native" else "text"
    u = result.usage
    usage = Usage(
        input_tokens=u.input_tokens or 0,
        output_tokens=u.output_tokens or 0,
        cached_input_tokens=getattr(u, "cache_read_tokens", 0) or 0,
        cache_write_tokens=getattr(u, "cache_write_tokens", 0) or 0,
    )
    finish = getattr(result, "finish_reason", None)
    return ModelResponse(
        text=text or None, tool_calls=calls, usage=usage, model=name, finish_reason=finish, output_path=path
    )


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
    if isinstance(
        exc,
        (
            x.ModelRequestTimeout,
            x.ModelConnectionError,
            x.ModelRateLimitError,
            x.ModelUnavailableError,
            x.ModelServerError,
        ),
    ):
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
