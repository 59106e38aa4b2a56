"""A least-recently-used map bounded by the bytes its values hold.

The live panels keep renderings here so a push to many watchers renders once.
A rendering of a long ticket is large (a 584-turn conversation is about a
megabyte), so a bound by entry count bounds nothing: entries are charged
their size, and the least recently used go first once the total passes the
limit. An entry larger than the whole limit is not kept.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Callable, Hashable


class ByteBoundedCache:
    def __init__(self, limit: Callable[[], int]):
        self._limit = limit  # read at every insertion, so a settings change applies at once
        self._entries: "OrderedDict[Hashable, tuple[object, int]]" = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def get(self, key):
        with self._lock:
            hit = self._entries.get(key)
            if hit is None:
                return None
            self._entries.move_to_end(key)
            return hit[0]

    def put(self, key, value, size: int) -> None:
        with self._lock:
            old = self._entries.pop(key, None)
            if old is not None:
                self._bytes -= old[1]
            if size <= self._limit():
                self._entries[key] = (value, size)
                self._bytes += size
            self._evict()

    def charge(self, key, value, extra: int) -> None:
        """`value`, still held under `key`, grew (or shrank) by `extra` bytes."""
        with self._lock:
            hit = self._entries.get(key)
            if hit is None or hit[0] is not value:
                return
            self._entries[key] = (value, hit[1] + extra)
            self._bytes += extra
            self._evict()

    def _evict(self) -> None:
        limit = self._limit()
        while self._bytes > limit and self._entries:
            _, (_, size) = self._entries.popitem(last=False)
            self._bytes -= size

    @property
    def nbytes(self) -> int:
        return self._bytes

    def __len__(self) -> int:
        return len(self._entries)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._bytes = 0
