"""Labelled references the harness scores against, kept apart from the code they judge.

`constraints.json`: the constraint sentences customers stated in the dev traces,
labelled by reading (see its `about`). The harness scores stated constraints
against these, never against the rule classifier's own output, and reports the
classifier's recall and precision on them.

`constraints_second_reader.json`: every held-out sentence of those traces judged yes or no by a second
reader, blind to the first reader's labels and to the classifier. The first reader had seen the
classifier's code; comparing the two readings (`reader_agreement`) says how much of a figure is
the reader rather than the classifier.

`constraints_adjudicated.json`: each sentence the two readers judged differently, decided by the
definition's numbered test (`adjudicated_yes`); the sentences they agree on keep their judgement.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
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


HALVES = ("tuning", "held_out")


def half(sentence: str) -> str:
    """Which half of the labelled sentences a sentence belongs to: the SHA-256 of its normalised
    text, even → "tuning", odd → "held_out". Fixed before the classifier was tuned on the relabelled
    set; a sentence's half never depends on its label, its ticket or the classifier."""
    return HALVES[int(hashlib.sha256(norm(sentence).encode()).hexdigest(), 16) % 2]


def score_classifier(pairs, only: str | None = None) -> dict:
    """Recall and precision of the classifier against the labels. `pairs`: (labelled, flagged)
    sentence lists per ticket. A flagged sentence matches a label when either holds the other.
    `only`: score one half (`half`) of both the labels and the flags."""
    tp_labels = n_labels = tp_flags = n_flags = 0
    for labelled, flagged in pairs:
        lab, flg = [norm(s) for s in labelled], [norm(s) for s in flagged]
        if only is not None:
            lab, flg = [s for s in lab if half(s) == only], [s for s in flg if half(s) == only]
        match = lambda a, b: a in b or b in a  # noqa: E731
        n_labels += len(lab)
        n_flags += len(flg)
        tp_labels += sum(any(match(a, b) for b in flg) for a in lab)
        tp_flags += sum(any(match(b, a) for a in lab) for b in flg)
    return {
        "labelled": n_labels,
        "flagged": n_flags,
        "labels_found": tp_labels,
        "flags_correct": tp_flags,
        "recall": tp_labels / n_labels if n_labels else None,
        "precision": tp_flags / n_flags if n_flags else None,
    }


# --- a second reader ------------------------------------------------------------------------

SECOND_READER = "constraints_second_reader.json"


@cache
def second_reader_labels(path: Path | str = HERE / SECOND_READER) -> dict | None:
    """The second reader's file (every held-out sentence, yes and no), or None when there is none."""
    path = Path(path)
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None


def first_reader_yes(only: str | None = "held_out") -> set[str]:
    """The sentences (normalised) the first reader labelled constraints, in any ticket. A sentence is
    judged on its own words, so one text carries one label wherever it is said (true of the file)."""
    return {
        norm(s) for said in constraint_labels()["tickets"].values() for s in said if only is None or half(s) == only
    }


def readings(second: dict | None) -> dict[str, tuple[bool, bool]]:
    """Per sentence the second reader judged (normalised): (first reader: constraint?, second reader:
    constraint?). The second file holds each held-out sentence once, yes or no; a first-reader label
    absent from it would be a sentence nobody compared, so it is an error, not a silent "no"."""
    first = first_reader_yes(second.get("half", "held_out"))
    out = {norm(s["sentence"]): (False, bool(s["constraint"])) for s in second["sentences"]}
    unread = sorted(first - out.keys())
    if unread:
        raise ValueError(f"the second reader did not judge {len(unread)} first-reader label(s): {unread[:3]}")
    return {text: (text in first, second_yes) for text, (_, second_yes) in out.items()}


ADJUDICATED = "constraints_adjudicated.json"


@cache
def adjudicated_labels(path: Path | str = HERE / ADJUDICATED) -> dict | None:
    """The adjudicator's decisions on the disputed sentences, or None when there is no such file."""
    path = Path(path)
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None


def adjudicated_yes(reads: dict[str, tuple[bool, bool]], adjudicated: dict) -> set[str]:
    """The adjudicated constraints (normalised): what both readers call one, plus each disputed
    sentence the adjudicator decided is one. Every disputed sentence needs a decision, and a decision
    must be about a disputed sentence with the readers' judgements as recorded — otherwise the file
    is stale against the readers' files, which is an error, not a silent default."""
    decided = {norm(d["sentence"]): d for d in adjudicated["decisions"]}
    disputed = {t for t, (a, b) in reads.items() if a != b}
    missing, extra = sorted(disputed - decided.keys()), sorted(decided.keys() - disputed)
    if missing:
        raise ValueError(f"the adjudication does not decide {len(missing)} disputed sentence(s): {missing[:3]}")
    if extra:
        raise ValueError(f"the adjudication decides {len(extra)} sentence(s) the readers agree on: {extra[:3]}")
    stale = [t for t, d in decided.items() if (d["first_reader"], d["second_reader"]) != reads[t]]
    if stale:
        raise ValueError(
            f"the adjudication records other readers' judgements for {len(stale)} sentence(s): {stale[:3]}"
        )
    return {t for t, (a, b) in reads.items() if a and b} | {t for t, d in decided.items() if d["constraint"]}


def reader_agreement(pairs: Iterable[tuple[bool, bool]]) -> dict:
    """Agreement of two readers over the same sentences: the four counts, the share agreed (observed),
    the share two readers with these yes-rates would agree by chance (expected), and Cohen's kappa,
    (observed − expected) / (1 − expected): 1 is full agreement, 0 what chance gives."""
    both_yes = only_first = only_second = both_no = 0
    for first, second in pairs:
        if first and second:
            both_yes += 1
        elif first:
            only_first += 1
        elif second:
            only_second += 1
        else:
            both_no += 1
    n = both_yes + only_first + only_second + both_no
    observed = (both_yes + both_no) / n if n else None
    expected = (
        ((both_yes + only_first) * (both_yes + only_second) + (only_second + both_no) * (only_first + both_no)) / n**2
        if n
        else None
    )
    kappa = None if n == 0 or expected == 1 else (observed - expected) / (1 - expected)
    return {
        "sentences": n,
        "both_yes": both_yes,
        "only_first": only_first,
        "only_second": only_second,
        "both_no": both_no,
        "observed": observed,
        "expected": expected,
        "kappa": kappa,
    }


# --- a team's own labels -------------------------------------------------------------------

LABELS_FORMAT = "sundry-constraint-labels/1"


class LabelsFileError(ValueError):
    """A labels file the harness cannot use; the message names the file and the entry."""


class LabelSet:
    """Constraint labels a team wrote for its own traces (`--labels FILE`).

    The file is JSON: {"format": "sundry-constraint-labels/1", "files": [...], "labels": [{"file",
    "ticket", "turn", "sentence"}, ...]} — or just the list of labels. `file` is the trace file's name
    (as the harness prints it), `ticket` the ticket's ID in it, `turn` the number of the customer
    turn that states `sentence`. `files` (optional) names files read in full: their tickets without
    a label have no constraints; any other file with a label counts as read in full too."""

    def __init__(self, labels: list[dict], files: list[str] = (), path: str = ""):
        self.labels, self.path = labels, path
        self.files = set(files) | {lab["file"] for lab in labels}

    @classmethod
    def load(cls, path) -> "LabelSet":
        path = Path(path)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise LabelsFileError(f"{path}: no such labels file") from None
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise LabelsFileError(f"{path}: not a JSON labels file ({exc})") from None
        files: list = []
        if isinstance(data, dict):
            if data.get("format", LABELS_FORMAT) != LABELS_FORMAT:
                raise LabelsFileError(f"{path}: format {data.get('format')!r}; expected {LABELS_FORMAT!r}")
            files = data.get("files", [])
            if not isinstance(files, list) or not all(isinstance(f, str) and f for f in files):
                raise LabelsFileError(f'{path}: "files" must be a list of trace file names')
            data = data.get("labels")
        if not isinstance(data, list):
            raise LabelsFileError(f'{path}: expected a list of labels, or an object with "labels" (a list)')
        out = []
        for i, lab in enumerate(data):
            where = f"{path}: label {i + 1}"
            if not isinstance(lab, dict):
                raise LabelsFileError(f"{where}: expected an object with file, ticket, turn and sentence")
            missing = [k for k in ("file", "ticket", "turn", "sentence") if k not in lab]
            if missing:
                raise LabelsFileError(f"{where}: missing {', '.join(missing)}")
            for key in ("file", "ticket", "sentence"):
                if not isinstance(lab[key], str) or not lab[key].strip():
                    raise LabelsFileError(f'{where}: "{key}" must be a non-empty string')
            if not isinstance(lab["turn"], int) or isinstance(lab["turn"], bool) or lab["turn"] < 1:
                raise LabelsFileError(f'{where}: "turn" must be a turn number (1 or more), not {lab["turn"]!r}')
            out.append({"file": lab["file"], "ticket": lab["ticket"], "turn": lab["turn"], "sentence": lab["sentence"]})
        return cls(out, files, str(path))

    def for_ticket(self, ticket) -> list[str] | None:
        """As `for_ticket`, from this set: None when the ticket's file is not labelled."""
        parts = ticket.meta.get("parts") or [(ticket.meta.get("file"), ticket.meta.get("source_id", ticket.id))]
        out: list[str] = []
        for file, tid in parts:
            if file not in self.files:
                return None
            out += [lab["sentence"] for lab in self.labels if lab["file"] == file and lab["ticket"] == str(tid)]
        return out

    def problems(self, tickets) -> list[str]:
        """Labels the loaded tickets cannot score: a ticket not loaded, a sentence its turn does not hold."""
        by_key = {
            (t.meta.get("file"), str(t.meta.get("source_id", t.id))): t for t in tickets if not t.meta.get("parts")
        }
        out = []
        for lab in self.labels:
            ticket = by_key.get((lab["file"], lab["ticket"]))
            if ticket is None:
                out.append(f"{lab['file']} ticket {lab['ticket']}: not among the tickets run")
                continue
            said = {t.number: norm(t.text) for t in ticket.turn_data() if t.author == "customer"}
            if norm(lab["sentence"]) not in said.get(lab["turn"], ""):
                found = [n for n, text in said.items() if norm(lab["sentence"]) in text]
                out.append(
                    f"{lab['file']} ticket {lab['ticket']} turn {lab['turn']}: the customer's turn does not hold "
                    f'"{lab["sentence"][:80]}"' + (f" (it is at turn {found[0]})" if found else "")
                )
        return out


def dev_labels():
    """The dev traces' labels (`constraints.json`) behind the same interface as a team's `LabelSet`."""
    return _DevLabels()


class _DevLabels:
    def for_ticket(self, ticket) -> list[str] | None:
        return for_ticket(ticket)
