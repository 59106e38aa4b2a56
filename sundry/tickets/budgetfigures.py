"""Budget beside cost and quality, per class, for the figures page: what a class's requests came to
against its budget, what a ticket cost, and how its customers rated it."""

from __future__ import annotations

from django.db.models import Avg, Count, F, Max, Q

from sundry.agent.models import AgentStep
from sundry.tickets.budgetfit import fixed_part
from sundry.tickets.satisfaction import Csat


def budget_rows(class_rows: list[dict], csat: list[Csat]) -> list[dict]:
    """`class_rows`: `admin_views.class_figures()`; `csat`: `csat_by_class()`, in the same class order."""
    over = Q(request_tokens__gt=F("ticket__ticket_class__token_budget"))
    steps = {r["ticket__ticket_class"]: r for r in AgentStep.objects.values("ticket__ticket_class").annotate(
        n=Count("id"), over=Count("id", filter=over), peak=Max("request_tokens"), mean=Avg("request_tokens"))}
    rated = {c.label: c for c in csat}
    out = []
    for row in class_rows:
        tclass, s = row["cls"], steps.get(row["cls"].pk, {})
        tickets, n = row["tickets"], s.get("n", 0)
        out.append({
            "cls": tclass, "fit": fixed_part(tclass), "steps": n, "mean": int(s.get("mean") or 0),
            "peak": s.get("peak") or 0, "over": s.get("over", 0),
            "over_share": round(100 * s.get("over", 0) / n, 1) if n else None,
            "cost_per_ticket": row["cost"] / tickets if tickets else None,
            "compactions_per_ticket": round(row["compactions"] / tickets, 2) if tickets else None,
            "rejections_per_ticket": round(row["rejections_total"] / tickets, 2) if tickets else None,
            "csat": rated.get(tclass.name),
        })
    return out
