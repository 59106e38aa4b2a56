"""The environment picks the services: embedded default vs PostgreSQL + Redis + Celery.

Settings are read once at import, so each case runs in a fresh interpreter.
The URLs point at hosts that are never contacted: building the settings, the
channel layer and its connection pool, and the Celery config opens no socket.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

PROBE = r"""
import json
import django
django.setup()
from django.conf import settings
from channels.layers import get_channel_layer
from sundry.celery import app

layer = get_channel_layer()
out = {
    "engine": settings.DATABASES["default"]["ENGINE"],
    "db_name": str(settings.DATABASES["default"]["NAME"]),
    "conn_max_age": settings.DATABASES["default"].get("CONN_MAX_AGE", 0),
    "layer": type(layer).__module__ + "." + type(layer).__name__,
    "background": settings.BACKGROUND_MODE,
    "broker": app.conf.broker_url,
    "acks_late": app.conf.task_acks_late,
    "reject_on_worker_lost": app.conf.task_reject_on_worker_lost,
    "serializer": app.conf.task_serializer,
    "result_serializer": app.conf.result_serializer,
    "accept_content": list(app.conf.accept_content),
    "time_limit": app.conf.task_time_limit,
    "visibility_timeout": (app.conf.broker_transport_options or {}).get("visibility_timeout"),
}
if settings.CHANNEL_LAYERS["default"]["BACKEND"] != "channels.layers.InMemoryChannelLayer":
    from channels_redis.utils import create_pool
    host = settings.CHANNEL_LAYERS["default"]["CONFIG"]["hosts"][0]
    pool = create_pool(host)  # what the layer builds for each event loop; opens no socket
    out["pool_socket_timeout"] = pool.connection_kwargs.get("socket_timeout")
    out["pool_host"] = pool.connection_kwargs.get("host")
print(json.dumps(out))
"""


def probe(tmp_path, **env) -> dict:
    clean = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "REDIS_URL"}}
    clean = {k: v for k, v in clean.items() if not k.startswith(("SUNDRY_", "CELERY_"))}
    clean.update(DJANGO_SETTINGS_MODULE="sundry.settings", SUNDRY_VAR_DIR=str(tmp_path / "var"), **env)
    done = subprocess.run(
        [sys.executable, "-c", PROBE], cwd=ROOT, env=clean, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_nothing_configured_runs_the_embedded_default(tmp_path):
    got = probe(tmp_path)
    assert got["engine"] == "django.db.backends.sqlite3"
    assert got["db_name"].startswith(str(tmp_path / "var"))
    assert got["layer"] == "channels.layers.InMemoryChannelLayer"
    assert got["background"] == "in-process"
    assert not got["broker"]


def test_urls_switch_to_postgres_redis_and_celery(tmp_path):
    got = probe(
        tmp_path,
        DATABASE_URL="postgres://sundry:pw@db.invalid:5432/sundry",
        REDIS_URL="redis://redis.invalid:6379/0",
    )
    assert got["engine"] == "django.db.backends.postgresql"
    assert got["conn_max_age"] == 0  # no persistent connections under ASGI, as Django's docs advise
    assert got["db_name"] == "sundry"
    assert got["layer"] == "channels_redis.pubsub.RedisPubSubChannelLayer"
    assert got["pool_host"] == "redis.invalid"
    assert got["background"] == "celery"
    assert got["broker"] == "redis://redis.invalid:6379/0"
    # Idle layer connections must outlive redis-py 8's 5 s default read timeout.
    assert got["pool_socket_timeout"] > 5


def test_celery_is_configured_for_at_least_once_json_tasks(tmp_path):
    got = probe(tmp_path, REDIS_URL="redis://redis.invalid:6379/0")
    assert got["acks_late"] is True
    assert got["reject_on_worker_lost"] is True
    assert got["serializer"] == got["result_serializer"] == "json"
    assert got["accept_content"] == ["json"]
    # Redelivery must not start while a task may still legally be running.
    assert got["time_limit"] and got["visibility_timeout"] > got["time_limit"]


def test_visibility_timeout_follows_a_raised_time_limit(tmp_path):
    got = probe(tmp_path, REDIS_URL="redis://redis.invalid:6379/0", SUNDRY_TASK_HARD_LIMIT="1200")
    assert got["time_limit"] == 1200
    assert got["visibility_timeout"] > 1200


def test_a_model_call_longer_than_a_claim_is_refused(tmp_path):
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("SUNDRY_", "CELERY_", "DATABASE_", "REDIS_"))}
    clean.update(
        DJANGO_SETTINGS_MODULE="sundry.settings",
        SUNDRY_VAR_DIR=str(tmp_path / "var"),
        SUNDRY_AGENT_CLAIM_TTL="60",
        SUNDRY_MODEL_CALL_TIMEOUT="90",
    )
    done = subprocess.run(
        [sys.executable, "-c", PROBE], cwd=ROOT, env=clean, capture_output=True, text=True, timeout=120
    )
    assert (
        done.returncode != 0 and "SUNDRY_MODEL_CALL_TIMEOUT must be shorter than SUNDRY_AGENT_CLAIM_TTL" in done.stderr
    )


TOOL_PROBE = r"""
import json
import django
django.setup()
from django.conf import settings
from sundry.toolservers import limits
example = "python examples/tau2_retail_mcp/server.py --data ../shared/corpora/tau2/domains/retail"
print(json.dumps({
    "prefix": settings.TOOL_ENV_PREFIX, "commands": settings.TOOL_COMMANDS, "hosts": settings.TOOL_HOSTS,
    "dirs": [str(d) for d in settings.TOOL_DECLARATIONS_DIRS],
    "example": limits.command_refusal(example, settings.BASE_DIR),
    "example_file": limits.declaration_refusal("examples/tau2_retail_mcp/retail.declarations.json"),
}))
"""


def tool_limits(tmp_path, **env) -> dict:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("SUNDRY_", "CELERY_", "DATABASE_", "REDIS_"))}
    clean.update(DJANGO_SETTINGS_MODULE="sundry.settings", SUNDRY_VAR_DIR=str(tmp_path / "var"), **env)
    done = subprocess.run(
        [sys.executable, "-c", TOOL_PROBE], cwd=ROOT, env=clean, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_tool_server_limits_default_to_the_example_in_development_and_no_stdio_in_production(tmp_path):
    dev = tool_limits(tmp_path)
    assert dev["prefix"] == "SUNDRY_TOOL_"
    assert dev["commands"] == ["python examples/tau2_retail_mcp/server.py"]
    assert dev["hosts"] == ["127.0.0.1", "localhost", "::1"]
    assert dev["dirs"] == [str(ROOT / "examples")]
    assert dev["example"] == dev["example_file"] == ""  # the README's demo command and file work as given
    prod = tool_limits(tmp_path, SUNDRY_ENV="production", SUNDRY_SECRET_KEY=secrets.token_urlsafe(64))
    assert prod["commands"] == [] and "stdio tool servers are off" in prod["example"]
    assert prod["hosts"] == dev["hosts"] and prod["prefix"] == dev["prefix"] and prod["example_file"] == ""


def test_tool_server_limits_are_read_from_the_environment(tmp_path):
    got = tool_limits(
        tmp_path,
        SUNDRY_TOOL_ENV_PREFIX="ACME_TOOLS_",
        SUNDRY_TOOL_COMMANDS="python -m acme.crm_mcp --tags a,b\n/usr/local/bin/billing-mcp",
        SUNDRY_TOOL_HOSTS="tools.acme.example:8443, [::1]:9000",
        SUNDRY_TOOL_DECLARATIONS_DIR=f"/srv/declarations{os.pathsep}declarations",
    )
    assert got["prefix"] == "ACME_TOOLS_"
    assert got["commands"] == ["python -m acme.crm_mcp --tags a,b", "/usr/local/bin/billing-mcp"]
    assert got["hosts"] == ["tools.acme.example:8443", "[::1]:9000"]
    assert got["dirs"] == ["/srv/declarations", str(ROOT / "declarations")]
    assert "SUNDRY_TOOL_COMMANDS" in got["example"] and "SUNDRY_TOOL_DECLARATIONS_DIR" in got["example_file"]
    commas = tool_limits(tmp_path, SUNDRY_TOOL_COMMANDS="python -m acme.crm_mcp, /usr/local/bin/billing-mcp")
    assert commas["commands"] == ["python -m acme.crm_mcp", "/usr/local/bin/billing-mcp"]
