"""A contact card never shows the customer a claim no record supports.

A real 0.5B model logged a phone call that never happened, with the summary "This order was damaged and a
refund is given."; the customer's confirmation card showed it, though no refund existed (docs/real-model.md,
run 21). The call guards read a tool's declared customer text for claims of actions; a card's text (a phone
call's summary) was read only for Sundry's own words. Now it is read for claims as a reply is
(`callguards.CLAIMS_ON_CARDS`). Summaries come from a grammar (claims of each kind × frames); true summaries
in the same frames still make their card. Negative control: with the card's text not read, every false
summary reaches a card.
"""

from __future__ import annotations

import itertools

import pytest

from sundry.agent.guards import callguards
from sundry.agent.loop import agent_run
from sundry.agent.models import Confirmation
from sundry.agent.provider.gateway import Gateway
from sundry.agent.provider.scripted import ScriptedModel
from sundry.evals import scorecard
from sundry.tickets.models import Turn
from sundry.tooling.messages import ModelResponse
from tests.agent.claimcase import LOOKUP, ORDER, case, customer_reads, phone_call_logged  # noqa: F401  (case: the fixture)

CLAIMS = [
    "a refund is given",
    "the refund of 15.00 USD has been issued",
    "we refunded the lamp",
    f"order {ORDER} was cancelled",
    "a replacement lamp was sent",
    "the refund was granted",
]
TRUE = [
    "they want 15.00 back",
    "they asked for a refund of 15.00 USD",
    "the lamp arrived broken",
    "they would like a replacement lamp",
]
FRAMES = ["This order was damaged and {c}.", "Customer called about the broken lamp; {c}.", "{C}."]


def _summaries(parts):
    return [f.format(c=p, C=p[0].upper() + p[1:]) for f, p in itertools.product(FRAMES, parts)]


def _logged(case, summary) -> tuple[bool, list[str]]:
    """Whether `summary` made a card, and the guards that refused the call."""
    call = phone_call_logged(case, summary)
    model = ScriptedModel([LOOKUP, call, ModelResponse(text=f"Thanks, I have looked at {ORDER}.")])
    agent_run(case["ticket"].pk, gateway=Gateway(override=model))
    made = Confirmation.objects.filter(ticket=case["ticket"], arguments__summary=summary).exists()
    refused = [
        t.payload["guard"]
        for t in Turn.objects.filter(ticket=case["ticket"], kind=Turn.Kind.REJECTION)
        if t.payload.get("name") == "log_phone_call"
    ]
    Turn.objects.filter(ticket=case["ticket"], kind=Turn.Kind.REJECTION).delete()
    return made, refused


@pytest.mark.django_db
@pytest.mark.parametrize("summary", _summaries(CLAIMS))
def test_a_summary_claiming_an_action_no_record_shows_makes_no_card(case, summary):
    made, refused = _logged(case, summary)
    assert not made and refused == ["unsupported_claim"], (made, refused)
    assert summary not in customer_reads(case)


@pytest.mark.django_db
@pytest.mark.parametrize("summary", _summaries(TRUE))
def test_a_summary_in_true_words_still_makes_its_card(case, summary):
    made, refused = _logged(case, summary)
    assert made and refused == []


@pytest.mark.django_db
@pytest.mark.parametrize("summary", _summaries(CLAIMS))
def test_negative_control_with_the_card_text_not_read_the_false_summary_reaches_a_card(case, monkeypatch, summary):
    monkeypatch.setattr(callguards, "CLAIMS_ON_CARDS", False)
    made, refused = _logged(case, summary)
    assert made and refused == []


@pytest.mark.django_db
def test_the_scorecard_counts_a_false_claim_a_card_showed_and_its_control_does_not(case, monkeypatch):
    """A card made past the guard (as before the reading) is what the customer read: counted as a false claim."""
    monkeypatch.setattr(callguards, "CLAIMS_ON_CARDS", False)
    made, _ = _logged(case, "This order was damaged and a refund is given.")
    assert made
    assert scorecard.read_by_customers(case["ticket"].pk)["false_claims"] == 1
    monkeypatch.setattr(scorecard, "CARDS_READ", False)
    assert scorecard.read_by_customers(case["ticket"].pk)["false_claims"] == 0


@pytest.mark.django_db
def test_a_true_summary_on_a_card_is_not_counted(case):
    made, _ = _logged(case, "Customer called about the broken lamp; they want 15.00 back.")
    assert made and scorecard.read_by_customers(case["ticket"].pk)["false_claims"] == 0
