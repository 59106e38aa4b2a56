"""Run a Celery task after the current transaction commits.

With a broker configured the task goes to Celery workers. Without one (the
embedded default) the same task body runs on a small in-process thread pool,
still after commit and still off the request path. "deferred" holds tasks until
`wait_idle()` runs them in the caller's thread: a benchmark uses it so the work
a step queues is timed apart from the step, as its own worker process would be.
"""

from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor

from django.conf import settings
from django.db import close_old_connections, transaction

log = logging.getLogger("sundry.background")
_executor: ThreadPoolExecutor | None = None
_deferred: list = []


def _pool() -> ThreadPoolExecutor:
    global _executor
    if _executor is None:
        _executor = ThreadPoolExecutor(max_workers=2, thread_name_prefix="sundry-bg")
    return _executor


def _run_locally(task, args, kwargs):
    close_old_connections()
    try:
        task.apply(args=args, kwargs=kwargs, throw=True)
    except Exception:  # the task records its own failure; the thread must not die silently
        log.exception("in-process task %s failed", task.name)
    finally:
        close_old_connections()


def wait_idle(timeout: float = 60) -> None:
    """Let queued in-process work finish (a management command calls this before it exits)."""
    global _executor
    while _deferred:
        task, args, kwargs = _deferred.pop(0)
        try:
            task.apply(args=args, kwargs=kwargs, throw=True)
        except Exception:
            log.exception("deferred task %s failed", task.name)
    if _executor is not None:
        pool, _executor = _executor, None
        pool.shutdown(wait=True, cancel_futures=False)


def enqueue_on_commit(task, *args, **kwargs) -> None:
    """Queue `task(*args, **kwargs)` once the surrounding transaction commits."""
    if settings.BACKGROUND_MODE == "celery":
        # Robust: a broker that is down must not turn a committed write into an error page.
        # What the task was for is on record (the agent's outbox) and queued again later.
        transaction.on_commit(lambda: task.apply_async(args=args, kwargs=kwargs), robust=True)
    elif settings.BACKGROUND_MODE == "deferred":
        transaction.on_commit(lambda: _deferred.append((task, args, kwargs)))
    else:
        transaction.on_commit(lambda: _pool().submit(_run_locally, task, args, kwargs))
