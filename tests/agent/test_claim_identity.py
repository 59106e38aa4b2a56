"""A reply that says what kind of thing an identifier is, is judged on the ID ledger and the domain's formats.

"SU-23452 is the customer ID for the order SU-23452." was posted by a real model (docs/real-model.md, run
10) about an order. The statements come from a grammar — ID kind × the words a reply calls a kind by ×
sentence frames (the ID as subject, the kind as subject, a label) — each true when the ID is of a kind the
words name, false otherwise; false ones are held, true ones pass, on the ledger and, for IDs the ledger does
not hold, on the domain's formats. Look-alikes — a mention, a question, a condition, a request to confirm,
the customer's words said back or quoted — are not read. A declared domain (as a tool server declares one)
gets its words from its own declaration. Through the real loop with the scripted model the false sentence
never reaches the customer (a plain reply or `reply_to_customer`), the stream stops before it, and a true
one is posted. Negative controls: with the reading switched off every false statement passes and the loop
posts it.
"""

from __future__ import annotations

import functools
import itertools
import re

import pytest

from sundry.agent import answer
from sundry.agent.guards import identityclaims, provisional, replyclaims
from sundry.agent.loop import agent_run
from sundry.agent.provider.gateway import Gateway
from sundry.agent.provider.scripted import ScriptedModel
from sundry.context.lanes import LedgerData, MoneyData
from sundry.evals import scorecard
from sundry.shop.models import Order
from sundry.tickets.models import Turn
from sundry.tooling.domain import Domain, get_domain
from tests.agent import recorded
from tests.agent.claimcase import customer_reads, looked_up_then_said, open_case

SHOP = get_domain()
ORDER = "SU-41001"
# One ID of each kind the shop declares, as its tools return them.
IDS = {
    "order": ORDER,
    "customer": "cus_ab12cd34",
    "tracking": "1Z999AA101234567",
    "item": "itm_ab12cd34",
    "sku": "SKU-AB123",
    "refund": "rfd_ab12cd34",
    "return": "ret_ab12cd34",
    "payment": "pay_ab12cd34",
    "payment_method": "pm_ab12cd34",
    "address": "adr_ab12cd34",
}
# How replies call each kind (the grammar's own ground truth, not read from the domain): wording → kinds.
NOUNS = {
    "order": {"order"},
    "order number": {"order"},
    "order ID": {"order"},
    "most recent order": {"order"},
    "customer ID": {"customer"},
    "customer number": {"customer"},
    "account number": {"customer"},
    "tracking number": {"tracking"},
    "tracking code": {"tracking"},
    "item": {"item"},
    "item ID": {"item"},
    "product": {"item", "sku"},
    "SKU": {"sku"},
    "refund reference": {"refund"},
    "refund ID": {"refund"},
    "return": {"return"},
    "return reference": {"return"},
    "payment ID": {"payment"},
    "payment method": {"payment_method"},
    "address ID": {"address"},
}
FRAMES = [
    "{id} is the {noun}.",
    "{id} is your {noun}.",
    "{id} is the {noun} for the order {order}.",
    "{id} is {a} {noun}.",
    "{id} is actually your {noun}.",
    "I checked, and {id} is your {noun}.",
    "{id} refers to your {noun}.",
    "Your {noun} is {id}.",
    "The {noun} for your request is {id}.",
    "Your {noun} is {id}, as the records show.",
    "{Noun}: {id}",
    "- **{Noun}:** {id}",
    "We found it ({noun}: {id}).",
]


def _article(noun: str) -> str:
    return "an" if noun[0].lower() in "aeiou" or noun.startswith("SKU") else "a"


def _say(frame: str, value: str, noun: str) -> str:
    return frame.format(id=value, noun=noun, Noun=noun[0].upper() + noun[1:], a=_article(noun), order=ORDER)


def _statements():
    """(sentence, the ID's kind, the kinds its words name, true)."""
    for (kind, value), (noun, named), frame in itertools.product(IDS.items(), NOUNS.items(), FRAMES):
        yield _say(frame, value, noun), kind, frozenset(named), kind in named


STATEMENTS = list(_statements())
TRUE = [s for s in STATEMENTS if s[3]]
FALSE = [s for s in STATEMENTS if not s[3]]


def _entry(value: str, kind: str) -> LedgerData:
    return LedgerData(
        role=f"{kind}:{value}", value=value, kind=kind, verified=True, first_seen_turn=1, last_used_turn=1
    )


LEDGER = [_entry(v, k) for k, v in IDS.items()]


def _held(text: str, *, ledger=LEDGER, money=(), domain=SHOP) -> list[replyclaims.Claim]:
    """The claims of what an ID is that the records do not support."""
    records = replyclaims.Records.of(domain, ledger=ledger, money=money)
    return [c for c in records.unsupported(text) if c.kind == replyclaims.IDENTITY]


def _all_held(text: str, *, ledger=LEDGER) -> list[replyclaims.Claim]:
    return replyclaims.Records.of(SHOP, ledger=ledger).unsupported(text)


# --- what is read --------------------------------------------------------------------------------------


def test_the_grammar_is_what_it_says():
    assert len(STATEMENTS) == len(IDS) * len(NOUNS) * len(FRAMES)
    print(f"identity statements: {len(STATEMENTS)} ({len(TRUE)} true, {len(FALSE)} false)")
    assert len(TRUE) > 200 and len(FALSE) > 2000


def test_every_generated_statement_is_read_as_the_kind_it_says():
    nouns = identityclaims.nouns_of(SHOP)
    missed = [
        (text, named)
        for text, kind, named, _true in STATEMENTS
        if [(s.value, s.kinds) for s in identityclaims.statements(text, nouns)] != [(IDS[kind], named)]
    ]
    assert not missed, missed[:10]


def test_false_statements_are_held_on_the_ledger():
    passed = [text for text, *_ in FALSE if not _held(text)]
    assert not passed, passed[:10]
    (claim,) = _held(f"{ORDER} is the customer ID.")
    assert claim.mode == replyclaims.STATED and claim.why == f"the ledger shows {ORDER} is an order, not a customer"


def test_true_statements_pass():
    held = [(text, [c.why for c in _all_held(text)]) for text, *_ in TRUE if _all_held(text)]
    assert not held, held[:10]


def test_an_id_the_ledger_does_not_hold_is_judged_by_the_domains_formats():
    assert all(_held(text, ledger=[]) for text, *_ in FALSE[::7])
    assert not any(_held(text, ledger=[]) for text, *_ in TRUE)
    (claim,) = _held(f"{ORDER} is the customer ID.", ledger=[])
    assert claim.why == f"{ORDER} has the format of an order, not a customer"


def test_the_money_lane_says_its_records_are_orders():
    money = [MoneyData(order=ORDER, currency="USD", paid_cents=6998, refunded_cents=0)]
    held = _held(f"{ORDER} is your tracking number.", ledger=[], money=money)
    assert held and held[0].why.startswith("the ledger shows")


def test_an_id_of_no_known_format_nor_in_the_ledger_is_left_to_the_identifier_check():
    for text in ("AB-77 is your customer ID.", "Your tracking number is ZX-991.", "Order number: 12345"):
        assert not _held(text, ledger=[]), text


# The same words that assert nothing of what the ID is. Each uses an ID of another kind than its words
# name, so a reading would hold it.
LOOKALIKES = [
    "Your {noun} {id} is on its way.",
    "Please send me the {noun} for {id}.",
    "I'll look up the {noun} for {id} now.",
    "Is {id} your {noun}?",
    "Could you check whether {id} is your {noun}?",
    "Please confirm that {id} is your {noun}.",
    "Let me know if {id} is the {noun} you mean.",
    "If {id} is the {noun} you mean, I can look into it.",
    "When {id} is your {noun}, the page lists it.",
    "{id} will be your {noun} once it is booked.",
    "You wrote that {id} is your {noun}.",
    "You mentioned {id} is your {noun}.",
    'You said "{id} is my {noun}".',
    "{id} is not your {noun}.",
    "{id} isn't a {noun}.",
    "The refund for {id} is the {noun} you asked about.",
    "The {noun} for the customer whose ID is {id} is on its way.",
    "The {noun} of the order that is {id} has shipped.",
    "Thanks for sending {id} and your {noun}.",
    "I have {id} and the {noun} on file.",
    "{id} is the one we talked about, and the {noun} is on its way.",
    "The {noun} you asked about is {id}.",  # a relative clause: not read, though it asserts
]


def _lookalikes():
    for (kind, value), (noun, named), frame in itertools.product(IDS.items(), NOUNS.items(), LOOKALIKES):
        if kind not in named:
            yield _say(frame, value, noun)


def test_no_lookalike_is_read_or_held():
    looks = list(dict.fromkeys(_lookalikes()))
    nouns = identityclaims.nouns_of(SHOP)
    read = [t for t in looks if identityclaims.statements(t, nouns)]
    held = [t for t in looks if _held(t)]
    print(f"look-alikes read: {len(read)}/{len(looks)}, held: {len(held)}")
    assert len(looks) > 2000 and not read and not held, read[:10]


def test_plain_mentions_and_other_statements_are_not_read():
    nouns = identityclaims.nouns_of(SHOP)
    for text in (
        f"Your order {ORDER} has shipped.",
        f"Order {ORDER} was placed on 10 August 2026.",
        f"{ORDER} is a shipped order.",  # a status (statusclaims), true of an order
        f"The refund of 20.00 USD on {ORDER} is the full amount.",
        "Your order total is 69.98 USD and the order date is 2026-08-10.",
        "Your order is 3 days late.",
        f"{ORDER} is the customer's order.",
        f"{ORDER} is the order confirmation you received.",
    ):
        assert not [s for s in identityclaims.statements(text, nouns) if "order" not in s.kinds], text


RUN_10 = "SU-23452 is the customer ID for the order SU-23452."  # docs/real-model.md, run 10


def test_the_run_10_sentence_is_held():
    (claim,) = _held(RUN_10, ledger=[_entry("SU-23452", "order")])
    assert claim.why == "the ledger shows SU-23452 is an order, not a customer"
    assert "identity (stated)" in replyclaims.describe([claim])
    assert _held(RUN_10, ledger=[]), "by its format alone"


def test_negative_control_without_the_reading_the_false_statements_pass(monkeypatch):
    monkeypatch.setattr(identityclaims, "_SHAPES", [])
    passed = [text for text, *_ in FALSE if not _held(text)]
    print(f"false identity statements passed without the reading: {len(passed)}/{len(FALSE)}")
    assert len(passed) == len(FALSE)
    assert not _held(RUN_10, ledger=[_entry("SU-23452", "order")])


# --- the words come from the domain's declaration --------------------------------------------------------

HOTEL = Domain.from_data(
    {
        "name": "hotel",
        "owner_kind": "booking",
        "id_patterns": {"booking": r"BK\d{4}", "guest": r"G\d{4}"},
        "id_nouns": {"booking": ["reservation"]},
        "tools": {
            "get_booking": {
                "lookup": True,
                "args": {"booking_ref": "booking"},
                "results": {"guest_no": "guest", "rooms[].room_code": "room"},
            }
        },
    }
)


def test_a_declared_domain_names_its_kinds_by_its_fields_and_its_id_nouns():
    nouns = identityclaims.nouns_of(HOTEL)
    assert {p: set(k) for p, k in nouns.phrases.items()} == {
        "booking": {"booking"},
        "reservation": {"booking"},
        "guest": {"guest"},
        "room": {"room"},
    }
    guest, room = _entry("G1234", "guest"), _entry("R-12", "room")
    ledger = [_entry("BK1234", "booking"), guest, room]
    assert not _held("BK1234 is your reservation number.", ledger=ledger, domain=HOTEL)
    assert not _held("Your booking reference is BK1234.", ledger=ledger, domain=HOTEL)
    assert _held("G1234 is your reservation.", ledger=ledger, domain=HOTEL)
    assert _held("BK1234 is your guest number.", ledger=[], domain=HOTEL)  # by format
    # A kind with no format is judged on the ledger alone.
    assert not _held("R-12 is your room.", ledger=ledger, domain=HOTEL)
    assert _held("BK1234 is your room code.", ledger=ledger, domain=HOTEL)
    assert not _held("BK1234 is your room code.", ledger=[], domain=HOTEL)
    # Words its declaration does not give are not read: the shop's "order", "account", "parcel".
    for text in ("BK1234 is your order number.", "G1234 is your account number.", "BK1234 is your parcel."):
        assert not identityclaims.statements(text, nouns), text


def test_id_nouns_are_checked_when_a_domain_is_declared():
    with pytest.raises(ValueError, match="id nouns for kind 'flight'"):
        Domain.from_data({"name": "x", "id_patterns": {"booking": r"BK\d{4}"}, "id_nouns": {"flight": ["leg"]}})
    with pytest.raises(ValueError, match="id_nouns"):
        Domain.from_data({"name": "x", "id_patterns": {"booking": r"BK\d{4}"}, "id_nouns": {"booking": ["Leg!"]}})


# --- the stream and the guard share the path -------------------------------------------------------------


def test_the_stream_stops_before_the_false_sentence():
    facts = replyclaims.Records.of(SHOP, ledger=[_entry("SU-23452", "order")])
    text = f"Thanks for waiting. {RUN_10} It is on its way to you."
    shown = provisional.shown(
        text, known={"SU-23452"}, final=True, sentence_ok=lambda upto: answer.sentence_passes(upto, facts, None)
    )
    assert shown == "Thanks for waiting."
    true = "Thanks for waiting. SU-23452 is your order number. It is on its way to you."
    assert (
        provisional.shown(
            true, known={"SU-23452"}, final=True, sentence_ok=lambda upto: answer.sentence_passes(upto, facts, None)
        )
        == true
    )


# --- through the loop, judged from what the customer reads ---------------------------------------------


@pytest.fixture
def case(django_user_model):
    text = f"Where is {ORDER}?"
    return open_case(
        django_user_model, text, order=ORDER, subject="Where is it", prices=(3499,), status=Order.Status.SHIPPED
    )


POSTED = f"{ORDER} is the customer ID for the order {ORDER}."  # run 10's sentence, on this ticket's order
TRUE_REPLY = f"{ORDER} is your order number. It has shipped."
AFTER = f"A colleague will look into where {ORDER} is."


_answers = functools.partial(looked_up_then_said, order=ORDER, after=AFTER)


@pytest.mark.django_db
@pytest.mark.parametrize("via", ["reply", "reply_to_customer"])
def test_the_false_sentence_never_reaches_the_customer(case, via):
    agent_run(case["ticket"].pk, gateway=Gateway(override=ScriptedModel(_answers(via, POSTED))))
    reads = customer_reads(case)
    assert "customer ID" not in reads
    if via == "reply_to_customer":
        rejection = Turn.objects.filter(ticket=case["ticket"], kind=Turn.Kind.REJECTION).last()
        assert rejection.payload["guard"] == "unsupported_claim" and "identity (stated)" in rejection.text
    else:
        held = Turn.objects.filter(ticket=case["ticket"], kind=Turn.Kind.ERROR).last()
        assert "identity (stated)" in held.text and f"the ledger shows {ORDER} is an order" in held.text


@pytest.mark.django_db
@pytest.mark.parametrize("via", ["reply", "reply_to_customer"])
def test_a_true_sentence_is_posted(case, via):
    agent_run(case["ticket"].pk, gateway=Gateway(override=ScriptedModel(_answers(via, TRUE_REPLY, again=False))))
    assert TRUE_REPLY in customer_reads(case)
    read = scorecard.read_by_customers(case["ticket"].pk)
    assert (read["false_statements"], read["false_claims"]) == (0, 0)


@pytest.mark.django_db
@pytest.mark.parametrize("via", ["reply", "reply_to_customer"])
def test_negative_control_without_the_reading_it_is_posted(case, via, monkeypatch):
    monkeypatch.setattr(identityclaims, "_SHAPES", [])
    agent_run(case["ticket"].pk, gateway=Gateway(override=ScriptedModel(_answers(via, POSTED))))
    assert POSTED in customer_reads(case)
    monkeypatch.undo()  # posted by the check without the reading; read back by the check with it
    read = scorecard.read_by_customers(case["ticket"].pk)
    assert (read["false_statements"], read["false_claims"]) == (1, 0)


# --- real replies -----------------------------------------------------------------------------------------


def test_no_real_agent_reply_of_the_tau2_traces_is_held_for_what_it_says_an_id_is():
    """Replies a strong model wrote to real users (τ²-bench traces, beside the checkout when present), each
    judged on a ledger of the IDs the tool results and the user's messages before it gave: what they say
    an ID is ("- Reservation ID: …", "(item ID: …)", "your phone number is …") is read, and none is held."""
    from sundry.evals.domains import DOMAINS
    from sundry.evals.importers import tau2_results

    traces = recorded.traces()
    replies, read, held = 0, 0, []
    for path in sorted(traces.glob("*.json")):
        for ticket in tau2_results(path):
            domain = DOMAINS[ticket.domain].domain
            nouns = identityclaims.nouns_of(domain)
            kinds: dict[str, str] = {}
            for t in ticket.turns:
                if t.kind == "tool_result":
                    for _path, kind, value in domain.ids(t.payload.get("name", ""), t.text):
                        kinds.setdefault(value, kind)
                elif t.author == "customer" and t.kind == "message":
                    for kind, value in domain.typed_ids(t.text):
                        kinds.setdefault(value, kind)
                elif t.author == "agent" and t.kind == "message" and t.text.strip():
                    replies += 1
                    ledger = [_entry(v, k) for v, k in kinds.items()]
                    said = [c for c in replyclaims.claims_of(t.text, nouns=nouns) if c.kind == replyclaims.IDENTITY]
                    read += len(said)
                    held += [
                        (c.sentence, why)
                        for c in said
                        if (why := identityclaims.fault(c.stated, ledger, (), domain.owner_kind, nouns))
                    ]
    print(f"real replies: {replies}, identity statements read: {read}, held: {len(held)}")
    assert replies > 800 and read > 20 and not held, held[:5]


def test_a_word_of_the_grammar_the_domain_does_not_give_is_not_in_it():
    # The grammar's words are the shop's: each names kinds the shop's vocabulary gives it.
    nouns = identityclaims.nouns_of(SHOP)
    for noun, named in NOUNS.items():
        assert nouns.named(re.sub(r"\s+", " ", noun.lower()).split())[1] == named, noun


def test_a_class_of_tool_servers_keeps_each_files_id_nouns():
    from sundry.toolservers.catalog import _merged

    other = Domain.from_data(
        {"name": "spa", "id_patterns": {"appointment": r"SP\d{4}"}, "id_nouns": {"appointment": ["slot"]}}
    )
    merged = _merged([HOTEL, other], {**HOTEL.tools, **other.tools})
    assert merged.id_nouns == {"booking": ["reservation"], "appointment": ["slot"]}
    nouns = identityclaims.nouns_of(merged)
    assert nouns.named(["slot"])[1] == {"appointment"} and nouns.named(["reservation"])[1] == {"booking"}
