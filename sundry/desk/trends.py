"""A class's figures week by week, and the tickets behind each week's figure.

Weeks run Monday to Monday in the site's time zone (`TIME_ZONE`): the database truncates each row's
time to its local week (`TruncWeek`), and a week's drill-down selects the same half-open range.
Each family of figures is one aggregate query over the window — steps (tokens per request,
latency, cost, the cached share), compactions, guard rejections by kind — so the page costs the
same for ten tickets or ten thousand.

A week with no step, no compaction and no rejection has no figures (None: the chart breaks its line,
the table says so); a week with steps and no rejection has 0 rejections. The cached share is None
for a week whose steps sent no input to a provider (an offline model reports none).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date, datetime, time, timedelta
from decimal import Decimal

from django.db.models import Count, Q, Sum, TextField, Value
from django.db.models.fields.json import KT
from django.db.models.functions import Coalesce, NullIf, TruncWeek
from django.utils import timezone

from sundry.agent.models import AgentStep
from sundry.compaction.models import CompactionRun
from sundry.desk.budgetfigures import BUDGET_SETTINGS
from sundry.tickets.models import TicketClass, TicketClassChange, Turn

# The figures a week has, in the page's order: key → (name, unit).
FIGURES = {
    "tokens": ("Tokens per request", "tokens"),
    "compactions": ("Compactions", "compactions"),
    "cost": ("Cost", "USD"),
    "cache": ("Cached share of input", "%"),
    "latency": ("Latency per step", "ms"),
    "rejections": ("Guard rejections", "rejections"),
}
# What counts as a compaction done, as the figures page counts it; every run's cost counts.
DONE = ("succeeded", "fallback")
DEFAULT_WEEKS = 12
MAX_WEEKS = 52
UNKNOWN_GUARD = "unknown"


@dataclass
class Week:
    start: date
    steps: int = 0
    tickets: int = 0
    request_tokens: int = 0
    latency_ms: int = 0
    step_cost: Decimal = Decimal(0)
    input_tokens: int = 0
    cached_tokens: int = 0
    runs: int = 0
    compactions: int = 0
    compaction_cost: Decimal = Decimal(0)
    rejections: dict[str, int] = field(default_factory=dict)

    @property
    def empty(self) -> bool:
        return not (self.steps or self.runs or self.rejections)

    def value(self, figure: str, kind: str | None = None):
        """The week's figure; None when the week has nothing to measure it on."""
        if figure == "tokens":
            return self.request_tokens / self.steps if self.steps else None
        if figure == "latency":
            return self.latency_ms / self.steps if self.steps else None
        if figure == "cache":
            return 100 * self.cached_tokens / self.input_tokens if self.input_tokens else None
        if self.empty:
            return None
        if figure == "cost":
            return self.step_cost + self.compaction_cost
        if figure == "compactions":
            return self.compactions
        if figure == "rejections":
            return self.rejections.get(kind, 0) if kind else sum(self.rejections.values())
        raise KeyError(figure)


def monday_of(day: date) -> date:
    return day - timedelta(days=day.weekday())


def week_starts(weeks: int, today: date | None = None) -> list[date]:
    """The last `weeks` local weeks' Mondays, oldest first, this week's last."""
    last = monday_of(today or timezone.localdate())
    return [last - timedelta(weeks=k) for k in range(weeks - 1, -1, -1)]


def week_bounds(monday: date) -> tuple[datetime, datetime]:
    """[start, end) of the local week starting `monday`, as aware datetimes (a DST week is 167 or 169 hours)."""
    tz = timezone.get_current_timezone()
    start = timezone.make_aware(datetime.combine(monday, time.min), tz)
    return start, timezone.make_aware(datetime.combine(monday + timedelta(days=7), time.min), tz)


def _local_week(value: datetime) -> date:
    return timezone.localtime(value).date()


def _in(tclass: TicketClass, since: datetime, until: datetime) -> Q:
    return Q(ticket__ticket_class=tclass, created_at__gte=since, created_at__lt=until)


def guard_kind():
    """A rejection turn's guard, as the figures page names it: missing or blank is "unknown"."""
    return Coalesce(NullIf(KT("payload__guard"), Value("")), Value(UNKNOWN_GUARD), output_field=TextField())


def change_label(changes: dict) -> str:
    """`{field: [before, after]}` in words, budget settings first (jsonb keeps its keys in its own order)."""
    names = [n for n in BUDGET_SETTINGS if n in changes] + sorted(n for n in changes if n not in BUDGET_SETTINGS)
    return "; ".join(f"{n} {changes[n][0]} → {changes[n][1]}" for n in names)


def class_trends(tclass: TicketClass, weeks: int = DEFAULT_WEEKS, today: date | None = None) -> dict:
    """{"weeks": [Week, oldest first], "kinds": guard kinds seen, "marks": [(monday, label)]}."""
    starts = week_starts(weeks, today)
    since, until = week_bounds(starts[0])[0], week_bounds(starts[-1])[1]
    found = {s: Week(s) for s in starts}
    window = _in(tclass, since, until)
    for r in (
        AgentStep.objects.filter(window)
        .annotate(week=TruncWeek("created_at"))
        .values("week")
        .annotate(
            steps=Count("id"),
            tickets=Count("ticket", distinct=True),
            request_tokens=Sum("request_tokens"),
            latency=Sum("latency_ms"),
            cost=Sum("cost_usd"),
            input_tokens=Sum("input_tokens", filter=Q(offline=False)),
            cached=Sum("cached_input_tokens", filter=Q(offline=False)),
        )
        .order_by()
    ):
        w = found[_local_week(r["week"])]
        w.steps, w.tickets, w.request_tokens = r["steps"], r["tickets"], r["request_tokens"] or 0
        w.latency_ms, w.step_cost = r["latency"] or 0, r["cost"] or Decimal(0)
        w.input_tokens, w.cached_tokens = r["input_tokens"] or 0, r["cached"] or 0
    for r in (
        CompactionRun.objects.filter(window)
        .annotate(week=TruncWeek("created_at"))
        .values("week")
        .annotate(runs=Count("id"), done=Count("id", filter=Q(status__in=DONE)), cost=Sum("cost_usd"))
        .order_by()
    ):
        w = found[_local_week(r["week"])]
        w.runs, w.compactions, w.compaction_cost = r["runs"], r["done"], r["cost"] or Decimal(0)
    kinds = set()
    for r in (
        Turn.objects.filter(window, kind=Turn.Kind.REJECTION)
        .annotate(week=TruncWeek("created_at"), guard=guard_kind())
        .values("week", "guard")
        .annotate(n=Count("id"))
        .order_by()
    ):
        found[_local_week(r["week"])].rejections[r["guard"]] = r["n"]
        kinds.add(r["guard"])
    marks: dict[date, list[str]] = {}
    for change in TicketClassChange.objects.filter(
        ticket_class=tclass, changed_at__gte=since, changed_at__lt=until
    ).order_by("changed_at", "pk"):
        if label := change_label(change.changes):
            marks.setdefault(monday_of(_local_week(change.changed_at)), []).append(label)
    return {
        "weeks": [found[s] for s in starts],
        "kinds": sorted(kinds),
        "marks": [(monday, "; ".join(labels)) for monday, labels in sorted(marks.items())],
    }


@dataclass
class TicketFigure:
    """One ticket's part of a week's step figure."""

    ticket_id: int
    subject: str
    steps: int = 0
    request_tokens: int = 0
    latency_ms: int = 0
    input_tokens: int = 0
    cached_tokens: int = 0
    step_cost: Decimal = Decimal(0)
    compaction_cost: Decimal = Decimal(0)

    @property
    def cost(self) -> Decimal:
        return self.step_cost + self.compaction_cost


def week_tickets(tclass: TicketClass, figure: str, monday: date) -> list[TicketFigure]:
    """Per ticket, what it put into the week's tokens, latency, cache or cost figure: one query each for
    steps and (for cost) compactions. The tickets listed are exactly those the figure counts."""
    since, until = week_bounds(monday)
    window = _in(tclass, since, until)
    steps = AgentStep.objects.filter(window)
    if figure == "cache":
        steps = steps.filter(offline=False, input_tokens__gt=0)
    rows: dict[int, TicketFigure] = {}
    for r in (
        steps.values("ticket_id", "ticket__subject")
        .annotate(
            steps=Count("id"),
            request_tokens=Sum("request_tokens"),
            latency=Sum("latency_ms"),
            cost=Sum("cost_usd"),
            input_tokens=Sum("input_tokens", filter=Q(offline=False)),
            cached=Sum("cached_input_tokens", filter=Q(offline=False)),
        )
        .order_by("ticket_id")
    ):
        rows[r["ticket_id"]] = TicketFigure(
            r["ticket_id"],
            r["ticket__subject"],
            steps=r["steps"],
            request_tokens=r["request_tokens"] or 0,
            latency_ms=r["latency"] or 0,
            input_tokens=r["input_tokens"] or 0,
            cached_tokens=r["cached"] or 0,
            step_cost=r["cost"] or Decimal(0),
        )
    if figure == "cost":
        for r in (
            CompactionRun.objects.filter(window)
            .values("ticket_id", "ticket__subject")
            .annotate(cost=Sum("cost_usd"))
            .order_by("ticket_id")
        ):
            row = rows.setdefault(r["ticket_id"], TicketFigure(r["ticket_id"], r["ticket__subject"]))
            row.compaction_cost = r["cost"] or Decimal(0)
    return [rows[k] for k in sorted(rows)]


def week_compactions(tclass: TicketClass, monday: date) -> list[dict]:
    """The compactions the week's figure counts, oldest first."""
    since, until = week_bounds(monday)
    return list(
        CompactionRun.objects.filter(_in(tclass, since, until), status__in=DONE)
        .order_by("created_at", "pk")
        .values(
            "id", "ticket_id", "ticket__subject", "created_at", "status", "model_used", "tokens_before", "tokens_after"
        )
    )


def week_rejections(tclass: TicketClass, monday: date, kind: str | None = None) -> list[dict]:
    """The guard rejections the week's figure counts (of one kind, when given), oldest first."""
    since, until = week_bounds(monday)
    rows = Turn.objects.filter(_in(tclass, since, until), kind=Turn.Kind.REJECTION).annotate(guard=guard_kind())
    if kind:
        rows = rows.filter(guard=kind)
    return list(
        rows.order_by("created_at", "pk").values(
            "id", "ticket_id", "ticket__subject", "number", "guard", "created_at", "payload__name"
        )
    )


def week_of(tclass: TicketClass, monday: date) -> Week:
    """One week's figures, the same as its column on the trends page."""
    return class_trends(tclass, 1, today=monday)["weeks"][0]
