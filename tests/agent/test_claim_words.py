"""A reply's claims in a domain's own words, its offers, and its promises to contact the customer.

Wordings come from a small grammar (subject × modal or tense × verb × entity × amount),
not written for the rule, and are judged against generated states:

- a write's own words, from its declaration (τ²'s airline and telecom: "your flight has
  been upgraded", "I've suspended the line"): held when nothing ran, when another
  write ran, or when it ran on another record; passed when the write that says it ran;
- offers ("I can refund 48.99 USD on …", "I'm able to cancel it for you"): passed when
  the action is open to the customer, held when a rule forbids it, its card was
  declined, it is done already, or it names another figure than its open card;
- contact promises ("I'll e-mail you the label", "we will call you tomorrow"): passed on
  an open card or hold for a contact tool, held with none, after a contact that already
  ran, and when a rule in force forbids the channel.

Through the real loop, an offer of another figure than the open card is asked again and
held, and the card's own figure reaches the customer's page.
"""

from __future__ import annotations

import itertools
from collections import Counter

import pytest
from pydantic import ValidationError

from sundry.agent.guards import replyclaims
from sundry.agent.guards.replyclaims import DECLINED, OPEN, Proposal
from sundry.agent.loop import agent_run
from sundry.agent.provider.gateway import Gateway
from sundry.agent.provider.scripted import ScriptedModel
from sundry.context.lanes import ActionData, LedgerData, MoneyData, RuleData
from sundry.evals.domains.tau2 import AIRLINE_DECLARATION, TELECOM_DECLARATION
from sundry.tickets.models import Ticket, Turn
from sundry.tooling.domain import Domain, ToolDecl, get_domain
from sundry.tooling.messages import ModelResponse
from tests.agent.claimcase import LOOKUP, REFUND, case, customer_reads  # noqa: F401  (case: the fixture)

AIRLINE, TELECOM, SHOP = Domain.from_data(AIRLINE_DECLARATION), Domain.from_data(TELECOM_DECLARATION), get_domain()


def _records(domain, *, actions=(), ledger=(), money=(), proposals=(), rules=()) -> replyclaims.Records:
    return replyclaims.Records.of(domain, actions=actions, ledger=ledger, money=money, proposals=proposals, rules=rules)


def _action(tool, target, cents=None):
    return ActionData(
        tool=tool,
        target=target,
        turn=3,
        idempotency_key=f"{tool}-{target}",
        reversible=False,
        amount_cents=cents,
        currency="USD" if cents else "",
        on=(target,),
    )


def _entry(value, kind, description=""):
    return LedgerData(
        role=f"{kind}:{value}",
        value=value,
        kind=kind,
        verified=True,
        first_seen_turn=1,
        last_used_turn=1,
        description=description,
    )


# --- a write's own words ---------------------------------------------------------------------------

# (domain, the write that does it, another write of the domain, a record and another of its kind,
#  its kind, past participle, base form, what it acts on) — English, written here, not read from the
#  declarations they test.
OWN = [
    (AIRLINE, "update_reservation_flights", "update_reservation_baggages", "upgraded", "upgrade", "flight"),
    (AIRLINE, "update_reservation_flights", "cancel_reservation", "rescheduled", "reschedule", "flight"),
    (AIRLINE, "update_reservation_flights", "book_reservation", "changed", "change", "cabin"),
    (AIRLINE, "update_reservation_baggages", "update_reservation_flights", "added", "add", "bag"),
    (AIRLINE, "book_reservation", "update_reservation_flights", "booked", "book", "reservation"),
    (AIRLINE, "send_certificate", "book_reservation", "issued", "issue", "certificate"),
    (TELECOM, "suspend_line", "resume_line", "suspended", "suspend", "line"),
    (TELECOM, "resume_line", "suspend_line", "reactivated", "reactivate", "line"),
    (TELECOM, "enable_roaming", "disable_roaming", "turned on", "turn on", "roaming"),
    (TELECOM, "refuel_data", "enable_roaming", "added", "add", "data"),
    (TELECOM, "send_payment_request", "refuel_data", "sent", "send", "payment request"),
]
RECORD = {"airline": ("ZFA04Y", "8JX2WO", "reservation"), "telecom": ("L1001", "L1002", "line")}
DONE_FORMS = [
    "Your {noun}{on} has been {part}.",
    "The {noun}{on} was {part} successfully.",
    "Good news: your {noun}{on} has now been {part}.",
    "I've {part} your {noun}{on}.",
    "We have just {part} the {noun}{on}.",
]
FUTURE_FORMS = ["I'll {base} your {noun}{on} once you confirm.", "Your {noun}{on} will be {part} after you confirm."]
OFFER_FORMS = ["I can {base} your {noun}{on} now.", "Would you like me to {base} the {noun}{on}?"]
CLOSERS = ["", " Anything else?"]


def _own_cases():
    for (domain, tool, other, part, base, noun), named, closer in itertools.product(OWN, (True, False), CLOSERS):
        record, elsewhere, kind = RECORD[domain.name]
        on = f" on {kind} {record}" if named else ""
        for mode, forms in (("done", DONE_FORMS), ("future", FUTURE_FORMS), ("offer", OFFER_FORMS)):
            for form in forms:
                text = form.format(noun=noun, on=on, part=part, base=base) + closer
                yield mode, domain, tool, other, record, elsewhere, kind, named, text


OWN_CASES = list(_own_cases())


def test_a_write_is_told_in_its_declared_words_and_judged_on_what_ran():
    """Without the declarations' words these sentences are not claims at all: every "held" below fails."""
    figures = Counter()
    for mode, domain, tool, other, record, elsewhere, kind, named, text in OWN_CASES:
        ledger = [_entry(record, kind), _entry(elsewhere, kind)]
        ran = [_action(tool, record)]

        def held(**state) -> bool:
            return bool(_records(domain, ledger=ledger, **state).unsupported(text))

        if mode == "done":
            assert held(), ("nothing ran", text)
            assert held(actions=[_action(other, record)]), ("another write ran", text)
            assert not held(actions=ran), ("its write ran", text)
            if named:
                assert held(actions=[_action(tool, elsewhere)]), ("it ran on another record", text)
        elif mode == "future":
            assert held(), ("no card", text)
            assert held(proposals=[Proposal(other, (record,), OPEN)]), ("another write's card", text)
            assert not held(proposals=[Proposal(tool, (record,), OPEN)]), ("its card is open", text)
            if named:
                assert held(proposals=[Proposal(tool, (elsewhere,), OPEN)]), ("a card on another record", text)
        else:
            assert not held(), ("open to the customer", text)
            assert held(proposals=[Proposal(tool, (record,), DECLINED)]), ("its card was declined", text)
        figures[mode] += 1
    print(f"sentences in the writes' own words, judged on generated states: {dict(figures)}")
    assert figures["done"] == 2 * 2 * len(OWN) * len(DONE_FORMS)


def test_a_shop_sentence_in_another_domains_words_claims_nothing_there():
    """The words are the domain's own: telecom's "suspended" is no claim in the airline's declarations,
    and a verb alone names nothing ("I've updated you on the status")."""
    for text in ["Your line has been suspended.", "I've updated you on the status.", "I've added a note."]:
        assert not _records(AIRLINE).unsupported(text), text
    assert _records(TELECOM).unsupported("Your line has been suspended.")


def test_a_declaration_says_its_words_in_base_form_and_only_for_a_write():
    ToolDecl(name="upgrade_seat", write=True, claim_verbs=["upgrade", "top up"], claim_nouns=["seat"])
    for bad in (
        dict(name="get_seat", lookup=True, claim_verbs=["upgrade"]),  # a lookup tells of nothing done
        dict(name="upgrade_seat", write=True, claim_verbs=["Upgraded!"]),
        dict(name="upgrade_seat", write=True, claim_nouns=["seat; drop table"]),
    ):
        with pytest.raises(ValidationError):
            ToolDecl(**bad)


# --- offers ----------------------------------------------------------------------------------------

ORDER, OTHER = "SU-41001", "SU-41002"
OFFERS = {
    "refund": ["refund {amt}{on}", "issue a refund of {amt}{on}"],
    "cancel": ["cancel {it}", "go ahead and cancel {it}"],
    "return": ["book a return for {it}"],
}
MODALS = [
    "I can {verb} now.",
    "I'm able to {verb} for you.",
    "We'd be happy to {verb}.",
    "Would you like me to {verb}?",
]
TOOL = {"refund": "issue_refund", "cancel": "cancel_order", "return": "book_return"}
NEVER = {"refund": "Please never refund anything to me.", "cancel": "Do not cancel any of my orders."}


def _offers():
    for (kind, verbs), modal, named, amount in itertools.product(OFFERS.items(), MODALS, (True, False), (True, False)):
        for verb in verbs:
            if amount and "{amt}" not in verb:
                continue
            said = verb.format(
                amt="48.99 USD" if amount else "the full amount",
                on=f" on {ORDER}" if named else "",
                it=ORDER if named else "it",
            )
            yield kind, named, amount, modal.format(verb=said)


OFFER_CASES = list(_offers())


def test_an_offer_is_judged_on_whether_the_action_is_open_to_the_customer():
    figures = Counter()
    ledger = [_entry(ORDER, "order", "Desk lamp · delivered")]
    paid = MoneyData(order=ORDER, currency="USD", paid_cents=4899, refunded_cents=0)
    for kind, named, amount, text in OFFER_CASES:
        tool = TOOL[kind]

        def held(**state) -> list:
            return _records(SHOP, ledger=ledger, money=[paid], **state).unsupported(text)

        card = Proposal(tool, (ORDER,), OPEN, 4899 if kind == "refund" else None, "USD")
        assert [c.mode for c in replyclaims.claims_of(text)] == ["offer"], text
        assert not held(), ("nothing done yet", text)
        assert not held(proposals=[card]), ("its card is open", text)
        why = {"its card was declined": held(proposals=[Proposal(tool, (ORDER,), DECLINED)])}
        if kind in NEVER:
            why["a rule forbids it"] = held(rules=[RuleData(id=1, text=NEVER[kind], turn=1)])
        if kind == "cancel":
            why["it is done already"] = held(actions=[_action(tool, ORDER)])
        if kind == "refund":
            gone = MoneyData(order=ORDER, currency="USD", paid_cents=4899, refunded_cents=4899)
            why["nothing is left to refund"] = _records(SHOP, ledger=ledger, money=[gone]).unsupported(text)
            if amount:
                other = Proposal(tool, (ORDER,), OPEN, 1500, "USD")
                why["its open card names another figure"] = held(proposals=[other])
        for state, false in why.items():
            assert false and false[0].mode == "offer", (state, text)
            figures[f"held: {state}"] += 1
        figures["passed: open to the customer"] += 1
    print(dict(figures))
    assert figures["passed: open to the customer"] == len(OFFER_CASES)


def test_an_offer_names_what_the_records_say_against_it():
    text = f"I can refund 25.00 USD on {ORDER} now."
    false = _records(SHOP, proposals=[Proposal("issue_refund", (ORDER,), OPEN, 1500, "USD")]).unsupported(text)
    assert "refund (offered) of 25.00 USD — its open card names another figure" in replyclaims.describe(false)


# --- contact promises ------------------------------------------------------------------------------

SUBJECTS = ["I'll", "We will", "I am going to", "We're going to"]
CONTACTS = {
    "email": ["e-mail you the label", "email you the details for {order}", "send you an e-mail about {order}"],
    "phone": ["call you", "phone you about {order}"],
}
WHEN = ["", " tomorrow", " shortly"]
CONTACT_TOOL = {"email": "send_email", "phone": "log_phone_call"}
FORBIDS = {"email": "Please never email me again.", "phone": "Do not call me, ever."}


def _promises():
    for subject, (kind, verbs), when in itertools.product(SUBJECTS, CONTACTS.items(), WHEN):
        for verb in verbs:
            yield kind, f"{subject} {verb.format(order=ORDER)}{when}."


PROMISES = list(_promises())


def test_a_promise_to_contact_stands_on_an_open_card_and_never_against_a_rule():
    figures = Counter()
    for kind, text in PROMISES:
        tool = CONTACT_TOOL[kind]

        def held(**state) -> list:
            return _records(SHOP, ledger=[_entry(ORDER, "order")], **state).unsupported(text)

        assert not held(proposals=[Proposal(tool, ("C-1",), OPEN)]), ("its card is open", text)
        assert held(), ("nothing open", text)
        assert held(actions=[_action(tool, "C-1")]), ("one was made before: no new one is open", text)
        forbidden = held(rules=[RuleData(id=1, text=FORBIDS[kind], turn=1)])
        assert forbidden and forbidden[0].why == "a rule in force forbids it", text
        other = "email" if kind == "phone" else "phone"
        assert held(proposals=[Proposal(CONTACT_TOOL[other], ("C-1",), OPEN)]), ("the other channel's card", text)
        figures[kind] += 1
    print(f"contact promises judged: {dict(figures)}")


# --- through the loop ------------------------------------------------------------------------------


@pytest.mark.django_db
def test_an_offer_of_another_figure_than_the_open_card_is_asked_again_then_held(case):
    offer = f"I can refund 25.00 USD on {ORDER} right away."
    model = ScriptedModel([LOOKUP, REFUND, ModelResponse(text=offer), ModelResponse(text=offer)])
    agent_run(case["ticket"].pk, gateway=Gateway(override=model))
    assert "25.00 USD" not in customer_reads(case)
    assert "its open card names another figure" in model.requests[-1].messages[-1].content
    held = Turn.objects.filter(ticket=case["ticket"], kind=Turn.Kind.ERROR).last()
    assert "refund (offered) of 25.00 USD" in held.text
    assert "unsupported_claim" in Ticket.objects.get(pk=case["ticket"].pk).attention


@pytest.mark.django_db
def test_an_offer_of_the_open_cards_figure_reaches_the_page(case):
    """The control: the same words with the card's figure are posted at once."""
    offer = f"I can refund 15.00 USD on {ORDER} right away: please press Confirm."
    model = ScriptedModel([LOOKUP, REFUND, ModelResponse(text=offer)])
    agent_run(case["ticket"].pk, gateway=Gateway(override=model))
    assert offer in customer_reads(case) and len(model.requests) == 3
