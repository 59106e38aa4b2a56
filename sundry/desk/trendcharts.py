"""Weekly trend charts: server-rendered SVG in the budget lab's manner (`labcharts`).

One series per chart, a point per week that has a figure, each point a link to the tickets behind it;
a week without one breaks the line (a gap, never a zero). A dashed vertical line marks each week a
class's settings changed. `<title>` names the chart and `<desc>` reads out every week's value, the
empty weeks and the changes; the chart is a group, not an image, so its points stay reachable links
for a keyboard and a screen reader; the page puts the same figures in a table beside it.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import date

from django.utils.html import escape
from django.utils.safestring import SafeString

from sundry.desk.labcharts import BOTTOM, CURRENT, LEFT, PROPOSED, RIGHT, TOP, H, W, chart_svg, chart_text


def weekly_chart(
    key: str,
    title: str,
    points: list[tuple[date, float | None, str]],
    marks: list[tuple[date, str]],
    shown: Callable[[float], str],
) -> SafeString:
    """`points`: (week's Monday, value or None, drill-down URL); `marks`: (week's Monday, what changed);
    `shown`: a value as the reader should read it."""
    values = [float(v) for _, v, _ in points if v is not None]
    top = max(values + [0]) * 1.1 or 1
    n = max(len(points) - 1, 1)

    def x(i):
        return LEFT + (W - LEFT - RIGHT) * i / n

    def y(v):
        return TOP + (H - TOP - BOTTOM) * (1 - float(v) / float(top))

    body = [
        f'<line x1="{LEFT}" y1="{y(0):.1f}" x2="{W - RIGHT}" y2="{y(0):.1f}" stroke="#999"/>',
        chart_text(LEFT - 6, y(0) + 4, shown(0), anchor="end", size=10, fill="#555"),
    ]
    if values:
        peak = max(values)
        body.append(chart_text(LEFT - 6, y(peak) + 4, shown(peak), anchor="end", size=10, fill="#555"))
        body.append(f'<line x1="{LEFT}" y1="{y(peak):.1f}" x2="{W - RIGHT}" y2="{y(peak):.1f}" stroke="#e4e4e4"/>')
    lines, dots, run = [], [], []  # lines first, points over them: a point stays the thing clicked
    for i, (monday, value, href) in enumerate(points + [(None, None, "")]):
        if value is None:
            if len(run) > 1:
                lines.append(
                    f'<polyline points="{" ".join(run)}" fill="none" stroke="{CURRENT}" stroke-width="2" '
                    'pointer-events="none"/>'
                )
            run = []
            if monday is not None:  # a gap: a grey tick on the axis says "no figure", not zero
                dots.append(
                    f'<line class="gap" x1="{x(i):.1f}" y1="{y(0) - 4:.1f}" x2="{x(i):.1f}" y2="{y(0) + 4:.1f}" '
                    f'stroke="#bbb"><title>week of {monday.isoformat()}: no activity</title></line>'
                )
            continue
        run.append(f"{x(i):.1f},{y(value):.1f}")
        dots.append(
            f'<a href="{escape(href)}" class="point" data-week="{monday.isoformat()}" aria-label="week of '
            f'{monday.isoformat()}: {escape(shown(value))}, the tickets behind it">'
            f'<circle cx="{x(i):.1f}" cy="{y(value):.1f}" r="5" fill="{CURRENT}"><title>week of '
            f"{monday.isoformat()}: {escape(shown(value))} (open the tickets behind it)</title></circle></a>"
        )
    if points:
        body.append(chart_text(LEFT, H - 18, f"week of {points[0][0].isoformat()}", size=10, fill="#555"))
        body.append(
            chart_text(W - RIGHT, H - 18, f"week of {points[-1][0].isoformat()}", anchor="end", size=10, fill="#555")
        )
    weeks = [p[0] for p in points]
    changes = []
    for monday, label in marks:
        if monday not in weeks:
            continue
        i = weeks.index(monday)
        changes.append(
            f'<line class="change-mark" data-week="{monday.isoformat()}" x1="{x(i):.1f}" y1="{TOP}" x2="{x(i):.1f}" '
            f'y2="{y(0):.1f}" stroke="{PROPOSED}" stroke-dasharray="4 3" stroke-width="2"><title>week of '
            f"{monday.isoformat()}: {escape(label)}</title></line>"
        )
        changes.append(chart_text(min(x(i) + 4, W - 200), TOP + 10, label[:60], size=10, fill=PROPOSED))
    body += lines + changes + dots
    measured = [f"week of {m.isoformat()} {shown(v)}" for m, v, _ in points if v is not None]
    gaps = [m.isoformat() for m, v, _ in points if v is None]
    desc = (
        f"{title}, by week: "
        + ("; ".join(measured) or "no figures")
        + ". "
        + (f"No figure in the weeks of {', '.join(gaps)}. " if gaps else "")
        + (
            "Settings changed: " + "; ".join(f"week of {m.isoformat()}: {label}" for m, label in marks) + "."
            if marks
            else "No settings change in this period."
        )
    )
    return chart_svg(key, title, desc, "".join(body), links=True)
