"""When to compact, and which turns to replace. Pure: plain data in, decision out."""

from __future__ import annotations

from dataclasses import dataclass

from sundry.context.lanes import TurnData

# After a compaction, the next one needs the request to grow by this share of
# the budget beyond its post-compaction size (no compaction on every step).
GROWTH_FRACTION = 0.10
# Consecutive failed (or fallback) compactions that trip the breaker.
BREAKER_FAILURES = 3
BREAKER_PREFIX = "Compaction breaker"


@dataclass(frozen=True)
class TriggerInput:
    total_tokens: int  # latest assembled request, real tokenizer
    trigger_tokens: int  # class budget × trigger fraction
    budget: int
    held_pending: bool = False  # a tool call awaits staff approval
    breaker_tripped: bool = False
    run_in_flight: bool = False  # a compaction is queued or running for this ticket
    last_tokens_after: int | None = None  # request size right after the last compaction


@dataclass(frozen=True)
class Decision:
    compact: bool
    reason: str


def decide(inp: TriggerInput) -> Decision:
    if inp.held_pending:
        return Decision(False, "a tool call awaits staff approval")
    if inp.breaker_tripped:
        return Decision(False, "breaker tripped; staff must clear it")
    if inp.run_in_flight:
        return Decision(False, "a compaction is already queued or running")
    if inp.total_tokens <= inp.trigger_tokens:
        return Decision(False, f"{inp.total_tokens} ≤ trigger {inp.trigger_tokens}")
    if inp.last_tokens_after is not None:
        needed = inp.last_tokens_after + int(inp.budget * GROWTH_FRACTION)
        if inp.total_tokens < needed:
            return Decision(False, f"{inp.total_tokens} < {needed}: not enough growth since the last compaction")
    return Decision(True, f"{inp.total_tokens} > trigger {inp.trigger_tokens}")


# Compaction pays only when the turns it would replace are several times what their
# summary is expected to take: below that it spends model time to shrink the request
# by little or, as a fallback trim, to grow it, and it loses the customer's own words.
EXPECTED_SUMMARY_TOKENS = 200
PAYS_FACTOR = 3


def compaction_floor(expected_summary_tokens: int = EXPECTED_SUMMARY_TOKENS) -> int:
    return expected_summary_tokens * PAYS_FACTOR


def pays(compactable_tokens: int, *, expected_summary_tokens: int = EXPECTED_SUMMARY_TOKENS) -> Decision:
    """Whether replacing `compactable_tokens` of history (the turns before the cut) is worth a compaction."""
    floor = compaction_floor(expected_summary_tokens)
    if compactable_tokens - expected_summary_tokens <= 0:
        return Decision(False, f"{compactable_tokens} compactable tokens: a summary of ~{expected_summary_tokens} "
                               "cannot shrink the request")
    if compactable_tokens < floor:
        return Decision(False, f"{compactable_tokens} compactable tokens < floor {floor} "
                               f"({PAYS_FACTOR}× the expected summary)")
    return Decision(True, f"{compactable_tokens} compactable tokens ≥ floor {floor}")


# A resolution step's next request is its own request plus the turns it
# appended plus what its harvest and effects added to the lanes (a few ledger,
# money and action lines). When that estimate, with this allowance for the lane
# growth, stays under the trigger, the exact check — which reads every lane and
# assembles — is skipped.
LANE_GROWTH_ALLOWANCE = 256  # tokens
MESSAGE_OVERHEAD_TOKENS = 8  # per appended turn: role and framing in the request


def clearly_under(*, request_tokens: int, appended_tokens: int, appended_turns: int, trigger_tokens: int,
                  lanes_may_grow: bool = True) -> bool:
    """`lanes_may_grow=False` for a step that only replied: it wrote no lane, only its turn."""
    estimate = request_tokens + appended_tokens + MESSAGE_OVERHEAD_TOKENS * appended_turns
    return estimate + (LANE_GROWTH_ALLOWANCE if lanes_may_grow else 0) < trigger_tokens


def breaker_should_trip(recent_outcomes: list[str]) -> bool:
    """`recent_outcomes`: statuses of the ticket's finished runs, newest first."""
    tail = recent_outcomes[:BREAKER_FAILURES]
    return len(tail) == BREAKER_FAILURES and all(s in ("failed", "fallback") for s in tail)


def _call_ids(turn: TurnData) -> set[str]:
    return {str(c.get("id")) for c in (turn.payload or {}).get("calls") or [] if isinstance(c, dict) and c.get("id")}


def cut_point(turns: list[TurnData], *, covered: int, keep_recent: int) -> int | None:
    """The last turn to replace: before the newest `keep_recent` turns, never
    splitting a tool call from its results. None when there is nothing to replace.

    `turns` are the turns after `covered` (the current summary's end), oldest first.
    """
    if len(turns) <= keep_recent:
        return None
    cut = turns[-keep_recent - 1].number if keep_recent else turns[-1].number
    while cut > covered:
        # A call at or before the cut whose result comes after it pulls the cut back before the call.
        late = {str((t.payload or {}).get("call_id")) for t in turns if t.number > cut and (t.payload or {}).get("call_id")}
        split = [t.number for t in turns if t.number <= cut and t.kind == "tool_call" and _call_ids(t) & late]
        if not split:
            break
        cut = min(split) - 1
    return cut if cut > covered else None
