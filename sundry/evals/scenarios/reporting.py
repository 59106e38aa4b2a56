"""Scenario results → the per-mode table, a JSON report and an HTML report with per-scenario effect diffs."""

from __future__ import annotations

import json
import statistics
from datetime import datetime, timezone
from pathlib import Path

from sundry.evals.scenarios.modes import MODES, REFERENCE
from sundry.evals.scenarios.runner import RunResult, ScenarioResult

TEMPLATE = Path(__file__).resolve().parent / "report.html"


def mode_rows(results: list[ScenarioResult], modes: list[str]) -> list[dict]:
    """Per mode: scenarios with effects exactly as expected, forbidden effects, compaction damage, reply facts."""
    rows = []
    for name in modes:
        runs = [r.runs[name] for r in results if name in r.runs]
        facts = sum(len(x.facts) for x in runs)
        tokens = [t for x in runs for t in x.request_tokens]
        sundry = [t for x in runs for t in x.sundry_tokens]
        rows.append(
            {
                "mode": name,
                "label": MODES[name].label,
                "scenarios": len(runs),
                "effects_correct": sum(x.judgement.correct for x in runs),
                "forbidden": sum(x.forbidden for x in runs),
                "scenarios_with_forbidden": sum(x.forbidden > 0 for x in runs),
                "missing": sum(len(x.judgement.missing) for x in runs),
                "damage": None if name == REFERENCE else sum(x.damage for x in runs),
                "scenarios_damaged": None if name == REFERENCE else sum(x.damage > 0 for x in runs),
                "facts_ok": sum(x.facts_ok for x in runs),
                "facts": facts,
                "compactions": sum(x.compactions for x in runs),
                "long_scenarios": sum(x.compactions >= 3 for x in runs),
                "median_request_tokens": int(statistics.median(tokens)) if tokens else 0,
                "max_request_tokens": max(tokens, default=0),
                "over_sundry_steps": sum(b > s for b, s in zip(tokens, sundry)),
                "seconds": round(sum(x.seconds for x in runs), 1),
            }
        )
    return rows


def table(results: list[ScenarioResult], modes: list[str]) -> str:
    heads = [
        "mode",
        "effects correct",
        "forbidden effects",
        "compaction damage",
        "reply facts",
        "compactions",
        "≥3 compactions",
        "request tokens (median/max)",
        "run time",
    ]
    lines = []
    for r in mode_rows(results, modes):
        dmg = "—" if r["damage"] is None else f"{r['damage']} in {r['scenarios_damaged']} scenario(s)"
        lines.append(
            [
                r["label"],
                f"{r['effects_correct']}/{r['scenarios']}",
                f"{r['forbidden']} in {r['scenarios_with_forbidden']} scenario(s)",
                dmg,
                f"{r['facts_ok']}/{r['facts']}",
                str(r["compactions"]),
                str(r["long_scenarios"]),
                f"{r['median_request_tokens']}/{r['max_request_tokens']}",
                f"{r['seconds']} s",
            ]
        )
    widths = [max(len(str(x)) for x in col) for col in zip(heads, *lines)]
    fmt = " | ".join(f"{{:<{w}}}" for w in widths)
    return "\n".join([fmt.format(*heads), "-+-".join("-" * w for w in widths)] + [fmt.format(*x) for x in lines])


def progress_line(result: ScenarioResult, modes: list[str]) -> str:
    if result.error:
        return f"{result.scenario.id:<44} NOT RUN: {result.error}"
    cells = []
    for name in modes:
        run = result.runs.get(name)
        if run is None:
            continue
        mark = "ok" if run.judgement.correct else "FAIL"
        extra = []
        if run.forbidden:
            extra.append(f"{run.forbidden} forbidden")
        if run.judgement.missing:
            extra.append(f"{len(run.judgement.missing)} missing")
        if run.damage:
            extra.append(f"damage {run.damage}")
        cells.append(
            f"{name}:{mark}"
            + (f"({', '.join(extra)})" if extra else "")
            + f" facts {run.facts_ok}/{len(run.facts)} c{run.compactions}"
        )
    line = f"{result.scenario.id:<44} " + "  ".join(cells)
    triggered = result.runs.get("triggered")
    want = result.scenario.min_compactions
    if triggered is not None and want and triggered.compactions < want:
        line += f"  [long scenario: {triggered.compactions} of {want} compactions when triggered]"
    return line


def _run_dict(run: RunResult, result: ScenarioResult) -> dict:
    c = result.cast
    j = run.judgement
    return {
        "mode": run.mode,
        "effects_correct": j.correct,
        "seconds": round(run.seconds, 2),
        "ticket_id": run.ticket_id,
        "effects": [e.describe(c) for e in run.effects],
        "matched": [{"expected": s.model_dump(exclude_none=True), "actual": e.describe(c)} for s, e in j.matched],
        "missing": [s.model_dump(exclude_none=True) for s in j.missing],
        "allowed": [e.describe(c) for e in j.allowed],
        "forbidden": [e.describe(c) for e in j.forbidden],
        "damage": {
            "lost": [e.describe(c) for e in run.damage_lost],
            "extra": [e.describe(c) for e in run.damage_extra],
        },
        "facts": [
            {
                "after": f.fact.after,
                "ok": f.ok,
                "missing": f.missing,
                "forbidden_said": f.present_forbidden,
                "why": f.fact.why,
                "replies": f.replies,
            }
            for f in run.facts
        ],
        "compactions": run.compactions,
        "steps": run.steps,
        "held": run.held,
        "cards": run.cards,
        "presses": run.presses,
        "request_tokens": run.request_tokens,
        "sundry_tokens": run.sundry_tokens,
        "transcript": [{"who": a, "text": t} for a, t in run.transcript],
    }


def as_json(results: list[ScenarioResult], modes: list[str], *, config: dict, seconds: float) -> dict:
    scenarios = []
    for r in results:
        entry = {
            "id": r.scenario.id,
            "title": r.scenario.title,
            "themes": r.scenario.themes,
            "messages": len(r.scenario.customer_messages),
            "min_compactions": r.scenario.min_compactions,
            "error": r.error,
            "runs": {},
        }
        if r.cast is not None:
            entry["customer"] = r.cast.customer_id
            entry["orders"] = {k: o.number for k, o in r.cast.orders.items()}
            entry["expect"] = [e.model_dump(exclude_none=True) for e in r.scenario.expect]
            entry["runs"] = {name: _run_dict(run, r) for name, run in r.runs.items()}
        scenarios.append(entry)
    return {
        "generated": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "config": config,
        "seconds": round(seconds, 1),
        "modes": {m: MODES[m].label for m in modes},
        "table": mode_rows(results, modes),
        "scenarios": scenarios,
    }


def write_json(data: dict, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, ensure_ascii=False, indent=1))
    return path


def write_html(data: dict, path: Path) -> Path:
    from django.template import Context, Engine

    engine = Engine(autoescape=True)
    html = engine.from_string(TEMPLATE.read_text()).render(Context({"data": data}))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(html)
    return path


def failed(results: list[ScenarioResult]) -> list[str]:
    """What fails the CI slice: forbidden effects, compaction damage, scenarios that could not run."""
    out = []
    for r in results:
        if r.error:
            out.append(f"{r.scenario.id}: not run ({r.error})")
        for name, run in r.runs.items():
            for e in run.judgement.forbidden:
                out.append(f"{r.scenario.id} [{name}]: forbidden effect {e.describe(r.cast)}")
            for e in run.damage_lost:
                out.append(
                    f"{r.scenario.id} [{name}]: compaction damage — never-compacted run had {e.describe(r.cast)}"
                )
            for e in run.damage_extra:
                out.append(f"{r.scenario.id} [{name}]: compaction damage — only here: {e.describe(r.cast)}")
    return out
