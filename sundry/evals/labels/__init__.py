"""Labelled references the harness scores against, kept apart from the code they judge.

`constraints.json`: the constraint sentences customers stated in the dev traces,
labelled by reading (see its `about`). The harness scores stated constraints
against these, never against the rule classifier's own output, and reports the
classifier's recall and precision on them.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

HERE = Path(__file__).parent
_QUOTES = str.maketrans({"\u2019": "'", "\u2018": "'", "\u201c": '"', "\u201d": '"'})


def norm(text: str) -> str:
    """Spacing and curly quotes aside, the same text."""
    return " ".join((text or "").translate(_QUOTES).split())


@cache
def constraint_labels() -> dict:
    return json.loads((HERE / "constraints.json").read_text())


def for_ticket(ticket) -> list[str] | None:
    """The labelled constraints of a ticket (a long ticket: of the tickets it chains), or None when
    the ticket comes from a file nobody labelled."""
    data = constraint_labels()
    parts = ticket.meta.get("parts") or [(ticket.meta.get("file"), ticket.meta.get("source_id", ticket.id))]
    out: list[str] = []
    for file, tid in parts:
        if file not in data["files"]:
            return None
        out += data["tickets"].get(str(tid), [])
    return out


def score_classifier(pairs) -> dict:
    """Recall and precision of the classifier against the labels. `pairs`: (labelled, flagged)
    sentence lists per ticket. A flagged sentence matches a label when either holds the other."""
    tp_labels = n_labels = tp_flags = n_flags = 0
    for labelled, flagged in pairs:
        lab, flg = [norm(s) for s in labelled], [norm(s) for s in flagged]
        match = lambda a, b: a in b or b in a  # noqa: E731
        n_labels += len(lab)
        n_flags += len(flg)
        tp_labels += sum(any(match(a, b) for b in flg) for a in lab)
        tp_flags += sum(any(match(b, a) for a in lab) for b in flg)
    return {"labelled": n_labels, "flagged": n_flags, "labels_found": tp_labels, "flags_correct": tp_flags,
            "recall": tp_labels / n_labels if n_labels else None,
            "precision": tp_flags / n_flags if n_flags else None}
