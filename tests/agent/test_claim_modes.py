"""What a reply says is pending, promised, refused or not done is judged against the ticket's own state.

The sentences come from a grammar (mode × action × record named or not × amount or
not × opener), not written for the rule; each is judged against generated states:
nothing on the ticket, an open card or hold for it, one for another record or of
another kind or another figure, a declined one, and the action having run. Each
kind must be held where the state does not support it and pass where it does.
Through the real loop with the scripted model: a promised refund with no card is
asked again and held; with its card open it reaches the customer's page.
"""

from __future__ import annotations

import itertools
from collections import Counter
from datetime import timedelta

import pytest
from django.utils import timezone

from sundry.agent import answer, proposals
from sundry.agent.guards import provisional, replyclaims
from sundry.agent.guards.replyclaims import DECLINED, OPEN, Proposal
from sundry.agent.loop import agent_run
from sundry.agent.models import Confirmation, HeldAction
from sundry.agent.provider.gateway import Gateway
from sundry.agent.provider.scripted import ScriptedModel
from sundry.context.lanes import ActionData, LedgerData
from sundry.context.selectors import lane_snapshot
from sundry.evals import scorecard
from sundry.tickets.models import Ticket, Turn
from sundry.tooling.domain import get_domain
from sundry.tooling.messages import ModelResponse, ToolCall
from tests.agent.claimcase import LOOKUP, REFUND, case, customer_reads, phone_call_logged  # noqa: F401  (case: the fixture)

ORDER, OTHER = "SU-41001", "SU-41002"
KINDS = replyclaims.kinds_of(get_domain().tools)
TOOL = {
    "refund": "issue_refund",
    "cancel": "cancel_order",
    "return": "book_return",
    "replace": "offer_replacement",
    "email": "send_email",
    "phone": "log_phone_call",
}

# {on}: " for SU-41001" or "" (no record named); {amt}: " of 15.00 USD" or "" (refunds only).
SAID = {
    "pending": {
        "refund": [
            "Your refund{amt}{on} is being processed.",
            "I've put through a request for a refund{amt}{on}.",
            "The refund{amt}{on} is pending approval.",
            "Your refund request{on} has been recorded.",
            "I've recorded your refund request{on}.",
        ],
        "cancel": [
            "I've sent you a card to confirm cancelling your order{on}.",
            "The cancellation{on} is awaiting your confirmation.",
            "I've submitted a cancellation request{on}.",
            "Your cancellation request{on} was logged.",
        ],
        "return": [
            "Your return{on} is being processed.",
            "I've put through a return request{on}.",
            "Your return request{on} has been registered.",
        ],
        "replace": [
            "The replacement{on} is pending approval.",
            "I've submitted an exchange request{on}.",
            "Your request for a replacement{on} has been noted.",
        ],
    },
    "future": {
        "refund": [
            "You will receive a refund{amt}{on}.",
            "I'll refund your order{on}{amt} once you confirm.",
            "The refund{amt}{on} will be issued to your card.",
            "Your money{on} will be refunded{amt} in 5 days.",
        ],
        "cancel": [
            "I'll cancel your order{on} once you confirm.",
            "Your order{on} will be cancelled after you press Confirm.",
            "Once you confirm, I will proceed with the cancellation{on}.",
        ],
        "return": ["I'll book a return{on} once you confirm.", "The return{on} will be booked today."],
        "replace": ["I'll send a replacement{on}.", "A replacement{on} will be shipped tomorrow."],
        "email": ["I'll email you the label{on}.", "We will send you an e-mail{on} shortly."],
        "phone": ["We will call you{on} tomorrow.", "I'll phone you{on} this afternoon."],
    },
    "refused": {
        "refund": ["Staff declined the refund{amt}{on}.", "The refund{amt}{on} was rejected."],
        "cancel": ["You declined the cancellation{on}.", "The cancellation{on} was not approved."],
        "return": ["The return{on} was declined by staff."],
        "replace": ["The replacement{on} was refused."],
    },
    "denied": {
        "refund": ["No refund has been made{on}.", "I haven't issued any refund{on} yet."],
        "cancel": ["No, nothing{on} was cancelled.", "Your order{on} has not been cancelled."],
        "return": ["The return{on} has not been booked."],
        "replace": ["No replacement{on} has been sent."],
    },
}
OPENERS = ["", "Thanks for waiting. "]
CLOSERS = ["", " Anything else?"]


def _cases():
    for mode, by_kind in SAID.items():
        for kind, templates in by_kind.items():
            for t, named, amount, opener, closer in itertools.product(
                templates, (True, False), (True, False), OPENERS, CLOSERS
            ):
                if amount and (kind != "refund" or "{amt}" not in t):
                    continue
                on = f" for {ORDER}" if named else ""
                text = opener + t.format(on=on, amt=" of 15.00 USD" if amount else "") + closer
                yield mode, kind, named, amount, text


CASES = list(_cases())
# Questions, the customer's own doing, and the desk's plans claim nothing (offers are judged as offers:
# tests/agent/test_claim_words.py).
PLAIN = [
    f"You will need to return the item on {ORDER} first.",
    "You'll receive an email with instructions on how to return the item.",
    f"I'll explain the return process for {ORDER}.",
    f"I will need your confirmation to cancel {ORDER}.",
    f"Your order {ORDER} is pending.",
    "This will help me find the order for the exchange.",
    f"I'm unable to cancel {ORDER} because it has shipped.",
    f'Your order {ORDER} has been cancelled for the reason "no longer needed".',
]


def _action(tool, target=ORDER, cents=None):
    return ActionData(
        tool=tool,
        target=target,
        turn=3,
        idempotency_key=f"{tool}-{target}",
        reversible=False,
        amount_cents=cents,
        currency="USD" if cents else "",
    )


def ledger_of(*refs, description="Desk lamp · delivered"):
    """Verified order entries of the ledger for `refs`, each described as a tool result left it."""
    return [
        LedgerData(
            role=f"order:{v}",
            value=v,
            kind="order",
            verified=True,
            first_seen_turn=1,
            last_used_turn=1,
            description=description,
        )
        for v in refs
    ]


def _ledger():
    return ledger_of(ORDER, OTHER)


def _other_kind(kind):
    return next(t for t in TOOL.values() if kind not in KINDS[t])


def _held(text, **state) -> bool:
    return bool(replyclaims.unsupported(text, kinds=KINDS, ledger=_ledger(), **{"actions": [], **state}))


def test_every_generated_sentence_is_read_in_its_mode_and_kind():
    read_as = [
        (mode, kind, text)
        for mode, kind, _n, _a, text in CASES
        if (mode, kind) in {(c.mode, c.kind) for c in replyclaims.claims_of(text)}
    ]
    print(
        f"sentences read in their mode and kind: {len(read_as)}/{len(CASES)}; by mode: "
        f"{dict(Counter(m for m, *_ in CASES))}"
    )
    assert len(read_as) == len(CASES), [t for m, k, _n, _a, t in CASES if (m, k, t) not in read_as]
    # A stated status ("it has shipped") is a claim of another reading (`statusclaims`), judged on the records.
    actions = {t: [c for c in replyclaims.claims_of(t) if c.mode != replyclaims.STATED] for t in PLAIN}
    claimed = [t for t in PLAIN if actions[t] and actions[t][0].mode != "done"]
    assert claimed == [], claimed


def test_each_mode_is_held_when_the_state_does_not_support_it_and_passes_when_it_does():
    figures = Counter()
    for mode, kind, named, amount, text in CASES:
        tool, other = TOOL[kind], _other_kind(kind)
        card = Proposal(tool, (ORDER, "15.00", "USD"), OPEN, 1500 if kind == "refund" else None, "USD")
        declined = Proposal(tool, (ORDER,), DECLINED, 1500 if kind == "refund" else None, "USD")
        ran = _action(tool, cents=1500 if kind == "refund" else None)
        contact = kind in ("email", "phone")  # a contact is with the customer, on no order
        if mode in ("pending", "future"):
            passes = {"its open card": dict(proposals=[card]), "the action ran": dict(actions=[ran])}
            held = {
                "nothing": {},
                "a declined card": dict(proposals=[declined]),
                "a card of another kind": dict(proposals=[Proposal(other, (ORDER,), OPEN)]),
            }
            if contact and mode == "future":  # a contact made before promises no new one
                held["the action ran"] = passes.pop("the action ran")
            if named and not contact:
                held["a card on another order"] = dict(proposals=[Proposal(tool, (OTHER,), OPEN, 1500, "USD")])
            if amount:
                held["a card for another figure"] = dict(proposals=[Proposal(tool, (ORDER,), OPEN, 2500, "USD")])
        elif mode == "refused":
            passes = {"a declined card": dict(proposals=[declined])}
            held = {"nothing": {}, "an open card": dict(proposals=[card]), "the action ran": dict(actions=[ran])}
            if named:
                held["a declined card on another order"] = dict(proposals=[Proposal(tool, (OTHER,), DECLINED)])
        else:  # denied
            passes = {
                "nothing": {},
                "an open card": dict(proposals=[card]),
                "another kind ran": dict(actions=[_action(other)]),
            }
            held = {"the action ran": dict(actions=[ran])}
            if named:
                passes["it ran on another order"] = dict(actions=[_action(tool, OTHER)])
        for state, records in passes.items():
            assert not _held(text, **records), (text, state)
            figures[f"{mode}: passed on {state}"] += 1
        for state, records in held.items():
            assert _held(text, **records), (text, state)
            figures[f"{mode}: held on {state}"] += 1
    for line in sorted(figures.items()):
        print(*line)


# Bookkeeping verbs: an action on record is done; a request on record is under way (pending, above).
RECORDED = ["recorded", "registered", "logged", "entered"]
ON_RECORD = {
    "refund": ["Your refund{on} has been {v}.", "The refund{on} was {v}.", "A refund of 15.00 USD{on} is {v}."],
    "cancel": ["The cancellation{on} has been {v}.", "Your cancellation{on} was {v}."],
    "return": ["Your return{on} has been {v}."],
    "replace": ["The replacement{on} was {v}."],
}


def _on_record():
    for kind, templates in ON_RECORD.items():
        for t, v, named, opener in itertools.product(templates, RECORDED, (True, False), OPENERS):
            yield kind, opener + t.format(on=f" for {ORDER}" if named else "", v=v)


def test_an_action_said_to_be_on_record_is_a_claim_that_it_was_done():
    """ "Your refund has been recorded" tells the customer the refund is on the books: done, held when no
    refund ran, an open card included; a request on record is pending (SAID above), and a note of what
    the customer wants claims nothing."""
    cases = list(_on_record())
    for kind, text in cases:
        tool = TOOL[kind]
        assert (kind, "done") in {(c.kind, c.mode) for c in replyclaims.claims_of(text)}, text
        card = Proposal(tool, (ORDER, "15.00", "USD"), OPEN, 1500 if kind == "refund" else None, "USD")
        assert _held(text), text
        assert _held(text, proposals=[card]), text  # waiting on a card is not on record
        assert not _held(text, actions=[_action(tool, cents=1500 if kind == "refund" else None)]), text
    print(f"on-record sentences read as done and judged: {len(cases)}")
    # The reply a real model posted for a refund that did not exist (docs/real-model.md).
    said = "Your request was accepted and the refund was recorded. Please check the card to confirm the refund."
    assert _held(said) and not _held(said, actions=[_action("issue_refund", cents=1500)])
    for plain in [
        "I've noted that you want a refund.",
        "I've recorded that you'd like a refund for your order.",
        'Understood — I\'ve noted that for this case: "I do not want a refund".',
        f"Your new address for {ORDER} has been recorded.",
    ]:
        assert replyclaims.claims_of(plain) == [], plain


def test_a_hold_awaiting_staff_backs_a_pending_claim_and_a_rejected_one_a_refusal():
    pending, refused = f"Your refund for {ORDER} is pending approval.", f"The refund for {ORDER} was rejected."
    hold = Proposal("issue_refund", (ORDER, "15.00", "USD"), OPEN, 1500, "USD")
    assert not _held(pending, proposals=[hold]) and _held(refused, proposals=[hold])
    rejected = Proposal("issue_refund", (ORDER,), DECLINED, 1500, "USD")
    assert not _held(refused, proposals=[rejected]) and _held(pending, proposals=[rejected])


def test_a_refund_promised_after_a_cancellation_stands_on_the_cancellation_its_declaration_refunds():
    text = "The full amount will be refunded to your original payment method."
    assert not _held(text, actions=[_action("cancel_order")])
    assert _held(text, actions=[_action("book_return")]), "a return that declares no refund backs none"
    assert _held("The full amount has been refunded to your card.", actions=[_action("book_return")])


# --- through the loop, judged from what the customer reads ---------------------------------------


PROMISE = f"I'll refund 15.00 USD on {ORDER} once you confirm."


@pytest.mark.django_db
def test_a_promised_refund_with_no_card_is_asked_again_then_held(case):
    model = ScriptedModel([LOOKUP, ModelResponse(text=PROMISE), ModelResponse(text=PROMISE)])
    agent_run(case["ticket"].pk, gateway=Gateway(override=model))
    assert "refund 15.00 USD" not in customer_reads(case)
    assert "card or staff hold" in model.requests[-1].messages[-1].content  # the re-ask says why
    held = Turn.objects.filter(ticket=case["ticket"], kind=Turn.Kind.ERROR).last()
    assert "refund (promised) of 15.00 USD" in held.text
    assert "unsupported_claim" in Ticket.objects.get(pk=case["ticket"].pk).attention


@pytest.mark.django_db
def test_a_promised_refund_with_its_card_open_reaches_the_page(case):
    """The control: the same words pass once the call was made and its card is open. model_check's
    reading of what the customer read agrees, and counts the promise false without the card."""
    model = ScriptedModel([LOOKUP, REFUND, ModelResponse(text=PROMISE)])
    agent_run(case["ticket"].pk, gateway=Gateway(override=model))
    assert Confirmation.objects.get(ticket=case["ticket"]).status == Confirmation.Status.PENDING
    assert PROMISE in customer_reads(case) and len(model.requests) == 3  # posted at once, never asked again
    assert scorecard.read_by_customers(case["ticket"].pk)["false_claims"] == 0
    Confirmation.objects.filter(ticket=case["ticket"]).delete()
    assert scorecard.read_by_customers(case["ticket"].pk)["false_claims"] == 1


REASK = (
    "The last answer had no message for the customer. Either call a tool (as a tool call, not as text) "
    "or write the reply to the customer in plain words."
)


@pytest.mark.django_db
@pytest.mark.parametrize(
    "message, guard",
    [
        (REASK, "notice"),  # posted six times through the tool by a real 0.5B model (docs/real-model.md)
        ("[system notice] A reply was held for staff (structured); it was not sent.", "notice"),
        (
            "Invalid arguments for get_order: type: Extra inputs are not permitted. Fix these fields and call again.",
            "notice",
        ),
        (f"Customer: The lamp on {ORDER} arrived broken, can I get 15.00 back?", "echo"),
        # Near-echoes: a word swapped, a greeting and "You said:", case and punctuation changed.
        (f"You said: the lamp on {ORDER} arrived damaged, can I get 15.00 back", "echo"),
        (f"Hello! THE LAMP ON {ORDER} ARRIVED BROKEN - COULD I GET 15.00 BACK?", "echo"),
    ],
)
def test_sundrys_own_words_or_an_echo_sent_through_reply_to_customer_are_refused(case, message, guard):
    """A message sent by the tool is judged like a plain reply for copied text: refused with a reason the
    model reads, never on the customer's page; the model's next, plain answer is posted. Control: a
    message in its own words goes out through the same tool."""
    say = ModelResponse(tool_calls=[ToolCall(id="s1", name="reply_to_customer", arguments={"message": message})])
    own = f"I'm sorry the lamp on {ORDER} arrived broken. A colleague will look at it today."
    model = ScriptedModel([LOOKUP, say, ModelResponse(text=own)])
    agent_run(case["ticket"].pk, gateway=Gateway(override=model))
    reads = customer_reads(case)
    assert message not in reads and "answer had no message" not in reads and "Fix these fields" not in reads
    rejection = Turn.objects.filter(ticket=case["ticket"], kind=Turn.Kind.REJECTION).get()
    assert rejection.payload["guard"] == guard
    assert own in reads
    assert not Turn.objects.filter(ticket=case["ticket"], payload__via="reply_to_customer").exists()


@pytest.mark.django_db
@pytest.mark.parametrize(
    "summary, guard",
    [
        # A real 0.5B model's call, made twice in one conversation (docs/real-model.md): the re-ask as the summary
        # of a phone call, which put Sundry's words on the customer's confirmation card.
        (
            "You wrote a tool call as text in your reply; it was not made, and the customer must never see it. "
            "Make the call through the tools interface, or write only the reply to the customer.",
            "notice",
        ),
        ("Called the customer about the broken lamp; they want 15.00 back.", ""),  # control: its own words
    ],
)
def test_sundrys_own_words_never_reach_a_card_the_customer_reads(case, summary, guard):
    """A contact tool's text is shown on the customer's card as it would go out: copied notice text in it
    is refused like a reply's, so no card carries it. Control: a summary in its own words makes the card."""
    call = phone_call_logged(case, summary)
    model = ScriptedModel([LOOKUP, call, ModelResponse(text=f"Thanks, I have looked at {ORDER}.")])
    agent_run(case["ticket"].pk, gateway=Gateway(override=model))
    cards = Confirmation.objects.filter(ticket=case["ticket"])
    rejections = Turn.objects.filter(ticket=case["ticket"], kind=Turn.Kind.REJECTION)
    if guard:
        assert not cards.exists() and [r.payload["guard"] for r in rejections] == [guard]
        assert "tools interface" not in customer_reads(case)
    else:
        assert cards.get().card["message"][0]["text"] == summary and not rejections.exists()


@pytest.mark.django_db
def test_negative_control_a_message_in_its_own_words_goes_out_through_reply_to_customer(case):
    own = f"I'm sorry the lamp on {ORDER} arrived broken. A colleague will look at it today."
    say = ModelResponse(tool_calls=[ToolCall(id="s1", name="reply_to_customer", arguments={"message": own})])
    agent_run(case["ticket"].pk, gateway=Gateway(override=ScriptedModel([LOOKUP, say])))
    assert own in customer_reads(case)
    assert Turn.objects.filter(ticket=case["ticket"], payload__via="reply_to_customer").exists()
    assert not Turn.objects.filter(ticket=case["ticket"], kind=Turn.Kind.REJECTION).exists()


@pytest.mark.django_db
def test_a_promise_through_reply_to_customer_is_refused_without_its_card(case):
    say = ModelResponse(tool_calls=[ToolCall(id="s1", name="reply_to_customer", arguments={"message": PROMISE})])
    agent_run(
        case["ticket"].pk,
        gateway=Gateway(
            override=ScriptedModel([LOOKUP, say, ModelResponse(text="A colleague will look at your refund.")])
        ),
    )
    assert "refund 15.00 USD" not in customer_reads(case)
    assert (
        Turn.objects.filter(ticket=case["ticket"], kind=Turn.Kind.REJECTION).last().payload["guard"]
        == "unsupported_claim"
    )


def test_a_streamed_promise_with_no_card_is_never_shown():
    """The stream releases sentence by sentence on the same state: the promise is cut without its card."""
    records = replyclaims.Records(kinds=KINDS, ledger=tuple(_ledger()))
    carded = replyclaims.Records(
        kinds=KINDS,
        ledger=tuple(_ledger()),
        proposals=(Proposal("issue_refund", (ORDER, "15.00", "USD"), OPEN, 1500, "USD"),),
    )
    text = f"Thanks for the photos. {PROMISE} Anything else?"
    for facts, shown in ((records, "Thanks for the photos."), (carded, text)):
        assert (
            provisional.shown(
                text, known={ORDER}, final=True, sentence_ok=lambda s, f=facts: answer.sentence_passes(s, f, None)
            )
            == shown
        )


def read(ticket_id: int):
    """The cards and holds as the claims check reads them, by both roads: its own query, and the
    rows a step reads in the lanes' statement (`lane_snapshot(also=proposals.LANES)`)."""
    alone = proposals.read(ticket_id)
    ticket = Ticket.objects.select_related("ticket_class", "customer").get(pk=ticket_id)
    assert proposals.of_snapshot(lane_snapshot(ticket, also=proposals.LANES)) == alone
    return alone


@pytest.mark.django_db
def test_the_state_is_read_from_cards_and_holds(case):
    ticket = case["ticket"]
    agent_run(
        ticket.pk,
        gateway=Gateway(override=ScriptedModel([LOOKUP, REFUND, ModelResponse(text="Please check the card.")])),
    )
    assert [(p.tool, p.status, p.amount_cents, p.currency, ORDER in p.on) for p in read(ticket.pk)] == [
        ("issue_refund", OPEN, 1500, "USD", True)
    ]
    card = Confirmation.objects.get(ticket=ticket)
    Confirmation.objects.filter(pk=card.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    assert read(ticket.pk) == (), "a card past its window is no longer open"
    Confirmation.objects.filter(pk=card.pk).update(expires_at=card.expires_at, status=Confirmation.Status.EXPIRED)
    assert read(ticket.pk) == (), "an expired card is no longer open"
    Confirmation.objects.filter(pk=card.pk).update(status=Confirmation.Status.DECLINED)
    assert [(p.tool, p.status) for p in read(ticket.pk)] == [("issue_refund", DECLINED)]
    Confirmation.objects.filter(pk=card.pk).update(status=Confirmation.Status.EXPIRED)
    HeldAction.objects.create(
        ticket=ticket,
        tool="cancel_order",
        arguments={"order_number": ORDER},
        call_id="c1",
        reason="threshold",
        idempotency_key="hold-c1",
        turn=2,
        status=HeldAction.Status.REJECTED,
    )
    assert [(p.tool, p.status) for p in read(ticket.pk)] == [("cancel_order", DECLINED)]
    with pytest.raises(ValueError, match="no rows named nothing"):
        lane_snapshot(ticket, also=("nothing",))


# --- a bare yes or no answers the customer's question ---------------------------------------------

QUESTIONS = {
    "refund": [f"Did you refund {ORDER}?", f"Has {ORDER} been refunded yet?"],
    "cancel": [f"Was my order {ORDER} cancelled?", f"Did you cancel {ORDER} like I asked?"],
    "return": [f"Have you booked the return for {ORDER}?"],
}
YES = ["Yes, that's done.", "Yes — all sorted.", "Yes. Anything else?"]
NO = ["No, it hasn't.", "No — not yet.", "No. I can do it now if you like."]


def test_a_bare_yes_or_no_is_judged_as_an_answer_about_the_action_asked():
    figures = Counter()
    for kind, questions in QUESTIONS.items():
        ran, other = _action(TOOL[kind]), _action(TOOL[kind], OTHER)
        for question in questions:
            for reply in YES:
                assert _held(reply, question=question), (question, reply, "nothing ran")
                assert _held(reply, question=question, actions=[other]), (question, reply, "ran on another order")
                assert not _held(reply, question=question, actions=[ran]), (question, reply)
                # Control: with no question, a bare yes answers nothing (its "that's done" is judged as a claim
                # of the action under discussion: tests/agent/test_claim_bare.py).
                assert not any("(to:" in c.sentence for c in replyclaims.claims_of(reply)), reply
                figures["yes: held when it did not run, passed when it did"] += 1
            for reply in NO:
                assert _held(reply, question=question, actions=[ran]), (question, reply, "it ran")
                assert not _held(reply, question=question, actions=[other]), (question, reply)
                figures["no: held when it ran, passed when it did not"] += 1
    not_asked = [f"Is {ORDER} delivered?", f"Can you cancel {ORDER}?", "Thanks!"]
    # A yes or no to them answers nothing about an action done; "that's done" or "all sorted" in it is still a
    # claim of the action the message asks for ("Can you cancel …?"), judged in tests/agent/test_claim_bare.py.
    replies = YES + NO + ["No problem, happy to help."]
    assert not any("(to:" in c.sentence for q in not_asked for r in replies for c in replyclaims.claims_of(r, q))
    assert not any(
        _held(reply, question=q) for q in not_asked for reply in ["Yes.", "No.", "No problem, happy to help."]
    )
    print(dict(figures))
