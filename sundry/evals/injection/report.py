"""The injection suite's table: which guard stopped each case, by goal and channel. Pure."""

from __future__ import annotations

from collections import Counter

from sundry.evals.injection.cases import CHANNELS, GOALS, Case
from sundry.evals.injection.judge import Outcome

START = "<!-- injection-table:start -->"
END = "<!-- injection-table:end -->"
THROUGH = "got through"


def _cell(outcomes: list[Outcome]) -> str:
    if not outcomes:
        return "–"
    counts = Counter(THROUGH if o.unauthorized else " + ".join(o.stopped_by) or "nothing recorded" for o in outcomes)
    if len(counts) == 1:
        [(what, _)] = counts.items()
        return f"**{what}**" if what == THROUGH else what
    return "; ".join(f"{'**' + w + '**' if w == THROUGH else w} ×{n}" for w, n in counts.most_common())


def table(cases: list[Case], outcomes: dict[str, Outcome]) -> str:
    """Markdown: a goal × channel matrix of stopping guards, the guards' counts, and the totals."""
    lines = ["| goal \\ channel | " + " | ".join(c.label for c in CHANNELS) + " |", "|---|" + "---|" * len(CHANNELS)]
    for goal in GOALS:
        cells = [
            _cell([outcomes[c.id] for c in cases if c.goal == goal and c.channel == ch and c.id in outcomes])
            for ch in CHANNELS
        ]
        lines.append(f"| {goal.label} | " + " | ".join(cells) + " |")
    ran = [outcomes[c.id] for c in cases if c.id in outcomes]
    through = [o for o in ran if o.unauthorized]
    by_guard = Counter(g for o in ran if not o.unauthorized for g in o.stopped_by)
    lines += ["", "| guard | cases it stopped (alone or with another) |", "|---|---|"]
    lines += [f"| {g} | {n} |" for g, n in by_guard.most_common()]
    lines += [
        "",
        f"**{len(ran)} cases, {len(through)} with an unauthorized effect"
        + (f" ({', '.join(o.case_id for o in through)})" if through else "")
        + ".**",
    ]
    return "\n".join(lines)


def case_rows(cases: list[Case], outcomes: dict[str, Outcome]) -> str:
    """Markdown: every case — its text, what the model attempted, what stopped it, any unauthorized effect."""
    lines = [
        "| case | planted text | the obedient model attempted | stopped by | unauthorized |",
        "|---|---|---|---|---|",
    ]
    for case in cases:
        o = outcomes.get(case.id)
        if o is None:
            continue
        cells = [
            case.id,
            case.text,
            "<br>".join(o.attempts) or "(nothing: never shown)",
            " + ".join(o.stopped_by),
            "; ".join(o.unauthorized) or "none",
        ]
        lines.append("| " + " | ".join(c.replace("|", "/").replace("\n", " ") for c in cells) + " |")
    return "\n".join(lines)


def replace_table(document: str, new_table: str) -> str:
    """`document` with the text between the table markers replaced."""
    head, _, rest = document.partition(START)
    _, _, tail = rest.partition(END)
    if not rest:
        raise ValueError(f"no {START} marker in the document")
    return f"{head}{START}\n{new_table}\n{END}{tail}"


def current_table(document: str) -> str:
    return document.partition(START)[2].partition(END)[0].strip()
