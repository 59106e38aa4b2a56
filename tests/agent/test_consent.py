"""The consent guard: irreversible actions only on what was asked for (pure)."""

from __future__ import annotations

import pytest

from sundry.agent.guards.consent import Done, Entity, Said, check_consent, sentence_kind

FRYER, CHARGER, GRINDER, LAMP = "SU-25386", "SU-27531", "SU-26004", "SU-29117"
ENTITIES = [
    Entity(FRYER, "order", "Air Fryer 5.5L · delivered"),
    Entity("itm_fryer", "item", "Air Fryer 5.5L", of=FRYER),
    Entity(CHARGER, "order", "USB-C Charger 65W · shipped"),
    Entity(GRINDER, "order", "Burr Coffee Grinder, French Press 1L · delivered"),
    Entity(LAMP, "order", "LED Desk Lamp · placed"),
    Entity("itm_lamp", "item", "LED Desk Lamp", of=LAMP),
    Entity("rfd_1", "refund", f"refund 40.00 USD on {FRYER} · issued"),
]


def customer(*texts, start=1):
    return [Said("customer", start + i, t) for i, t in enumerate(texts)]


def consent(action, target, said, done=(), state=None):
    return check_consent(action=action, target=target, said=said, entities=ENTITIES, done=list(done), state=state)


# --- what a sentence does --------------------------------------------------------------------


@pytest.mark.parametrize(
    "sentence",
    [
        "Is the refund for the air fryer done?",
        "Is the refund for the grinder approved yet?",
        "Has the air fryer been refunded already?",
        "Did you cancel the lamp order?",
        "When will my refund arrive?",
        "Any update on the return?",
        "What's the status of my replacement?",
        "I got the refund, thanks.",
        "Hi, was the refund processed?",
    ],
)
def test_status_questions_are_not_requests(sentence):
    action = next(a for a in ("refund", "cancel", "return", "replace") if sentence_kind(sentence, a))
    assert sentence_kind(sentence, action) == "status"


@pytest.mark.parametrize(
    "sentence,action",
    [
        ("Please refund 40.00 USD for the cracked air fryer.", "refund"),
        ("Can you refund the air fryer order?", "refund"),
        ("I'd like a refund on the grinder.", "refund"),
        ("Refund another 10.00 USD on the air fryer order.", "refund"),
        ("I want my money back for the air fryer.", "refund"),
        ("The air fryer arrived cracked, I'd like 40 USD back.", "refund"),
        ("Cancel SU-29117 please.", "cancel"),
        ("I want to return the lamp.", "return"),
        ("Could you send me a replacement for the air fryer?", "replace"),
        ("Is it possible to cancel the lamp order?", "cancel"),
        ("Please refnd the air fryer.", "refund"),  # a typo of the action
        ("I'd like to cancle the lamp order.", "cancel"),
        ("Actually, not a refund — I'd rather have a replacement.", "replace"),
        ("Yes, a replacement of the air fryer.", "replace"),  # the answer to "would you like a replacement?"
        ("Ok, a refund then.", "refund"),
    ],
)
def test_requests_are_requests(sentence, action):
    assert sentence_kind(sentence, action) == "request"


@pytest.mark.parametrize(
    "sentence,action",
    [
        ("Don't refund the air fryer.", "refund"),
        ("Please do not cancel the lamp order.", "cancel"),
        ("I don't want a refund, I'll keep it.", "refund"),
        ("Never mind the refund.", "refund"),
        ("I'd rather not return the lamp.", "return"),
        ("No refund needed.", "refund"),
        ("Actually, not a refund — I'd rather have a replacement.", "refund"),
        ("I'd rather have a replacement than a refund.", "refund"),
        ("Yes, but don't cancel it.", "cancel"),
    ],
)
def test_negations_withdraw(sentence, action):
    assert sentence_kind(sentence, action) == "negated"


@pytest.mark.parametrize(
    "sentence,action",
    [
        ("Yes, the refund came through.", "refund"),
        ("Yes, is the refund done?", "refund"),
        ("Yes, I was going to ask about a refund, but", "refund"),
    ],
)
def test_a_yes_is_not_a_request_unless_it_answers_with_the_action(sentence, action):
    assert sentence_kind(sentence, action) != "request"


def test_a_sentence_without_the_action_is_not_about_it():
    assert sentence_kind("Where is my lamp?", "refund") is None
    assert sentence_kind("I'm not happy so please refund the lamp.", "refund") == "request"


# --- the case that moved money nobody asked for ------------------------------------------------


def test_a_status_question_about_the_air_fryer_never_refunds_the_charger():
    said = customer("Is the refund for the air fryer done?")
    verdict = consent("refund", [CHARGER], said)
    assert not verdict.ok
    assert verdict.details["why"] == "status_question"
    assert "asked whether a refund was done" in verdict.reason and "nothing asked for a new one" in verdict.reason


def test_a_status_question_never_refunds_the_order_it_names_either():
    verdict = consent("refund", [GRINDER], customer("Is the refund for the grinder approved yet?"))
    assert not verdict.ok and verdict.details["why"] == "status_question"


def test_a_request_naming_the_product_consents_for_its_order_and_only_that_order():
    said = customer("The air fryer arrived cracked.", "Please refund 40.00 USD for the air fryer.")
    assert consent("refund", [FRYER], said).ok
    other = consent("refund", [CHARGER], said)
    assert not other.ok and other.details["why"] == "other_entity" and CHARGER in other.reason


def test_a_request_by_id_and_by_a_typed_id_with_a_typo():
    assert consent("cancel", [LAMP], customer("Cancel SU-29117 please.")).ok
    assert consent("cancel", [LAMP], customer("Cancel SU-29171 please.")).ok  # two digits swapped
    # A typo that is nearer another ledger entry does not name the target.
    assert not consent("cancel", [LAMP], customer(f"Cancel {CHARGER} please.")).ok


def test_product_words_with_typos_and_plurals_still_match():
    assert consent("refund", [FRYER], customer("Please refund the air frier.")).ok
    assert consent("refund", [GRINDER], customer("I'd like a refund for the coffee grinders.")).ok


def test_a_request_without_an_entity_takes_the_one_the_message_or_previous_message_names():
    assert consent("refund", [FRYER], customer("My air fryer is cracked. Can I get a refund?")).ok
    assert consent("refund", [FRYER], customer("My air fryer is cracked.", "Can I get a refund?")).ok
    # The previous message named two orders: which one is for staff.
    said = customer("The air fryer and the lamp both broke.", "Can I get a refund?")
    assert not consent("refund", [FRYER], said).ok


def test_a_request_after_messages_naming_nothing_takes_the_entity_named_before_them():
    said = customer("My air fryer is cracked.", "Please never email me, phone only.", "A refund of 40.00 USD please.")
    assert consent("refund", [FRYER], said).ok
    assert not consent("refund", [CHARGER], said).ok


def test_a_request_naming_nothing_after_compaction_takes_the_order_in_state():
    said = customer("I'd like a refund of 19.00 GBP for the damage, I'll keep it.", start=11)
    assert not consent("refund", [FRYER], said).ok  # nothing says which order
    state = {"target": (FRYER, False)}
    assert consent("refund", [FRYER], said, state=state).ok
    assert not consent("refund", [CHARGER], said, state=state).ok
    # What the request's messages name wins over state; and state alone asks for nothing.
    assert not consent("refund", [FRYER], customer("Refund the lamp please."), state=state).ok
    assert not consent("refund", [FRYER], customer("Where is my parcel?"), state=state).ok


def test_a_correction_carries_the_request_to_the_entity_meant():
    said = customer(
        f"Please refund 8.00 USD on order {CHARGER[:-1]}0, it arrived damaged.",
        "Hmm, let me check.",
        f"Sorry, I meant {FRYER}.",
    )
    assert consent("refund", [FRYER], said).ok
    assert not consent("refund", [CHARGER], said).ok
    # A correction after no request asks for nothing.
    assert not consent("refund", [FRYER], customer(f"Where is {CHARGER}?", f"Sorry, I meant {FRYER}.")).ok


def test_words_naming_one_product_fully_are_not_about_another_sharing_one_of_them():
    entities = ENTITIES + [Entity("SU-24970", "order", "USB-C Cable 2m (2 pack) · delivered")]
    said = customer("The USB-C Cable 2m (2 pack) stopped working. Please refund 7.00 GBP on that order.")
    assert check_consent(action="refund", target=["SU-24970"], said=said, entities=entities).ok
    assert not check_consent(action="refund", target=[CHARGER], said=said, entities=entities).ok


def test_refund_all_my_orders_is_held():
    verdict = consent("refund", [FRYER], customer("Refund all my orders."))
    assert not verdict.ok and verdict.details["why"] == "blanket"


def test_a_later_negation_withdraws_an_earlier_request():
    said = customer("Please refund the air fryer.", "Actually, don't refund the air fryer, I'll keep it.")
    verdict = consent("refund", [FRYER], said)
    assert not verdict.ok and verdict.details["why"] == "withdrawn"


def test_a_request_already_carried_out_gives_no_consent_for_another():
    said = customer("Please refund 40.00 USD on the air fryer.")
    done = [Done("refund", FRYER, turn=3)]
    verdict = consent("refund", [FRYER], said, done)
    assert not verdict.ok and verdict.details["why"] == "already_done"
    # A second partial refund asked for after the first is a new request.
    said += customer("Refund another 10.00 USD on the air fryer order.", start=5)
    assert consent("refund", [FRYER], said, done).ok


def test_an_action_is_not_consent_for_another_action():
    said = customer("I want to return the lamp.")
    assert consent("return", [LAMP, "itm_lamp"], said).ok
    assert not consent("refund", [LAMP], said).ok
    assert not consent("cancel", [LAMP], said).ok


def test_nothing_said_is_held_with_a_plain_reason():
    verdict = consent("replace", [FRYER, "itm_fryer"], customer("Hello, where is my order?"))
    assert not verdict.ok and verdict.details["why"] == "not_asked"
    assert "Air Fryer 5.5L" in verdict.reason


def test_a_staff_note_asking_for_it_is_consent():
    said = customer("The lamp is broken.") + [Said("staff", 2, "Go ahead and refund the lamp order in full.")]
    verdict = consent("refund", [LAMP], said)
    assert verdict.ok and verdict.evidence == "staff note turn 2"


def test_a_confirmed_resolution_on_the_confirmed_order_is_consent_an_inferred_one_is_not():
    state = {"action": ("refund", True), "target": (FRYER, True)}
    assert consent("refund", [FRYER], [], state=state).ok
    assert not consent("refund", [CHARGER], [], state=state).ok
    assert not consent("refund", [FRYER], [], state={"action": ("refund", False), "target": (FRYER, True)}).ok
    assert not consent("cancel", [FRYER], [], state=state).ok


def test_an_amount_asked_back_or_off_is_a_refund_request():
    assert sentence_kind("The table leg from SU-25386 is scratched; I'll keep it for 40 off.", "refund") == "request"
    assert sentence_kind("I'd like $40 back.", "refund") == "request"
    assert sentence_kind("Did I get the 40 back?", "refund") == "status"


# --- IDs in a declared format: '#W…' orders one edit apart ---------------------------------------

NEAR_A, NEAR_B = "#W9300146", "#W9300147"  # two orders one edit apart, in a domain whose orders start with '#'
RETAIL_PATTERNS = (r"#W\d{7}", r"\d{10}")  # its order and item formats, as a declaration file gives them


def _near(target, said, entities, patterns=RETAIL_PATTERNS):
    return check_consent(action="cancel", target=[target], said=said, entities=entities, id_patterns=patterns)


@pytest.mark.parametrize("known", ["both", "named only", "target only"])
def test_a_request_naming_one_order_never_consents_for_its_neighbour_one_edit_away(known):
    """The declared format is matched whole ('#' included): '#W9300147' is that order, not a typo of
    '#W9300146', whichever of the two the ledger holds."""
    lamp, chair = Entity(NEAR_A, "order", "Desk Lamp · pending"), Entity(NEAR_B, "order", "Office Chair · pending")
    entities = {"both": [lamp, chair], "named only": [chair], "target only": [lamp]}[known]
    said = customer(f"Where is my order {NEAR_A}? It has not shipped.", f"Please cancel {NEAR_B}.")
    other = _near(NEAR_A, said, entities)
    assert not other.ok and other.details["why"] == "other_entity", other
    assert _near(NEAR_B, said, entities).ok  # the order named
    # And the other way round.
    said = customer(f"Please cancel {NEAR_A}.")
    assert not _near(NEAR_B, said, entities).ok
    assert _near(NEAR_A, said, entities).ok


def test_without_the_declared_format_a_neighbour_could_be_taken_for_the_target():
    """Negative control: read with the generic ID token alone ('#' dropped), the request naming
    #W9300147 falls back on the order named before and consents to cancel #W9300146."""
    entities = [Entity(NEAR_A, "order", "Desk Lamp · pending")]
    said = customer(f"Where is my order {NEAR_A}? It has not shipped.", f"Please cancel {NEAR_B}.")
    assert _near(NEAR_A, said, entities, patterns=()).ok  # the misfire the declared format prevents
    assert not _near(NEAR_A, said, entities).ok


def test_an_order_id_typed_without_its_hash_is_still_that_order():
    entities = [Entity(NEAR_A, "order", "Desk Lamp · pending"), Entity(NEAR_B, "order", "Office Chair · pending")]
    assert _near(NEAR_A, customer("Please cancel W9300146."), entities).ok
    assert not _near(NEAR_B, customer("Please cancel W9300146."), entities).ok


def test_the_guard_reads_the_order_format_from_the_domains_declarations():
    """The retail example's declaration file gives '#W\\d{7}': read with the patterns it declares for the kinds
    a consent action acts on, a request naming #W9300147 does not ask for a cancellation of #W9300146 (both
    orders of the ticket). The phrase reader only proposes now (guards.check_call grants nothing from
    words; a card does), so it is checked here directly, with the patterns exactly as a domain gives them."""
    from pathlib import Path

    from sundry.toolservers import declfile

    retail = declfile.load(Path(__file__).resolve().parents[2] / "examples/tau2_retail_mcp/retail.declarations.json")
    patterns = tuple(p for kind, p in retail.id_patterns.items() if kind in ("order", "item"))
    assert r"#W\d{7}" in patterns, retail.id_patterns  # the format comes from the file, not from this test
    entities = [Entity(NEAR_A, "order", "Desk Lamp · pending"), Entity(NEAR_B, "order", "Office Chair · pending")]
    said = customer(f"Where is my order {NEAR_A}? It has not shipped.", f"Please cancel {NEAR_B}.")

    other = _near(NEAR_A, said, entities, patterns=patterns)
    assert (other.ok, other.details["why"]) == (False, "other_entity"), other
    assert _near(NEAR_B, said, entities, patterns=patterns).ok
    # Without the file's patterns the neighbour is taken for a typo of the target: the patterns decide.
    assert _near(NEAR_A, said, entities[:1], patterns=()).ok
    assert not _near(NEAR_A, said, entities[:1], patterns=patterns).ok
