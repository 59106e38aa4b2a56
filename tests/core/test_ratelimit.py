"""The rate limit on Redis, as deployed: the same limit at the window's edge as the cache's
add()/incr() gave, in one round trip a count (docs/benchmarks.md, "the rate limit in one round trip")."""

from __future__ import annotations

import uuid

import pytest
from django.core.cache import caches
from django.core.cache.backends.redis import RedisCache
from redis.connection import AbstractConnection

from sundry.core import ratelimit
from sundry.core.ratelimit import Rate, allow

on_redis = pytest.mark.skipif(
    not isinstance(caches["default"], RedisCache), reason="the Redis cache (REDIS_URL) is the subject"
)


@pytest.fixture
def sends(monkeypatch):
    """Each write to Redis: a round trip (a pipeline's commands go in one write)."""
    sent = []
    real = AbstractConnection.send_packed_command

    def counted(self, command, check_health=True):
        sent.append(command)
        return real(self, command, check_health)

    monkeypatch.setattr(AbstractConnection, "send_packed_command", counted)
    return sent


def _key(who, rate):
    backend = caches["default"]
    window = int(ratelimit.time.time() // rate.seconds)
    return backend.make_and_validate_key(f"rate:test:{who}:{window}"), backend._cache.get_client(write=True)


@on_redis
def test_a_count_on_redis_is_one_round_trip_and_the_limit_holds_at_its_edge(sends):
    rate, who = Rate(3, 86400), uuid.uuid4().hex
    allow("test", uuid.uuid4().hex, rate)  # the connection's own opening (HELLO, CLIENT …) is not the count's
    answers = []
    for _ in range(5):
        before = len(sends)
        answers.append(allow("test", who, rate))
        assert len(sends) - before == 1  # the cache's add() and incr() sent three
    assert answers == [True, True, True, False, False]
    assert allow("test", uuid.uuid4().hex, rate)  # another person's count is their own
    key, client = _key(who, rate)
    assert int(client.get(key)) == 5  # refused requests count too, as they did
    assert 0 < client.ttl(key) <= rate.seconds + 1  # the window's counter expires with it


@on_redis
def test_a_counter_made_by_the_cache_before_is_counted_on(sends):
    """A counter the earlier add() made (a plain integer under the cache's key) is the same counter:
    a deploy in the middle of a window neither resets nor breaks anyone's count."""
    rate, who = Rate(3, 86400), uuid.uuid4().hex
    window = int(ratelimit.time.time() // rate.seconds)
    assert caches["default"].add(f"rate:test:{who}:{window}", 1, timeout=rate.seconds + 1)
    assert [allow("test", who, rate) for _ in range(3)] == [True, True, False]


@on_redis
def test_with_redis_down_a_message_is_let_through(monkeypatch):
    from redis.exceptions import ConnectionError as RedisConnectionError

    def down(self, *args, **kwargs):
        raise RedisConnectionError("refused")

    monkeypatch.setattr(AbstractConnection, "connect", down)
    monkeypatch.setattr(AbstractConnection, "send_packed_command", down)
    assert allow("test", uuid.uuid4().hex, Rate(1, 60))
