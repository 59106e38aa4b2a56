"""Harness results → a summary table, a JSON report and a self-contained HTML report with SVG charts."""

from __future__ import annotations

import json
from collections import Counter
from datetime import datetime, timezone
from pathlib import Path

from sundry.context.harvest import NEAR_FULL
from sundry.evals.harness import LABELS, REFUSED, STRATEGIES, HarnessReport

# (column, numerator, denominator) — rates shown per strategy.
RATES = [
    ("ID survival (guard accepts)", "id_ok", "id_checks"),
    ("IDs verbatim in request", "id_present", "id_checks"),
    ("Stated constraints verbatim", "constraint_ok", "constraint_checks"),
    ("Planted rule verbatim", "planted_verbatim", "planted_checks"),
    ("Planted rule respected", "planted_respected", "planted_checks"),
    ("Side effects still known", "action_ok", "action_checks"),
    ("Model next call: same IDs", "model_same", "model_steps"),
]
SHORT = {
    "ID survival (guard accepts)": "IDs (guard)",
    "IDs verbatim in request": "IDs verbatim",
    "Stated constraints verbatim": "constraints",
    "Planted rule verbatim": "planted: kept",
    "Planted rule respected": "planted: obeyed",
    "Side effects still known": "side effects",
    "Model next call: same IDs": "model: same IDs",
}
COUNTS = [("orphans", "Orphaned calls/results"), ("model_repeats", "Side effects proposed again")]
COLORS = {
    "sundry": "#1b7f5a",
    "window": "#c2581b",
    "prose": "#5b5fc7",
    "full": "#888888",
    "triggered": "#0b4f36",
    "forced": "#6cc3a0",
}


def _rate(c: Counter, num: str, den: str) -> float | None:
    if num == "model_same":
        return None if not c["model_steps"] else (c["model_steps"] - c["model_diffs"]) / c["model_steps"]
    return None if not c[den] else c[num] / c[den]


def _pct(x: float | None) -> str:
    return "—" if x is None else f"{100 * x:.1f}%"


def rates(report: HarnessReport, domain: str | None = None) -> dict[str, dict]:
    totals = report.totals(domain)
    out = {}
    for s in STRATEGIES:
        c = totals[s]
        row = {
            label: {
                "rate": _rate(c, n, d),
                "num": c[n] if n != "model_same" else c["model_steps"] - c["model_diffs"],
                "den": c[d],
            }
            for label, n, d in RATES
        }
        row.update({label: {"count": c[key]} for key, label in COUNTS})
        out[s] = row
    return out


def summary_table(report: HarnessReport) -> str:
    """The console table: one row per strategy, rates per check; then per-domain ID survival."""
    heads = ["strategy"] + [label for label, _, _ in RATES] + [label for _, label in COUNTS]
    rows = []
    for s, row in rates(report).items():
        rows.append(
            [LABELS[s]]
            + [
                _pct(row[label]["rate"]) + (f" ({row[label]['num']}/{row[label]['den']})" if row[label]["den"] else "")
                for label, _, _ in RATES
            ]
            + [str(row[label]["count"]) for _, label in COUNTS]
        )
    lines = _grid(heads, rows)
    lines.append("")
    dheads = ["domain", "tickets"] + [f"{LABELS[s]}: IDs / constraints" for s in STRATEGIES]
    drows = []
    for d in report.domains():
        r = rates(report, d)
        n = sum(1 for t in report.tickets if t.domain == d)
        drows.append(
            [d, str(n)]
            + [
                f"{_pct(r[s]['ID survival (guard accepts)']['rate'])} / "
                f"{_pct(r[s]['Stated constraints verbatim']['rate'])}"
                for s in STRATEGIES
            ]
        )
    return "\n".join(lines + _grid(dheads, drows))


def _grid(heads: list[str], rows: list[list[str]]) -> list[str]:
    # Transposed when wide: one line per check reads better in a terminal.
    if len(heads) > 6:
        width = max(len(h) for h in heads)
        out = [" " * width + " | " + " | ".join(f"{r[0]:<26}" for r in rows)]
        out.append("-" * len(out[0]))
        for i, h in enumerate(heads[1:], 1):
            out.append(f"{h:<{width}} | " + " | ".join(f"{r[i]:<26}" for r in rows))
        return out
    widths = [max(len(str(x)) for x in col) for col in zip(heads, *rows)]
    fmt = " | ".join(f"{{:<{w}}}" for w in widths)
    return [fmt.format(*heads), "-+-".join("-" * w for w in widths)] + [fmt.format(*r) for r in rows]


def failure_lines(report: HarnessReport, *, per_baseline: int = 5) -> list[str]:
    out = []
    sundry = report.failures("sundry")
    out.append(f"Sundry lanes: {len(sundry)} failure(s)")
    out += [f"  {f.ticket} turn {f.turn} [{f.check}] {f.detail}" for f in sundry]
    for s in ("window", "prose"):
        fails = report.failures(s)
        by_check = Counter(f.check for f in fails)
        out.append(
            f"{LABELS[s]}: {len(fails)} failure(s) — " + ", ".join(f"{k} {v}" for k, v in by_check.most_common())
        )
        out += [f"  {f.ticket} turn {f.turn} [{f.check}] {f.detail}" for f in fails[:per_baseline]]
    s = report.totals()["sundry"]
    out.append(
        f"Recorded calls repeating a completed side effect: {s['repeats_proposed']}; "
        f"held by the repeat guard after compaction: {s['repeats_held']}"
    )
    out.append(
        f"Recorded second changes with new arguments (not repeats, by the tool's declaration): "
        f"{s['second_changes']}; wrongly held: {s['second_changes_held']}"
    )
    runs = sum(t.compactions for t in report.tickets)
    falls = sum(t.fallbacks for t in report.tickets)
    out.append(
        f"Forced compactions: {runs}; {falls} fell back to the deterministic trim "
        "(the summary was refused, mostly as not shorter than a small range); lanes intact either way"
    )
    steps = sum(t.boundaries for t in report.tickets)
    out.append(
        f"Ledger near its allowance ({report.config.ledger_tokens:,} tokens, ≥ {NEAR_FULL:.0%}): "
        f"{s['ledger_near_full']} of {steps} steps; peak {max((t.stats['sundry']['ledger_peak'] for t in report.tickets), default=0):,} tokens"
    )
    over = [(t.id, o) for t in report.tickets for o in t.over_budget]
    out.append(
        f"Sundry's request over the budget ({report.config.budget:,}): {len(over)} of {steps} steps; "
        f"the fixed part alone over it on {s['over_budget_fixed']}"
    )
    out += [f"  {tid} turn {o['turn']}: {o['tokens']:,} tokens, {o['cause']}" for tid, o in over]
    triggered = sum(1 for t in report.tickets for n in t.series["triggered"] if n > report.config.budget)
    how = (
        "the trigger after resolution steps, and in place before a step over the budget"
        if report.config.compact_before_step
        else "the trigger after resolution steps only (the control): lookups between two resolution steps grow the "
        "request before the trigger is asked"
    )
    out.append(f"Compacted as production does it ({how}): over the budget on {triggered} of {steps} steps")
    made_up = [(t.id, m) for t in report.tickets for m in t.made_up]
    if made_up:
        by = Counter(m["class"] for _, m in made_up)
        out.append(
            f"IDs the guard refuses even against the full history: {len(made_up)} — "
            + ", ".join(f"{REFUSED_LABELS[k]} {by[k]}" for k in REFUSED)
        )
        for tid, m in made_up:
            out.append(
                f"  {tid} turn {m['turn']} {m['tool']}.{m['arg']}={m['value']} — {REFUSED_LABELS[m['class']]}; "
                f"{'refused after compaction' if m['caught'] else 'ACCEPTED after compaction'}"
            )
    out += constraint_lines(report)
    return out


def constraint_lines(report: HarnessReport) -> list[str]:
    """The constraint classifier against the labels, or plainly that nothing was labelled."""
    if not any(t.labelled is not None for t in report.tickets):
        return [
            "Constraints: none of these tickets has labelled constraints, so constraints were not measured "
            "(give --labels FILE; see sundry/evals/README.md for its format)."
        ]
    out = []
    for what, enforced in (
        ("Constraint classifier (quote threshold: what a summary quotes)", False),
        ("Rule classifier (enforce threshold: candidate rules; the control)", True),
    ):
        score = report.classifier_score(enforced=enforced)
        if score["labelled"]:
            out.append(
                f"{what} against the labelled constraints: recall {_pct(score['recall'])} "
                f"({score['labels_found']}/{score['labelled']}), precision {_pct(score['precision'])} "
                f"({score['flags_correct']}/{score['flagged']})"
            )
    return out


REFUSED_LABELS = {
    "made_up": "truly wrong: made up",
    "unverified": "truly wrong: used unverified",
    "same_response": "recorded in the same response as its lookup",
    "free_text": "returned only inside free text",
    "typed_not_looked_up": "typed by the customer, written to before any lookup (the guard asks for one)",
    "unrecognised": "legitimate but refused (typed in a shape no pattern knows)",
}


def as_json(report: HarnessReport) -> dict:
    return {
        "generated": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "config": report.config.describe(),
        "seconds": round(report.seconds, 2),
        "strategies": LABELS,
        "rates": rates(report),
        "rates_by_domain": {d: rates(report, d) for d in report.domains()},
        "classifier": report.classifier_score(),
        "classifier_enforce_threshold": report.classifier_score(enforced=True),
        "failures": [f.as_dict() for f in report.failures()],
        "tickets": [t.as_dict() for t in report.tickets],
    }


def write_json(report: HarnessReport, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(as_json(report), ensure_ascii=False, indent=1))
    return path


# --- charts: plain data the template draws as inline SVG ---------------------------------------


def bar_chart(report: HarnessReport, *, width: int = 720, height: int = 260) -> dict:
    """Grouped bars: one group per check, one bar per strategy."""
    r = rates(report)
    checks = [label for label, _, _ in RATES if any(r[s][label]["den"] for s in STRATEGIES)]
    left, bottom, top = 40, 60, 10
    plot_h = height - bottom - top
    group_w = (width - left) / max(1, len(checks))
    bar_w = group_w / (len(STRATEGIES) + 1)
    bars, labels = [], []
    for gi, label in enumerate(checks):
        x0 = left + gi * group_w + bar_w / 2
        labels.append(
            {"x": round(x0 + bar_w * len(STRATEGIES) / 2, 1), "y": height - bottom + 14, "text": SHORT[label]}
        )
        for si, s in enumerate(STRATEGIES):
            rate = r[s][label]["rate"]
            if rate is None:
                continue
            h = plot_h * rate
            bars.append(
                {
                    "x": round(x0 + si * bar_w, 1),
                    "y": round(top + plot_h - h, 1),
                    "w": round(bar_w - 2, 1),
                    "h": round(h, 1),
                    "color": COLORS[s],
                    "title": f"{LABELS[s]} — {label}: {_pct(rate)}",
                }
            )
    grid = [{"y": round(top + plot_h * (1 - f), 1), "label": f"{int(f * 100)}%"} for f in (0, 0.25, 0.5, 0.75, 1)]
    return {
        "width": width,
        "height": height,
        "bars": bars,
        "labels": labels,
        "grid": grid,
        "left": left,
        "legend": [{"label": LABELS[s], "color": COLORS[s]} for s in STRATEGIES],
    }


def line_chart(ticket, budget: int, *, width: int = 720, height: int = 240) -> dict:
    """Tokens per request over one ticket's life, compactions marked."""
    s = ticket.series
    xs = s["turn"]
    if not xs:
        return {}
    names = ["full", "triggered", "sundry", "window", "prose"]
    top_v = max([budget] + [v for n in names for v in s[n]]) * 1.05
    left, bottom, top = 50, 30, 10
    pw, ph = width - left - 10, height - bottom - top
    x_of = lambda t: left + pw * (t - xs[0]) / max(1, xs[-1] - xs[0])  # noqa: E731
    y_of = lambda v: top + ph * (1 - v / top_v)  # noqa: E731
    titles = {
        "full": "full history",
        "triggered": "Sundry (compaction when triggered)",
        "sundry": "Sundry (compacted at every step)",
        "window": "sliding window",
        "prose": "prose-only",
    }
    dashes = {"full": "4 3", "sundry": "2 2", "triggered": "", "window": "", "prose": ""}
    colors = {**COLORS, "sundry": COLORS["forced"]}
    lines = [
        {
            "points": " ".join(f"{x_of(t):.1f},{y_of(v):.1f}" for t, v in zip(xs, s[n])),
            "color": colors[n],
            "dash": dashes[n],
            "label": titles[n],
        }
        for n in names
    ]
    marks = [{"x": round(x_of(t), 1)} for t in ticket.triggered_compactions if xs[0] <= t <= xs[-1]]
    return {
        "width": width,
        "height": height,
        "lines": lines,
        "marks": marks,
        "top": top,
        "bottom": height - bottom,
        "budget_y": round(y_of(budget), 1),
        "budget": budget,
        "left": left,
        "right": width - 10,
        "ymax": int(top_v),
        "first": xs[0],
        "last": xs[-1],
        "title": f"{ticket.id} ({ticket.domain}, {ticket.turns} turns)",
    }


def write_html(report: HarnessReport, path: Path) -> Path:
    from django.template.loader import render_to_string

    by_domain = {}
    for t in report.tickets:
        if t.series["turn"] and (t.domain not in by_domain or t.turns > by_domain[t.domain].turns):
            by_domain[t.domain] = t
    data = as_json(report)
    rows = [
        {
            "label": LABELS[s],
            "color": COLORS[s],
            "cells": [_pct(data["rates"][s][label]["rate"]) for label, _, _ in RATES],
            "counts": [data["rates"][s][label]["count"] for _, label in COUNTS],
        }
        for s in STRATEGIES
    ]
    domains = [
        {
            "name": d,
            "cells": [
                [_pct(rs[s][label]["rate"]) for s in STRATEGIES]
                for label in ("ID survival (guard accepts)", "Stated constraints verbatim")
            ],
        }
        for d, rs in data["rates_by_domain"].items()
    ]
    context = {
        "data": data,
        "rows": rows,
        "rate_heads": [label for label, _, _ in RATES],
        "count_heads": [label for _, label in COUNTS],
        "domains": domains,
        "labels": [LABELS[s] for s in STRATEGIES],
        "bars": bar_chart(report),
        "lines": [line_chart(t, t.config.get("budget") or 0) for t in by_domain.values()],
        "sundry_failures": report.failures("sundry"),
        "baseline_failures": [f for s in ("window", "prose") for f in report.failures(s)][:200],
        "made_up": [
            {"ticket": t.id, **m, "class_label": REFUSED_LABELS[m["class"]]} for t in report.tickets for m in t.made_up
        ],
        "tickets": report.tickets,
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render_to_string("evals/report.html", context))
    return path
