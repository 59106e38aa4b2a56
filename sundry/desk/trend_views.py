"""A class's figures over time, and the tickets behind each week's figure. Admins only, as the figures page."""

from __future__ import annotations

from datetime import date
from decimal import Decimal

from django import forms
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.http import Http404, HttpResponseBadRequest
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils import timezone
from django.utils.http import urlencode
from django.views.decorators.http import require_GET

from sundry.core.people import is_admin
from sundry.desk import trends
from sundry.desk.trendcharts import weekly_chart
from sundry.people.selectors import customer_of
from sundry.tickets.models import TicketClass

# Drill-down rows a page shows.
PER_PAGE = 100


class WeeksForm(forms.Form):
    weeks = forms.IntegerField(
        min_value=1,
        max_value=trends.MAX_WEEKS,
        required=False,
        label="Weeks",
        help_text=f"How many weeks back from this one, at most {trends.MAX_WEEKS}.",
    )


def _admins_only(request):
    """None for an admin; customers go to their own start page; other staff are refused."""
    if is_admin(request.user):
        return None
    if customer_of(request.user) is not None:
        return redirect("home")
    raise PermissionDenied("Figures are for admins.")


def shown(figure: str):
    """How a figure's value reads, in the table and in the chart."""
    if figure == "cost":
        return lambda v: f"${Decimal(v):.4f}"
    if figure == "cache":
        return lambda v: f"{v:.1f}%"
    if figure == "latency":
        return lambda v: f"{round(v):,} ms"
    if figure == "tokens":
        return lambda v: f"{round(v):,}"
    return lambda v: f"{round(v):,}"


def _week_url(tclass: TicketClass, monday: date, figure: str, kind: str | None = None) -> str:
    url = reverse("desk-trend-week", args=[tclass.pk, monday.isoformat(), figure])
    return f"{url}?{urlencode({'kind': kind})}" if kind else url


@login_required
@require_GET
def class_trends(request, class_id: int):
    if (away := _admins_only(request)) is not None:
        return away
    tclass = get_object_or_404(TicketClass, pk=class_id)
    form = WeeksForm(request.GET or None)
    status, weeks = 200, trends.DEFAULT_WEEKS
    if form.is_bound:
        if form.is_valid():
            weeks = form.cleaned_data["weeks"] or trends.DEFAULT_WEEKS
        else:
            status = 400  # the page still shows the default window, with the form's error beside it
    data = trends.class_trends(tclass, weeks)
    charts = []
    for figure, (name, _unit) in trends.FIGURES.items():
        points = [(w.start, w.value(figure), _week_url(tclass, w.start, figure)) for w in data["weeks"]]
        charts.append(
            {
                "figure": figure,
                "name": name,
                "chart": weekly_chart(
                    f"trend-{figure}", f"{tclass.name}: {name.lower()}", points, data["marks"], shown(figure)
                ),
            }
        )
    marks = dict(data["marks"])
    # The table behind the charts: a row a week, a cell a figure, each linking to its tickets.
    table = [
        {
            "week": w,
            "change": marks.get(w.start, ""),
            "cells": [(figure, *_cell(tclass, w, figure)) for figure in trends.FIGURES],
            "kinds": [(kind, *_cell(tclass, w, "rejections", kind)) for kind in data["kinds"]],
        }
        for w in data["weeks"]
    ]
    return render(
        request,
        "desk/trends.html",
        {
            "tclass": tclass,
            "form": form,
            "weeks": len(data["weeks"]),
            "marks": data["marks"],
            "charts": charts,
            "table": table,
            "kinds": data["kinds"],
            "figures": [name for name, _ in trends.FIGURES.values()],
            "tz": timezone.get_current_timezone_name(),
        },
        status=status,
    )


def _cell(tclass: TicketClass, week: trends.Week, figure: str, kind: str | None = None) -> tuple[str, str, bool]:
    """(the figure as it reads, or why the week has none; its drill-down URL; whether it has one)."""
    value = week.value(figure, kind)
    if value is not None:
        return shown(figure)(value), _week_url(tclass, week.start, figure, kind), True
    if week.empty:
        return "no activity", "", False
    return ("no input sent to a provider" if figure == "cache" else "no model steps"), "", False


def _monday(week: str) -> date | str:
    """The week's Monday, or what is wrong with `week`."""
    try:
        day = date.fromisoformat(week)
    except ValueError:
        return f"{week!r} is not a date: a week is named by its Monday, as YYYY-MM-DD."
    if day.weekday() != 0:
        return f"A week is named by its Monday; {week} is a {day:%A} (its week's Monday is {trends.monday_of(day)})."
    return day


@login_required
@require_GET
def trend_week(request, class_id: int, week: str, figure: str):
    """The tickets (or compactions, or rejections) behind one week's figure, each linking to its ticket."""
    if (away := _admins_only(request)) is not None:
        return away
    tclass = get_object_or_404(TicketClass, pk=class_id)
    if figure not in trends.FIGURES:
        raise Http404(f"No figure {figure!r}; the figures are {', '.join(trends.FIGURES)}.")
    monday = _monday(week)
    if isinstance(monday, str):
        return HttpResponseBadRequest(monday, content_type="text/plain; charset=utf-8")
    kind = (request.GET.get("kind") or None) if figure == "rejections" else None
    summary = trends.week_of(tclass, monday)
    if figure == "compactions":
        rows = trends.week_compactions(tclass, monday)
    elif figure == "rejections":
        rows = trends.week_rejections(tclass, monday, kind)
    else:
        rows = trends.week_tickets(tclass, figure, monday)
    page = Paginator(rows, PER_PAGE).get_page(request.GET.get("page"))
    value = summary.value(figure, kind)
    start, end = trends.week_bounds(monday)
    return render(
        request,
        "desk/trend_week.html",
        {
            "tclass": tclass,
            "figure": figure,
            "name": trends.FIGURES[figure][0],
            "kind": kind,
            "monday": monday,
            "start": start,
            "end": end,
            "week": summary,
            "total_cost": summary.step_cost + summary.compaction_cost,
            "value": None if value is None else shown(figure)(value),
            "page": page,
            "count": len(rows),
            "tickets": len({r["ticket_id"] if isinstance(r, dict) else r.ticket_id for r in rows}),
            "query": urlencode({"kind": kind}) if kind else "",
        },
    )
