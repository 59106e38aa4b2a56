"""The constraint classifier (quote threshold) on the grammar of constraint shapes and on the dev
labels' held-out half; the old rule classifier is the control that fails the same bar; a sentence
flagged only at the quote threshold is quoted, never enforced."""

from __future__ import annotations

import hashlib

import pytest

from sundry.compaction import summariser as sm
from sundry.context.constraints import constraint_sentences, is_constraint
from sundry.context.rules import candidate_rules, infer_enforcement
from sundry.evals import constraintgrammar as grammar
from sundry.evals import labels, sources


def test_grammar_recall_and_precision_and_the_old_classifier_fails_them():
    new = grammar.score(is_constraint)
    assert new["wordings"] > 250 and new["recall"] >= 0.9 and new["precision"] >= 0.9, new
    old = grammar.score(lambda s: bool(candidate_rules(s)))
    assert old["recall"] < 0.5  # the enforce threshold alone: one constraint shape in three
    # Ablations: without the stance or without the limit feature, descriptions are flagged.
    assert grammar.score(lambda s: is_constraint(s, stance=False))["precision"] < new["precision"]
    assert grammar.score(lambda s: is_constraint(s, limit=False))["precision"] < 0.9


def test_a_sentence_flagged_only_at_the_quote_threshold_is_quoted_not_enforced():
    plain = "If I can't get the total under $950, can you just cancel the whole order?"
    refused = "This is a family emergency, and I can't believe there's no way to get a refund."
    assert constraint_sentences(plain) == [plain] and not candidate_rules(plain)
    assert infer_enforcement(refused)  # read as a rule it would block refunds …
    quotes = [plain, refused, "Never email me, phone only."]
    # … so only what the enforce threshold flags becomes a candidate rule; a summariser's own words still do.
    kept = sm.rule_candidate_texts([*quotes, "The customer does not want refunds to a gift card."], quotes)
    assert kept == ["Never email me, phone only.", "The customer does not want refunds to a gift card."]


def _half(ticket_id: str) -> str:
    # The split the method was designed on: a ticket's SHA-256, even → design, odd → held out.
    return "design" if int(hashlib.sha256(ticket_id.encode()).hexdigest(), 16) % 2 == 0 else "held_out"


@pytest.mark.skipif(sources.tau2_traces_dir() is None, reason="needs ../shared/corpora/tau2/traces")
def test_dev_labels_held_out_half_against_the_old_classifier():
    tickets = sources.load_files(sources.trace_files([sources.tau2_traces_dir()]))
    scores = {}
    for name, classify in (("new", constraint_sentences), ("old", candidate_rules)):
        for half in ("design", "held_out"):
            pairs = [
                (
                    labels.for_ticket(t) or [],
                    [
                        s
                        for turn in t.turn_data()
                        if turn.author == "customer" and turn.kind == "message"
                        for s in classify(turn.text)
                    ],
                )
                for t in tickets
                if _half(t.id) == half
            ]
            scores[name, half] = labels.score_classifier(pairs)
    assert scores["new", "held_out"]["labelled"] == 37
    assert scores["new", "held_out"]["recall"] >= 0.75 > 0.3 > scores["old", "held_out"]["recall"]
    assert scores["new", "design"]["recall"] >= 0.8 > 0.3 > scores["old", "design"]["recall"]
