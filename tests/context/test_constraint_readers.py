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
    agreement, rows = constraintscore.reader_rows(tickets, reads, labels.adjudicated_labels())
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
    assert (ours["second"]["labels_found"], ours["second"]["labelled"]) == (71, 89)
    assert (ours["agreed"]["labels_found"], ours["agreed"]["labelled"]) == (67, 74)
    assert (ours["adjudicated"]["labels_found"], ours["adjudicated"]["labelled"]) == (71, 80)
    # Disputed sentences leave the agreed column: fewer flags, fewer labels than either reading; the
    # adjudicated column keeps every sentence, so its flags are the first column's.
    assert ours["agreed"]["flagged"] == ours["first"]["flagged"] - 6
    assert ours["adjudicated"]["flagged"] == ours["first"]["flagged"]
    for reading in constraintscore.READINGS:
        assert ours[reading]["precision"] > 3 * by["control: flag every sentence"][reading]["precision"]
        assert (
            ours[reading]["recall"]
            > 5 * by["control: shuffled (as many flags, on random sentences)"][reading]["recall"]
        )

    # Control: the readers swapped — the one-sided counts and the first/second columns swap.
    swapped_agreement, swapped = constraintscore.reader_rows(tickets, {t: (b, a) for t, (a, b) in reads.items()})
    assert "adjudicated" not in dict(swapped)["quote threshold (context.constraints)"]  # no file given, no column
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
    assert "| quote threshold (context.constraints) | 98.4 % (60/61) / 83.3 % (60/72) |" in text  # tuning half
    assert "both yes 73, only the first 2, only the second 15, both no 786" in text
    assert "Cohen's kappa 0.885" in text
    assert (
        "| quote threshold (context.constraints) | 90.8 % (69/76) / 77.5 % (69/89) | 79.8 % (71/89) / 79.8 % (71/89) "
        "| 90.5 % (67/74) / 80.7 % (67/83) | 88.8 % (71/80) / 79.8 % (71/89) |"
    ) in text
    assert "| control: shuffled (as many flags, on random sentences) |" in text.split("Cohen's kappa")[1]
    assert "| control: flag every sentence |" in text.split("Cohen's kappa")[1]

    # Control: without the second file the readers' rows are gone and the output says why.
    bare = StringIO()
    call_command(
        "constraint_classifier", "--traces", str(TRACES), "--second-reader", str(tmp_path / "none.json"), stdout=bare
    )
    assert "agreement not measured" in bare.getvalue() and "Cohen's kappa" not in bare.getvalue()

    # Control: without the adjudicated file the fourth column is gone and the output says so.
    no_adj = StringIO()
    call_command(
        "constraint_classifier", "--traces", str(TRACES), "--adjudicated", str(tmp_path / "none.json"), stdout=no_adj
    )
    assert "No adjudicated labels" in no_adj.getvalue() and "adjudicated labels R / P" not in no_adj.getvalue()

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


def test_the_adjudication_decides_exactly_the_disputed_sentences():
    """The adjudicated labels: both readers' yeses plus the disputed sentences decided yes; every
    disputed sentence is decided once, by a numbered rule of the definition, and the readers' files
    are left as they were. A stale or partial adjudication stops, it does not default."""
    reads = labels.readings(labels.second_reader_labels())
    adjudicated = labels.adjudicated_labels()
    decisions = adjudicated["decisions"]
    disputed = {t for t, (a, b) in reads.items() if a != b}
    assert len(decisions) == 17 and {labels.norm(d["sentence"]) for d in decisions} == disputed
    assert all(d["rule"][0] in "12345678" and d["reason"] for d in decisions)
    yes = labels.adjudicated_yes(reads, adjudicated)
    both = {t for t, (a, b) in reads.items() if a and b}
    assert len(both) == 73 and both < yes and len(yes) == 79
    assert len(yes - both) == sum(d["constraint"] for d in decisions) == 6
    # The readers' own files are unchanged by adjudication: their counts are those the docs report.
    assert sum(a for a, _ in reads.values()) == 75 and sum(b for _, b in reads.values()) == 88

    # Controls: a disputed sentence left undecided, a decision on a sentence both agree on, and a
    # decision recording other readers' judgements are each an error.
    with pytest.raises(ValueError, match="does not decide 1 disputed"):
        labels.adjudicated_yes(reads, {**adjudicated, "decisions": decisions[1:]})
    agreed = next(t for t in both)
    extra = {**adjudicated, "decisions": [*decisions, {**decisions[0], "sentence": agreed}]}
    with pytest.raises(ValueError, match="decides 1 sentence"):
        labels.adjudicated_yes(reads, extra)
    flipped = [{**decisions[0], "first_reader": not decisions[0]["first_reader"]}, *decisions[1:]]
    with pytest.raises(ValueError, match="other readers' judgements for 1"):
        labels.adjudicated_yes(reads, {**adjudicated, "decisions": flipped})
