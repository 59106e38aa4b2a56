"""Cost in the numbers: working turns and compactions side by side, per ticket or per class."""

from __future__ import annotations

from django.db.models import Count, Sum

from sundry.agent.models import AgentStep
from sundry.compaction.models import CompactionRun


def cost_figures(*, ticket=None, ticket_class=None) -> dict:
    """{"working": {...}, "compaction": {...}} with count, tokens, cost_usd, latency_ms."""
    steps, runs = AgentStep.objects.all(), CompactionRun.objects.all()
    if ticket is not None:
        steps, runs = steps.filter(ticket=ticket), runs.filter(ticket=ticket)
    if ticket_class is not None:
        steps, runs = steps.filter(ticket__ticket_class=ticket_class), runs.filter(ticket__ticket_class=ticket_class)
    w = steps.aggregate(
        n=Count("id"),
        tin=Sum("input_tokens"),
        tout=Sum("output_tokens"),
        cost=Sum("cost_usd"),
        ms=Sum("latency_ms"),
        sent=Sum("request_tokens"),
    )
    c = runs.aggregate(
        n=Count("id"), tin=Sum("input_tokens"), tout=Sum("output_tokens"), cost=Sum("cost_usd"), ms=Sum("latency_ms")
    )
    # Only finished compactions saved anything.
    c.update(runs.filter(tokens_after__isnull=False).aggregate(before=Sum("tokens_before"), after=Sum("tokens_after")))
    return {
        "working": {
            "count": w["n"],
            "request_tokens": w["sent"] or 0,
            "input_tokens": w["tin"] or 0,
            "output_tokens": w["tout"] or 0,
            "cost_usd": w["cost"] or 0,
            "latency_ms": w["ms"] or 0,
        },
        "compaction": {
            "count": c["n"],
            "input_tokens": c["tin"] or 0,
            "output_tokens": c["tout"] or 0,
            "cost_usd": c["cost"] or 0,
            "latency_ms": c["ms"] or 0,
            "tokens_saved": max(0, (c["before"] or 0) - (c["after"] or 0)),
        },
    }
