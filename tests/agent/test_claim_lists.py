"""A reply that tells its claims as a list — "Your requests have been processed:" then the items — is
judged item by item; and a claim is judged on the kind of record it names, by the domain's declarations.

The wordings come from a grammar (list shape × lead-in × item × record), not written for the rule:
every lead-in of a mode (done, pending, promised, refused, not done) before items that name an action
without a verb of their own ("Refund of 48.99 USD on SU-41001", "Order SU-41001 cancelled", "Bag added
to ZFA04Y"), for the shop's six kinds and τ² airline's and telecom's own writes. Each list is judged in
generated states in both directions: held where the records do not back its items, passed where they
do. Lists that claim nothing — steps for the customer, options, details — are held in no state. The
negative control takes the list reading out: the false claims then pass, and promised items are misread.
Through the real loop, a list claiming a refund and a return nothing backs is asked again and held; the
list of the refund that ran posts at once. Streamed, the unbacked item never shows.

The kind of record a claim names is the domain's (its ID patterns, its writes' targets), not the shop's
"order": on a hotel declared here, with bookings and spa appointments both cancelled by their own tools,
"your booking has been cancelled" is not backed by an appointment's cancellation.
"""

from __future__ import annotations

import itertools
from collections import Counter

import pytest

from sundry.agent import answer
from sundry.agent.guards import claimlists, provisional, replyclaims
from sundry.agent.guards.replyclaims import DECLINED, OPEN, Proposal
from sundry.agent.loop import agent_run
from sundry.agent.models import Confirmation
from sundry.agent.provider.gateway import Gateway
from sundry.agent.provider.scripted import ScriptedModel
from sundry.agent.services import confirmation_decide
from sundry.context.lanes import ActionData, LedgerData
from sundry.evals.domains.tau2 import AIRLINE_DECLARATION, TELECOM_DECLARATION
from sundry.tickets.models import Ticket, Turn
from sundry.tooling.domain import Domain, get_domain
from sundry.tooling.messages import ModelResponse, ToolCall
from tests.agent.claimcase import case, customer_reads  # noqa: F401  (fixture)

SHOP, AIRLINE, TELECOM = get_domain(), Domain.from_data(AIRLINE_DECLARATION), Domain.from_data(TELECOM_DECLARATION)
RECORDS = {
    "demo_shop": ("SU-41001", "SU-41002", "order"),
    "airline": ("ZFA04Y", "8JX2WO", "reservation"),
    "telecom": ("L1001", "L1002", "line"),
}

# --- the grammar ----------------------------------------------------------------------------------

# (domain, tool, another write of the domain, items naming the tool's action on "{rec}" without a verb of their own)
ACTIONS = [
    (SHOP, "issue_refund", "book_return", ["Refund of 48.99 USD on {rec}", "Refund for order {rec}"]),
    (SHOP, "cancel_order", "book_return", ["Order {rec} cancelled", "Cancellation of order {rec}"]),
    (SHOP, "book_return", "issue_refund", ["Return for {rec}", "Return label for order {rec}"]),
    (SHOP, "offer_replacement", "book_return", ["Replacement for {rec}", "Exchange of the lamp on {rec}"]),
    (AIRLINE, "cancel_reservation", "update_reservation_flights", ["Reservation {rec} cancelled"]),
    (AIRLINE, "update_reservation_flights", "update_reservation_baggages", ["Flight on {rec} upgraded to business"]),
    (AIRLINE, "update_reservation_baggages", "update_reservation_flights", ["Bag added to {rec}"]),
    (TELECOM, "suspend_line", "resume_line", ["Line {rec} suspended"]),
    (TELECOM, "enable_roaming", "disable_roaming", ["Roaming turned on for line {rec}"]),
    (TELECOM, "refuel_data", "enable_roaming", ["Data added to line {rec}"]),
]
LEADS = {
    "done": [
        "Your requests have been processed:",
        "Thanks for waiting! Here's what I did:",
        "All done. The following has been completed:",
        "I've taken care of the following:",
        "Completed:",
    ],
    "pending": [
        "The following have been submitted:",
        "These are awaiting your confirmation:",
        "Pending staff approval:",
    ],
    "future": [
        "Once you confirm, I'll do the following:",
        "The following will be processed:",
        "Next, we will take care of these:",
    ],
    "refused": ["The following requests were declined:", "Staff rejected these:"],
    "denied": ["The following could not be processed:", "These have not been done:"],
}
# INLINE: the items in the lead-in's sentence, after its colon ("Completed: a refund of … and …").
INLINE = "inline"
SHAPES = ["- {item}", "* {item}", "\u2022 {item}", "{n}. {item}", "{n}) {item}", "- **{item}**", INLINE]
CLOSERS = ["", "\nAnything else I can help with?"]


def _list(lead, items, shape, closer=""):
    if shape == INLINE:
        joined = items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]
        return f"{lead} {joined}." + closer.replace("\n", " ")
    lines = [shape.format(item=item, n=n) for n, item in enumerate(items, 1)]
    return "\n".join([lead, *lines]) + closer


def wordings(mode):
    """(domain, tool, other, text) for every lead-in of `mode`, shape and action, the item on the record."""
    out = []
    for (domain, tool, other, items), lead, shape, closer in itertools.product(ACTIONS, LEADS[mode], SHAPES, CLOSERS):
        record = RECORDS[domain.name][0]
        for item in items:
            out.append((domain, tool, other, _list(lead, [item.format(rec=record)], shape, closer)))
    return out


# Lists that claim nothing: steps for the customer, options, details. Items in the same nouns.
PLAIN_LEADS = [
    "Here's what you need to do:",
    "Please follow these steps:",
    "Here are your options:",
    "You can choose one of the following:",
    "Here are the details of {rec}:",
    "To get a refund, you'll need to:",
    "Which of these would you like?",
    "If you'd like, I can do any of these:",
    "I'm happy to help with the following:",
    "Here's a summary of what you're requesting:",
]
PLAIN_ITEMS = [
    "Return the item within 30 days",
    "Cancel the order from your account page",
    "A full refund of 48.99 USD",
    "A replacement of the same lamp",
    "Refund to your original payment method",
    "Exchange for another size",
    "Restart your phone",
    "Turn on airplane mode and off again",
    "Order {rec}: delivered on 3 May",
    "Total: 48.99 USD",
    "Keep the receipt",
]


def plain_lists(record):
    out = []
    for lead, shape in itertools.product(PLAIN_LEADS, SHAPES[::2]):
        items = [i.format(rec=record) for i in PLAIN_ITEMS]
        out.append(_list(lead.format(rec=record), items, shape))
    return out


# --- the records ----------------------------------------------------------------------------------


def _action(tool, target, amount_cents=None):
    return ActionData(
        tool=tool,
        target=target,
        turn=3,
        idempotency_key=f"{tool}-{target}",
        reversible=False,
        on=(target,),
        amount_cents=amount_cents,
        currency="USD" if amount_cents else "",
    )


def _ledger(domain):
    record, elsewhere, kind = RECORDS[domain.name]
    return [
        LedgerData(role=f"{kind}:{v}", value=v, kind=kind, verified=True, first_seen_turn=1, last_used_turn=1)
        for v in (record, elsewhere)
    ]


def _held(domain, text, *, actions=(), proposals=(), question="Any update?") -> bool:
    records = replyclaims.Records.of(domain, actions=actions, ledger=_ledger(domain), proposals=proposals)
    return bool(records.unsupported(text, question))


def _states(mode, tool, other, record, elsewhere):
    """(name, records, held?) for a list item in `mode` of `tool` on `record`."""
    ran, card, declined = (
        [_action(tool, record)],
        [Proposal(tool, (record,), OPEN)],
        [Proposal(tool, (record,), DECLINED)],
    )
    if mode == "done":
        return [
            ("nothing ran", {}, True),
            ("its card is open, not run", {"proposals": card}, True),
            ("another write ran", {"actions": [_action(other, record)]}, True),
            ("it ran on another record", {"actions": [_action(tool, elsewhere)]}, True),
            ("it ran", {"actions": ran}, False),
        ]
    if mode == "pending":
        return [
            ("nothing", {}, True),
            ("another write's card is open", {"proposals": [Proposal(other, (record,), OPEN)]}, True),
            ("its card is open", {"proposals": card}, False),
            ("it ran", {"actions": ran}, False),
        ]
    if mode == "future":
        return [
            ("nothing", {}, True),
            ("its card was declined", {"proposals": declined}, True),
            ("another write's card is open", {"proposals": [Proposal(other, (record,), OPEN)]}, True),
            ("its card is open", {"proposals": card}, False),
        ]
    if mode == "refused":
        return [
            ("nothing", {}, True),
            ("its card is open", {"proposals": card}, True),
            ("its card was declined", {"proposals": declined}, False),
        ]
    return [  # denied
        ("it ran", {"actions": ran}, True),
        ("nothing ran", {}, False),
        ("it ran on another record", {"actions": [_action(tool, elsewhere)]}, False),
    ]


def judged(mode):
    figures, wrong = Counter(), []
    for domain, tool, other, text in wordings(mode):
        record, elsewhere, _kind = RECORDS[domain.name]
        for state, records, held in _states(mode, tool, other, record, elsewhere):
            got = _held(domain, text, **records)
            figures[f"{mode}: {'held' if held else 'passed'} when {state}"] += 1
            if got != held:
                wrong.append((text, state, "held" if got else "passed"))
    return figures, wrong


MODES = list(LEADS)

# --- the tests ------------------------------------------------------------------------------------


def test_every_lead_in_gives_its_items_its_mode():
    for mode in MODES:
        for domain, tool, _other, text in wordings(mode):
            kinds = replyclaims.kinds_of(domain.tools)[tool]
            claims = replyclaims.claims_of(text, "", replyclaims.vocabulary_of(domain.tools))
            assert any(c.kind in kinds and c.mode == mode for c in claims), (text, claims)


@pytest.mark.parametrize("mode", MODES)
def test_a_listed_claim_is_judged_in_both_directions(mode):
    figures, wrong = judged(mode)
    for line in sorted(figures.items()):
        print(*line)
    print(f"{mode}: {len(wordings(mode))} lists, {sum(figures.values())} judgements, wrong {len(wrong)}")
    assert wrong == [], wrong[:10]


def test_a_listed_refund_is_judged_on_its_figure():
    text = "Your requests have been processed:\n- Refund of 48.99 USD on SU-41001\n- Order SU-41002 cancelled"
    both = [_action("cancel_order", "SU-41002")]
    assert not _held(SHOP, text, actions=[_action("issue_refund", "SU-41001", 4899), *both])
    assert _held(SHOP, text, actions=[_action("issue_refund", "SU-41001", 2000), *both])  # another figure
    assert _held(SHOP, text, actions=[_action("issue_refund", "SU-41001", 4899)])  # the cancellation never ran
    why = replyclaims.Records.of(SHOP, ledger=_ledger(SHOP), actions=both).unsupported(text)
    assert [c.kind for c in why] == ["refund"] and "Refund of 48.99 USD on SU-41001" in why[0].sentence


@pytest.mark.parametrize(
    "text",
    [
        "Your requests have been processed: a refund of 48.99 USD on SU-41001 and the cancellation of SU-41002.",
        "Thanks! Here's what I did: refunded 48.99 USD on SU-41001; cancelled SU-41002.",
        "Completed: refund of 48.99 USD on SU-41001, as well as order SU-41002 cancelled. Anything else?",
    ],
)
def test_an_inline_list_is_judged_item_by_item(text):
    """The items after a lead-in's colon, in one sentence, are claims of the lead-in's mode, each with
    its own figure and record."""
    both = [_action("cancel_order", "SU-41002")]
    assert not _held(SHOP, text, actions=[_action("issue_refund", "SU-41001", 4899), *both])
    assert _held(SHOP, text, actions=[_action("issue_refund", "SU-41001", 2000), *both])  # another figure
    assert _held(SHOP, text, actions=[_action("issue_refund", "SU-41001", 4899)])  # the cancellation never ran
    assert _held(SHOP, text, actions=both)  # the refund never ran
    why = replyclaims.Records.of(SHOP, ledger=_ledger(SHOP), actions=both).unsupported(text)
    assert [c.kind for c in why] == ["refund"] and "SU-41001" in why[0].sentence


def test_a_colon_that_leads_no_list_of_ours_claims_nothing_new():
    for text in [
        "Here are the details: order SU-41001, refund of 48.99 USD.",
        "You have two options: a refund or a replacement.",
        "Please note: the refund policy allows 30 days.",
    ]:
        assert not _held(SHOP, text), text
    # A sentence with a time in it is read as the sentence it is, not as a list.
    assert _held(SHOP, "Your refund was processed at 10:30 today.")
    assert not _held(SHOP, "Your refund was processed at 10:30 today.", actions=[_action("issue_refund", "SU-41001")])
    # The lead-in of an inline list is a sentence too: its own claim is judged.
    text = "I've refunded 48.99 USD on SU-41001 and also done the following: cancelled SU-41002."
    assert _held(SHOP, text, actions=[_action("cancel_order", "SU-41002")])


def test_an_item_that_says_its_own_mode_keeps_it():
    text = "Your requests have been processed:\n- Order SU-41001 cancelled\n- Return for SU-41002: awaiting your confirmation"
    ran = [_action("cancel_order", "SU-41001")]
    assert _held(SHOP, text, actions=ran)  # the return has no card
    assert not _held(SHOP, text, actions=ran, proposals=[Proposal("book_return", ("SU-41002",), OPEN)])


@pytest.mark.parametrize(
    "text, tool",
    [
        ("Return requests have been submitted for:\n- SU-41001\n- the lamp", "book_return"),
        ("Refunds have been issued for the following orders:\n1. SU-41001 (48.99 USD)", "issue_refund"),
        ("I'll cancel these once you confirm:\n- SU-41001", "cancel_order"),
    ],
)
def test_an_item_that_names_no_action_is_of_the_lead_ins(text, tool):
    """ "Return requests have been submitted for:" then the records: each item a claim of the lead-in's action."""
    mode = replyclaims.claims_of(text)[0].mode
    record = [Proposal(tool, ("SU-41001",), OPEN)] if mode != "done" else []
    ran = [_action(tool, "SU-41001")] if mode == "done" else []
    assert _held(SHOP, text), (text, "nothing")
    assert _held(SHOP, text, actions=[_action(tool, "SU-41002")]), (text, "on another order")
    assert not _held(SHOP, text, actions=ran, proposals=record), (text, "its card or its action")


def test_lists_that_claim_nothing_are_held_in_no_state():
    held, judged_ = [], 0
    for domain, tool, other, _items in ACTIONS:
        record, _e, _k = RECORDS[domain.name]
        states = [{}, {"proposals": [Proposal(tool, (record,), OPEN)]}, {"actions": [_action(other, record)]}]
        for text, records in itertools.product(plain_lists(record), states):
            judged_ += 1
            if _held(domain, text, **records):
                held.append((text, records))
    print(f"plain lists: {len(plain_lists('X'))} × {len(ACTIONS)} actions × 3 states = {judged_}; held {len(held)}")
    assert held == [], held[:5]


def test_negative_control_without_the_list_reading(monkeypatch):
    """Take the list reading out: most false claims made as lists pass, and items under a promise are
    read as done ("Order … cancelled") and held though their card is open."""
    assert all(not judged(mode)[1] for mode in MODES)
    monkeypatch.setattr(claimlists, "items", lambda *a, **k: [])
    missed, misread, should_hold = 0, 0, 0
    for mode in MODES:
        figures, wrong = judged(mode)
        should_hold += sum(n for name, n in figures.items() if ": held" in name)
        missed += sum(1 for w in wrong if w[2] == "passed")
        misread += sum(1 for w in wrong if w[2] == "held")
        print(
            f"{mode}: without the list reading, {sum(1 for w in wrong if w[2] == 'passed')} false claims pass, "
            f"{sum(1 for w in wrong if w[2] == 'held')} true ones held"
        )
    print(f"all: {missed}/{should_hold} false claims pass; {misread} true ones held")
    assert missed > should_hold // 2 and misread > 0


# --- the kind of record a claim names -------------------------------------------------------------

HOTEL = Domain.from_data(
    {
        "name": "hotel_claims",
        "id_patterns": {"guest": r"G\d{4}", "booking": r"BK\d{4}", "appointment": r"SP\d{4}"},
        "owner_kind": "guest",  # neither kind of record a cancellation acts on
        "tools": {
            "find_booking": {"lookup": True, "args": {"booking_ref": "booking"}},
            "cancel_booking": {
                "write": True,
                "args": {"booking_ref": "booking"},
                "target": "booking_ref",
                "capabilities": ["cancels"],
            },
            "cancel_spa_appointment": {
                "write": True,
                "args": {"appointment_ref": "appointment"},
                "target": "appointment_ref",
                "capabilities": ["cancels"],
            },
        },
    }
)
HOTEL_LEDGER = [
    LedgerData(role=f"{k}:{v}", value=v, kind=k, verified=True, first_seen_turn=1, last_used_turn=1)
    for k, v in (("booking", "BK1234"), ("booking", "BK1235"), ("appointment", "SP1234"))
]
BOOKING, SPA = _action("cancel_booking", "BK1234"), _action("cancel_spa_appointment", "SP1234")
# (claim, held after the booking's cancellation, held after the appointment's)
HOTEL_CLAIMS = [
    ("Your booking has been cancelled.", False, True),
    ("Your spa appointment has been cancelled.", True, False),
    ("Booking BK1234 has been cancelled.", False, True),
    ("Booking BK1235 has been cancelled.", True, True),
    ("I've cancelled appointment SP1234 for you.", True, False),
    ("The cancellation of your booking is complete.", False, True),
    ("It has been cancelled.", False, False),  # names no kind: any cancellation on the ticket
    ("Your requests have been processed:\n- Booking BK1234 cancelled", False, True),
    ("Your requests have been processed:\n- Spa appointment cancelled", True, False),
    ("No, your booking has not been cancelled.", True, False),  # a denial: held where it ran
]


def _hotel_held(text, actions, **kw):
    records = replyclaims.Records.of(HOTEL, actions=actions, ledger=HOTEL_LEDGER)
    if kw:
        records = replyclaims.Records(**{**records.__dict__, **kw})
    return bool(records.unsupported(text))


@pytest.mark.parametrize("text, after_booking, after_spa", HOTEL_CLAIMS)
def test_a_claim_is_backed_only_by_an_action_on_the_kind_of_record_it_names(text, after_booking, after_spa):
    assert _hotel_held(text, [BOOKING]) == after_booking, (text, "the booking was cancelled")
    assert _hotel_held(text, [SPA]) == after_spa, (text, "the appointment was cancelled")


def test_negative_control_without_the_declared_targets_any_cancellation_backs_any_claim():
    wrong = [
        text
        for text, after_booking, after_spa in HOTEL_CLAIMS
        if _hotel_held(text, [BOOKING], targets={}, kind_of=None) != after_booking
        or _hotel_held(text, [SPA], targets={}, kind_of=None) != after_spa
    ]
    print(f"without the targets: {len(wrong)} of {len(HOTEL_CLAIMS)} claims judged wrongly: {wrong}")
    assert len(wrong) >= 7


def test_a_tau2_reservation_claim_is_judged_on_the_reservation_it_names():
    """τ² airline's owner kind is not reservations: the claim was judged anywhere on the ticket before."""
    text = "Reservation 8JX2WO has been cancelled."
    assert _held(AIRLINE, text, actions=[_action("cancel_reservation", "ZFA04Y")])
    assert not _held(AIRLINE, text, actions=[_action("cancel_reservation", "8JX2WO")])
    # Named by its ID pattern alone, not in the ledger: an invented reservation backs nothing.
    assert _held(AIRLINE, "Reservation 9XK3PL has been cancelled.", actions=[_action("cancel_reservation", "ZFA04Y")])
    records = replyclaims.Records.of(
        AIRLINE, actions=[_action("cancel_reservation", "ZFA04Y")], ledger=_ledger(AIRLINE)
    )
    control = replyclaims.Records(**{**records.__dict__, "targets": {}, "kind_of": None})
    assert not control.unsupported(text)  # the negative control: without the declared targets it passes


def test_the_stream_stops_before_a_false_listed_item():
    """Streamed, an item the records do not back never reaches a screen; the items before it do."""
    records = replyclaims.Records.of(SHOP, ledger=_ledger(SHOP), actions=[_action("cancel_order", "SU-41002")])
    text = (
        "Your requests have been processed:\n1. Order SU-41002 cancelled\n"
        "2. Refund of 48.99 USD on SU-41001\nAnything else?"
    )

    def ok(prefix):
        return answer.sentence_passes(prefix, records, None, "Any update?")

    shown = provisional.shown(text, known={"SU-41001", "SU-41002"}, final=True, sentence_ok=ok)
    # (the bare number "2." shows only with its item: never left dangling)
    assert shown == "Your requests have been processed:\n1. Order SU-41002 cancelled"
    # The control: once the refund ran, the whole list streams.
    records = replyclaims.Records.of(
        SHOP, ledger=_ledger(SHOP), actions=[_action("cancel_order", "SU-41002"), _action("issue_refund", "SU-41001")]
    )
    assert provisional.shown(text, known={"SU-41001", "SU-41002"}, final=True, sentence_ok=ok) == text


# --- through the loop -----------------------------------------------------------------------------

LOOP_ORDER = "SU-41001"  # the `case` fixture's order
LISTED = (
    "Your requests have been processed:\n"
    f"1. Refund of 15.00 USD on {LOOP_ORDER}\n"
    f"2. Return for {LOOP_ORDER}\n"
    "Anything else I can help with?"
)
LOOKUP = ModelResponse(tool_calls=[ToolCall(id="g1", name="get_order", arguments={"order_number": LOOP_ORDER})])


@pytest.mark.django_db
def test_a_listed_claim_nothing_backs_is_asked_again_then_held(case):  # noqa: F811
    model = ScriptedModel([LOOKUP, ModelResponse(text=LISTED), ModelResponse(text=LISTED)])
    agent_run(case["ticket"].pk, gateway=Gateway(override=model))
    assert "Return for" not in customer_reads(case)
    assert "no tool did" in model.requests[-1].messages[-1].content  # the re-ask says why
    held = Turn.objects.filter(ticket=case["ticket"], kind=Turn.Kind.ERROR).last()
    assert "Your requests have been processed: Refund of 15.00 USD" in held.text


@pytest.mark.django_db
def test_a_listed_claim_of_what_ran_reaches_the_page(case):  # noqa: F811
    """The control: the list of what did run posts at once."""
    refund = ModelResponse(
        tool_calls=[
            ToolCall(
                id="r1",
                name="issue_refund",
                arguments={"order_number": LOOP_ORDER, "amount": "15.00", "currency": "USD", "reason": "damaged"},
            )
        ]
    )
    first = ScriptedModel([LOOKUP, refund, ModelResponse(text="Please confirm on the card.")])
    agent_run(case["ticket"].pk, gateway=Gateway(override=first))
    card = Confirmation.objects.get(ticket=case["ticket"])
    confirmation_decide(
        card_id=card.pk,
        ticket=Ticket.objects.get(pk=case["ticket"].pk),
        confirm=True,
        digest=card.digest,
        via=Confirmation.Via.BUTTON,
        wake=False,
    )
    done = LISTED.replace(f"2. Return for {LOOP_ORDER}\n", "")
    model = ScriptedModel([ModelResponse(text=done)])
    agent_run(case["ticket"].pk, gateway=Gateway(override=model))
    assert "Refund of 15.00 USD" in customer_reads(case) and len(model.requests) == 1  # posted, never asked again
