"""A team's own constraint labels (`--labels FILE`): the loader's errors, scoring a ticket by them,
and the report saying plainly when nothing is labelled."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from sundry.evals import importers, labels, report
from sundry.evals.harness import HarnessConfig, HarnessReport, run_ticket

FIXTURE = Path(__file__).parent / "fixtures" / "tau2_retail_small.json"
TIGHT = HarnessConfig(budget=2500, keep_recent=2, plant=False)
SENTENCE = "Please don't refund to my gift card, only to the credit card."


@pytest.fixture(scope="module")
def retail():
    return importers.tau2_results(FIXTURE)[0]


def _write(tmp_path, data) -> Path:
    path = tmp_path / "labels.json"
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    return path


def _label(ticket, **over):
    turn = next(t.number for t in ticket.turn_data() if t.author == "customer" and SENTENCE in t.text)
    return {"file": ticket.meta["file"], "ticket": ticket.meta["source_id"], "turn": turn, "sentence": SENTENCE, **over}


@pytest.mark.parametrize(
    "data, says",
    [
        ("{not json", "not a JSON labels file"),
        ({"format": "other/2", "labels": []}, "expected 'sundry-constraint-labels/1'"),
        ({"labels": {"file": "x"}}, "expected a list of labels"),
        ([{"file": "x.json", "ticket": "retail-1", "sentence": "No calls."}], "label 1: missing turn"),
        (
            [{"file": "x.json", "ticket": "retail-1", "turn": 0, "sentence": "No calls."}],
            '"turn" must be a turn number',
        ),
        (
            [{"file": "x.json", "ticket": "retail-1", "turn": 2, "sentence": " "}],
            '"sentence" must be a non-empty string',
        ),
        ({"files": ["ok.json", 3], "labels": []}, '"files" must be a list'),
    ],
)
def test_a_bad_labels_file_is_refused_naming_what_is_wrong(tmp_path, data, says):
    with pytest.raises(labels.LabelsFileError, match=says.replace("(", r"\(")):
        labels.LabelSet.load(_write(tmp_path, data))
    with pytest.raises(CommandError, match="Cannot read the labels"):
        call_command(
            "safety_harness",
            "--tickets",
            str(FIXTURE),
            "--no-plant",
            "--labels",
            str(_write(tmp_path, data)),
            "--out",
            str(tmp_path),
        )


def test_a_team_scores_its_own_ticket_and_misplaced_labels_are_named(tmp_path, retail):
    good = _label(retail)
    wrong_turn = _label(retail, turn=good["turn"] + 1)
    elsewhere = {**good, "ticket": "retail-999"}
    found = labels.LabelSet.load(_write(tmp_path, {"labels": [good, wrong_turn, elsewhere]}))
    problems = found.problems([retail])
    assert len(problems) == 2 and f"it is at turn {good['turn']}" in problems[0] and "not among" in problems[1]
    result = run_ticket(retail, TIGHT, label_set=found)
    assert result.labelled == [SENTENCE, SENTENCE]
    assert result.stats["sundry"]["constraint_checks"] > 0
    # Control: a set labelling another file leaves this ticket unlabelled, and the report says so.
    other = labels.LabelSet.load(_write(tmp_path, [{**good, "file": "someone-else.json"}]))
    bare = run_ticket(retail, TIGHT, label_set=other)
    assert bare.labelled is None and bare.stats["sundry"]["constraint_checks"] == 0
    lines = report.constraint_lines(HarnessReport(TIGHT, [bare]))
    assert lines == [line for line in lines if "not measured" in line] and len(lines) == 1
    scored = report.constraint_lines(HarnessReport(TIGHT, [result]))
    assert "recall" in scored[0] and "enforce threshold" in scored[1]


def test_the_command_measures_a_teams_own_export_by_its_labels_and_says_when_there_are_none(tmp_path, retail):
    from io import StringIO

    from sundry.evals import records

    export = records.dump([retail], tmp_path / "our_export.json")
    label = {**_label(retail), "file": export.name, "ticket": retail.meta["source_id"]}
    out = StringIO()
    call_command(
        "safety_harness",
        "--tickets",
        str(export),
        "--no-plant",
        "--labels",
        str(_write(tmp_path, {"files": [export.name], "labels": [label]})),
        "--out",
        str(tmp_path),
        stdout=out,
    )
    said = out.getvalue()
    assert "Labels: 1 of 1 constraint label(s) found in their tickets" in said
    assert (
        "Constraint classifier (quote threshold: what a summary quotes) against the labelled constraints: "
        "recall 100.0% (1/1)" in said
    )
    # Control: the same export without labels is not measured, and the report says so.
    bare = StringIO()
    call_command("safety_harness", "--tickets", str(export), "--no-plant", "--out", str(tmp_path), stdout=bare)
    assert "constraints were not measured (give --labels FILE" in bare.getvalue()
