"""The constraint classifier scored sentence by sentence on the labelled dev traces, by half, with
its controls: `manage.py constraint_classifier [--traces DIR]`.

Every customer sentence of the labelled files is one item (as `context.constraints.sentences`
splits a message); the labels say which are constraints (`labels/constraints.json`, relabelled
against the definition in docs/how-it-works.md). Each sentence falls in the tuning or the held-out
half by the hash of its text (`labels.half`). The controls show what the figures would be without
the classifier's reading: *flag everything* (recall 100 %, precision the share of constraints),
*shuffled* (the classifier's own number of flags, put on sentences drawn at random with a fixed
seed), and the enforce threshold (`context.rules.candidate_rules`, the narrower classifier).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path

from sundry.context.constraints import constraint_sentences, is_constraint, sentences
from sundry.context.rules import candidate_rules
from sundry.evals import labels, sources

Classify = Callable[[str], list[str]]


def customer_sentences(traces: Path | str) -> list[tuple[list[str], list[str]]]:
    """Per labelled ticket of `traces`: (its labelled constraints, its customer messages)."""
    out = []
    for ticket in sources.load_files(sources.trace_files([traces])):
        labelled = labels.for_ticket(ticket)
        if labelled is None:
            continue
        said = [t.text for t in ticket.turn_data() if t.author == "customer" and t.kind == "message"]
        out.append((labelled, said))
    return out


def score(classify: Classify, tickets, only: str | None = None) -> dict:
    return labels.score_classifier(
        ((labelled, [s for text in said for s in classify(text)]) for labelled, said in tickets), only
    )


def shuffled_score(classify: Classify, tickets, only: str | None = None, seed: int = 0) -> dict:
    """The control with the classifier's reading taken away: as many flags as `classify` makes over
    `tickets`, put on sentences drawn at random (fixed seed)."""
    every = [(i, s) for i, (_, said) in enumerate(tickets) for text in said for s in sentences(text)]
    n = sum(len(classify(text)) for _, said in tickets for text in said)
    chosen = sorted(random.Random(seed).sample(range(len(every)), n))
    flagged: list[list[str]] = [[] for _ in tickets]
    for k in chosen:
        i, s = every[k]
        flagged[i].append(s)
    return labels.score_classifier(((lab, flg) for (lab, _), flg in zip(tickets, flagged)), only)


def rows(tickets) -> list[tuple[str, dict]]:
    """(name, {half: score}) for the classifier and its controls."""
    named: list[tuple[str, Classify]] = [
        ("quote threshold (context.constraints)", constraint_sentences),
        ("control: flag every sentence", sentences),
        ("control: enforce threshold (context.rules)", candidate_rules),
        ("ablation: no stance feature", lambda t: [s for s in sentences(t) if is_constraint(s, stance=False)]),
        ("ablation: no limit feature", lambda t: [s for s in sentences(t) if is_constraint(s, limit=False)]),
    ]
    out = [(name, {h: score(c, tickets, h) for h in (*labels.HALVES, None)}) for name, c in named]
    shuffled = {h: shuffled_score(constraint_sentences, tickets, h) for h in (*labels.HALVES, None)}
    out.insert(2, ("control: shuffled (as many flags, on random sentences)", shuffled))
    return out


def _cell(s: dict) -> str:
    if s["recall"] is None or s["precision"] is None:
        return "—"
    return (
        f"{100 * s['recall']:.1f} % ({s['labels_found']}/{s['labelled']}) / "
        f"{100 * s['precision']:.1f} % ({s['flags_correct']}/{s['flagged']})"
    )


def table(tickets) -> str:
    lines = ["| classifier | tuning half R / P | held-out half R / P | all R / P |", "|---|---|---|---|"]
    for name, by in rows(tickets):
        lines.append(f"| {name} | {_cell(by['tuning'])} | {_cell(by['held_out'])} | {_cell(by[None])} |")
    return "\n".join(lines)
