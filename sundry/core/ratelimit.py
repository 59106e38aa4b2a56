"""Fixed-window rate limits on Django's cache (Redis when REDIS_URL is set, so every web
process shares the counts; the local-memory cache in the single-process default).

One person cannot queue model calls faster than a person writes: each accepted
message or new ticket may start an agent run.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from django.core.cache import cache


@dataclass(frozen=True)
class Rate:
    count: int
    seconds: int

    @classmethod
    def parse(cls, text: str) -> "Rate":
        """`"20/60"` → 20 per 60 seconds; `"20/m"`, `"10/h"` and `"200/d"` also read."""
        count, _, per = text.partition("/")
        units = {"s": 1, "m": 60, "h": 3600, "d": 86400}
        seconds = units[per] if per in units else int(per)
        if int(count) < 1 or seconds < 1:
            raise ValueError(f"a rate needs a positive count and period: {text!r}")
        return cls(int(count), seconds)


def allow(scope: str, who: object, rate: Rate) -> bool:
    """Count one more request by `who` under `scope`; False once the window's count is used up."""
    window = int(time.time() // rate.seconds)
    key = f"rate:{scope}:{who}:{window}"
    # add() creates the counter with its expiry only if absent; incr() is atomic on Redis.
    if cache.add(key, 1, timeout=rate.seconds + 1):
        return True
    try:
        return cache.incr(key) <= rate.count
    except ValueError:  # expired between add() and incr(): a new window
        cache.add(key, 1, timeout=rate.seconds + 1)
        return True
