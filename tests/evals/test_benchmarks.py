"""Benchmark helpers (figures are printed by `python -m bench`; nothing here is timed)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bench import benchmarks
from sundry.context import render
from sundry.evals import importers
from sundry.tooling.messages import Message, ModelRequest

FIXTURES = Path(__file__).parent / "fixtures"
ROOT = Path(__file__).resolve().parents[2]


def test_tile_repeats_a_ticket_without_breaking_calls_from_results():
    ticket = importers.tau2_results(FIXTURES / "tau2_retail_small.json")[0]
    long = benchmarks.tile(ticket, 200)
    assert 190 <= len(long.turns) <= 200
    assert [t.number for t in long.turns] == list(range(1, len(long.turns) + 1))
    call_ids = [c["id"] for t in long.turns if t.kind == "tool_call" for c in t.payload["calls"]]
    assert len(call_ids) == len(set(call_ids))  # unique per lap
    messages = render.turns_to_messages(long.turn_data())
    assert not any(m.content == render.MISSING_RESULT for m in messages)


def test_assembly_run_compacts_and_keeps_the_request_bounded():
    ticket = benchmarks.tile(importers.tau2_results(FIXTURES / "tau2_retail_small.json")[0], 300)
    fig = benchmarks.assembly_run(ticket)
    assert fig.compactions > 0 and fig.steps > 50
    assert fig.late_tokens < fig.full_late_tokens / 2


def test_instant_model_looks_up_then_replies():
    model = benchmarks.InstantModel()
    ask = ModelRequest(model="x", messages=[Message(role="user", content="Where is my order SU-40110?")])
    assert model.complete(ask).tool_calls[0].arguments == {"order_number": "SU-40110"}
    done = ModelRequest(model="x", messages=ask.messages + [Message(role="tool", content="{}", tool_call_id="a")])
    assert model.complete(done).text and not model.complete(done).tool_calls


@pytest.mark.services
@pytest.mark.parametrize("change", ["touch", "turn"])
def test_push_benchmark_delivers_every_version_to_every_client(redis_url, change):
    # The real thing at a small size: the web process, the Redis layer, raw websocket clients.
    bench = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "bench.pushbench",
            "--clients",
            "3,8",
            "--pushes",
            "3",
            "--timeout",
            "20",
            "--change",
            change,
            "--history",
            "6",
        ],
        cwd=ROOT,
        env={**os.environ, "DJANGO_SETTINGS_MODULE": "sundry.settings"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        stdout, stderr = bench.communicate(timeout=180)
    finally:
        bench.kill()
    assert bench.returncode == 0, stderr
    figures = json.loads(stdout.strip().splitlines()[-1])
    assert figures["layer"] == "channels_redis.pubsub.RedisPubSubChannelLayer"
    assert [(r["clients"], r["deliveries"], r["lost"]) for r in figures["rounds"]] == [(3, 9, 0), (8, 24, 0)]
    assert all(0 < r["p50_ms"] <= r["p99_ms"] for r in figures["rounds"])
    assert figures["server_memory_kb"]["8"]["VmHWM"] > 0
    url = os.environ.get("DATABASE_URL", "")
    if url.startswith(("postgres://", "postgresql://")):  # measured on the deployment's database, then dropped
        import psycopg

        assert "PostgreSQL" in figures["database"]
        with psycopg.connect(url) as conn:
            # Its own throwaway database, by name: others' benchmarks may share the server.
            assert figures["database_name"].startswith("sundry_pushbench_")
            left = conn.execute(
                "SELECT datname FROM pg_database WHERE datname = %s", [figures["database_name"]]
            ).fetchall()
        assert left == []
    else:
        assert "SQLite" in figures["database"]
