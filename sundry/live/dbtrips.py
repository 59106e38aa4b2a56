"""The sockets' calls to the database: Channels' `database_sync_to_async`, on pooled connections
in the web process.

Channels closes the connection around every such call where connections are not kept
(`CONN_MAX_AGE=0`, sundry/settings.py), so each socket's access check, snapshot render and
re-check connected to PostgreSQL afresh: about 30 % of the web process's time opening 500
sockets (docs/benchmarks.md). With `LIVE_DB_POOL` set (sundry/web.py sets it), a socket's calls
use a connection whose settings add Django's own pool (`OPTIONS["pool"]`, psycopg_pool):
closing it hands it back, and the next call takes it again, checked first. Only the sockets'
calls: requests and tasks still connect per request or task — with the whole process pooled,
requests went unanswered while every backend was being terminated (the pool's reconnect backs
off; tests/faults), which a connection per request rides out. The calls all run on asgiref's
one thread for thread-sensitive work outside a request, so the pool seldom holds more than one.
"""

from __future__ import annotations

from channels.db import DatabaseSyncToAsync
from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, connections
from django.db.utils import load_backend

_POOLED: dict = {}  # the pooled settings, made once from the configured database's


def _pooled_settings() -> dict | None:
    if not _POOLED:
        base = connections.settings[DEFAULT_DB_ALIAS]
        if not base["ENGINE"].endswith("postgresql"):
            _POOLED["settings"] = None
        else:
            _POOLED["settings"] = {
                **base,
                "OPTIONS": {
                    **base.get("OPTIONS", {}),
                    "pool": {
                        "min_size": 1,
                        "max_size": max(1, settings.LIVE_DB_POOL),
                        # A socket waiting longer than this for a connection fails its call (the
                        # page reconnects), as one whose database is out of reach does.
                        "timeout": 10,
                        "max_idle": 60,
                    },
                },
                # The pool checks a connection before handing it out (one empty query): one the
                # server closed meanwhile is replaced, not given to a socket.
                "CONN_HEALTH_CHECKS": True,
                "CONN_MAX_AGE": 0,  # the pool's own requirement; closing returns to the pool
            }
    return _POOLED["settings"]


def _use_pool() -> None:
    """Make this context's default connection one of the pool's (kept by the socket's task for
    its later calls; made again where it was not)."""
    pooled = _pooled_settings()
    if pooled is None:
        return
    current = getattr(connections._connections, DEFAULT_DB_ALIAS, None)
    if current is not None and current.settings_dict is pooled:
        return
    if current is not None:
        current.close()
    connections[DEFAULT_DB_ALIAS] = load_backend(pooled["ENGINE"]).DatabaseWrapper(pooled, DEFAULT_DB_ALIAS)


class DatabaseTrip(DatabaseSyncToAsync):
    """`database_sync_to_async` (stale connections closed around the call) on the pool's
    connections when `LIVE_DB_POOL` is set."""

    def thread_handler(self, loop, *args, **kwargs):
        if settings.LIVE_DB_POOL > 0:
            _use_pool()
        return super().thread_handler(loop, *args, **kwargs)


database_trip = DatabaseTrip
