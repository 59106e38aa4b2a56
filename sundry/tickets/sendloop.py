"""One event loop per process that sends the pushes of synchronous code.

`async_to_sync` from a thread with no loop of its own runs each call on a new event loop, and
channels_redis's pub/sub layer keeps its Redis connections per loop: every push then opened a
connection, sent, and closed it again (about 5 ms of a step's time, several times a step). Here the
pushes of a process share one loop on a daemon thread, so its connection to Redis is kept and a push
is one PUBLISH per group.

Per process id: a Celery prefork child inherits the parent's loop object but not its thread, and
starts its own on its first push.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import threading
from collections.abc import Coroutine

_lock = threading.Lock()
_loop: asyncio.AbstractEventLoop | None = None
_pid = 0


def _running_loop() -> asyncio.AbstractEventLoop:
    global _loop, _pid
    with _lock:
        if _loop is None or _pid != os.getpid():
            loop = asyncio.new_event_loop()
            threading.Thread(target=loop.run_forever, name="sundry-pushes", daemon=True).start()
            _loop, _pid = loop, os.getpid()
        return _loop


def submit(coro: Coroutine) -> concurrent.futures.Future:
    """Start `coro` on the process's push loop and return at once (its future says how it ended)."""
    return asyncio.run_coroutine_threadsafe(coro, _running_loop())


def run(coro: Coroutine, timeout: float) -> None:
    """Run `coro` on the process's push loop and wait for it; raises what it raised, or TimeoutError
    (the coroutine is then cancelled) after `timeout` seconds."""
    future = asyncio.run_coroutine_threadsafe(coro, _running_loop())
    try:
        future.result(timeout)
    except TimeoutError:
        future.cancel()
        raise
