"""Budget beside cost and quality, per class, for the figures page: what a class's requests came to
against its budget, what a ticket cost, and how its customers rated it."""

from __future__ import annotations

from datetime import timedelta

from django.db.models import Avg, Count, F, Max, Q
from django.db.models.functions import TruncDate
from django.utils import timezone

from sundry.agent.models import AgentStep
from sundry.desk.budgetfit import fixed_part
from sundry.desk.labcharts import trend_chart
from sundry.tickets.models import TicketClass, TicketClassChange
from sundry.tickets.satisfaction import Csat

# The time series cover this many days back from today.
TREND_DAYS = 28
# A change to these moves the series: the figures page marks it.
BUDGET_SETTINGS = ("token_budget", "trigger_fraction", "recent_turns_kept", "ledger_share")


def budget_rows(class_rows: list[dict], csat: list[Csat]) -> list[dict]:
    """`class_rows`: `admin_views.class_figures()`; `csat`: `csat_by_class()`, in the same class order."""
    over = Q(request_tokens__gt=F("ticket__ticket_class__token_budget"))
    steps = {
        r["ticket__ticket_class"]: r
        for r in AgentStep.objects.values("ticket__ticket_class").annotate(
            n=Count("id"), over=Count("id", filter=over), peak=Max("request_tokens"), mean=Avg("request_tokens")
        )
    }
    rated = {c.label: c for c in csat}
    out = []
    for row in class_rows:
        tclass, s = row["cls"], steps.get(row["cls"].pk, {})
        tickets, n = row["tickets"], s.get("n", 0)
        out.append(
            {
                "cls": tclass,
                "fit": fixed_part(tclass),
                "steps": n,
                "mean": int(s.get("mean") or 0),
                "peak": s.get("peak") or 0,
                "over": s.get("over", 0),
                "over_share": round(100 * s.get("over", 0) / n, 1) if n else None,
                "cost_per_ticket": row["cost"] / tickets if tickets else None,
                "compactions_per_ticket": round(row["compactions"] / tickets, 2) if tickets else None,
                "rejections_per_ticket": round(row["rejections_total"] / tickets, 2) if tickets else None,
                "csat": rated.get(tclass.name),
            }
        )
    return out


def budget_trends(days: int = TREND_DAYS) -> list[dict]:
    """Per class, request tokens per step day by day, with each budget change marked on its day."""
    since = timezone.localdate() - timedelta(days=days - 1)
    means: dict[int, list[tuple[str, int]]] = {}
    for row in (
        AgentStep.objects.filter(created_at__date__gte=since)
        .annotate(day=TruncDate("created_at"))
        .values("ticket__ticket_class", "day")
        .annotate(mean=Avg("request_tokens"))
        .order_by("day")
    ):
        means.setdefault(row["ticket__ticket_class"], []).append((row["day"].isoformat(), int(row["mean"])))
    changes: dict[int, list[tuple[str, str]]] = {}
    for change in (
        TicketClassChange.objects.filter(changed_at__date__gte=since)
        .select_related("changed_by")
        .order_by("changed_at")
    ):
        moved = [
            f"{name} {change.changes[name][0]} → {change.changes[name][1]}"
            for name in BUDGET_SETTINGS
            if name in change.changes
        ]  # in the form's order: jsonb keeps its keys sorted its own way
        if moved:
            day = timezone.localtime(change.changed_at).date().isoformat()
            changes.setdefault(change.ticket_class_id, []).append((day, "; ".join(moved)))
    out = []
    for tclass in TicketClass.objects.all():
        found = dict(means.get(tclass.pk, []))
        marks = changes.get(tclass.pk, [])
        if not found and not marks:
            continue
        # Every day of the period on the axis, so a change sits on its own day; None: no steps that day.
        days_ = [(d.isoformat(), found.get(d.isoformat())) for d in (since + timedelta(n) for n in range(days))]
        out.append(
            {
                "cls": tclass,
                "marks": marks,
                "days": days_,
                "chart": trend_chart(
                    f"trend-{tclass.slug}",
                    f"{tclass.name}: request tokens per step, by day",
                    days_,
                    marks,
                    "tokens per request",
                ),
            }
        )
    return out
