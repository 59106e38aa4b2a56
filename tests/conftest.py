"""Suite-wide fixtures.

The suite runs on whatever the environment names, exactly as the app does:
settings read DATABASE_URL and REDIS_URL at import. `bash bin/test` exports
both when PostgreSQL and Redis answer, so the tests that depend on row locks,
the Redis channel layer or Celery run against the real servers; with neither
set the suite runs on the embedded default (SQLite, in-memory layer) and the
Redis-only tests skip, saying why. Shared factories live in tests/factories.py.
"""

from __future__ import annotations

import os
import random

import pytest
from channels.layers import channel_layers
from django.conf import settings

# One prefix per run: concurrent runs, and an app running on the same Redis,
# never see (or flush) each other's channel keys.
TEST_CHANNEL_PREFIX = f"sundry-test-{os.getpid()}"


def pytest_report_header(config):
    db = settings.DATABASES["default"]
    layer = settings.CHANNEL_LAYERS["default"]["BACKEND"].rsplit(".", 1)[-1]
    lines = [
        f"sundry: database {db['ENGINE'].rsplit('.', 1)[-1]}, channel layer {layer}, "
        f"background {settings.BACKGROUND_MODE}"
    ]
    if os.environ.get("SUNDRY_TEST_ORDER"):
        lines.append(f"sundry: test order {os.environ['SUNDRY_TEST_ORDER']}")
    return lines


# Tests that share one worker when the suite runs in parallel (bin/test: pytest-xdist,
# --dist loadgroup), in order. The fault tests each start a web process, a worker and private
# servers and time recoveries against bounds: they run in two lines beside the rest, not four at
# once — one line for the agent-run faults, one for the server outages — because one line alone
# (about 14 minutes summed) was the whole suite's critical path.
SERIAL_GROUPS = {
    "faults": {
        "test_run_faults.py": "faults-runs",
        "test_step_retries.py": "faults-runs",
        "test_database_faults.py": "faults-servers",
        "test_redis_faults.py": "faults-servers",
    },
}


def pytest_itemcollected(item):
    files = SERIAL_GROUPS.get(_tier(item.nodeid))
    if files is not None:
        name = item.nodeid.split("::")[0].rsplit("/", 1)[-1]
        # A new fault file joins the first line until someone places it.
        item.add_marker(pytest.mark.xdist_group(files.get(name, next(iter(files.values())))))


def _tier(nodeid: str) -> str:
    """tests/<tier>/… → <tier>; a top-level test file is its own tier."""
    parts = nodeid.split("::")[0].split("/")
    return parts[1] if len(parts) > 2 else parts[-1].removesuffix(".py")


_TIER_SECONDS: dict[str, float] = {}


def pytest_runtest_logreport(report):
    # On the controlling process, every worker's reports arrive here: setup, call and teardown.
    _TIER_SECONDS[_tier(report.nodeid)] = _TIER_SECONDS.get(_tier(report.nodeid), 0.0) + report.duration


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    """Each tier's time (setup, call and teardown summed over its tests): where the run's time went."""
    if not _TIER_SECONDS or hasattr(config, "workerinput"):
        return
    terminalreporter.write_sep("-", "time per tier (summed; tiers run in parallel under -n)")
    for tier, seconds in sorted(_TIER_SECONDS.items(), key=lambda kv: -kv[1]):
        terminalreporter.write_line(f"{seconds:8.1f} s  {tier}")


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config, items):
    """SUNDRY_TEST_ORDER=reverse, or shuffle:<seed>, runs the suite in another order.

    Tests must not depend on what ran before them; this shows it. Applied last,
    after pytest-django's own ordering, so no order is assumed.
    """
    if hasattr(config, "workerinput"):  # a pytest-xdist worker: every worker sorts alike
        # Under pytest-xdist the groups that stay on one worker go out first: the longest of them
        # (the fault tests) would otherwise be the run's tail.
        items.sort(key=lambda item: 0 if item.get_closest_marker("xdist_group") else 1)
    order = os.environ.get("SUNDRY_TEST_ORDER", "").strip()
    if not order:
        return
    if order == "reverse":
        items.reverse()
    elif order.startswith("shuffle:"):
        random.Random(order.removeprefix("shuffle:")).shuffle(items)
    else:
        raise pytest.UsageError(f"SUNDRY_TEST_ORDER={order!r}: use 'reverse' or 'shuffle:<seed>'")


@pytest.fixture(scope="session", autouse=True)
def _isolated_channel_prefix():
    """Every Redis key this process makes — channel groups, presence marks, cache and rate-limit
    counts — carries its own prefix: parallel workers (pytest-xdist) share one Redis, and their
    tickets have the same primary keys in their own test databases."""
    config = settings.CHANNEL_LAYERS["default"].setdefault("CONFIG", {})
    if "prefix" in config:
        config["prefix"] = TEST_CHANNEL_PREFIX
    settings.CHANNEL_PREFIX = TEST_CHANNEL_PREFIX
    cache = settings.CACHES.get("default", {})
    if "KEY_PREFIX" in cache:
        cache["KEY_PREFIX"] = TEST_CHANNEL_PREFIX


# Hashing a password the production way costs about a quarter of a CPU-second (PBKDF2, a million
# rounds), and the suite makes hundreds of users. Tests hash with MD5 instead (Django's advice for
# test suites); PBKDF2 stays listed, for the few passwords a server process started by a test must
# verify (it runs the production settings).
TEST_PASSWORD_HASHERS = [
    "django.contrib.auth.hashers.MD5PasswordHasher",
    "django.contrib.auth.hashers.PBKDF2PasswordHasher",
]


@pytest.fixture(scope="session", autouse=True)
def _fast_password_hashing():
    from django.test import override_settings

    with override_settings(PASSWORD_HASHERS=TEST_PASSWORD_HASHERS):  # its signal clears the hasher cache
        yield


@pytest.fixture(scope="session")
def django_db_modify_db_settings(django_db_modify_db_settings_parallel_suffix):
    """On PostgreSQL, name the test database per run so two runs never collide."""
    db = settings.DATABASES["default"]
    if db["ENGINE"].endswith("postgresql"):
        test = db.setdefault("TEST", {})
        test["NAME"] = f"{test.get('NAME') or 'test_' + db['NAME']}_{os.getpid()}"


@pytest.fixture(scope="session")
def django_db_setup(django_db_setup, django_db_blocker):
    """Before the test database is dropped, end sessions other threads left open.

    Consumers and the background pool query from their own threads; a
    connection kept alive there would make DROP DATABASE fail and leave the
    database behind.
    """
    yield
    from django.db import connection

    if connection.vendor != "postgresql":
        return
    with django_db_blocker.unblock(), connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            " WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )


@pytest.fixture(autouse=True)
def fresh_channel_layer():
    """Each test gets its own channel layer instance and an empty render cache.

    A layer caches connections per event loop and buffers messages, and each
    async test runs on its own loop, so sharing one across tests leaks state.
    The Redis layer is pub/sub: it leaves no keys behind, and its per-loop
    connections close with their loop.
    """
    from sundry.live import consumers, panels

    channel_layers.backends.clear()
    panels.CACHE.clear()
    consumers.RENDERS = consumers._Renders()
    yield
    channel_layers.backends.clear()
    panels.CACHE.clear()
    consumers.RENDERS = consumers._Renders()


@pytest.fixture
def redis_url() -> str:
    url = os.environ.get("REDIS_URL", "")
    if not url:
        pytest.skip("needs a real Redis: set REDIS_URL (bash bin/test does when Redis answers)")
    return url


_LOOPBACK = {"127.0.0.1", "localhost", "::1", "0.0.0.0", "testserver"}
_PROVIDER_KEYS = [
    "OPENAI_API_KEY",
    "ANTHROPIC_API_KEY",
    "SUNDRY_OPENAI_COMPAT_API_KEY",
    "SUNDRY_OPENAI_COMPAT_BASE_URL",
    "OLLAMA_BASE_URL",
    "OLLAMA_API_KEY",
]


@pytest.fixture(scope="session", autouse=True)
def _never_reach_a_network_model():
    """Tests never reach a network model: provider keys are cleared and only loopback answers.

    Every model in the suite is the offline model, a ScriptedModel, or a
    server a test starts on 127.0.0.1.
    """
    import socket

    patch = pytest.MonkeyPatch()
    for key in _PROVIDER_KEYS:
        patch.delenv(key, raising=False)
    real_getaddrinfo, real_connect = socket.getaddrinfo, socket.socket.connect

    def getaddrinfo(host, *args, **kwargs):
        name = host.decode() if isinstance(host, bytes) else host
        if name is not None and name not in _LOOPBACK and not str(name).startswith("127."):
            raise OSError(f"test network guard: {name} is not loopback")
        return real_getaddrinfo(host, *args, **kwargs)

    def connect(self, address):
        if isinstance(address, tuple) and address[0] not in _LOOPBACK and not str(address[0]).startswith("127."):
            raise OSError(f"test network guard: {address[0]} is not loopback")
        return real_connect(self, address)

    patch.setattr(socket, "getaddrinfo", getaddrinfo)
    patch.setattr(socket.socket, "connect", connect)
    yield
    patch.undo()


@pytest.fixture(autouse=True)
def _generous_rate_limits(settings):
    """Rate limits are tested where they are the subject (tests/core/test_security.py, which
    sets its own); elsewhere a test posting many messages as one customer is not abuse, and
    counts kept in a shared Redis must not leak from one run into the next."""
    settings.RATE_CUSTOMER_MESSAGES = "100000/m"
    settings.RATE_CUSTOMER_TICKETS = "100000/h"
