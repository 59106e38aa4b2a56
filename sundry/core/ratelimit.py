"""Fixed-window rate limits on Django's cache (Redis when REDIS_URL is set, so every web
process shares the counts; the local-memory cache in the single-process default).

One person cannot queue model calls faster than a person writes: each accepted
message or new ticket may start an agent run.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

from django.core.cache import cache, caches
from django.core.cache.backends.redis import RedisCache


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


try:
    from redis.exceptions import RedisError as _CacheDown
except ImportError:  # no Redis client installed: the local-memory cache cannot be down

    class _CacheDown(Exception):
        pass


log = logging.getLogger("sundry.ratelimit")


def allow(scope: str, who: object, rate: Rate) -> bool:
    """Count one more request by `who` under `scope`; False once the window's count is used up.

    With the cache's Redis down the request is let through (and logged): a customer's message
    is stored rather than refused because the counter is out of reach."""
    try:
        return _count(scope, who, rate)
    except _CacheDown as exc:
        log.warning("rate limit %s not counted (cache unavailable: %s)", scope, exc)
        return True


def _count(scope: str, who: object, rate: Rate) -> bool:
    window = int(time.time() // rate.seconds)
    key = f"rate:{scope}:{who}:{window}"
    backend = caches["default"]  # `cache` is a proxy to it, which isinstance() does not see through
    if isinstance(backend, RedisCache):
        return _count_on_redis(backend._cache.get_client(write=True), backend.make_and_validate_key(key), rate)
    # add() creates the counter with its expiry only if absent; incr() is atomic on Redis.
    if cache.add(key, 1, timeout=rate.seconds + 1):
        return True
    try:
        return cache.incr(key) <= rate.count
    except ValueError:  # expired between add() and incr(): a new window
        cache.add(key, 1, timeout=rate.seconds + 1)
        return True


def _count_on_redis(client, key: str, rate: Rate) -> bool:
    """The count in one round trip: MULTI, a SET that makes the counter (at 0, with its expiry)
    only if absent, INCR, EXEC, sent together and run as one. Through the cache's add() and
    incr() it took three (SET NX, then incr()'s EXISTS and INCR) on every message posted."""
    pipe = client.pipeline(transaction=True)
    pipe.set(key, 0, ex=rate.seconds + 1, nx=True)
    pipe.incr(key)
    _, count = pipe.execute()
    return count <= rate.count
