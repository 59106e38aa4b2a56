"""Two readers of the held-out constraint sentences: the agreement arithmetic (counts, Cohen's kappa),
the second reader's file covering what the first labelled, and the command printing the figures
against each reading — with the controls that swap the readers or take the second reading away."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from sundry.evals import constraintscore, labels, sources

TRACES = sources.tau2_traces_dir()
needs_traces = pytest.mark.skipif(TRACES is None, reason="needs ../shared/corpora/tau2/traces")


def _pairs(both_yes, only_first, only_second, both_no):
    return (
        [(True, True)] * both_yes
        + [(True, False)] * only_first
        + [(False, True)] * only_second
        + [(False, False)] * both_no
    )


def test_kappa_arithmetic_on_a_worked_example():
    # 50 items, 20 both yes, 15 both no: observed 0.7; each reader says yes to 25 (first) / 30 (second),
    # so chance agreement is (25·30 + 25·20) / 50² = 0.5 and kappa (0.7 − 0.5) / 0.5 = 0.4.
    a = labels.reader_agreement(_pairs(20, 5, 10, 15))
    assert (a["sentences"], a["both_yes"], a["only_first"], a["only_second"], a["both_no"]) == (50, 20, 5, 10, 15)
    assert a["observed"] == pytest.approx(0.7) and a["expected"] == pytest.approx(0.5)
    assert a["kappa"] == pytest.approx(0.4)


def test_kappa_bounds_and_the_readers_swapped():
    assert labels.reader_agreement(_pairs(10, 0, 0, 40))["kappa"] == pytest.approx(1.0)
    # Readers who say yes independently at these rates agree only by chance: kappa 0.
    assert labels.reader_agreement(_pairs(4, 16, 6, 24))["kappa"] == pytest.approx(0.0)
    # A reader who says the opposite of the other agrees less than chance.
    assert labels.reader_agreement(_pairs(0, 10, 40, 0))["kappa"] < 0
    # Control: swapping the readers' roles swaps the one-sided counts; kappa does not move.
    a, b = labels.reader_agreement(_pairs(20, 5, 10, 15)), labels.reader_agreement(_pairs(20, 10, 5, 15))
    assert (a["only_first"], a["only_second"]) == (b["only_second"], b["only_first"])
    assert a["kappa"] == pytest.approx(b["kappa"])
    # No variation at all: kappa is undefined, not 1 or 0.
    assert labels.reader_agreement(_pairs(0, 0, 0, 30))["kappa"] is None
    assert labels.reader_agreement([])["kappa"] is None


def test_the_second_reading_covers_every_held_out_label_of_the_first():
    second = labels.second_reader_labels()
    assert second["half"] == "held_out" and len(second["sentences"]) == 876
    assert all(labels.half(s["sentence"]) == "held_out" for s in second["sentences"])
    reads = labels.readings(second)
    assert {t for t, (a, _) in reads.items() if a} == labels.first_reader_yes("held_out")
    # Control: a first-reader label missing from the second file is an error, not a silent "no".
    dropped = next(s for s in second["sentences"] if labels.norm(s["sentence"]) in labels.first_reader_yes())
    short = {**second, "sentences": [s for s in second["sentences"] if s is not dropped]}
    with pytest.raises(ValueError, match="did not judge 1 first-reader label"):
        labels.readings(short)


@needs_traces
def test_reader_rows_on_the_held_out_half_and_their_controls():
    tickets = constraintscore.customer_sentences(TRACES)
    reads = labels.readings(labels.second_reader_labels())
    agreement, rows = constraintscore.reader_rows(tickets, reads)
    assert {k: agreement[k] for k in ("sentences", "both_yes", "only_first", "only_second", "both_no")} == {
        "sentences": 876,
        "both_yes": 73,
        "only_first": 2,
        "only_second": 15,
        "both_no": 786,
    }
    assert agreement["kappa"] == pytest.approx(0.885, abs=0.0005)
    by = dict(rows)
    ours = by["quote threshold (context.constraints)"]
    # The first reading, relabelled sentence by sentence, gives the held-out figure of the main table.
    main = dict(constraintscore.rows(tickets))["quote threshold (context.constraints)"]["held_out"]
    assert ours["first"] == main
    assert (ours["second"]["labels_found"], ours["second"]["labelled"]) == (66, 89)
    assert (ours["agreed"]["labels_found"], ours["agreed"]["labelled"]) == (64, 74)
    # Disputed sentences leave the agreed column: fewer flags, fewer labels than either reading.
    assert ours["agreed"]["flagged"] == ours["first"]["flagged"] - 4
    for reading in constraintscore.READINGS:
        assert ours[reading]["precision"] > 3 * by["control: flag every sentence"][reading]["precision"]
        assert (
            ours[reading]["recall"]
            > 5 * by["control: shuffled (as many flags, on random sentences)"][reading]["recall"]
        )

    # Control: the readers swapped — the one-sided counts and the first/second columns swap.
    swapped_agreement, swapped = constraintscore.reader_rows(tickets, {t: (b, a) for t, (a, b) in reads.items()})
    assert (swapped_agreement["only_first"], swapped_agreement["only_second"]) == (15, 2)
    theirs = dict(swapped)["quote threshold (context.constraints)"]
    assert theirs["first"] == ours["second"] and theirs["second"] == ours["first"]
    assert theirs["first"]["recall"] != ours["first"]["recall"]
    # Control: a second reading identical to the first agrees fully and its columns equal the first's.
    same_agreement, same = constraintscore.reader_rows(tickets, {t: (a, a) for t, (a, _) in reads.items()})
    assert same_agreement["kappa"] == pytest.approx(1.0)
    same_ours = dict(same)["quote threshold (context.constraints)"]
    assert same_ours["second"] == same_ours["agreed"] == same_ours["first"]


@needs_traces
def test_the_command_prints_the_readers_rows_and_says_when_there_is_no_second_reading(tmp_path):
    out = StringIO()
    call_command("constraint_classifier", "--traces", str(TRACES), stdout=out)
    text = out.getvalue()
    assert "| quote threshold (context.constraints) | 95.1 %" in text  # the existing table stays
    assert "both yes 73, only the first 2, only the second 15, both no 786" in text
    assert "Cohen's kappa 0.885" in text
    assert "| quote threshold (context.constraints) | 86.8 % (66/76) / 82.5 % (66/80) | 74.2 % (66/89)" in text
    assert "| control: shuffled (as many flags, on random sentences) |" in text.split("Cohen's kappa")[1]
    assert "| control: flag every sentence |" in text.split("Cohen's kappa")[1]

    # Control: without the second file the readers' rows are gone and the output says why.
    bare = StringIO()
    call_command(
        "constraint_classifier", "--traces", str(TRACES), "--second-reader", str(tmp_path / "none.json"), stdout=bare
    )
    assert "agreement not measured" in bare.getvalue() and "Cohen's kappa" not in bare.getvalue()

    # Control: a second file that skipped a sentence the first reader labelled stops the command.
    second = labels.second_reader_labels()
    first = labels.first_reader_yes()
    short = {**second, "sentences": [s for s in second["sentences"] if labels.norm(s["sentence"]) not in first]}
    (tmp_path / "short.json").write_text(json.dumps(short))
    with pytest.raises(CommandError, match="did not judge 75 first-reader label"):
        call_command(
            "constraint_classifier",
            "--traces",
            str(TRACES),
            "--second-reader",
            str(tmp_path / "short.json"),
            stdout=StringIO(),
        )
