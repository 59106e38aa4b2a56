"""The constraint classifier on sentences nobody tuned it on: `manage.py constraint_fresh`.

The sentences are `instructionsentences.fresh_sentences` (one item per distinct text). Two readers
labelled them against the definition in docs/how-it-works.md, blind to the classifier and to each
other, before the classifier was run on them; their disputes were decided by the definition's rule
numbers alone. The labels files name sentences by id, never by text, so nothing of the corpus is
copied into the project: `labels/constraints_fresh_reader1.json`, `…_reader2.json` and
`…_adjudicated.json`.

A reader may mark a sentence *odd* (no real customer would say it to the agent: role-play
directions, persona lines). The figures are given over every sentence and over the plain ones (no
reader called them odd).

The set is split by task before any change was made to the classifier from it (`task_half`): the
SHA-256 of "domain-taskid", even → tuning, odd → held out. Rules may be taken from the tuning half's
misses and false flags only; the held-out half is scored, not read. A text said in several tasks is
one item, in the half of its first task.

Controls: *flag everything*, *shuffled* (as many flags as the classifier makes, on sentences drawn
at random with a fixed seed) and the enforce threshold (`context.rules.candidate_rules`).
"""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Callable
from pathlib import Path

from sundry.context.constraints import constraint_sentences
from sundry.context.rules import candidate_rules
from sundry.evals.constraintscore import cell
from sundry.evals.instructionsentences import Sentence, fresh_sentences
from sundry.evals.labels import HERE, reader_agreement

READER_FILES = ("constraints_fresh_reader1.json", "constraints_fresh_reader2.json")
ADJUDICATED_FILE = "constraints_fresh_adjudicated.json"

Flag = Callable[[str], bool]
HALVES = ("tuning", "held_out")


def task_half(sentence_id: str) -> str:
    """The half of the fresh set a sentence belongs to, by its task: the SHA-256 of "domain-taskid",
    even → "tuning", odd → "held_out". Never depends on the text, its label or the classifier."""
    task = sentence_id.rsplit("-", 1)[0]
    return HALVES[int(hashlib.sha256(task.encode()).hexdigest(), 16) % 2]


def distinct(items: list[Sentence]) -> list[Sentence]:
    """One item per distinct text, under the id of its first occurrence."""
    seen: dict[str, Sentence] = {}
    for s in items:
        seen.setdefault(s.text, s)
    return list(seen.values())


def load_reader(path: Path, ids: set[str]) -> dict[str, dict]:
    """A reader's labels, refused unless they judge exactly the sentences in `ids` yes or no."""
    labels = json.loads(Path(path).read_text())["labels"]
    missing, extra = ids - set(labels), set(labels) - ids
    if missing or extra:
        raise ValueError(f"{path}: {len(missing)} sentences unjudged, {len(extra)} ids not in the set")
    bad = [i for i, v in labels.items() if v.get("label") not in ("yes", "no")]
    if bad:
        raise ValueError(f"{path}: {len(bad)} labels are neither yes nor no, e.g. {bad[0]}")
    return labels


def load_adjudicated(path: Path, disputed: set[str]) -> dict[str, bool]:
    """The disputed sentences decided: refused unless exactly the disputes are decided yes or no."""
    decided = json.loads(Path(path).read_text())["decided"]
    if set(decided) != disputed:
        raise ValueError(
            f"{path}: decides {len(set(decided) - disputed)} undisputed and misses {len(disputed - set(decided))}"
        )
    bad = [i for i, v in decided.items() if v.get("label") not in ("yes", "no") or not v.get("rule")]
    if bad:
        raise ValueError(f"{path}: {len(bad)} decisions lack a yes/no label or a rule, e.g. {bad[0]}")
    return {i: v["label"] == "yes" for i, v in decided.items()}


def score(flags: dict[str, bool], truth: dict[str, bool]) -> dict:
    """Recall and precision of `flags` against `truth`, over the ids of `truth`."""
    labelled = sum(truth.values())
    flagged = sum(flags[i] for i in truth)
    found = sum(flags[i] and truth[i] for i in truth)
    return {
        "labelled": labelled,
        "flagged": flagged,
        "found": found,
        "labels_found": found,
        "flags_correct": found,
        "recall": found / labelled if labelled else None,
        "precision": found / flagged if flagged else None,
    }


def shuffled(flags: dict[str, bool], ids: list[str], seed: int = 0) -> dict[str, bool]:
    """As many flags as `flags` sets over `ids`, put on ids drawn at random."""
    n = sum(flags[i] for i in ids)
    chosen = set(random.Random(seed).sample(ids, n))
    return {i: i in chosen for i in ids}


def classifiers() -> list[tuple[str, Flag]]:
    return [
        ("quote threshold (context.constraints)", lambda t: bool(constraint_sentences(t))),
        ("control: flag every sentence", lambda t: True),
        ("control: enforce threshold (context.rules)", lambda t: bool(candidate_rules(t))),
    ]


def readings(first: dict, second: dict, adjudicated: dict[str, bool] | None) -> dict[str, dict[str, bool]]:
    """Each reading as {id: is a constraint}; *agreed* leaves the disputed sentences out."""
    a = {i: v["label"] == "yes" for i, v in first.items()}
    b = {i: v["label"] == "yes" for i, v in second.items()}
    out = {"first": a, "second": b, "agreed": {i: a[i] for i in a if a[i] == b[i]}}
    if adjudicated is not None:
        out["adjudicated"] = {i: adjudicated.get(i, a[i]) for i in a}
    return out


def rows(items: list[Sentence], reads: dict[str, dict[str, bool]], only: set[str] | None = None):
    """(name, {reading: score}) for the classifier and its controls, over `only` ids if given."""
    texts = {s.id: s.text for s in items}
    out = []
    for name, flag in classifiers():
        flags = {i: flag(t) for i, t in texts.items()}
        out.append((name, {r: score(flags, _within(truth, only)) for r, truth in reads.items()}))
        if name.startswith("quote"):
            mixed = {
                r: score(shuffled(flags, sorted(_within(truth, only))), _within(truth, only))
                for r, truth in reads.items()
            }
            out.append(("control: shuffled (as many flags, on random sentences)", mixed))
    return out


def _within(truth: dict[str, bool], only: set[str] | None) -> dict[str, bool]:
    return truth if only is None else {i: v for i, v in truth.items() if i in only}


def report(corpora: Path | None = None, folder: Path = HERE) -> str:
    """The readers' agreement and the classifier's figures against each reading, all and plain."""
    items = distinct(fresh_sentences(corpora))
    ids = {s.id for s in items}
    first, second = (load_reader(folder / f, ids) for f in READER_FILES)
    disputed = {i for i in ids if first[i]["label"] != second[i]["label"]}
    adj_path = folder / ADJUDICATED_FILE
    adjudicated = load_adjudicated(adj_path, disputed) if adj_path.exists() else None
    reads = readings(first, second, adjudicated)
    plain = {i for i in ids if not first[i].get("odd") and not second[i].get("odd")}
    a = reader_agreement((first[i]["label"] == "yes", second[i]["label"] == "yes") for i in sorted(ids))
    lines = [
        f"{len(items)} distinct sentences ({len(plain)} that no reader called odd). Two readers: both yes "
        f"{a['both_yes']}, only the first {a['only_first']}, only the second {a['only_second']}, both no "
        f"{a['both_no']}; Cohen's kappa {a['kappa']:.3f}.",
    ]
    if adjudicated is None:
        lines.append(f"No adjudication ({ADJUDICATED_FILE}): that column is not measured.")
    names = list(reads)
    halves = {h: {i for i in ids if task_half(i) == h} for h in HALVES}
    lines.append(
        f"Split by task (SHA-256 of domain-taskid): tuning {len(halves['tuning'])} sentences, "
        f"held out {len(halves['held_out'])}."
    )
    for scope, kept in (("every sentence", ids), ("plain sentences only", plain)):
        for half_name, members in (
            ("tuning half", halves["tuning"]),
            ("held-out half", halves["held_out"]),
            ("all", ids),
        ):
            only = kept & members
            lines += ["", f"**{scope}, {half_name} ({len(only)})**", ""]
            lines.append("| classifier | " + " | ".join(f"{n} R / P" for n in names) + " |")
            lines.append("|---|" + "---|" * len(names))
            for name, by in rows(items, reads, only):
                lines.append(f"| {name} | " + " | ".join(cell(by[n]) for n in names) + " |")
    return "\n".join(lines)
