"""The trigger's pure rules: boundary, growth, held actions, breaker; and the cut point."""

from sundry.compaction.trigger import TriggerInput, breaker_should_trip, cut_point, decide
from sundry.context.lanes import TurnData


def inp(total, **kw):
    return TriggerInput(total_tokens=total, trigger_tokens=6400, budget=8000, **kw)


def test_boundary_just_under_and_just_over():
    assert not decide(inp(6400)).compact  # at the trigger: not over
    assert decide(inp(6401)).compact


def test_growth_needed_after_a_compaction():
    # Post-compaction 6000: needs 6000 + 10% of 8000 = 6800.
    assert not decide(inp(6799, last_tokens_after=6000)).compact
    assert decide(inp(6800, last_tokens_after=6000)).compact
    assert decide(inp(6401, last_tokens_after=3000)).compact


def test_never_while_held_in_flight_or_tripped():
    assert not decide(inp(9000, held_pending=True)).compact
    assert not decide(inp(9000, run_in_flight=True)).compact
    assert not decide(inp(9000, breaker_tripped=True)).compact


def test_breaker_needs_three_consecutive_failures():
    assert breaker_should_trip(["failed", "fallback", "failed"])
    assert not breaker_should_trip(["failed", "failed"])
    assert not breaker_should_trip(["failed", "succeeded", "failed", "failed"])


def t(n, kind="message", **payload):
    return TurnData(number=n, author="agent", kind=kind, text="x", payload=payload)


def test_cut_keeps_recent_k_and_never_splits_a_call_from_its_result():
    turns = [
        t(1),
        t(2),
        t(3),
        t(4, "tool_call", calls=[{"id": "a", "name": "get_order"}]),
        t(5, "tool_result", call_id="a"),
        t(6),
        t(7),
    ]
    # Keep 2 → naive cut 5: fine (call 4 and result 5 both replaced).
    assert cut_point(turns, covered=0, keep_recent=2) == 5
    # Keep 3 → naive cut 4 would orphan result 5: pulled back to 3.
    assert cut_point(turns, covered=0, keep_recent=3) == 3
    assert cut_point(turns, covered=0, keep_recent=7) is None
    assert cut_point(turns[3:], covered=3, keep_recent=3) is None  # only the call itself could go: not split


def test_compaction_pays_only_above_a_floor_of_several_summaries():
    from sundry.compaction.trigger import EXPECTED_SUMMARY_TOKENS, compaction_floor, pays

    floor = compaction_floor()
    assert floor == 3 * EXPECTED_SUMMARY_TOKENS
    # The customer's opening message alone (19–29 tokens) is never worth a summary.
    assert not pays(25).compact and "cannot shrink" in pays(25).reason
    assert not pays(floor - 1).compact and "floor" in pays(floor - 1).reason
    assert pays(floor).compact
