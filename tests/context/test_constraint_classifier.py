"""The constraint classifier (quote threshold) on the grammar of constraint shapes and on the dev
labels' held-out half; the old rule classifier is the control that fails the same bar; a sentence
flagged only at the quote threshold is quoted, never enforced."""

from __future__ import annotations

import pytest

from sundry.compaction import summariser as sm
from sundry.context.constraints import constraint_sentences, is_constraint
from sundry.context.rules import candidate_rules, infer_enforcement
from sundry.evals import constraintgrammar as grammar
from sundry.evals import constraintscore, labels, sources


def test_grammar_recall_and_precision_and_the_old_classifier_fails_them():
    new = grammar.score(is_constraint)
    assert new["wordings"] > 550 and new["recall"] >= 0.95 and new["precision"] >= 0.95, new
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


@pytest.mark.skipif(sources.tau2_traces_dir() is None, reason="needs ../shared/corpora/tau2/traces")
def test_dev_labels_halves_and_their_controls():
    """Figures on the relabelled dev sentences, by sentence-hash half (`labels.half`), beside the
    controls the docs print: flag everything, shuffled flags, the enforce threshold."""
    tickets = constraintscore.customer_sentences(sources.tau2_traces_dir())
    by = dict(constraintscore.rows(tickets))
    ours = by["quote threshold (context.constraints)"]
    assert ours[None]["labelled"] == 137
    for h in labels.HALVES:
        assert ours[h]["precision"] > 3 * by["control: flag every sentence"][h]["precision"]
        assert ours[h]["recall"] > 2 * by["control: shuffled (as many flags, on random sentences)"][h]["recall"]
        assert ours[h]["recall"] > by["control: enforce threshold (context.rules)"][h]["recall"]


def test_the_split_is_by_the_sentence_alone():
    """The half is the hash of the sentence's text, so spacing and curly quotes do not move it and
    the label, the ticket and the classifier cannot."""
    s = "I don\u2019t want  insurance."
    assert labels.half(s) == labels.half("I don't want insurance.")
    halves = [labels.half(f"Please don't call me before {h} o'clock.") for h in range(1, 41)]
    assert 10 < halves.count("tuning") < 30
