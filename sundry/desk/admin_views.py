"""Figures for admins, per class and per model: tickets, compactions, tokens saved, cost, latency, guard rejections,
the prompt cache (cached share, cost saved, compaction's effect) and how far token counts were off; customer
satisfaction per class and per agent (sundry.tickets.satisfaction)."""

from __future__ import annotations

from collections import defaultdict
from decimal import Decimal

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.db.models import Avg, Count, F, Q, Sum
from django.shortcuts import render
from django.views.decorators.http import require_GET

from sundry.agent import calibration
from sundry.agent.models import AgentStep
from sundry.agent.provider import pricing
from sundry.agent.provider.gateway import resolve_model
from sundry.compaction.models import CompactionRun
from sundry.core.people import is_admin
from sundry.desk.budgetfigures import budget_rows, budget_trends
from sundry.desk.cachefigures import cache_figures, token_counts
from sundry.tickets.models import TicketClass, Turn
from sundry.tickets.satisfaction import SATISFIED, csat_by_agent, csat_by_class


def _unpriced(models: set[str]) -> list[str]:
    """The models among `models` with no known price: their calls count 0 in the cost."""
    return sorted(m for m in models if m and not pricing.cost(m, 0, 0, base_url=resolve_model(m).base_url).priced)


def class_figures(cache: dict | None = None) -> list[dict]:
    cache = cache_figures()[0] if cache is None else cache
    done = Q(status__in=["succeeded", "fallback"])
    steps = {
        r["ticket__ticket_class"]: r
        for r in AgentStep.objects.values("ticket__ticket_class").annotate(
            n=Count("id"), cost=Sum("cost_usd"), latency=Avg("latency_ms"), tokens=Sum("input_tokens")
        )
    }
    runs = {
        r["ticket__ticket_class"]: r
        for r in CompactionRun.objects.values("ticket__ticket_class").annotate(
            n=Count("id", filter=done),
            fallback=Count("id", filter=Q(status="fallback")),
            failed=Count("id", filter=Q(status="failed")),
            saved=Sum(F("tokens_before") - F("tokens_after"), filter=done & Q(tokens_after__isnull=False)),
            cost=Sum("cost_usd"),
            latency=Avg("latency_ms", filter=done),
        )
    }
    # Which models answered each class, to name the ones whose cost is unknown.
    used = defaultdict(set)
    for class_id, model in (
        AgentStep.objects.filter(offline=False).values_list("ticket__ticket_class", "model").distinct()
    ):
        used[class_id].add(model)
    for class_id, model in CompactionRun.objects.values_list("ticket__ticket_class", "model_used").distinct():
        used[class_id].add(model)
    rejections = defaultdict(lambda: defaultdict(int))
    for class_id, payload in Turn.objects.filter(kind=Turn.Kind.REJECTION).values_list(
        "ticket__ticket_class", "payload"
    ):
        guard = (payload or {}).get("guard") or "unknown"
        rejections[class_id][guard] += 1
    out = []
    for tclass in TicketClass.objects.annotate(n_tickets=Count("tickets")).order_by("token_budget", "name"):
        s, r = steps.get(tclass.pk, {}), runs.get(tclass.pk, {})
        cost = (s.get("cost") or Decimal(0)) + (r.get("cost") or Decimal(0))
        out.append(
            {
                "cls": tclass,
                "tickets": tclass.n_tickets,
                "steps": s.get("n", 0),
                "compactions": r.get("n", 0),
                "fallbacks": r.get("fallback", 0),
                "failed": r.get("failed", 0),
                "tokens_saved": r.get("saved") or 0,
                "cost": cost,
                "compaction_cost": r.get("cost") or Decimal(0),
                "step_latency": int(s.get("latency") or 0),
                "compaction_latency": int(r.get("latency") or 0),
                "rejections": sorted(rejections[tclass.pk].items()),
                "rejections_total": sum(rejections[tclass.pk].values()),
                "unpriced": _unpriced(used[tclass.pk]),
                "cache": cache.get(tclass.pk),
            }
        )
    return out


def model_figures(cache: dict | None = None) -> list[dict]:
    """Per model, not per class: a class's offline and real-model compactions are never mixed.

    Steps by the model that answered; compactions by the model that summarised (`model_used`),
    with the share that fell back to the deterministic trim, the structured-output path
    each used, and net tokens saved (negative when compactions made requests bigger)."""
    cache = cache_figures()[1] if cache is None else cache
    done = Q(status__in=["succeeded", "fallback"])
    rows: dict[str, dict] = defaultdict(
        lambda: {
            "steps": 0,
            "held": 0,
            "step_cost": Decimal(0),
            "step_latency": 0,
            "input_tokens": 0,
            "cached_tokens": 0,
            "compactions": 0,
            "fallbacks": 0,
            "grew": 0,
            "saved": 0,
            "paths": {},
        }
    )
    for r in AgentStep.objects.values("model").annotate(
        n=Count("id"),
        held=Count("id", filter=Q(outcome="held_reply") | Q(checks__held_rest=True)),  # part of a reply held too
        cost=Sum("cost_usd"),
        latency=Avg("latency_ms"),
        tin=Sum("input_tokens"),
        cached=Sum("cached_input_tokens"),
    ):
        row = rows[r["model"]]
        row.update(
            steps=r["n"],
            held=r["held"],
            step_cost=r["cost"] or Decimal(0),
            step_latency=int(r["latency"] or 0),
            input_tokens=r["tin"] or 0,
            cached_tokens=r["cached"] or 0,
        )
    for r in (
        CompactionRun.objects.filter(done)
        .values("model_used")
        .annotate(
            n=Count("id"),
            fallback=Count("id", filter=Q(status="fallback")),
            grew=Count("id", filter=Q(tokens_after__gt=F("tokens_before"))),
            saved=Sum(F("tokens_before") - F("tokens_after"), filter=Q(tokens_after__isnull=False)),
        )
    ):
        row = rows[r["model_used"] or "?"]
        row.update(compactions=r["n"], fallbacks=r["fallback"], grew=r["grew"], saved=r["saved"] or 0)
    for model, path, n in (
        CompactionRun.objects.filter(done).values_list("model_used", "output_path").annotate(n=Count("id"))
    ):
        rows[model or "?"]["paths"][path or "text"] = n
    out = []
    for model, row in sorted(rows.items()):
        row["model"] = model
        row["fallback_share"] = round(100 * row["fallbacks"] / row["compactions"]) if row["compactions"] else None
        row["cached_share"] = round(100 * row["cached_tokens"] / row["input_tokens"]) if row["input_tokens"] else None
        row["paths"] = sorted(row["paths"].items())
        row["cache"] = cache.get(model)
        out.append(row)
    return out


@login_required
@require_GET
def figures(request):
    if not is_admin(request.user):
        raise PermissionDenied("Figures are for admins.")
    by_class, by_model = cache_figures()
    rows, csat_classes = class_figures(by_class), csat_by_class()
    return render(
        request,
        "desk/figures.html",
        {
            "rows": rows,
            "models": model_figures(by_model),
            "budget_rows": budget_rows(rows, csat_classes),
            "budget_trends": budget_trends(),
            "token_counts": token_counts(),
            "token_window": calibration.WINDOW,
            "token_min_steps": calibration.MIN_STEPS,
            "csat_classes": csat_classes,
            "csat_agents": csat_by_agent(),
            "satisfied": SATISFIED,
        },
    )
