"""Wall-clock spans of a task's stages, for the realistic benchmark's breakdown.

Installed only in the benchmark's worker (`bench.benchworker`, when `SUNDRY_REALBENCH_STAGES` is
set): it wraps a few of Sundry's functions by name, so the product's code carries no timing of its
own. Each wrapped call appends (stage, start, end) on `time.time()` — the clock the model server,
the web process and the customers' client share — to the running task's list, which the worker
writes beside the task's start and end. Spans nest (a push inside a commit); the report reads each.

A wrapper costs two clock reads and an append (about a microsecond): nothing beside a step's
tens of milliseconds.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import threading
import time

_spans: list[tuple[str, float, float]] = []


def take() -> list[tuple[str, float, float]]:
    """The spans recorded since the last take (the task's), oldest first."""
    out = list(_spans)
    _spans.clear()
    return out


def clear() -> None:
    _spans.clear()


def _name(name: str) -> str:
    """Spans from a thread other than the task's (the heartbeat's, a records read's) are marked `~`."""
    return name if threading.current_thread() is threading.main_thread() else f"~{name}"


def _timed(fn, name: str):
    if inspect.iscoroutinefunction(fn):

        @functools.wraps(fn)
        async def timed_async(*args, **kwargs):
            began = time.time()
            try:
                return await fn(*args, **kwargs)
            finally:
                _spans.append((_name(name), began, time.time()))

        return timed_async

    @functools.wraps(fn)
    def timed(*args, **kwargs):
        began = time.time()
        try:
            return fn(*args, **kwargs)
        finally:
            _spans.append((_name(name), began, time.time()))

    return timed


class _TimedContext:
    """A context manager's entering and leaving, each its own span (`name:enter`, `name:exit`)."""

    def __init__(self, inner, name: str):
        self.inner, self.name = inner, name

    def __enter__(self):
        began = time.time()
        try:
            return self.inner.__enter__()
        finally:
            _spans.append((_name(f"{self.name}:enter"), began, time.time()))

    def __exit__(self, *exc):
        began = time.time()
        try:
            return self.inner.__exit__(*exc)
        finally:
            _spans.append((_name(f"{self.name}:exit"), began, time.time()))


def _timed_context(fn, name: str):
    @functools.wraps(fn)
    def made(*args, **kwargs):
        return _TimedContext(fn(*args, **kwargs), name)

    return made


# (module, attribute path, stage name, kind). A function is wrapped where its callers look it up:
# the module a call site names (`claims.release`) or the caller's own global (`step.lane_snapshot`).
STAGES = [
    ("django.db.backends.base.base", "BaseDatabaseWrapper.connect", "db.connect", "call"),
    ("django.db.backends.base.base", "BaseDatabaseWrapper.close", "db.close", "call"),
    ("sundry.agent.loop", "_open", "open", "call"),
    ("sundry.agent.loop", "toolbox_for", "toolbox", "call"),
    ("sundry.agent.loop", "_inputs_after", "inputs_after", "call"),
    ("sundry.agent.loop", "agent_step", "step", "call"),
    ("sundry.agent.claims", "release", "release", "call"),
    ("sundry.agent.claims", "renew", "renew", "call"),
    ("sundry.agent.claims", "heartbeat", "heartbeat", "context"),
    ("sundry.agent.step", "lane_snapshot", "lanes", "call"),
    ("sundry.agent.step", "assemble_request", "assembly", "call"),
    ("sundry.agent.step", "_claim_facts", "facts", "call"),
    ("sundry.agent.step", "_commit", "commit", "call"),
    ("sundry.agent.answer", "obtain", "obtain", "call"),
    ("sundry.agent.recordstates", "Ahead.__init__", "records.start", "call"),
    ("sundry.agent.recordstates", "Ahead.join", "records.join", "call"),
    ("sundry.agent.provider.gateway", "Gateway.call", "gateway", "call"),
    ("sundry.agent.provider.gateway", "_send", "send", "call"),
    ("sundry.agent.streaming", "ReplyStream.typing", "stream.typing", "call"),
    ("sundry.agent.streaming", "ReplyStream.written", "stream.written", "call"),
    ("sundry.agent.streaming", "ReplyStream.finish", "stream.finish", "call"),
    # Inside a step's commit: its tool calls and their pieces, the one-statement reply, the step's record.
    ("sundry.agent.step", "run_calls", "calls", "call"),
    ("sundry.agent.calls", "_judge", "call guards", "call"),
    ("sundry.agent.calls", "execute", "execute", "call"),
    ("sundry.agent.calls", "apply_effects", "effects", "call"),
    ("sundry.context.services", "ledger_harvest", "harvest", "call"),
    ("sundry.agent.calls", "turn_append", "turn append (calls)", "call"),
    ("sundry.agent.step", "_reply_at_once", "reply at once", "call"),
    ("sundry.agent.step", "_record_step", "step record", "call"),
    # Every statement, and every commit: the database's share of a stage.
    ("django.db.backends.utils", "CursorWrapper.execute", "sql", "call"),
    ("django.db.backends.utils", "CursorWrapper.executemany", "sql", "call"),
    ("django.db.backends.base.base", "BaseDatabaseWrapper.commit", "db.commit", "call"),
    ("sundry.tickets.events", "_push", "push", "call"),
    ("sundry.tickets.events", "group_send", "group_send", "call"),
]


def install(stages=STAGES) -> list[str]:
    """Wrap each stage's function; returns the stages not found (a renamed function)."""
    missing = []
    for module_name, path, name, kind in stages:
        try:
            owner = importlib.import_module(module_name)
            *parents, attr = path.split(".")
            for part in parents:
                owner = getattr(owner, part)
            fn = inspect.getattr_static(owner, attr) if parents else getattr(owner, attr)
        except (ImportError, AttributeError):
            missing.append(name)
            continue
        setattr(owner, attr, _timed_context(fn, name) if kind == "context" else _timed(fn, name))
    return missing
