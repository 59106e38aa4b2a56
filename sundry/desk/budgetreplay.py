"""Replay a ticket's recorded steps under other budget settings. Pure: plain data in, figures out.

Each recorded step keeps the size of the request it sent and what it was made of (the lanes,
the turns it showed, the summary). Under other settings the same step would have shown other
turns: a compaction at another moment, or none, changes where the summary ends. The replayed
request is the recorded one with the turns and summary it showed swapped for the ones the
replay's own compactions leave, and the ledger held to the proposed share. Compactions are
decided by production's own rules (`compaction.trigger`: the trigger after a resolution step,
growth since the last one, the cut that never splits a call from its result and gives up recent
turns only where the request would stay over the budget, the floor below which a summary does not pay).

What the replay cannot know, it assumes and says so: a turn costs its stored token count plus
the trigger's per-turn framing estimate; a summary the recorded ticket never had costs what
the trigger expects a summary to cost; held approvals and the breaker, which block compaction,
are not replayed; a larger ledger share cannot bring back entries the recorded ticket archived.
At the recorded settings each step's request is the recorded one whenever the replay compacts
where the ticket did.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sundry.compaction.trigger import (
    EXPECTED_SUMMARY_TOKENS,
    MESSAGE_OVERHEAD_TOKENS,
    TriggerInput,
    cut_within_budget,
    decide,
    pays,
)
from sundry.context.lanes import TurnData


@dataclass(frozen=True)
class Budget:
    budget: int
    trigger_fraction: float
    recent_turns_kept: int
    ledger_share: float

    @property
    def trigger(self) -> int:
        return int(self.budget * self.trigger_fraction)

    @property
    def ledger_allowance(self) -> int:
        return max(0, int(self.budget * self.ledger_share))


@dataclass(frozen=True)
class StepRecord:
    number: int
    request_tokens: int
    summary_tokens: int  # the summary lane the step's request held (0: none)
    ledger_tokens: int
    first_turn: int | None  # the turns the request showed
    last_turn: int | None
    appended_through: int  # the last turn once the step committed (its own turns included)
    resolution: bool
    output_tokens: int = 0


@dataclass(frozen=True)
class History:
    ticket_id: int
    turns: list[TurnData]  # every turn, oldest first (tokens: its stored count)
    steps: list[StepRecord]  # oldest first
    ledger_allowance: int  # the recorded class's: the ledger never grew past it


@dataclass
class Replayed:
    ticket_id: int
    requests: list[tuple[int, int]] = field(default_factory=list)  # (step number, request tokens)
    compacted_after: list[int] = field(default_factory=list)  # step numbers
    ledger_over: int = 0  # steps whose ledger the proposed share would have archived from
    # Per compaction, what its summariser call replaced: the turns folded and the summary before them.
    summarised: list[int] = field(default_factory=list)


def turn_cost(turn: TurnData) -> int:
    return turn.tokens + MESSAGE_OVERHEAD_TOKENS


def _cost(turns: list[TurnData], first: int | None, last: int | None) -> int:
    if first is None or last is None:
        return 0
    return sum(turn_cost(t) for t in turns if first <= t.number <= last)


def replay(history: History, settings: Budget, *, summary_tokens: int = EXPECTED_SUMMARY_TOKENS) -> Replayed:
    out = Replayed(history.ticket_id)
    turns, cover, summary, last_after = history.turns, 0, 0, None
    for step in history.steps:
        recorded_cover = (step.first_turn or 1) - 1 if step.summary_tokens else 0
        # The summary the replay holds: the recorded one when it ends where the recorded one did.
        shown_summary = step.summary_tokens if cover == recorded_cover else summary
        last = step.last_turn if step.last_turn is not None else step.appended_through
        trimmed = 0
        if settings.ledger_allowance < history.ledger_allowance and step.ledger_tokens > settings.ledger_allowance:
            trimmed = step.ledger_tokens - settings.ledger_allowance
            out.ledger_over += 1
        tokens = (
            step.request_tokens
            - _cost(turns, step.first_turn, step.last_turn)
            + _cost(turns, cover + 1, last)
            - step.summary_tokens
            + shown_summary
            - trimmed
        )
        out.requests.append((step.number, tokens))
        summary = shown_summary
        if not step.resolution:
            continue
        # As production decides after a resolution step: the next request, with the step's own turns.
        total = tokens + _cost(turns, last + 1, step.appended_through)
        decision = decide(
            TriggerInput(
                total_tokens=total,
                trigger_tokens=settings.trigger,
                budget=settings.budget,
                last_tokens_after=last_after,
            )
        )
        if not decision.compact:
            continue
        after = [t for t in turns if cover < t.number <= step.appended_through]
        # As `compaction_consider` sizes the cut: the room the budget leaves beside what compaction keeps.
        cut = cut_within_budget(
            after,
            covered=cover,
            keep_recent=settings.recent_turns_kept,
            room=settings.budget - (total - sum(t.tokens for t in after)),
            tokens_after=lambda c: sum(t.tokens for t in after if t.number > c),
        )
        if cut is None or not pays(sum(t.tokens for t in after if t.number <= cut)).compact:
            continue
        last_after = total - _cost(turns, cover + 1, cut) - summary + summary_tokens
        out.summarised.append(sum(t.tokens for t in after if t.number <= cut) + summary)
        cover, summary = cut, summary_tokens
        out.compacted_after.append(step.number)
    return out
