"""A reply never tells the customer that something was done which the records do not show.

The wordings are generated from a small grammar (kinds × phrasings × openers ×
closers), not written for the rule; the records are the ticket's own lanes.
Judged end to end by what the customer's page shows.
"""

from __future__ import annotations

import itertools

import pytest

from sundry.agent import answer
from sundry.agent.guards import replyclaims
from sundry.agent.loop import agent_run
from sundry.agent.models import Confirmation
from sundry.agent.provider.gateway import Gateway
from sundry.agent.provider.scripted import ScriptedModel
from sundry.agent.services import confirmation_decide
from sundry.context.lanes import ActionData, LedgerData, MoneyData
from sundry.shop.models import Refund
from sundry.tickets.models import Ticket, Turn
from sundry.tooling.domain import get_domain
from sundry.tooling.messages import ModelResponse, ToolCall
from tests.agent.claimcase import customer_reads, open_case

ORDER, OTHER = "SU-41001", "SU-41002"

DONE = {
    "refund": [
        "Your refund of 129.99 USD for {id} has been issued.",
        "I've issued a full refund for {id}.",
        "We have processed your refund on {id}.",
        "You have been refunded 129.99 USD for {id}.",
        "The refund for {id} was processed successfully.",
        "I've gone ahead and refunded {id}.",
        "129.99 USD for {id} was refunded to your card.",
    ],
    "cancel": [
        "Your order {id} has been cancelled.",
        "I cancelled {id} for you.",
        "{id} is now canceled.",
        "The cancellation of {id} is complete.",
        "Done: order {id} was cancelled.",
    ],
    "return": [
        "I've booked a return for {id}.",
        "Your return for {id} has been created.",
        "The return on {id} is now set up.",
        "We have started the return for {id}.",
    ],
    "replace": [
        "A replacement for {id} has been shipped.",
        "I've arranged an exchange for {id}.",
        "The item on {id} has been replaced.",
        "The exchange on {id} was placed.",
    ],
    "email": [
        "I've sent you an email about {id}.",
        "We have e-mailed you the details of {id}.",
        "A confirmation email for {id} has been sent.",
        "I've emailed you the label for {id}.",
    ],
    "phone": [
        "We called you about {id} this morning.",
        "I've phoned you about {id}.",
        "A phone call about {id} has been logged.",
    ],
}
NOT_DONE = [
    "Once you confirm on the card, {id} will be cancelled.",
    "Would you like me to cancel {id}?",
    "Your order {id} has not been cancelled.",
    "I can refund {id} if you confirm.",
    "The refund for {id} will be issued after you press Confirm.",
    "Should I book a return for {id}?",
    "I haven't issued any refund on {id} yet.",
    "A replacement for {id} can be sent once stock arrives.",
    "I'm unable to cancel {id} because it has shipped.",
    "I've sent you a card to confirm cancelling {id}.",
    "Your order {id} is on its way.",
    "I looked up {id}: it was delivered on 3 May.",
    "Press Confirm and I'll refund {id}.",
    "Was {id} cancelled by mistake?",
    "Order {id} was paid; no refund has been made.",
    "Nothing on {id} has been cancelled.",
    "I can email you the details of {id} if you like.",
    "Should we call you about {id}?",
    "We won't email you about {id}, as you asked.",
    "You will get an email about {id} once it ships.",
]
OPENERS = ["", "Thanks for waiting. ", "Good news! "]
CLOSERS = ["", " Anything else I can help with?", " Have a nice day!"]


def wordings(templates):
    return [f"{o}{t.format(id=ORDER)}{c}" for t, o, c in itertools.product(templates, OPENERS, CLOSERS)]


CLAIMS = [(kind, text) for kind, ts in DONE.items() for text in wordings(ts)]
PLAIN = wordings(NOT_DONE)
KINDS = replyclaims.kinds_of(get_domain().tools)


def test_every_generated_done_statement_is_read_as_a_claim_of_its_kind():
    read = [(kind, text) for kind, text in CLAIMS if kind in {c.kind for c in replyclaims.claims_in(text)}]
    print(f"done statements read: {len(read)}/{len(CLAIMS)}")
    assert read == CLAIMS


def test_questions_promises_negations_and_conditions_claim_nothing():
    claimed = [text for text in PLAIN if replyclaims.claims_in(text)]
    print(f"plain sentences read as claims: {len(claimed)}/{len(PLAIN)}")
    assert claimed == []


def test_the_shop_declaration_says_which_tool_does_what():
    # The shop's cancellation refunds what was paid (its declared money), so it backs a refund claim too.
    assert KINDS["issue_refund"] == {"refund"} and KINDS["cancel_order"] == {"cancel", "refund"}
    assert KINDS["book_return"] == {"return"} and KINDS["offer_replacement"] == {"replace"}
    assert KINDS["send_email"] == {"email"} and KINDS["log_phone_call"] == {"phone"} and "get_order" not in KINDS


def _action(tool, target=ORDER):
    return ActionData(tool=tool, target=target, turn=3, idempotency_key=f"{tool}-{target}", reversible=False)


TOOL = {
    "refund": "issue_refund",
    "cancel": "cancel_order",
    "return": "book_return",
    "replace": "offer_replacement",
    "email": "send_email",
    "phone": "log_phone_call",
}


@pytest.mark.parametrize("kind,text", CLAIMS[::3])
def test_a_claim_stands_only_on_an_action_of_its_kind_on_the_order_it_names(kind, text):
    assert replyclaims.unsupported(text, actions=[], kinds=KINDS), "no records: every claim is false"
    assert not replyclaims.unsupported(text, actions=[_action(TOOL[kind])], kinds=KINDS)
    if kind not in ("email", "phone"):  # a contact is with the customer, on no order
        assert replyclaims.unsupported(
            text, actions=[_action(TOOL[kind], OTHER)], kinds=KINDS, ledger=[_entry(ORDER), _entry(OTHER)]
        ), "done on another order"
    other = next(t for t in TOOL.values() if kind not in KINDS[t])
    assert replyclaims.unsupported(text, actions=[_action(other)], kinds=KINDS), "another kind of action"


def _entry(value, description="Desk lamp · delivered", note="", kind="order"):
    return LedgerData(
        role=f"order:{value}",
        value=value,
        kind=kind,
        verified=True,
        first_seen_turn=1,
        last_used_turn=1,
        description=description,
        note=note,
    )


def test_a_status_a_tool_reported_or_money_already_refunded_backs_a_claim():
    cancelled = "Your order SU-41001 has been cancelled."
    assert not replyclaims.unsupported(
        cancelled, actions=[], kinds=KINDS, ledger=[_entry(ORDER, "Desk lamp · cancelled")]
    )
    assert replyclaims.unsupported(cancelled, actions=[], kinds=KINDS, ledger=[_entry(ORDER)])
    refunded = "You have been refunded 129.99 USD for SU-41001."
    paid = MoneyData(order=ORDER, currency="USD", paid_cents=12999, refunded_cents=12999)
    assert not replyclaims.unsupported(refunded, actions=[], kinds=KINDS, money=[paid])
    assert replyclaims.unsupported(
        refunded,
        actions=[],
        kinds=KINDS,
        money=[MoneyData(order=ORDER, currency="USD", paid_cents=12999, refunded_cents=0)],
    )


def test_an_action_on_an_item_backs_a_claim_about_its_order():
    claim = f"I've arranged a replacement for order {ORDER}."
    on_item = ActionData(
        tool="offer_replacement",
        target="itm_0000abcd",
        turn=5,
        idempotency_key="k",
        reversible=True,
        on=(ORDER, "itm_0000abcd"),
    )
    assert not replyclaims.unsupported(claim, actions=[on_item], kinds=KINDS, ledger=[_entry(ORDER)])
    elsewhere = ActionData(
        tool="offer_replacement",
        target="itm_0000abcd",
        turn=5,
        idempotency_key="k",
        reversible=True,
        on=(OTHER, "itm_0000abcd"),
    )
    assert replyclaims.unsupported(claim, actions=[elsewhere], kinds=KINDS, ledger=[_entry(ORDER)])


def test_an_email_to_the_customer_backs_i_have_emailed_you_whatever_order_it_names():
    claim = f"I've sent you an email about {ORDER}."
    sent = ActionData(
        tool="send_email",
        target="cus_0000abcd",
        turn=4,
        idempotency_key="e",
        reversible=False,
        on=("cus_0000abcd", "Your order", f"About {ORDER}: it ships tomorrow."),
    )
    assert not replyclaims.unsupported(claim, actions=[sent], kinds=KINDS, ledger=[_entry(ORDER)])
    assert replyclaims.unsupported(claim, actions=[], kinds=KINDS, ledger=[_entry(ORDER)])  # control: none sent


def test_a_domain_that_declares_no_tool_of_a_kind_is_not_judged_on_it():
    assert not replyclaims.unsupported(
        "Your order SU-41001 has been cancelled.", actions=[], kinds={"issue_refund": {"refund"}}
    )


# --- the amount a refund claim names -------------------------------------------------------------

# (figure, currency, how a reply may write its currency): written every way replies write money.
MONEY = [
    ("48.99", "USD", ["{f} USD", "USD {f}", "${f}", "{f} dollars", "{f}"]),
    ("20.00", "EUR", ["{f} EUR", "EUR {f}", "€{f}", "{f} euros", "{f}"]),
    ("7,999.00", "INR", ["{f} INR", "INR {f}", "₹{f}", "{f} rupees", "{f}"]),
]
AMOUNT_CLAIMS = [
    "Your refund of {m} for {id} has been issued.",
    "I've refunded {m} to your card for {id}.",
    "We have processed a refund of {m} on {id}.",
    "{m} for {id} was refunded to your card.",
    "A refund of {m} on {id} has been processed.",
]


def _amount_claims():
    for figure, currency, shapes in MONEY:
        cents = int(figure.replace(",", "").replace(".", ""))
        for shape, template, opener in itertools.product(shapes, AMOUNT_CLAIMS, OPENERS):
            text = opener + template.format(m=shape.format(f=figure), id=ORDER)
            yield text, cents, currency


def _refund(cents, currency, target=ORDER):
    return ActionData(
        tool="issue_refund",
        target=target,
        turn=3,
        idempotency_key=f"r{cents}",
        reversible=False,
        amount_cents=cents,
        currency=currency,
    )


def test_a_refund_claim_stands_only_on_a_refund_of_the_amount_it_names():
    cases = list(_amount_claims())
    judged = {
        "read": 0,
        "backed by its refund": 0,
        "held at one cent off": 0,
        "held in another currency": 0,
        "held on another order": 0,
    }
    for text, cents, currency in cases:
        claim = [c for c in replyclaims.claims_in(text) if c.kind == "refund"]
        judged["read"] += bool(claim and claim[0].amounts)
        judged["backed by its refund"] += not replyclaims.unsupported(
            text, actions=[_refund(cents, currency)], kinds=KINDS
        )
        judged["held at one cent off"] += bool(
            replyclaims.unsupported(text, actions=[_refund(cents + 1, currency)], kinds=KINDS)
        )
        other = "GBP"  # two decimals like the three above: only the currency differs
        judged["held in another currency"] += bool(
            replyclaims.unsupported(text, actions=[_refund(cents, other)], kinds=KINDS)
        )
        judged["held on another order"] += bool(
            replyclaims.unsupported(
                text, actions=[_refund(cents, currency, OTHER)], kinds=KINDS, ledger=[_entry(ORDER), _entry(OTHER)]
            )
        )
    print(f"amount claims: {judged} of {len(cases)}")
    # A bare figure, "$" or "dollars" names no currency, so only its figure is compared: those are
    # the ones another currency cannot catch.
    unnamed = sum(
        1 for text, *_ in cases if not any(c in text for c in ("USD", "EUR", "INR", "€", "₹", "euros", "rupees"))
    )
    assert unnamed == len(cases) // 3  # "$", "dollars" and the bare figure for USD; the bare one for EUR, INR
    assert judged == {
        "read": len(cases),
        "backed by its refund": len(cases),
        "held at one cent off": len(cases),
        "held in another currency": len(cases) - unnamed,
        "held on another order": len(cases),
    }


def test_what_the_money_lane_shows_refunded_or_several_refunds_together_back_the_figure():
    text = f"In total 129.99 USD has been refunded for {ORDER}."
    lane = MoneyData(order=ORDER, currency="USD", paid_cents=12999, refunded_cents=12999)
    assert not replyclaims.unsupported(text, actions=[], kinds=KINDS, money=[lane])
    assert not replyclaims.unsupported(text, actions=[_refund(10000, "USD"), _refund(2999, "USD")], kinds=KINDS)
    short = MoneyData(order=ORDER, currency="USD", paid_cents=12999, refunded_cents=10000)
    assert replyclaims.unsupported(text, actions=[_refund(10000, "USD")], kinds=KINDS, money=[short])


def test_the_order_total_may_be_named_beside_the_refund_but_not_instead_of_it():
    lane = MoneyData(order=ORDER, currency="USD", paid_cents=12999, refunded_cents=2000)
    partial = f"I've refunded 20.00 USD of the 129.99 USD you paid for {ORDER}."
    assert not replyclaims.unsupported(partial, actions=[_refund(2000, "USD")], kinds=KINDS, money=[lane])
    whole = f"I've refunded the 129.99 USD you paid for {ORDER}."
    assert replyclaims.unsupported(whole, actions=[_refund(2000, "USD")], kinds=KINDS, money=[lane])


def test_counts_codes_that_are_no_currency_and_dates_are_not_amounts():
    for text in [
        f"2 USB cables on {ORDER} were refunded.",
        f"The refund for {ORDER} was issued on 3.05.2026.",
        f"Your refund for {ORDER} (ticket v2.10) has been processed.",
    ]:
        claim = replyclaims.claims_in(text)
        assert claim and claim[0].amounts == (), text
        assert not replyclaims.unsupported(text, actions=[_refund(500, "USD")], kinds=KINDS)


# --- through the loop, judged from what the customer reads ---------------------------------------


@pytest.fixture
def case(django_user_model):
    text = f"Please cancel {ORDER}."
    return open_case(django_user_model, text, order=ORDER, subject="Cancel", username="carol", prices=(12999,))


FALSE = f"Your order {ORDER} has been cancelled."


@pytest.mark.django_db
def test_a_false_done_reply_is_asked_again_and_the_honest_one_posted(case):
    model = ScriptedModel([ModelResponse(text=FALSE), ModelResponse(text="I can cancel it once you confirm.")])
    agent_run(case["ticket"].pk, gateway=Gateway(override=model))
    reads = customer_reads(case)
    assert "has been cancelled" not in reads and "once you confirm" in reads
    assert "no tool did" in model.requests[1].messages[-1].content


@pytest.mark.django_db
def test_a_false_done_reply_said_twice_is_held_for_staff(case):
    agent_run(case["ticket"].pk, gateway=Gateway(override=ScriptedModel([ModelResponse(text=FALSE)] * 2)))
    assert "has been cancelled" not in customer_reads(case)
    ticket = Ticket.objects.get(pk=case["ticket"].pk)
    assert "unsupported_claim" in ticket.attention
    held = Turn.objects.filter(ticket=ticket, kind=Turn.Kind.ERROR).last()
    assert "no record of this ticket shows" in held.text and FALSE in held.text


@pytest.mark.django_db
def test_a_false_done_message_through_reply_to_customer_is_refused(case):
    call = ToolCall(id="r1", name="reply_to_customer", arguments={"message": FALSE})
    agent_run(
        case["ticket"].pk,
        gateway=Gateway(
            override=ScriptedModel(
                [
                    ModelResponse(tool_calls=[call]),
                    ModelResponse(text="A colleague will confirm the cancellation with you."),
                ]
            )
        ),
    )
    assert "has been cancelled" not in customer_reads(case)
    rejection = Turn.objects.filter(ticket=case["ticket"], kind=Turn.Kind.REJECTION).last()
    assert rejection.payload["guard"] == "unsupported_claim"


@pytest.mark.django_db
def test_negative_control_without_the_check_the_false_claim_reaches_the_page(case, monkeypatch):
    """The judge can fail: with the claims check switched off, the customer reads the false claim."""
    monkeypatch.setattr(answer.replyclaims, "unsupported", lambda text, **kw: [])
    agent_run(case["ticket"].pk, gateway=Gateway(override=ScriptedModel([ModelResponse(text=FALSE)])))
    assert "has been cancelled" in customer_reads(case)


@pytest.mark.django_db
def test_a_refund_claimed_for_another_amount_than_ran_is_asked_again_and_the_true_figure_posted(case):
    """Through the loop: a refund of 15.00 USD the customer confirmed ran; a reply saying 51.00 never
    reaches the page, the one saying 15.00 does (the control: the same words with the true figure pass)."""
    ticket = case["ticket"]
    refund = ToolCall(
        id="r1",
        name="issue_refund",
        arguments={"order_number": ORDER, "amount": "15.00", "currency": "USD", "reason": "damaged"},
    )
    agent_run(
        ticket.pk,
        gateway=Gateway(
            override=ScriptedModel(
                [
                    ModelResponse(tool_calls=[ToolCall(id="g1", name="get_order", arguments={"order_number": ORDER})]),
                    ModelResponse(tool_calls=[refund]),
                    ModelResponse(text="Please confirm the refund on the card."),
                ]
            )
        ),
    )
    card = Confirmation.objects.get(ticket=ticket)
    confirmation_decide(
        card_id=card.pk,
        ticket=Ticket.objects.get(pk=ticket.pk),
        confirm=True,
        digest=card.digest,
        via=Confirmation.Via.BUTTON,
        wake=False,
    )
    assert list(Refund.objects.values_list("amount_cents", flat=True)) == [1500]
    wrong, right = f"I've refunded 51.00 USD for {ORDER}.", f"I've refunded 15.00 USD for {ORDER}."
    model = ScriptedModel([ModelResponse(text=wrong), ModelResponse(text=right)])
    agent_run(ticket.pk, gateway=Gateway(override=model))
    reads = customer_reads(case)
    assert "51.00" not in reads and "refunded 15.00 USD" in reads
    assert "refund of 51.00 USD" in model.requests[-1].messages[-1].content
    assert len(model.requests) == 2  # asked once more; the true figure went out at once
