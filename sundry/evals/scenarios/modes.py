"""The ways a scenario is run: what keeps its request small, and what the model reads.

- `never`: no compaction (the compaction app's resolution listener is off).
- `triggered`: compaction exactly as production triggers it after resolution steps.
- `every`: production's trigger, plus a compaction forced after every agent run
  (`compaction_consider(force=True)`: the same run, summariser and validation).
- `window` / `prose`: production's lanes and compaction run as in `triggered`, but
  the model reads a baseline instead of Sundry's request, built from the ticket's
  whole history at exactly the tokens Sundry's request had at that step
  (`evals.strategies`: the sliding window of newest whole units; the prose-only
  digest over Sundry's current cut with the raw turns after it). The loop's
  guards still judge every call as in production: the baselines differ only in
  what the model is shown.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass, field

from sundry.context.lanes import TurnData
from sundry.evals.strategies import ProseState, TokenCache, baseline_request, prose_compact, request_tokens, window
from sundry.tooling.messages import ModelRequest


@dataclass(frozen=True)
class Mode:
    name: str
    label: str
    compaction: str  # off | triggered | every
    baseline: str | None = None  # window | prose


MODES: dict[str, Mode] = {
    m.name: m
    for m in (
        Mode("never", "never compacted", "off"),
        Mode("triggered", "compacted as production triggers it", "triggered"),
        Mode("every", "compacted at every step boundary", "every"),
        Mode("window", "sliding window at equal tokens", "triggered", "window"),
        Mode("prose", "prose-only summary at equal tokens", "triggered", "prose"),
    )
}
REFERENCE = "never"


@contextmanager
def compaction_listener(on: bool):
    """Production's compaction, registered or not, for the block's length: the trigger after
    resolution steps and the compaction in place before a step over the budget."""
    from sundry.agent import loop, step
    from sundry.compaction.services import compact_before_step, resolution_listener

    hooks = ((loop.resolution_listeners, resolution_listener), (step.before_request_hooks, compact_before_step))
    saved = [list(where) for where, _ in hooks]
    for where, hook in hooks:
        if on and hook not in where:
            where.append(hook)
        if not on:
            where[:] = [x for x in where if x is not hook]
    try:
        yield
    finally:
        for (where, _), before in zip(hooks, saved):
            where[:] = before


def _turns(ticket_id: int) -> list[TurnData]:
    from sundry.tickets.models import Turn

    return [
        TurnData(number=t.number, author=t.author, kind=t.kind, text=t.text, payload=t.payload, tokens=t.tokens)
        for t in Turn.objects.filter(ticket_id=ticket_id).order_by("number")
    ]


def _covered(ticket_id: int) -> int:
    from sundry.context.models import Summary

    return (
        Summary.objects.filter(ticket_id=ticket_id, is_current=True)
        .values_list("covers_through_turn", flat=True)
        .first()
        or 0
    )


@dataclass
class BaselineGateway:
    """Hands the model a baseline request in place of the one the loop assembled (same tokens)."""

    inner: object  # a Gateway
    ticket_id: int
    policy: str
    kind: str  # window | prose
    tokenizer: str = "offline"
    tokens: list[tuple[int, int]] = field(default_factory=list)  # (Sundry's request, the baseline's) per call

    def __post_init__(self):
        self.cache = TokenCache(self.tokenizer)

    def rebuild(self, request: ModelRequest) -> ModelRequest:
        budget = request_tokens(request, self.tokenizer)
        tools = [t.model_dump() for t in request.tools]
        turns = _turns(self.ticket_id)
        if self.kind == "window":
            overhead = request_tokens(baseline_request(policy=self.policy, turns=[], tools=tools), self.tokenizer)
            allowance = max(0, budget - overhead)
            while True:
                # Units are costed one by one; rendered together they can come out a little larger
                # (a result whose call fell out of the window), so the whole request is checked.
                out = baseline_request(policy=self.policy, turns=window(turns, allowance, self.cache), tools=tools)
                excess = request_tokens(out, self.tokenizer) - budget
                if excess <= 0 or allowance == 0:
                    break
                allowance = max(0, allowance - excess)
        else:
            cut = _covered(self.ticket_id)
            raw = [t for t in turns if t.number > cut]
            base = request_tokens(
                baseline_request(policy=self.policy, turns=raw, tools=tools, prose=""), self.tokenizer
            )
            digest = prose_compact(
                ProseState(), [t for t in turns if t.number <= cut], cut, max(0, budget - base), self.tokenizer
            )
            out = baseline_request(policy=self.policy, turns=raw, tools=tools, prose=digest.text)
        out = out.model_copy(update={"model": request.model})
        self.tokens.append((budget, request_tokens(out, self.tokenizer)))
        return out

    @property
    def limits(self):
        """The wrapped gateway's call limits: the step sizes a re-ask by what they leave."""
        return self.inner.limits

    def is_local(self, model: str) -> bool:
        return self.inner.is_local(model)

    def call(self, request: ModelRequest, *, model: str | None = None, timeout: float = 60, stream=None):
        return self.inner.call(self.rebuild(request), model=model, timeout=timeout, stream=stream)

    def complete(self, request: ModelRequest, *, model: str | None = None, timeout: float = 60):
        return self.call(request, model=model, timeout=timeout).response
