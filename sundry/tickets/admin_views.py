"""Per-class figures for admins: tickets, compactions, tokens saved, cost, latency, guard rejections."""

from __future__ import annotations

from collections import defaultdict
from decimal import Decimal

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.db.models import Avg, Count, F, Q, Sum
from django.shortcuts import render
from django.views.decorators.http import require_GET

from sundry.agent import pricing
from sundry.agent.gateway import resolve_model
from sundry.agent.models import AgentStep
from sundry.compaction.models import CompactionRun
from sundry.core.people import is_admin
from sundry.tickets.models import TicketClass, Turn


def _unpriced(models: set[str]) -> list[str]:
    """The models among `models` with no known price: their calls count 0 in the cost."""
    return sorted(m for m in models if m and not pricing.cost(m, 0, 0, base_url=resolve_model(m).base_url).priced)


def class_figures() -> list[dict]:
    done = Q(status__in=["succeeded", "fallback"])
    steps = {r["ticket__ticket_class"]: r for r in AgentStep.objects.values("ticket__ticket_class").annotate(
        n=Count("id"), cost=Sum("cost_usd"), latency=Avg("latency_ms"), tokens=Sum("input_tokens"))}
    runs = {r["ticket__ticket_class"]: r for r in CompactionRun.objects.values("ticket__ticket_class").annotate(
        n=Count("id", filter=done), fallback=Count("id", filter=Q(status="fallback")),
        failed=Count("id", filter=Q(status="failed")),
        saved=Sum(F("tokens_before") - F("tokens_after"), filter=done & Q(tokens_after__isnull=False)),
        cost=Sum("cost_usd"), latency=Avg("latency_ms", filter=done))}
    # Which models answered each class, to name the ones whose cost is unknown.
    used = defaultdict(set)
    for class_id, model in AgentStep.objects.filter(offline=False).values_list("ticket__ticket_class", "model").distinct():
        used[class_id].add(model)
    for class_id, model in CompactionRun.objects.values_list("ticket__ticket_class", "model_used").distinct():
        used[class_id].add(model)
    rejections = defaultdict(lambda: defaultdict(int))
    for class_id, payload in Turn.objects.filter(kind=Turn.Kind.REJECTION).values_list(
            "ticket__ticket_class", "payload"):
        guard = (payload or {}).get("guard") or "unknown"
        rejections[class_id][guard] += 1
    out = []
    for tclass in TicketClass.objects.annotate(n_tickets=Count("tickets")).order_by("token_budget", "name"):
        s, r = steps.get(tclass.pk, {}), runs.get(tclass.pk, {})
        cost = (s.get("cost") or Decimal(0)) + (r.get("cost") or Decimal(0))
        out.append({
            "cls": tclass, "tickets": tclass.n_tickets, "steps": s.get("n", 0),
            "compactions": r.get("n", 0), "fallbacks": r.get("fallback", 0), "failed": r.get("failed", 0),
            "tokens_saved": r.get("saved") or 0, "cost": cost, "compaction_cost": r.get("cost") or Decimal(0),
            "step_latency": int(s.get("latency") or 0), "compaction_latency": int(r.get("latency") or 0),
            "rejections": sorted(rejections[tclass.pk].items()),
            "rejections_total": sum(rejections[tclass.pk].values()),
            "unpriced": _unpriced(used[tclass.pk]),
        })
    return out


@login_required
@require_GET
def figures(request):
    if not is_admin(request.user):
        raise PermissionDenied("Figures are for admins.")
    return render(request, "tickets/figures.html", {"rows": class_figures()})
