"""Sundry's Celery app, with each task's start and end written down, for the realistic benchmark.

    SUNDRY_REALBENCH_TASKLOG=tasks.jsonl celery -A bench.benchworker worker --pool prefork -c 4

The app is `sundry.celery.app` unchanged; this module only connects Celery's
documented signals. Each finished task appends one JSON line (name, first argument,
wall-clock start and end, and its duration on the process's monotonic clock),
timestamps taken before anything is written. `SUNDRY_REALBENCH_READY` names a
file created when the worker is ready to take tasks.

Before the pool forks, the parent imports the model client and loads the token
encodings: a long-lived worker has paid those once, and a few-minute run
must not charge them to its first steps.

With `SUNDRY_REALBENCH_STAGES` set, the worker also times a task's stages (`bench.stageclock`)
and writes them with the task as `spans`, and the time its message was published as
`published` (a header `bench.benchweb` stamps on the web process's publishes).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from celery.signals import task_postrun, task_prerun, worker_init, worker_ready

from bench import stageclock
from sundry.celery import app

__all__ = ["app"]

_started: dict[str, tuple[float, float]] = {}


@worker_init.connect
def _warm(**kwargs) -> None:
    import django

    django.setup()  # idempotent; Celery's Django fixup may not have run yet
    import pydantic_ai.direct  # noqa: F401
    import pydantic_ai.models.openai  # noqa: F401
    import pydantic_ai.providers.openai_compatible  # noqa: F401

    import sundry.agent.loop  # noqa: F401  (the task imports it on its first run)

    if os.environ.get("SUNDRY_REALBENCH_STAGES"):
        from bench import stageclock

        stageclock.install()
    try:
        from sundry.core.tokens import count_tokens

        for model in ("offline", "openai-compatible:offline"):
            count_tokens("warm", model=model)
    except Exception:  # a different token module: the first step loads what it needs
        pass


@worker_ready.connect
def _ready(**kwargs) -> None:
    path = os.environ.get("SUNDRY_REALBENCH_READY")
    if path:
        Path(path).write_text(str(os.getpid()))


@task_prerun.connect
def _task_start(task_id=None, **kwargs) -> None:
    _started[task_id] = (time.time(), time.monotonic())
    stageclock.clear()


def _published(task) -> float | None:
    """The publish time `bench.benchweb` stamped on the task's message (a custom header lands on the
    request as an attribute, or in its `headers`)."""
    request = getattr(task, "request", None)
    stamped = getattr(request, "bench_published", None)
    if stamped is None:
        stamped = (getattr(request, "headers", None) or {}).get("bench_published")
    return stamped


@task_postrun.connect
def _task_end(task_id=None, task=None, args=None, kwargs=None, state=None, **extra) -> None:
    ended, ended_mono = time.time(), time.monotonic()
    began, began_mono = _started.pop(task_id, (ended, ended_mono))
    path = os.environ.get("SUNDRY_REALBENCH_TASKLOG")
    if not path:
        return
    spans = stageclock.take()
    arg = args[0] if args else next(iter((kwargs or {}).values()), None)  # the ticket (agent) or run (compaction)
    line = json.dumps(
        {
            "task": getattr(task, "name", ""),
            "id": task_id,
            "arg": arg,
            "state": state,
            "pid": os.getpid(),
            "start": began,
            "end": ended,
            "seconds": ended_mono - began_mono,
            "published": _published(task),
            "spans": spans,
        }
    )
    with open(path, "a") as f:
        f.write(line + "\n")
