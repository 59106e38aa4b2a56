"""A connection to one MCP tool server, through the `mcp` SDK's `Client`, for synchronous callers.

Sundry's agent runs in plain threads (Celery tasks, sync views); the SDK is async.
A `Connection` keeps one `Client` open on an event loop of its own thread, so a
stdio server's process — and whatever state it keeps in memory — lives for as
long as the connection, not for one call. Every request has a deadline: a server
that fails, hangs or dies raises `ToolServerError` and the connection is closed
(the next request opens a new one), so a caller is never stuck on it.

Before any connection is made — a process started, a socket opened — the spec is
checked: a spec its builder marked `refused`, or one the process's policy
(`set_policy`; Sundry's deployment limits, set when the tool-server app loads)
refuses, raises `ToolServerError` with the reason and nothing is contacted.

Domain-free: what the tools mean is the declaration file's business (`toolservers`).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import logging
import os
import shlex
import sys
import threading
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable

import httpx2
from mcp import Client, MCPError, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import CONNECTION_CLOSED, REQUEST_TIMEOUT

log = logging.getLogger("sundry.toolservers")

CONNECT_TIMEOUT = 20.0  # seconds to start a server and finish the handshake, unless its spec says
STDERR_TAIL = 2000  # characters of a failed server's stderr shown to the admin


class ToolServerError(Exception):
    """The server could not be reached, failed, or did not answer in time."""


@dataclass(frozen=True)
class ServerSpec:
    """How to reach one server. `env` and `headers` carry values read from the environment at
    connect time (never stored); `key` names the connection without them."""

    name: str
    command: str = ""  # stdio: the command line; a leading `python` runs with Sundry's interpreter
    url: str = ""  # streamable HTTP
    cwd: str = ""
    env: tuple[tuple[str, str], ...] = ()
    headers: tuple[tuple[str, str], ...] = ()
    refused: str = ""  # why it may not be reached: no connection is attempted
    connect_timeout: float = CONNECT_TIMEOUT  # the server's own timeout: starting it and the handshake too

    @property
    def key(self) -> tuple:
        return (
            self.name,
            self.command,
            self.url,
            self.cwd,
            tuple(k for k, _ in self.env),
            tuple(k for k, _ in self.headers),
        )

    def argv(self) -> list[str]:
        parts = shlex.split(self.command)
        if parts and parts[0] in ("python", "python3"):
            parts[0] = sys.executable
        return parts

    def transport(self, on_response=None, errlog=None):
        """`on_response`: an async hook each HTTP response passes (the connection notes a refusal);
        `errlog`: a file a stdio server's stderr goes to (default: Sundry's own stderr)."""
        if self.url:
            client = httpx2.AsyncClient(
                headers=dict(self.headers),
                timeout=httpx2.Timeout(30.0, read=300.0),
                follow_redirects=False,  # the SDK follows same-origin ones itself
                event_hooks={"response": [on_response]} if on_response else None,
            )
            return streamable_http_client(self.url, http_client=client)
        argv = self.argv()
        if not argv:
            raise ToolServerError(f"{self.name}: neither a command nor a URL to reach the server")
        params = StdioServerParameters(command=argv[0], args=argv[1:], env=dict(self.env) or None, cwd=self.cwd or None)
        return stdio_client(params, errlog=errlog) if errlog is not None else params


@dataclass(frozen=True)
class ListedTool:
    """A tool as the server lists it."""

    name: str
    description: str = ""
    input_schema: dict = field(default_factory=lambda: {"type": "object", "properties": {}})
    output_schema: dict | None = None
    read_only: bool = False  # the server's readOnlyHint

    def as_json(self) -> dict:
        return {
            "name": self.name,
            "description": self.description,
            "input_schema": self.input_schema,
            "output_schema": self.output_schema,
            "read_only": self.read_only,
        }

    @classmethod
    def from_json(cls, data: dict) -> "ListedTool":
        return cls(
            name=data["name"],
            description=data.get("description") or "",
            input_schema=data.get("input_schema") or {"type": "object", "properties": {}},
            output_schema=data.get("output_schema"),
            read_only=bool(data.get("read_only")),
        )


@dataclass(frozen=True)
class CallResult:
    """What a call returned: `text` for the model, `data` parsed (dict, list or str) for the declarations."""

    ok: bool
    text: str
    data: Any = None


def _is_wrapped(schema: dict | None) -> bool:
    """The SDK's schema for a tool that returns a plain value: {"result": value}."""
    props = (schema or {}).get("properties") or {}
    return set(props) == {"result"}


def read_result(result, output_schema: dict | None = None) -> CallResult:
    """A `CallToolResult` as text and data: structured content when there is some, else the text,
    parsed as JSON when it is JSON (a tool that returns a JSON string, like a product list)."""
    text = "\n".join(getattr(c, "text", "") for c in result.content if getattr(c, "type", "") == "text").strip()
    if result.is_error:
        return CallResult(ok=False, text=text or "The tool reported an error without a message.")
    data = result.structured_content
    if isinstance(data, dict) and set(data) == {"result"} and (_is_wrapped(output_schema) or output_schema is None):
        data = data["result"]
    if data is None:
        data = text
    if isinstance(data, str):
        try:
            data = json.loads(data)
        except ValueError:
            pass
    shown = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False)
    return CallResult(ok=True, text=shown, data=data)


class Connection:
    """One open `Client` on its own thread's event loop; requests run one at a time, each with a deadline."""

    def __init__(self, spec: ServerSpec, errlog=None):
        self.spec = spec
        self._errlog = errlog  # a stdio server's stderr, kept for the admin's test connection
        self._loop: asyncio.AbstractEventLoop | None = None
        self._queue: asyncio.Queue | None = None
        self._task: asyncio.Task | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._closed = False
        self._refused = 0  # an HTTP 401 or 403 the server answered: why, said plainly, when it fails
        self._lock = threading.Lock()  # one request at a time from this process's threads
        self.pid = os.getpid()
        self._thread = threading.Thread(target=self._run, name=f"mcp-{spec.name}", daemon=True)

    # --- the loop's side ----------------------------------------------------------------

    def _run(self) -> None:
        try:
            asyncio.run(self._main())
        except BaseException as exc:  # noqa: BLE001  (recorded for the caller)
            self._error = self._error or exc
        finally:
            self._closed = True
            self._ready.set()

    async def _main(self) -> None:
        self._loop, self._queue = asyncio.get_running_loop(), asyncio.Queue()
        self._task = asyncio.current_task()
        pending: concurrent.futures.Future | None = None
        try:
            async with Client(
                self.spec.transport(self._saw, self._errlog), read_timeout_seconds=self.spec.connect_timeout
            ) as client:
                self._ready.set()
                while True:
                    item = await self._queue.get()
                    if item is None:
                        return
                    fn, pending = item
                    try:
                        value = await fn(client)
                    except Exception as exc:  # noqa: BLE001  (handed to the waiting thread)
                        if not pending.done():
                            pending.set_exception(exc)
                    else:
                        if not pending.done():
                            pending.set_result(value)
                    pending = None
        except BaseException as exc:
            self._error = self._error or exc
            if pending is not None and not pending.done():
                pending.set_exception(ToolServerError(f"{self.spec.name}: the connection closed"))
            raise
        finally:
            self._closed = True
            while self._queue is not None and not self._queue.empty():
                item = self._queue.get_nowait()
                if item is not None and not item[1].done():
                    item[1].set_exception(ToolServerError(f"{self.spec.name}: the connection closed"))

    async def _saw(self, response) -> None:
        if response.status_code in (401, 403):
            self._refused = response.status_code

    def _why(self, exc: BaseException | None) -> str:
        if self._refused:
            return (
                f"the server refused our credentials (HTTP {self._refused} "
                f"{'Unauthorized' if self._refused == 401 else 'Forbidden'}); check the environment variables "
                "its headers are read from"
            )
        return _reason(exc)

    # --- the caller's side --------------------------------------------------------------

    @property
    def alive(self) -> bool:
        return self._ready.is_set() and not self._closed and self.pid == os.getpid()

    def open(self, timeout: float | None = None) -> "Connection":
        timeout = self.spec.connect_timeout if timeout is None else timeout
        reason = refusal(self.spec)
        if reason:  # nothing started, nothing contacted: the same answer whatever lies there
            self._closed = True
            self._error = ToolServerError(reason)
            raise ToolServerError(f"{self.spec.name}: {reason}")
        self._thread.start()
        if not self._ready.wait(timeout):
            self.close()
            raise ToolServerError(f"{self.spec.name}: the server did not connect within {timeout:g} s")
        if self._closed:
            raise ToolServerError(f"{self.spec.name}: could not connect ({self._why(self._error)})")
        return self

    def request(self, fn: Callable[[Client], Awaitable[Any]], timeout: float) -> Any:
        """Run `fn(client)` on the connection's loop; at most `timeout` seconds, then the connection closes."""
        if not self.alive:
            raise ToolServerError(f"{self.spec.name}: not connected ({_reason(self._error)})")
        future: concurrent.futures.Future = concurrent.futures.Future()
        with self._lock:
            self._loop.call_soon_threadsafe(self._queue.put_nowait, (fn, future))
            try:
                return future.result(timeout)
            except concurrent.futures.TimeoutError:
                self.close()  # a hung server: its in-flight call is cancelled with the connection
                raise ToolServerError(f"{self.spec.name}: no answer within {timeout:g} s") from None
            except ToolServerError:
                raise
            except Exception as exc:
                if isinstance(exc, MCPError) and exc.code == REQUEST_TIMEOUT:
                    self.close()  # the SDK's own deadline came first: a hung server all the same
                    raise ToolServerError(f"{self.spec.name}: no answer within {timeout:g} s") from None
                if isinstance(exc, MCPError) and exc.code == CONNECTION_CLOSED:
                    self.close()  # the server went away: the next request starts it again
                if not self.alive:
                    raise ToolServerError(
                        f"{self.spec.name}: the server failed ({self._why(self._error or exc)})"
                    ) from exc
                raise ToolServerError(f"{self.spec.name}: {self._why(exc)}") from exc

    def list_tools(self, timeout: float) -> list[ListedTool]:
        async def fetch(client: Client) -> list[ListedTool]:
            out, cursor = [], None
            for _ in range(50):  # pages; a server that never stops paging is cut off
                page = await client.list_tools(cursor=cursor)
                for t in page.tools:
                    hints = t.annotations
                    out.append(
                        ListedTool(
                            name=t.name,
                            description=t.description or "",
                            input_schema=t.input_schema or {"type": "object", "properties": {}},
                            output_schema=t.output_schema,
                            read_only=bool(hints and hints.read_only_hint),
                        )
                    )
                cursor = page.next_cursor
                if not cursor:
                    break
            return out

        return self.request(fetch, timeout)

    def call(self, name: str, arguments: dict, timeout: float, output_schema: dict | None = None) -> CallResult:
        async def send(client: Client):
            return await client.call_tool(name, arguments, read_timeout_seconds=timeout)

        return read_result(self.request(send, timeout), output_schema)

    def close(self) -> None:
        if self._loop is not None and not self._closed and self._task is not None:
            try:
                self._loop.call_soon_threadsafe(self._task.cancel)
            except RuntimeError:  # the loop already ended
                pass
        if self._thread.is_alive() and threading.current_thread() is not self._thread:
            self._thread.join(10)
        self._closed = True


def _reason(exc: BaseException | None) -> str:
    if exc is None:
        return "no reason given"
    if isinstance(exc, BaseExceptionGroup):
        return "; ".join(dict.fromkeys(_reason(e) for e in exc.exceptions))
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


# --- what may be reached ----------------------------------------------------------------------

_POLICY: Callable[[ServerSpec], str] | None = None


def set_policy(check: Callable[[ServerSpec], str] | None) -> None:
    """`check(spec)` says why a spec may not be connected to ("" when it may); run before every connection."""
    global _POLICY
    _POLICY = check


def refusal(spec: ServerSpec) -> str:
    return spec.refused or (_POLICY(spec) if _POLICY is not None else "")


# --- one connection per server per process ------------------------------------------------

_POOL: dict[tuple, Connection] = {}
_POOL_LOCK = threading.Lock()


def connection(spec: ServerSpec) -> Connection:
    """This process's open connection to `spec`, opened (again) when there is none or it died, within
    the spec's connect timeout."""
    reason = refusal(spec)
    if reason:  # an open connection is not kept past a limit either
        raise ToolServerError(f"{spec.name}: {reason}")
    with _POOL_LOCK:
        conn = _POOL.get(spec.key)
        if conn is not None and conn.alive:
            return conn
        if conn is not None and conn.pid == os.getpid():
            conn.close()
        conn = _POOL[spec.key] = Connection(spec)
    return conn.open()


def close_all() -> None:
    """Close this process's connections (tests; a worker shutting down)."""
    with _POOL_LOCK:
        conns = [c for c in _POOL.values() if c.pid == os.getpid()]
        _POOL.clear()
    for c in conns:
        c.close()


def probe(
    spec: ServerSpec,
    *,
    timeout: float,
    samples: list[tuple[str, dict]] | None = None,
    may_call: Callable[[ListedTool], bool] = lambda tool: tool.read_only,
    errlog=None,
) -> tuple[list[ListedTool], list[CallResult | str | None]]:
    """Connect afresh, list the tools and make the sample calls in the order given; close.

    One outcome per sample, in its place: a `CallResult`, a failure (a string), or None when the
    tool is not listed or `may_call` forbids it. A sample that kills the server costs only its own
    result: the next one starts a fresh connection. A connection or listing failure raises
    `ToolServerError`; `errlog` receives a stdio server's stderr for the caller to show."""
    conn = Connection(spec, errlog).open()
    try:
        tools = conn.list_tools(timeout)
        by_name = {t.name: t for t in tools}
        results: list[CallResult | str | None] = []
        for name, arguments in samples or []:
            if name not in by_name or not may_call(by_name[name]):
                results.append(None)
                continue
            try:
                if not conn.alive:
                    conn.close()
                    conn = Connection(spec, errlog).open()
                results.append(conn.call(name, arguments, timeout, by_name[name].output_schema))
            except ToolServerError as exc:
                results.append(str(exc))
        return tools, results
    finally:
        conn.close()


def stderr_tail(errlog, limit: int = STDERR_TAIL) -> str:
    """The last `limit` characters of a server's captured stderr, from a line's start where possible."""
    if errlog is None:
        return ""
    errlog.flush()
    errlog.seek(0)
    text = errlog.read()
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    text = text.strip()
    if len(text) > limit:
        text = text[-limit:]
        text = text[text.find("\n") + 1 :] if "\n" in text[:200] else text
    return text
