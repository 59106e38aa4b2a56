"""The realistic benchmark and its model server (figures are printed by `python -m bench --realistic`).

Nothing here is timed: the checks are that the figures come from what the run
measured (counts agree with the database, the model's latency shows up where it
should and moves the share when it changes), never how fast anything was.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bench import realbench
from sundry.agent.loop import agent_run
from sundry.agent.provider.gateway import Gateway
from sundry.agent.services import customer_message_post
from sundry.desk.lifecycle import ticket_create
from sundry.evals import modelserver
from sundry.evals.modelserver import latency_for, to_completion, to_model_request
from sundry.shop.models import Order
from sundry.shop.offline import OfflineModel
from tests.factories import CustomerFactory, ParcelFactory, TicketClassFactory, paid_order

ROOT = Path(__file__).resolve().parents[2]


def test_latency_is_a_fixed_spread_per_request():
    bodies = [f'{{"n": {i}}}'.encode() for i in range(200)]
    seconds = [latency_for(b, seed=3, low=1.0, high=3.0) for b in bodies]
    assert all(1.0 <= s <= 3.0 for s in seconds)
    assert max(seconds) - min(seconds) > 1.5  # spread over the range, not one value
    assert seconds == [latency_for(b, seed=3, low=1.0, high=3.0) for b in bodies]  # same request, same time
    assert seconds != [latency_for(b, seed=4, low=1.0, high=3.0) for b in bodies]


def test_a_chat_completions_body_reads_back_as_the_offline_models_request():
    body = {
        "model": "offline",
        "messages": [
            {"role": "system", "content": "Rules"},
            {"role": "user", "content": [{"type": "text", "text": "Where is SU-40111?"}]},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "c1",
                        "type": "function",
                        "function": {"name": "get_order", "arguments": '{"order_number": "SU-40111"}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "c1", "content": '{"ok": true}'},
        ],
        "tools": [{"type": "function", "function": {"name": "get_order", "parameters": {"type": "object"}}}],
    }
    request = to_model_request(body)
    assert [m.role for m in request.messages] == ["system", "user", "assistant", "tool"]
    assert request.messages[1].content == "Where is SU-40111?"
    assert request.messages[2].tool_calls[0].arguments == {"order_number": "SU-40111"}
    assert request.messages[3].tool_name == "get_order"
    assert request.tools[0].name == "get_order"
    with pytest.raises(ValueError):
        to_model_request({"messages": [{"role": "narrator", "content": "x"}]})


class Recording:
    """The offline model, keeping every request it answered."""

    def __init__(self):
        self.model, self.requests = OfflineModel(), []

    def complete(self, request):
        self.requests.append(request)
        return self.model.complete(request)


@pytest.mark.django_db
def test_through_the_server_the_gateway_gets_what_the_offline_model_answers(monkeypatch):
    customer = CustomerFactory()
    paid_order(customer=customer, number="SU-40110", prices=(3000, 2000))
    shipped = paid_order(customer=customer, number="SU-40111", status=Order.Status.SHIPPED, prices=(4500,))
    ParcelFactory(order=shipped, status="in_transit")
    ticket = ticket_create(customer=customer.person, ticket_class=TicketClassFactory(approval_rules={}), subject="Help")
    recorder = Recording()
    for text in ("Where is my order SU-40111?", "The item from SU-40110 arrived broken, I want a refund."):
        customer_message_post(ticket=ticket, text=text, wake=False)
        agent_run(ticket.pk, gateway=Gateway(override=recorder))
    assert len(recorder.requests) >= 4
    server = modelserver.serve(0, seed=1, low=0.0, high=0.0)
    try:
        monkeypatch.setenv("SUNDRY_OPENAI_COMPAT_BASE_URL", f"http://127.0.0.1:{server.server_address[1]}/v1")
        monkeypatch.setenv("SUNDRY_OPENAI_COMPAT_API_KEY", "loopback")
        gateway = Gateway()
        for request in recorder.requests:
            direct = OfflineModel().complete(request)
            call = gateway.call(request, model="openai-compatible:offline", timeout=30)
            assert not call.response.offline and call.resolved.provider == "openai-compatible"
            assert call.response.text == direct.text
            assert [(c.name, c.arguments) for c in call.response.tool_calls] == [
                (c.name, c.arguments) for c in direct.tool_calls
            ]
    finally:
        server.shutdown()
    assert to_completion(direct, "m")["choices"][0]["finish_reason"] in ("stop", "tool_calls")


def _realbench(latency: float) -> dict:
    done = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "bench.realbench",
            "--slots",
            "2",
            "--tickets",
            "2",
            "--messages",
            "2",
            "--model-min",
            str(latency),
            "--model-max",
            str(latency),
            "--think-median",
            "0.3",
            "--think-min",
            "0.1",
            "--think-max",
            "0.5",
            "--duration",
            "60",
            "--reply-timeout",
            "60",
        ],
        cwd=ROOT,
        env={**os.environ, "DJANGO_SETTINGS_MODULE": "sundry.settings"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        out, err = done.communicate(timeout=240)
    finally:
        if done.poll() is None:
            done.kill()
    assert done.returncode == 0, err[-3000:]
    return json.loads(out.strip().splitlines()[-1])


@pytest.mark.services
def test_realistic_benchmark_reports_what_it_measured(redis_url):
    if realbench._postgres_bin() is None:
        pytest.skip("needs PostgreSQL's server binaries (initdb, pg_ctl) to start a server of the run's own")
    slow, instant = _realbench(0.1), _realbench(0.0)
    for figures in (slow, instant):
        assert figures["messages"]["posted"] == 4 and figures["messages"]["replied"] == 4
        assert figures["messages"]["http_errors"] == 0 and figures["messages"]["unanswered"] == 0
        steps = figures["steps"]
        # Every step went to the model server over HTTP, and each call left a step behind.
        assert steps["recorded"] == steps["model_calls"] > 0 and steps["offline"] == 0
        assert steps["calls_unattributed"] == 0  # each call is matched to its ticket's message
        assert figures["agent_tasks"]["count"] >= 4
        assert figures["reply_push_ms"]["p50"] <= figures["reply_push_ms"]["p99"]
        assert figures["model_ms_per_step"]["gateway_mean"] >= figures["model_ms_per_step"]["server_mean"]
    # The server holds each answer for the configured latency, and that is the model time reported.
    assert slow["model_ms_per_step"]["server_p50"] >= 100 > instant["model_ms_per_step"]["server_p50"]
    # Negative control: with next to no model time, Sundry's own time is a far larger share of it.
    assert instant["sundry_share_pct"] > 2 * slow["sundry_share_pct"] > 0
    assert not instant["targets"]["sundry_share_met"]
    # On a PostgreSQL server of its own (this machine has the binaries) or, without them, skipped.
    assert "private" in slow["database"] and slow["database_connections_peak"] > 0
