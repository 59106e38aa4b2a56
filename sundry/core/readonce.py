"""Reads shared by the panels of one rendering.

A staff rendering shows some rows in several panels: the current summary in the
conversation and the summary panel, the compaction runs in three, the pending
held actions in two. Inside `shared_reads()` each such read happens once;
outside it (a single panel rendered for a view) `once` simply reads.
"""

from __future__ import annotations

import contextlib
from contextvars import ContextVar

_reads: ContextVar[dict | None] = ContextVar("sundry_shared_reads", default=None)


@contextlib.contextmanager
def shared_reads():
    token = _reads.set({})
    try:
        yield
    finally:
        _reads.reset(token)


def once(key: tuple, read):
    """`read()`, or what it returned for the same key earlier in this rendering. Callers must not mutate it."""
    memo = _reads.get()
    if memo is None:
        return read()
    if key not in memo:
        memo[key] = read()
    return memo[key]
