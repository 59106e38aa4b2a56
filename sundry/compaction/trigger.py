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
        return Decision(
            False,
            f"{compactable_tokens} compactable tokens: a summary of ~{expected_summary_tokens} "
            "cannot shrink the request",
        )
    if compactable_tokens < floor:
        return Decision(
            False, f"{compactable_tokens} compactable tokens < floor {floor} ({PAYS_FACTOR}× the expected summary)"
        )
    return Decision(True, f"{compactable_tokens} compactable tokens ≥ floor {floor}")


# A resolution step's next request is its own request plus the turns it
# appended plus what its harvest and effects added to the lanes (a few ledger,
# money and action lines). When that estimate, with this allowance for the lane
# growth, stays under the trigger, the exact check — which reads every lane and
# assembles — is skipped.
LANE_GROWTH_ALLOWANCE = 256  # tokens
MESSAGE_OVERHEAD_TOKENS = 8  # per appended turn: role and framing in the request


def clearly_under(
    *, request_tokens: int, appended_tokens: int, appended_turns: int, trigger_tokens: int, lanes_may_grow: bool = True
) -> bool:
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
        late = {
            str((t.payload or {}).get("call_id")) for t in turns if t.number > cut and (t.payload or {}).get("call_id")
        }
        split = [t.number for t in turns if t.number <= cut and t.kind == "tool_call" and _call_ids(t) & late]
        if not split:
            break
        cut = min(split) - 1
    return cut if cut > covered else None


def over_budget_cause(accounting: dict, *, total: int, budget: int, recent_kept: int) -> str:
    """Why a request of `total` tokens is over `budget`, in numbers, from its step's accounting
    (`context.assembly.Accounting.as_dict`): the parts compaction cannot shrink (system prompt, tool
    schemas, pinned lanes) and what they leave for the summary and the recent turns kept word for word."""
    lanes = accounting.get("lanes") or {}
    system, tools = int(lanes.get("system") or 0), int(accounting.get("tools") or 0)
    rules, ledger, state = (int(lanes.get(k) or 0) for k in ("rules", "ledger", "state"))
    summary, recent = int(lanes.get("summary") or 0), int(lanes.get("recent") or 0)
    pinned = rules + ledger + state
    fixed = system + tools + pinned
    framing = max(0, total - fixed - summary - recent)
    head = (
        f"over by {total - budget:,} tokens: system prompt {system:,} + tool schemas {tools:,} + pinned lanes "
        f"{pinned:,} (rules {rules:,}, ledger {ledger:,}, state {state:,})"
    )
    if fixed >= budget:
        return (
            f"{head} = {fixed:,}, over the budget of {budget:,} by themselves: compaction cannot help "
            "(a larger budget, fewer tools or a smaller ledger share can)"
        )
    return (
        f"{head} = {fixed:,} leave only {budget - fixed:,} of {budget:,} for the summary ({summary:,}), "
        f"the recent turns ({recent:,}; the {recent_kept} most recent are kept word for word) "
        f"and message framing ({framing:,})"
    )


def cut_within_budget(turns: list[TurnData], *, covered: int, keep_recent: int, room: int, tokens_after) -> int | None:
    """`cut_point`, moved later while the turns after it take more than `room` tokens (what the
    budget leaves once the prompt, tools, lanes and summary are counted): fewer recent turns kept
    word for word, never fewer than one, never splitting a call from its result.

    `tokens_after(cut)`: what the turns after `cut` cost. The class's recent turns are kept whole
    whenever they fit; only a request that would stay over the budget gives some of them up."""
    keep = keep_recent
    cut = cut_point(turns, covered=covered, keep_recent=keep)
    while keep > 1 and tokens_after(cut if cut is not None else covered) > room:
        keep -= 1
        deeper = cut_point(turns, covered=covered, keep_recent=keep)
        if deeper is not None and (cut is None or deeper > cut):
            cut = deeper
    return cut
