"""The budget lab's charts: server-rendered SVG that reads without colour and without sight.

Each chart is an `<svg role="img">` named by its `<title>` and summed up in its `<desc>` (what a
screen reader announces), draws its series apart by dash pattern and marker shape as well as
colour, and writes its values as text beside the bars; the page puts the figures behind each
chart in a table next to it. Plain data in (a proposal's stored figures), markup out.
"""

from __future__ import annotations

from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

CURRENT, PROPOSED, RECORDED = "#1b5e9e", "#b5472a", "#6b6b6b"
W, H, LEFT, RIGHT, TOP, BOTTOM = 640, 230, 58, 16, 14, 36


def chart_svg(key: str, title: str, desc: str, body: str, height: int = H, *, links: bool = False) -> SafeString:
    """An image named by its title and described by its desc; with `links`, a group instead (an image's
    content is hidden from assistive technology, so links inside one could not be reached)."""
    k = escape(key)
    named = (
        f'role="group" aria-labelledby="chart-{k}-title" aria-describedby="chart-{k}-desc"'
        if links
        else f'role="img" aria-labelledby="chart-{k}-title chart-{k}-desc"'
    )
    return mark_safe(
        f'<svg class="lab-chart" id="chart-{k}" {named} viewBox="0 0 {W} {height}" width="100%" '
        f'xmlns="http://www.w3.org/2000/svg">'
        f'<title id="chart-{escape(key)}-title">{escape(title)}</title>'
        f'<desc id="chart-{escape(key)}-desc">{escape(desc)}</desc>{body}</svg>'
    )


def chart_text(x: float, y: float, text: str, *, anchor: str = "start", size: int = 11, fill: str = "#222") -> str:
    return (
        f'<text x="{x:.1f}" y="{y:.1f}" font-size="{size}" text-anchor="{anchor}" fill="{fill}">{escape(text)}</text>'
    )


def _marks(steps: list[int], after: list[int], values: list[int], x, y, shape: str, colour: str) -> str:
    """A marker on the line at each step a compaction followed (triangle: current; diamond: proposed)."""
    out = []
    for step in after:
        if step not in steps:
            continue
        i = steps.index(step)
        cx, cy = x(i), y(values[i])
        if shape == "triangle":
            pts = f"{cx:.1f},{cy - 7:.1f} {cx - 6:.1f},{cy + 4:.1f} {cx + 6:.1f},{cy + 4:.1f}"
        else:
            pts = f"{cx:.1f},{cy - 7:.1f} {cx - 6:.1f},{cy:.1f} {cx:.1f},{cy + 7:.1f} {cx + 6:.1f},{cy:.1f}"
        out.append(
            f'<polygon points="{pts}" fill="{colour}" stroke="#fff" stroke-width="1">'
            f"<title>compaction after step {step}</title></polygon>"
        )
    return "".join(out)


def tokens_chart(sample: dict, *, current_trigger: int, proposed_trigger: int) -> SafeString:
    """One ticket's request tokens step by step: the current settings' line, the proposal's, both triggers
    and where each compacted."""
    steps, cur, prop = sample["steps"], sample["current"], sample["proposed"]
    top = max([*cur, *prop, current_trigger, proposed_trigger, 1]) * 1.08
    n = max(len(steps) - 1, 1)

    def x(i):
        return LEFT + (W - LEFT - RIGHT) * i / n

    def y(v):
        return TOP + (H - TOP - BOTTOM) * (1 - v / top)

    body = [f'<line x1="{LEFT}" y1="{y(0):.1f}" x2="{W - RIGHT}" y2="{y(0):.1f}" stroke="#999"/>']
    for frac in (0.5, 1.0):  # two gridlines, labelled, so a reader can place a value
        v = int(top / 1.08 * frac)
        body.append(chart_text(LEFT - 6, y(v) + 4, f"{v:,}", anchor="end", size=10, fill="#555"))
        body.append(f'<line x1="{LEFT}" y1="{y(v):.1f}" x2="{W - RIGHT}" y2="{y(v):.1f}" stroke="#e4e4e4"/>')
    for trigger, colour, dash, label in (
        (current_trigger, CURRENT, "2 3", "current trigger"),
        (proposed_trigger, PROPOSED, "8 4", "proposed trigger"),
    ):
        body.append(
            f'<line x1="{LEFT}" y1="{y(trigger):.1f}" x2="{W - RIGHT}" y2="{y(trigger):.1f}" '
            f'stroke="{colour}" stroke-dasharray="{dash}" stroke-width="1"/>'
        )
        body.append(
            chart_text(W - RIGHT - 2, y(trigger) - 3, f"{label} {trigger:,}", anchor="end", size=10, fill=colour)
        )
    for values, colour, dash in ((cur, CURRENT, ""), (prop, PROPOSED, ' stroke-dasharray="6 3"')):
        pts = " ".join(f"{x(i):.1f},{y(v):.1f}" for i, v in enumerate(values))
        body.append(f'<polyline points="{pts}" fill="none" stroke="{colour}" stroke-width="2"{dash}/>')
    body.append(_marks(steps, sample["current_compactions"], cur, x, y, "triangle", CURRENT))
    body.append(_marks(steps, sample["proposed_compactions"], prop, x, y, "diamond", PROPOSED))
    body.append(chart_text(LEFT, H - 18, f"step {steps[0]}" if steps else "", size=10, fill="#555"))
    body.append(chart_text(W - RIGHT, H - 18, f"step {steps[-1]}" if steps else "", anchor="end", size=10, fill="#555"))
    body.append(chart_text(LEFT, H - 4, "— current (solid, ▲ compaction)", size=10, fill=CURRENT))
    body.append(chart_text(LEFT + 230, H - 4, "– – proposed (dashed, ◆ compaction)", size=10, fill=PROPOSED))

    def said(name, values, after, trigger):
        over = sum(1 for v in values if v > trigger)
        return (
            f"{name}: peak {max(values, default=0):,} tokens, {over} of {len(values)} steps over its trigger "
            f"of {trigger:,}, compacted after " + (", ".join(f"step {s}" for s in after) if after else "no step")
        )

    desc = (
        f"Request tokens for each of ticket #{sample['ticket']}'s {len(steps)} steps. "
        + said("Current settings", cur, sample["current_compactions"], current_trigger)
        + ". "
        + said("Proposed", prop, sample["proposed_compactions"], proposed_trigger)
        + "."
    )
    return chart_svg(
        f"tokens-{sample['ticket']}",
        f"Ticket #{sample['ticket']}: tokens per request, current vs proposed",
        desc,
        "".join(body),
    )


def _bars(
    key: str, title: str, rows: list[tuple[str, float | None, str, str]], unit_max: float, desc: str
) -> SafeString:
    """Horizontal bars, one per row (label, value or None, its text, colour), the value written beside each."""
    row_h, label_w = 26, 290
    height = TOP + row_h * len(rows) + 8
    body = []
    for i, (label, value, shown, colour) in enumerate(rows):
        y0 = TOP + i * row_h
        body.append(chart_text(label_w - 8, y0 + 16, label, anchor="end"))
        width = 0 if value is None or unit_max <= 0 else (W - label_w - 120) * value / unit_max
        body.append(f'<rect x="{label_w}" y="{y0 + 4}" width="{width:.1f}" height="16" fill="{colour}"/>')
        body.append(chart_text(label_w + width + 6, y0 + 16, shown))
    return chart_svg(key, title, desc, "".join(body), height)


def cost_chart(lab: dict) -> SafeString:
    """Cost per ticket: recorded, replayed at the current settings, replayed at the proposal."""
    rows = []
    names = lab.get("columns") or ["Recorded", "Current, replayed", "Proposed, replayed"]
    for name, key, colour in zip(
        names, ("recorded", "replayed_current", "replayed_proposed"), (RECORDED, CURRENT, PROPOSED)
    ):
        per = lab[key].get("cost_per_ticket")
        per = None if per is None else float(per)
        rows.append((name, per, "no known price" if per is None else f"${per:.4f}", colour))
    known = [r[1] for r in rows if r[1] is not None]
    desc = (
        f"The steps (prompt cache included) and the summariser's calls per ticket over {lab['tickets']} tickets, "
        f"at {lab['price_model']}'s prices"
        + (
            f" ({lab['proposed_price_model']}'s for the proposal)"
            if lab.get("proposed_price_model", lab["price_model"]) != lab["price_model"]
            else ""
        )
        + ": "
        + "; ".join(f"{r[0]} {r[2]}" for r in rows)
        + "."
    )
    return _bars("cost", "Cost per ticket", rows, max(known, default=0), desc)


def fidelity_chart(fidelity: dict) -> SafeString | None:
    """The harness's checks at the current settings and at the proposal, as percentages; None when unchecked."""
    if not fidelity.get("checked"):
        return None
    rows = []
    for name in ("ids", "actions", "constraints"):
        for which, colour in (("current", CURRENT), ("proposed", PROPOSED)):
            f = fidelity[which][name]
            shown = "no checks" if f["rate"] is None else f"{f['rate']}% ({f['ok']} of {f['checks']})"
            rows.append((f"{f['label']}, {which}", f["rate"], shown, colour))
    desc = "; ".join(f"{r[0]}: {r[2]}" for r in rows) + "."
    return _bars("fidelity", "What the agent still knows (the harness's checks)", rows, 100.0, desc)


def trend_chart(
    key: str, title: str, days: list[tuple[str, int | None]], marks: list[tuple[str, str]], unit: str
) -> SafeString:
    """A daily series (None: no data that day, the line breaks) with a vertical mark on each day a change
    was applied (`marks`: day, label)."""
    values = [v for _, v in days if v is not None]
    top = max(values + [1]) * 1.1
    n = max(len(days) - 1, 1)

    def x(i):
        return LEFT + (W - LEFT - RIGHT) * i / n

    def y(v):
        return TOP + (H - TOP - BOTTOM) * (1 - v / top)

    labels = [d for d, _ in days]
    body = [
        f'<line x1="{LEFT}" y1="{y(0):.1f}" x2="{W - RIGHT}" y2="{y(0):.1f}" stroke="#999"/>',
        chart_text(LEFT - 6, y(top / 1.1) + 4, f"{int(top / 1.1):,}", anchor="end", size=10, fill="#555"),
    ]
    run: list[str] = []
    for i, (d, v) in enumerate(days + [("", None)]):
        if v is None:
            if len(run) > 1:
                body.append(f'<polyline points="{" ".join(run)}" fill="none" stroke="{CURRENT}" stroke-width="2"/>')
            run = []
            continue
        run.append(f"{x(i):.1f},{y(v):.1f}")
        body.append(
            f'<circle cx="{x(i):.1f}" cy="{y(v):.1f}" r="3" fill="{CURRENT}"><title>{escape(d)}: {v:,} '
            f"{escape(unit)}</title></circle>"
        )
    if labels:
        body.append(chart_text(LEFT, H - 18, labels[0], size=10, fill="#555"))
        body.append(chart_text(W - RIGHT, H - 18, labels[-1], anchor="end", size=10, fill="#555"))
    for day, label in marks:
        i = labels.index(day) if day in labels else len(labels) - 1
        body.append(
            f'<line class="change-mark" data-day="{escape(day)}" x1="{x(i):.1f}" y1="{TOP}" x2="{x(i):.1f}" '
            f'y2="{y(0):.1f}" stroke="{PROPOSED}" stroke-dasharray="4 3" stroke-width="2"><title>'
            f"{escape(day)}: {escape(label)}</title></line>"
        )
        body.append(chart_text(min(x(i) + 4, W - 200), TOP + 10, label, size=10, fill=PROPOSED))
    shown = [(d, v) for d, v in days if v is not None]
    desc = (
        f"{unit.capitalize()}, mean per day: "
        + (", ".join(f"{d} {v:,}" for d, v in shown) or "no steps")
        + ". "
        + (
            "Settings changed: " + "; ".join(f"{d}: {label}" for d, label in marks) + "."
            if marks
            else "No settings change in this period."
        )
    )
    return chart_svg(key, title, desc, "".join(body))
