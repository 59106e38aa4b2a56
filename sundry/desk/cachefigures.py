"""The prompt cache and the token counts in the figures: per class and per model.

- Cached share: of the input tokens steps sent, the share the provider read from its
  prompt cache (`AgentStep.cached_input_tokens`, from provider usage).
- Cost saved: what those steps would have cost with every input token read afresh, less
  what they cost (genai-prices' cache-read and cache-write prices, `agent.pricing`);
  unknown for a model with no known price.
- Compaction's effect: a compaction rewrites the summary, so the step after it finds
  less of its request cached. For the first step after each finished compaction, its
  cached share beside the other steps', and the cached tokens it lost against the step
  before (what they would have saved, in USD).
- Token counts: Sundry's estimate of each request against the input tokens the provider
  reported for it (`agent.calibration`), per model.
"""

from __future__ import annotations

import bisect
from collections import defaultdict
from decimal import Decimal

from django.db.models import Q, Sum

from sundry.agent import calibration
from sundry.agent.models import AgentStep
from sundry.agent.provider import pricing
from sundry.agent.provider.gateway import resolve_model
from sundry.compaction.models import CompactionRun

_DONE = ("succeeded", "fallback")


def _row() -> dict:
    return {
        "input_tokens": 0,
        "cached_tokens": 0,
        "write_tokens": 0,
        "saved_usd": Decimal(0),
        "unpriced": set(),
        "after_steps": 0,
        "after_input": 0,
        "after_cached": 0,
        "lost_tokens": 0,
        "lost_usd": Decimal(0),
    }


def _base_url(model: str, memo: dict) -> str | None:
    if model not in memo:
        memo[model] = resolve_model(model).base_url
    return memo[model]


def _after_compactions() -> list[tuple[dict, dict | None]]:
    """(the first step after each finished compaction, the step before it), as value rows."""
    runs = list(
        CompactionRun.objects.filter(status__in=_DONE, finished_at__isnull=False).values_list(
            "ticket_id", "finished_at"
        )
    )
    if not runs:
        return []
    steps: dict[int, list[dict]] = defaultdict(list)
    for s in (
        AgentStep.objects.filter(ticket_id__in={t for t, _ in runs}, offline=False)
        .order_by("ticket_id", "number")
        .values("id", "ticket_id", "ticket__ticket_class", "model", "created_at", "input_tokens", "cached_input_tokens")
    ):
        steps[s["ticket_id"]].append(s)
    out, seen = [], set()
    for ticket_id, finished in runs:
        rows = steps.get(ticket_id, [])
        i = bisect.bisect_left([s["created_at"] for s in rows], finished)
        if i < len(rows) and rows[i]["id"] not in seen:
            seen.add(rows[i]["id"])
            out.append((rows[i], rows[i - 1] if i > 0 else None))
    return out


def cache_figures() -> tuple[dict[int, dict], dict[str, dict]]:
    """({class id: row}, {model: row}) with the cached share, cost saved and compaction's effect."""
    by_class: dict[int, dict] = defaultdict(_row)
    by_model: dict[str, dict] = defaultdict(_row)
    urls: dict = {}
    for r in (
        AgentStep.objects.filter(offline=False)
        .values("ticket__ticket_class", "model")
        .annotate(
            tin=Sum("input_tokens"),
            tout=Sum("output_tokens"),
            cached=Sum("cached_input_tokens"),
            writes=Sum("cache_write_tokens"),
        )
    ):
        model = r["model"]
        saved = pricing.cache_saving(
            model,
            r["tin"] or 0,
            r["tout"] or 0,
            cached_input_tokens=r["cached"] or 0,
            cache_write_tokens=r["writes"] or 0,
            base_url=_base_url(model, urls),
        )
        for row in (by_class[r["ticket__ticket_class"]], by_model[model]):
            row["input_tokens"] += r["tin"] or 0
            row["cached_tokens"] += r["cached"] or 0
            row["write_tokens"] += r["writes"] or 0
            if saved is None:
                row["unpriced"].add(model)
            else:
                row["saved_usd"] += saved
    for after, before in _after_compactions():
        model = after["model"]
        lost = max(0, (before["cached_input_tokens"] if before else 0) - after["cached_input_tokens"])
        worth = (
            pricing.cache_saving(model, lost, 0, cached_input_tokens=lost, base_url=_base_url(model, urls))
            if lost
            else 0
        )
        for row in (by_class[after["ticket__ticket_class"]], by_model[model]):
            row["after_steps"] += 1
            row["after_input"] += after["input_tokens"]
            row["after_cached"] += after["cached_input_tokens"]
            row["lost_tokens"] += lost
            row["lost_usd"] += worth or 0
    for row in (*by_class.values(), *by_model.values()):
        _shares(row)
    return dict(by_class), dict(by_model)


def _share(part: int, whole: int) -> int | None:
    return round(100 * part / whole) if whole else None


def _shares(row: dict) -> None:
    row["cached_share"] = _share(row["cached_tokens"], row["input_tokens"])
    row["after_share"] = _share(row["after_cached"], row["after_input"])
    row["other_share"] = _share(row["cached_tokens"] - row["after_cached"], row["input_tokens"] - row["after_input"])
    row["unpriced"] = sorted(row["unpriced"])


def token_counts() -> list[dict]:
    """Per model that reported input tokens: Sundry's estimate against the provider's count."""
    models = (
        AgentStep.objects.filter(~Q(model=""), offline=False, reported_request_tokens__gt=0)
        .values_list("model", flat=True)
        .distinct()
    )
    out = []
    for model in sorted(set(models)):
        c = calibration.calibration_for(model, fresh=True)
        out.append(
            {
                "model": model,
                "steps": c.steps,
                "exact": c.exact,
                "factor": round(c.factor, 3),
                "applied": round(c.applied, 3),
                "error_pct": round(100 * c.mean_abs_error, 1),
                "bias_pct": round(100 * c.bias, 1),
                "estimated": c.estimated,
                "reported": c.reported,
            }
        )
    return out
