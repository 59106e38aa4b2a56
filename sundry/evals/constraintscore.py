"""The constraint classifier scored sentence by sentence on the labelled dev traces, by half, with
its controls: `manage.py constraint_classifier [--traces DIR]`.

Every customer sentence of the labelled files is one item (as `context.constraints.sentences`
splits a message); the labels say which are constraints (`labels/constraints.json`, relabelled
against the definition in docs/how-it-works.md). Each sentence falls in the tuning or the held-out
half by the hash of its text (`labels.half`). The controls show what the figures would be without
the classifier's reading: *flag everything* (recall 100 %, precision the share of constraints),
*shuffled* (the classifier's own number of flags, put on sentences drawn at random with a fixed
seed), and the enforce threshold (`context.rules.candidate_rules`, the narrower classifier).

The first reader had seen the classifier's code, so the held-out half was read again by a second
reader blind to both (`labels/constraints_second_reader.json`). `reader_table` prints how far the two
readings agree (Cohen's kappa) and the classifier and its controls against each reading, against
the sentences both readers agree on, and against the adjudicated labels (the disputed sentences
decided by the definition's numbered test, `labels/constraints_adjudicated.json`).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path

from sundry.context.constraints import constraint_sentences, is_constraint, sentences
from sundry.context.rules import candidate_rules
from sundry.evals import labels, sources
from sundry.evals.labels import norm

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


def shuffled_score(classify: Classify, tickets, only: str | None = None, seed: int = 0, skip=frozenset()) -> dict:
    """The control with the classifier's reading taken away: as many flags as `classify` makes over
    `tickets`, put on sentences drawn at random (fixed seed). Sentences in `skip` (normalised) are
    taken out of both the flags and the draw."""
    every = [
        (i, s) for i, (_, said) in enumerate(tickets) for text in said for s in sentences(text) if norm(s) not in skip
    ]
    n = sum(1 for _, said in tickets for text in said for s in classify(text) if norm(s) not in skip)
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


def cell(s: dict) -> str:
    """One table cell: recall and precision with their counts (a set's labels found may differ from its
    correct flags when one sentence repeats; `freshscore`'s sets are distinct, so both are its `found`)."""
    if s["recall"] is None or s["precision"] is None:
        return "—"
    return (
        f"{100 * s['recall']:.1f} % ({s['labels_found']}/{s['labelled']}) / "
        f"{100 * s['precision']:.1f} % ({s['flags_correct']}/{s['flagged']})"
    )


def table(tickets) -> str:
    lines = ["| classifier | tuning half R / P | held-out half R / P | all R / P |", "|---|---|---|---|"]
    for name, by in rows(tickets):
        lines.append(f"| {name} | {cell(by['tuning'])} | {cell(by['held_out'])} | {cell(by[None])} |")
    return "\n".join(lines)


# --- two readers -------------------------------------------------------------------------------

READINGS = ("first", "second", "agreed", "adjudicated")


def relabelled(tickets, yes: set[str]) -> list[tuple[list[str], list[str]]]:
    """The same tickets labelled by a reading of sentences (normalised texts): a sentence that reading
    calls a constraint is labelled in every ticket that says it, once per ticket."""
    out = []
    for _, said in tickets:
        lab = list(dict.fromkeys(s for text in said for s in sentences(text) if norm(s) in yes))
        out.append((lab, said))
    return out


def reader_rows(
    tickets, reads: dict[str, tuple[bool, bool]], adjudicated: dict | None = None
) -> tuple[dict, list[tuple[str, dict]]]:
    """The readers' agreement over the sentences the second reader judged, and (name, {reading: score})
    on the held-out half for the classifier and its controls, scored against the first reader's
    labels, the second reader's, those both agree on (a sentence they disagree on is left out of
    the labels, the flags and the shuffled draw) and, given `adjudicated`, the adjudicated labels
    (every sentence kept)."""
    agreement = labels.reader_agreement(reads.values())
    first = {t for t, (a, _) in reads.items() if a}
    second = {t for t, (_, b) in reads.items() if b}
    disputed = first ^ second
    label_sets = {
        "first": (relabelled(tickets, first), set()),
        "second": (relabelled(tickets, second), set()),
        "agreed": (relabelled(tickets, first & second), disputed),
    }
    if adjudicated is not None:
        label_sets["adjudicated"] = (relabelled(tickets, labels.adjudicated_yes(reads, adjudicated)), set())
    named: list[tuple[str, Classify]] = [
        ("quote threshold (context.constraints)", constraint_sentences),
        ("control: flag every sentence", sentences),
    ]
    out = []
    for name, classify in named:
        by = {}
        for reading, (labelled, skip) in label_sets.items():
            kept = lambda t, c=classify, skip=skip: [s for s in c(t) if norm(s) not in skip]  # noqa: E731
            by[reading] = score(kept, labelled, "held_out")
        out.append((name, by))
    shuffled = {
        reading: shuffled_score(constraint_sentences, labelled, "held_out", skip=skip)
        for reading, (labelled, skip) in label_sets.items()
    }
    out.insert(1, ("control: shuffled (as many flags, on random sentences)", shuffled))
    return agreement, out


def reader_table(tickets, second: dict | None, adjudicated: dict | None = None) -> str:
    """The two readers' agreement and the held-out figures against each reading (and the adjudicated
    labels when there are any); says so when there is no second reading."""
    if second is None:
        return "No second reader's labels (labels/constraints_second_reader.json): agreement not measured."
    agreement, by_row = reader_rows(tickets, labels.readings(second), adjudicated)
    adj = adjudicated is not None
    a = agreement
    lines = [
        f"Two readers on the held-out half ({a['sentences']} sentences, each judged once): "
        f"both yes {a['both_yes']}, only the first {a['only_first']}, only the second {a['only_second']}, "
        f"both no {a['both_no']}; agreed on {100 * a['observed']:.1f} % (chance {100 * a['expected']:.1f} %), "
        f"Cohen's kappa {a['kappa']:.3f}.",
        "",
        "| held-out half | first reader's labels R / P | second reader's labels R / P "
        "| labels both readers agree on R / P |" + (" adjudicated labels R / P |" if adj else ""),
        "|---|---|---|---|" + ("---|" if adj else ""),
    ]
    for name, by in by_row:
        cells = [by["first"], by["second"], by["agreed"]] + ([by["adjudicated"]] if adj else [])
        lines.append(f"| {name} | " + " | ".join(cell(c) for c in cells) + " |")
    if not adj:
        lines += ["", "No adjudicated labels (labels/constraints_adjudicated.json): that column is not measured."]
    return "\n".join(lines)
