"""Wait until the database (and Redis, when configured) accept connections.

Containers start in any order; the web and worker entries run this first so a
slow PostgreSQL or Redis means a short wait, not a crash loop.
"""

from __future__ import annotations

import time

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.db import connections
from django.db.utils import OperationalError


def _database_ready() -> str | None:
    """None when the default database answers, else the reason it does not."""
    connection = connections["default"]
    try:
        connection.ensure_connection()
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
        return None
    except OperationalError as exc:
        connection.close()
        return f"database: {exc}".strip()


def _redis_ready() -> str | None:
    if not settings.REDIS_URL:
        return None
    import redis

    try:
        client = redis.Redis.from_url(settings.REDIS_URL, socket_connect_timeout=2, socket_timeout=2)
        try:
            client.ping()
        finally:
            client.close()
        return None
    except redis.RedisError as exc:
        return f"redis: {exc}"


class Command(BaseCommand):
    help = "Block until the database and, if REDIS_URL is set, Redis answer."

    def add_arguments(self, parser):
        parser.add_argument("--timeout", type=float, default=60.0, help="Seconds to wait before failing.")
        parser.add_argument("--interval", type=float, default=1.0, help="Seconds between attempts.")

    def handle(self, *args, timeout: float, interval: float, **options):
        deadline = time.monotonic() + timeout
        while True:
            problems = [p for p in (_database_ready(), _redis_ready()) if p]
            if not problems:
                self.stdout.write("services ready")
                return
            if time.monotonic() >= deadline:
                raise CommandError(f"services not ready after {timeout:g}s: " + "; ".join(problems))
            self.stderr.write("waiting for " + "; ".join(problems))
            time.sleep(interval)
