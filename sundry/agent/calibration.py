"""How far Sundry's token count is off for a model, and the factor budgeting applies to it.

Counts are exact for OpenAI-family models (tiktoken's own model table, `core.tokens`);
every other model is counted with cl100k_base and marked approximate. Each step records
both Sundry's count of the request it sent (`AgentStep.request_tokens`, tool schemas and
framing included) and the input tokens the provider reported for that same request
(`reported_request_tokens`: the step's first call; a re-ask's request is longer).

`calibrate` reads those pairs (pure); `calibration_for` reads a model's latest steps.
For an approximate model with enough evidence, budgeting (the compaction trigger)
counts in the provider's tokens: Sundry's count times the median reported/estimate
ratio. Exact models keep tiktoken's count; their error is shown all the same.
"""

from __future__ import annotations

import statistics
import threading
import time
from dataclasses import dataclass

from sundry.agent.models import AgentStep
from sundry.core.tokens import is_exact

WINDOW = 50  # a model's latest steps with a reported count
MIN_STEPS = 3  # below this, no factor: a single odd request should not move a class's trigger
CACHE_SECONDS = 60.0  # the trigger asks after every resolution step; the evidence moves slowly


@dataclass(frozen=True)
class Calibration:
    model: str
    steps: int  # pairs read
    exact: bool  # counted with the model's own tokenizer
    factor: float = 1.0  # median of reported / estimated
    mean_abs_error: float = 0.0  # mean |estimate - reported| / reported
    bias: float = 0.0  # mean (estimate - reported) / reported: below 0, Sundry counts too few
    estimated: int = 0  # totals over the pairs
    reported: int = 0

    @property
    def applied(self) -> float:
        """The factor budgeting uses: 1 for exact models and without enough evidence."""
        return 1.0 if self.exact or self.steps < MIN_STEPS else self.factor


def calibrate(model: str, pairs: list[tuple[int, int]]) -> Calibration:
    """From (Sundry's estimate, the provider's count) per request; pairs missing either are ignored."""
    pairs = [(e, r) for e, r in pairs if e > 0 and r > 0]
    exact = is_exact(model)
    if not pairs:
        return Calibration(model, 0, exact)
    return Calibration(
        model,
        len(pairs),
        exact,
        factor=statistics.median(r / e for e, r in pairs),
        mean_abs_error=statistics.fmean(abs(e - r) / r for e, r in pairs),
        bias=statistics.fmean((e - r) / r for e, r in pairs),
        estimated=sum(e for e, _ in pairs),
        reported=sum(r for _, r in pairs),
    )


def _pairs(model: str, window: int = WINDOW) -> list[tuple[int, int]]:
    return list(
        AgentStep.objects.filter(model=model, offline=False, reported_request_tokens__gt=0, request_tokens__gt=0)
        .order_by("-id")
        .values_list("request_tokens", "reported_request_tokens")[:window]
    )


_cache: dict[str, tuple[float, Calibration]] = {}
_lock = threading.Lock()


def calibration_for(model: str, *, fresh: bool = False) -> Calibration:
    """The model's calibration from its latest steps (kept for `CACHE_SECONDS` in this process)."""
    now = time.monotonic()
    with _lock:
        hit = _cache.get(model)
    if hit is not None and not fresh and now - hit[0] < CACHE_SECONDS:
        return hit[1]
    result = calibrate(model, _pairs(model))
    with _lock:
        _cache[model] = (now, result)
    return result


def applied_factor(model: str) -> float:
    """Provider tokens per Sundry token for budgeting `model` (1.0 where tiktoken is the model's own count).
    Offline models need no query."""
    return 1.0 if is_exact(model) else calibration_for(model).applied


def clear() -> None:
    with _lock:
        _cache.clear()
