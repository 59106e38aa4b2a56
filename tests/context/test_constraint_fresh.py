"""The fresh constraint set: the customer's-voice swap, the sentences drawn only from tasks without a
trace, the readers' files covering exactly those sentences, and the scoring with its controls."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from sundry.evals import freshscore, instructionsentences, sources
from sundry.evals.instructionsentences import Sentence, first_person

SHARED = sources.shared_dir()
CORPORA = SHARED / "corpora" / "tau2" if SHARED else None
needs_corpora = pytest.mark.skipif(
    CORPORA is None or not (CORPORA / "domains").is_dir(), reason="needs ../shared/corpora/tau2"
)


@pytest.mark.parametrize(
    "said, mine",
    [
        ("You do not want to cancel your flight.", "I do not want to cancel my flight."),
        ("You're willing to pay the difference.", "I'm willing to pay the difference."),
        (
            "If the agent asks for confirmation, only exchange the lamp.",
            "If you ask for confirmation, only exchange the lamp.",
        ),
        (
            "If the agent tells you it is not possible, ask for a voucher.",
            "If you tell me it is not possible, ask for a voucher.",
        ),
        ("You want the agent's help with the order you placed.", "I want your help with the order I placed."),
        ("The agent is allowed to charge you up to $50.", "You are allowed to charge me up to $50."),
        ("Use the card you’ve saved.", "Use the card I've saved."),
    ],
)
def test_the_customers_voice_is_a_fixed_swap(said, mine):
    assert first_person(said) == mine


def test_scores_and_their_controls_on_a_worked_example():
    truth = {"a": True, "b": True, "c": False, "d": False}
    s = freshscore.score({"a": True, "b": False, "c": True, "d": False}, truth)
    assert (s["labelled"], s["flagged"], s["found"]) == (2, 2, 1)
    assert s["recall"] == pytest.approx(0.5) and s["precision"] == pytest.approx(0.5)
    # Flag everything: recall 1, precision the share of constraints.
    every = freshscore.score(dict.fromkeys(truth, True), truth)
    assert every["recall"] == 1 and every["precision"] == pytest.approx(0.5)
    # Shuffled keeps the number of flags and moves them.
    flags = {str(i): i < 10 for i in range(100)}
    mixed = freshscore.shuffled(flags, sorted(flags))
    assert sum(mixed.values()) == 10 and mixed != flags


def test_a_readers_file_must_judge_exactly_the_set(tmp_path):
    ids = {"x-1-1", "x-1-2"}
    path = tmp_path / "r.json"
    path.write_text(json.dumps({"labels": {"x-1-1": {"label": "yes"}, "x-1-2": {"label": "no"}}}))
    assert set(freshscore.load_reader(path, ids)) == ids
    # Controls: a missing sentence, an extra one and a label that is neither yes nor no are refused.
    for labels in (
        {"x-1-1": {"label": "yes"}},
        {"x-1-1": {"label": "yes"}, "x-1-2": {"label": "no"}, "x-9-9": {"label": "no"}},
        {"x-1-1": {"label": "yes"}, "x-1-2": {"label": "maybe"}},
    ):
        path.write_text(json.dumps({"labels": labels}))
        with pytest.raises(ValueError):
            freshscore.load_reader(path, ids)


def test_an_adjudication_decides_exactly_the_disputes(tmp_path):
    path = tmp_path / "a.json"
    path.write_text(json.dumps({"decided": {"x-1-1": {"label": "no", "rule": "one-off request"}}}))
    assert freshscore.load_adjudicated(path, {"x-1-1"}) == {"x-1-1": False}
    with pytest.raises(ValueError):
        freshscore.load_adjudicated(path, {"x-1-1", "x-1-2"})
    path.write_text(json.dumps({"decided": {"x-1-1": {"label": "no"}}}))
    with pytest.raises(ValueError, match="rule"):
        freshscore.load_adjudicated(path, {"x-1-1"})


def test_distinct_keeps_the_first_id_of_each_text():
    items = [Sentence("a-1-1", "Same."), Sentence("a-2-1", "Same."), Sentence("a-2-2", "Other.")]
    assert [s.id for s in freshscore.distinct(items)] == ["a-1-1", "a-2-2"]


@needs_corpora
def test_fresh_sentences_come_only_from_tasks_without_a_trace():
    items = instructionsentences.fresh_sentences(CORPORA)
    traced = instructionsentences.traced_task_ids(CORPORA / "traces")
    assert items and all(traced[d] for d in instructionsentences.DOMAINS)
    for s in items:
        domain, task, _ = s.id.rsplit("-", 2)
        assert task not in traced[domain]
    assert len({s.id for s in items}) == len(items)
    # Control: the traced tasks do have instruction sentences; they are left out, not absent.
    assert len(instructionsentences.traced_task_ids(CORPORA / "traces")["retail"]) == 40


@needs_corpora
def test_the_readers_files_cover_the_set_and_the_command_prints_the_figures():
    out = StringIO()
    call_command("constraint_fresh", "--corpora", str(CORPORA), stdout=out)
    text = out.getvalue()
    assert "Cohen's kappa" in text and "quote threshold" in text and "control: shuffled" in text
    for scope in ("every sentence", "plain sentences only"):
        for half in ("tuning half", "held-out half", "all"):
            assert f"**{scope}, {half} (" in text
    # The classifier reads the sentences: against the adjudicated labels it finds more constraints
    # than the same number of flags put at random.
    items = freshscore.distinct(instructionsentences.fresh_sentences(CORPORA))
    ids = {s.id for s in items}
    first, second = (freshscore.load_reader(freshscore.HERE / f, ids) for f in freshscore.READER_FILES)
    disputed = {i for i in ids if first[i]["label"] != second[i]["label"]}
    adjudicated = freshscore.load_adjudicated(freshscore.HERE / freshscore.ADJUDICATED_FILE, disputed)
    truth = freshscore.readings(first, second, adjudicated)["adjudicated"]
    rows = dict(freshscore.rows(items, {"adjudicated": truth}))
    ours = rows["quote threshold (context.constraints)"]["adjudicated"]
    chance = rows["control: shuffled (as many flags, on random sentences)"]["adjudicated"]
    assert ours["recall"] > 2 * chance["recall"]


def test_the_command_says_what_is_missing(tmp_path):
    with pytest.raises(CommandError, match="corpora|tasks|No such"):
        call_command("constraint_fresh", "--corpora", str(tmp_path), stdout=StringIO())


def test_the_split_is_by_task_and_fixed():
    # The half is a function of the task alone: every sentence of a task falls in the same half.
    assert freshscore.task_half("airline-7-1") == freshscore.task_half("airline-7-12")
    # It is the SHA-256 of "domain-taskid", even → tuning (values fixed when the split was made).
    assert freshscore.task_half("airline-0-1") == "tuning"
    assert freshscore.task_half("retail-1-1") == "held_out"
    # Control: the domain is part of the key ("airline-1" is tuning where "retail-1" is held out),
    # and both halves occur over a hundred tasks.
    assert freshscore.task_half("airline-1-1") == "tuning"
    halves = {freshscore.task_half(f"retail-{n}-1") for n in range(100)}
    assert halves == {"tuning", "held_out"}
