"""The rule-candidate classifier and structured checks (pure)."""

import pytest

from sundry.context.rules import candidate_rules, infer_enforcement


@pytest.mark.parametrize(
    "text",
    [
        "Phone only, never email please.",
        "Please don't call me.",
        "Don't cancel the order!",
        "I don’t want insurance.",  # curly apostrophe, as people's keyboards type it
        "Whatever you do, do not restart the primary.",
        "Only email me, no calls",
        "Never email me.",
        "I only want to return the bike, nothing else from the order.",
        "That’s the only payment method I want to use.",
    ],
)
def test_directives_are_flagged_verbatim(text):
    assert candidate_rules(text) == [text]


@pytest.mark.parametrize(
    "text",
    [
        "I want to return the items from SU-22006, they don't fit.",
        "It never arrived.",
        "I don't remember the email address I used.",
        "I just want to make sure I'm doing this right.",
        "My card only has $950 left.",
        "Thanks, that works.",
    ],
)
def test_descriptions_are_not_flagged(text):
    assert candidate_rules(text) == []


def test_structured_checks():
    assert infer_enforcement("Phone only, never email please.") == {"block_tools": ["send_email"]}
    assert infer_enforcement("Only email me, no calls") == {"block_tools": ["log_phone_call"]}
    assert infer_enforcement("I don't want a replacement") == {"block_tools": ["offer_replacement"]}
    assert infer_enforcement("Please be quick.") == {}
    # A rule naming its order narrows the order actions it blocks to that order.
    assert infer_enforcement("Whatever you do, don't cancel SU-27849.") == {
        "block_tools": ["cancel_order"],
        "only_on": ["SU-27849"],
        "narrowed_tools": ["cancel_order"],
    }
