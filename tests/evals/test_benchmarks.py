"""Benchmark helpers (figures are printed by `manage.py benchmark`; nothing here is timed)."""

from __future__ import annotations

from pathlib import Path

from sundry.agent.schemas import Message, ModelRequest
from sundry.context import render
from sundry.evals import benchmarks, importers

FIXTURES = Path(__file__).parent / "fixtures"


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
