"""Compaction keeps the request within the budget whenever the parts it cannot shrink allow: the cut
gives up recent turns only where, with all of them kept, the request would stay over the budget."""

from __future__ import annotations

from sundry.compaction.trigger import cut_point, cut_within_budget, over_budget_cause
from sundry.context.lanes import TurnData


def _turns() -> list[TurnData]:
    turns = []
    for n in range(1, 21, 2):
        turns.append(TurnData(n, "customer", "message", "hi", tokens=100))
        turns.append(TurnData(n + 1, "agent", "message", "hello", tokens=100))
    turns[14] = TurnData(15, "agent", "tool_call", "", {"calls": [{"id": "c1", "name": "lookup"}]}, tokens=100)
    turns[15] = TurnData(16, "tool", "tool_result", "{}", {"call_id": "c1"}, tokens=1500)
    return turns


def _after(turns):
    return lambda cut: sum(t.tokens for t in turns if t.number > cut)


def test_within_the_budget_the_class_recent_turns_are_all_kept():
    turns = _turns()
    assert (
        cut_within_budget(turns, covered=0, keep_recent=8, room=10_000, tokens_after=_after(turns))
        == cut_point(turns, covered=0, keep_recent=8)
        == 12
    )


def test_over_the_budget_fewer_recent_turns_are_kept_until_the_rest_fits():
    turns = _turns()
    # The 8 recent turns take 2,200 tokens; 800 fit: the cut moves past the big result, never between it and its call.
    cut = cut_within_budget(turns, covered=0, keep_recent=8, room=800, tokens_after=_after(turns))
    assert cut == 16 and _after(turns)(cut) <= 800
    # Control: the class's cut alone leaves the request over.
    assert _after(turns)(cut_point(turns, covered=0, keep_recent=8)) > 800


def test_never_fewer_than_one_turn_is_kept():
    turns = _turns()
    assert cut_within_budget(turns, covered=0, keep_recent=8, room=0, tokens_after=_after(turns)) == 19


def test_the_cause_names_each_part_and_what_it_leaves():
    accounting = {
        "lanes": {"system": 606, "rules": 16, "ledger": 2_310, "state": 74, "summary": 300, "recent": 3_015},
        "tools": 3_052,
    }
    text = over_budget_cause(accounting, total=9_373, budget=8_000, recent_kept=8)
    assert text.startswith(
        "over by 1,373 tokens: system prompt 606 + tool schemas 3,052 + pinned lanes 2,400 "
        "(rules 16, ledger 2,310, state 74) = 6,058 leave only 1,942 of 8,000"
    )
    fixed_over = over_budget_cause(accounting, total=9_373, budget=6_000, recent_kept=8)
    assert "over the budget of 6,000 by themselves: compaction cannot help" in fixed_over
