"""The three ways a long ticket's request can be kept under budget, side by side.

- **Sundry**: lanes (rules, ledger, state) carried by code; only the history
  is summarised, by the compaction summariser with its validation and
  fallback. `Compactor` is the seam: `SundryCompactor` runs the compaction
  app's pure pieces (`summariser.build_request`, `validate`, `fallback_fields`)
  — the same steps `compaction.services._work`/`_accept` take, minus the
  database — so a recorded ticket can be compacted without one.
- **Sliding window**: the newest whole call/result units that fit the budget.
- **Prose-only**: the same cut points as Sundry, but no ledger, rules or state
  lanes; the history becomes a prose digest that keeps the natural-language
  sentences people wrote (identifiers in them survive, those only in tool
  results do not), trimmed oldest-first to the token allowance Sundry's lanes
  use at that moment — the same budget.
"""

from __future__ import annotations

import json
import re
import time
from collections import Counter
from dataclasses import dataclass, field, replace
from typing import Protocol

from sundry.compaction import summariser as sm
from sundry.compaction.offline import OfflineSummariser
from sundry.context import render
from sundry.context.constraints import constraint_sentences
from sundry.context.lanes import LaneSnapshot, LedgerData, SummaryData, TurnData
from sundry.core.tokens import REPLY_PRIMING, count_message_tokens, count_tokens
from sundry.tooling.messages import Message, ModelRequest, ToolSpec

PROSE_HEADING = "SUMMARY OF EARLIER TURNS (prose)"


class Compactor(Protocol):
    def compact(
        self,
        snapshot: LaneSnapshot,
        through_turn: int,
        *,
        history: list[TurnData] = (),
        ledger_all: list[LedgerData] = (),
    ) -> LaneSnapshot:
        """The snapshot with turns ≤ through_turn replaced by a summary; lanes untouched.
        `history`: every turn so far; `ledger_all`: archived entries too (validation knows them)."""


@dataclass
class CompactionStats:
    attempts: int = 0
    fallback: bool = False
    model_seconds: float = 0.0
    total_seconds: float = 0.0
    reasons: list[str] = field(default_factory=list)  # why attempts were refused


@dataclass
class SundryCompactor:
    """Compaction as the compaction app does it, on plain data. Records what each call cost."""

    model: str = "offline"
    summariser: object = field(default_factory=OfflineSummariser)
    last: CompactionStats = field(default_factory=CompactionStats)
    runs: int = 0
    fallbacks: int = 0
    refusals: Counter = field(default_factory=Counter)
    seen: dict = field(default_factory=dict)  # per ticket: sm.SeenTokens
    # The constraint classifier the request's sentences to quote come from (a control switches it off).
    classifier: object = constraint_sentences
    # The summary's constraints that became candidate rules in the last compaction, as the service adds them.
    last_candidates: list[str] = field(default_factory=list)

    def _context(
        self,
        snap: LaneSnapshot,
        replaced: list[TurnData],
        history: list[TurnData],
        through: int,
        ledger: list[LedgerData],
    ):
        # As the service does: the tokens seen so far are kept, and only newer turns are scanned.
        seen = self.seen.setdefault((snap.ticket_id, snap.customer_id), sm.SeenTokens())
        seen.add(history)
        return sm.ValidationContext(
            ledger_values=sorted({e.value for e in ledger}),
            roles=sorted({e.role for e in ledger}),
            history_ids=sorted(seen.ids),
            history_shaped=sorted(seen.shaped),
            replaced_tokens=sm.replaced_tokens(replaced, snap.summary, self.model),
            covers_through_turn=through,
            model=self.model,
            quotes=self._quotes,
        )

    def compact(
        self,
        snapshot: LaneSnapshot,
        through_turn: int,
        *,
        history: list[TurnData] = (),
        ledger_all: list[LedgerData] = (),
    ) -> LaneSnapshot:
        started = time.perf_counter()
        replaced = [t for t in snapshot.turns if t.number <= through_turn]
        kept = [t for t in snapshot.turns if t.number > through_turn]
        request = sm.build_request(
            model=self.model,
            turns=replaced,
            ledger=snapshot.ledger,
            rules=snapshot.rules,
            previous=snapshot.summary,
            classifier=self.classifier,
        )
        self._quotes = sm.required_quotes(
            replaced,
            rules=snapshot.rules,
            previous=snapshot.summary,
            roles={e.value: e.role for e in snapshot.ledger},
            classifier=self.classifier,
        )
        self.last_candidates = []
        ctx = self._context(
            snapshot, replaced, list(history) or snapshot.turns, through_turn, list(ledger_all) or snapshot.ledger
        )
        stats, verdict = CompactionStats(), None
        for _ in range(sm.MAX_ATTEMPTS):
            stats.attempts += 1
            t0 = time.perf_counter()
            response = self.summariser.complete(request)
            stats.model_seconds += time.perf_counter() - t0
            verdict = sm.validate(response.text or "", ctx)
            if verdict.ok:
                break
            stats.reasons += [f"{r}: {d[:200]}" for r, d in zip(verdict.reasons, verdict.details)]
        if verdict is not None and verdict.ok:
            text = verdict.text
            self.last_candidates = sm.rule_candidate_texts(verdict.fields.constraints_not_pinned, self._quotes)
        else:  # deterministic trim: every other lane stays intact, the earlier summary is kept
            stats.fallback = True
            fields = sm.fallback_fields(
                replaced,
                from_turn=replaced[0].number if replaced else through_turn,
                through_turn=through_turn,
                failures=stats.attempts,
                quotes=self._quotes,
            )
            text = sm.render_fields(fields)
            if snapshot.summary:
                text = f"{snapshot.summary.text.strip()}\n{text}"
        stats.total_seconds = time.perf_counter() - started
        self.last, self.runs, self.fallbacks = stats, self.runs + 1, self.fallbacks + stats.fallback
        self.refusals.update(r.split(":", 1)[0] for r in stats.reasons)
        return replace(snapshot, summary=SummaryData(through_turn, text, stats.fallback), turns=kept)


# --- prose-only ----------------------------------------------------------------------------

_SENTENCE = re.compile(r"[^.!?\n]+[.!?]?")
_WORD = re.compile(r"[A-Za-z]{2,}")


def prose_sentences(turns: list[TurnData]) -> list[str]:
    """What people wrote, sentence by sentence: customer and agent words, no tool traffic."""
    out = []
    for t in turns:
        if t.kind not in ("message", "tool_call", "note") or not t.text:
            continue
        who = {"customer": "Customer", "agent": "Agent", "staff": "Staff"}.get(t.author, t.author.title())
        for m in _SENTENCE.finditer(t.text):
            s = " ".join(m.group(0).split())
            # Natural language only: a few words, not a JSON or code fragment.
            if len(_WORD.findall(s)) >= 3 and not s.lstrip().startswith(("{", "[", "```")):
                out.append(f"{who}: {s}")
    return out


@dataclass
class ProseState:
    through: int = 0
    sentences: list[str] = field(default_factory=list)
    text: str = ""


def prose_compact(
    state: ProseState, replaced: list[TurnData], through: int, cap_tokens: int, model: str = "offline"
) -> ProseState:
    """Fold `replaced` into the digest, then drop the oldest sentences until it fits `cap_tokens`."""
    sentences = state.sentences + prose_sentences(replaced)
    lines = list(sentences)
    while lines and count_tokens("\n".join(lines), model) > cap_tokens:
        lines.pop(0)
    return ProseState(through=through, sentences=lines, text="\n".join(lines))


# --- sliding window --------------------------------------------------------------------------


def units(turns: list[TurnData]) -> list[list[TurnData]]:
    """Whole units, oldest first: a tool call with all its results; any other turn alone."""
    owner: dict[str, int] = {}
    out: list[list[TurnData]] = []
    for t in turns:
        p = t.payload or {}
        call_id = p.get("call_id")
        if t.kind in ("tool_result", "rejection", "error") and call_id and str(call_id) in owner:
            out[owner[str(call_id)]].append(t)
            continue
        out.append([t])
        if t.kind == "tool_call":
            for c in p.get("calls") or []:
                if isinstance(c, dict) and c.get("id"):
                    owner[str(c["id"])] = len(out) - 1
    return out


class TokenCache:
    """Token cost of each turn's rendered messages, counted once per ticket."""

    def __init__(self, model: str = "offline"):
        self.model = model
        self._by_key: dict[tuple, int] = {}

    def unit(self, unit: list[TurnData]) -> int:
        key = tuple(t.number for t in unit)
        if key not in self._by_key:
            msgs = [m.model_dump() for m in render.turns_to_messages(unit)]
            self._by_key[key] = count_message_tokens(msgs, self.model) - REPLY_PRIMING if msgs else 0
        return self._by_key[key]


def window(turns: list[TurnData], allowance: int, cache: TokenCache) -> list[TurnData]:
    """The newest whole units whose messages fit `allowance` tokens."""
    kept: list[list[TurnData]] = []
    used = 0
    for unit in reversed(units(turns)):
        cost = cache.unit(unit)
        if used + cost > allowance:
            break
        kept.append(unit)
        used += cost
    return [t for unit in reversed(kept) for t in unit]


# --- baseline requests --------------------------------------------------------------------------


def baseline_request(
    *, policy: str, turns: list[TurnData], tools: list[dict], model: str = "offline", prose: str | None = None
) -> ModelRequest:
    """System prompt, an optional prose summary, raw turns: no rules, ledger or state lanes."""
    messages = [render.lane_message("system", render.render_system_prompt(policy))]
    if prose is not None:
        messages.append(Message(role="system", lane="summary", content=f"{PROSE_HEADING}\n{prose or '(nothing kept)'}"))
    messages += render.turns_to_messages(turns)
    return ModelRequest(model=model, messages=messages, tools=[ToolSpec(**t) for t in tools])


def request_tokens(request: ModelRequest, model: str = "offline") -> int:
    tools = count_tokens(json.dumps([t.model_dump() for t in request.tools]), model) if request.tools else 0
    return count_message_tokens([m.model_dump() for m in request.messages], model) + tools


def request_text(request: ModelRequest) -> str:
    """Everything the model reads, as one string, for verbatim checks."""
    parts = []
    for m in request.messages:
        parts.append(m.content)
        for c in m.tool_calls:
            parts.append(
                json.dumps(c.arguments, ensure_ascii=False) if isinstance(c.arguments, dict) else str(c.arguments)
            )
    return "\n".join(parts)
