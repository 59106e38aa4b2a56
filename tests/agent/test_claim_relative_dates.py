"""A reply that says when an order's event happened relative to now — "it shipped 15 days ago",
"yesterday, your order was delivered", "you placed it last week" — is judged on the records' dates.

The statements come from a grammar (event × frame × relative time), each judged against record
states whose dates are set relative to today (`recordstates.today`): passed where the record's day of
that event is one the time may mean (each time's days taken at offsets chosen inside its honest
tolerance), held where it is well outside. Look-alikes — futures, durations, questions, conditions,
the customer's words said back, vague words, a rule of every order, another verb's time — are not
read even against records four months old. The sentence a real model posted in run 10 ("The order
SU-21487 was shipped in 15 days ago.") is held with the order shipped four months ago and passes with
it shipped 15 days ago, through the real loop with the scripted model. Negative controls: with the
relative reading taken out the false ones pass; with the condition, the rule-of-every-order, the
still-to-come and the not-the-order readings taken out their look-alikes are read.

Words that name no count — "recently", "just", "newly", "the other day" — are in the grammar too, after
the verb and opening the clause as the other times are, and before the verb ("was recently shipped",
"has just been delivered"), judged against their generous spans; their look-alikes ("we recently
changed our returns window", "just to confirm", "the other day you mentioned …", "most recently",
"recently shipped orders …") are not read. Run 13's "The order SU-21487 was recently shipped." is held
through the loop with it shipped four months before. With the vague spans taken out the false ones
pass. Of the 882 recorded replies of a strong model, none is read as saying a vague time of an event.
"""

from __future__ import annotations

import itertools
import re
from collections import Counter
from datetime import UTC, date, datetime, timedelta

import pytest
from django.test import override_settings
from django.utils import timezone

from sundry.agent import recordstates
from sundry.agent.guards import relativedates, replyclaims, statusclaims
from sundry.agent.loop import agent_run
from sundry.agent.provider.gateway import Gateway
from sundry.agent.provider.scripted import ScriptedModel
from sundry.evals import scorecard
from sundry.shop.models import Order, Parcel
from sundry.tickets.models import Turn
from sundry.tooling import records as r
from sundry.tooling.domain import get_domain
from sundry.tooling.messages import ModelResponse, ToolCall
from sundry.tooling.records import RecordState
from tests.agent import recorded
from tests.agent.claimcase import customer_reads, open_case, reply_via
from tests.agent.test_claim_modes import ledger_of
from tests.factories import ParcelFactory, TrackingEventFactory

ORDER, OTHER = "SU-21487", "SU-21488"
KINDS = replyclaims.kinds_of(get_domain().tools)
TODAY = recordstates.today()  # the reply's day, as the loop gives it
DAY = TODAY[0]
EVENTS = (r.PLACED, r.SHIPPED, r.DELIVERED, r.REFUNDED, r.CANCELLED, r.RETURNED)
FOUR_MONTHS = 122


def state_at(days_ago: int, ref: str = ORDER) -> RecordState:
    """A record every event of which happened `days_ago` days before today."""
    on = DAY - timedelta(days=days_ago)
    return RecordState(ref, frozenset(EVENTS), tuple((e, on) for e in EVENTS), ((6998, "USD"),))


def _weekday(days_ago: int) -> str:
    return f"{DAY - timedelta(days=days_ago):%A}"


# --- the grammar -------------------------------------------------------------------------------------

# The time after the event's words ({t}), or opening the sentence ({T}).
FRAMES = {
    r.PLACED: ["Your order {ref} was placed {t}.", "You placed the order {t}.", "It was ordered {t}.",
               "The lamp you bought {t} is still under warranty.", "Order date: {t}.", "{T} you placed order {ref}."],
    r.SHIPPED: ["It shipped {t}.", "Your order {ref} was dispatched {t}.", "The order {ref} was shipped in {t}.",
                "We shipped it to you {t}.", "The parcel was sent out {t}.", "{T}, your order {ref} was shipped.",
                "{T} we dispatched your order."],
    r.DELIVERED: ["It was delivered {t}.", "Your order {ref} was delivered to your address {t}.",
                  "{T}, it was delivered."],
    r.REFUNDED: ["Your order {ref} was refunded {t}.", "We refunded it to your card {t}.", "{T}, we refunded {ref}."],
    r.CANCELLED: ["Your order {ref} was cancelled {t}.", "Cancellation date: {t}."],
    r.RETURNED: ["It was returned to us {t}.", "The lamp was returned {t}."],
}  # fmt: skip
# (time, days ago it may mean, days ago it cannot): the first inside its honest tolerance, the second
# well outside.
TIMES = [
    ("15 days ago", [14, 15, 16], [5, 30, FOUR_MONTHS]),
    ("fifteen days ago", [15], [FOUR_MONTHS]),
    ("3 days back", [3], [10, FOUR_MONTHS]),
    ("2 days ago", [2], [7]),
    ("yesterday", [1], [3, 15]),
    ("yesterday afternoon", [1], [15]),
    ("the day before yesterday", [2], [6]),
    ("earlier today", [0], [2, 15]),
    ("today", [0], [3]),
    ("this morning", [0], [4]),
    ("last night", [1], [5]),
    ("a week ago", [7], [1, 20]),
    ("last week", [7], [0, 20, FOUR_MONTHS]),
    ("two weeks ago", [14], [3, 30]),
    ("a couple of weeks ago", [14], [3, 40]),
    ("a few days ago", [3], [15]),
    ("about 15 days ago", [12, 18], [40]),
    ("a month ago", [30], [7, 90]),
    ("last month", [30], [0, 100]),
    ("over a month ago", [60, FOUR_MONTHS], [5]),
    ("more than two weeks ago", [20, FOUR_MONTHS], [3]),
    ("less than a week ago", [0, 3], [30]),
    ("in the last 15 days", [5], [FOUR_MONTHS]),
    ("4 months ago", [FOUR_MONTHS], [15, 200]),
    ("four months ago", [120], [30]),
    ("6 hours ago", [0], [5]),
    ("a year ago", [365], [30]),
    ("5 business days ago", [7], [30]),
    (f"on {_weekday(3)}", [3], [10, 40]),
    (f"last {_weekday(3)}", [3, 10], [40]),
    # Words that name no count, read generously (`relativedates.VAGUE`).
    ("recently", [0, 10, 30, 40], [60, FOUR_MONTHS]),
    ("only recently", [5], [FOUR_MONTHS]),
    ("the other day", [2, 7, 13], [30, FOUR_MONTHS]),
]
VAGUE_TIMES = {"recently", "only recently", "the other day"}

# Right before the event's verb ({a}): "was recently shipped", "has just been delivered".
VERB_FRAMES = {
    r.PLACED: ["Your order {ref} was {a} placed.", "You {a} placed order {ref}.", "You {a} ordered the lamp.",
               "The lamp you {a} bought is still under warranty.", "Your {a} placed order {ref} is on file."],
    r.SHIPPED: ["Your order {ref} was {a} shipped.", "It has {a} been dispatched.", "We {a} shipped it to you.",
                "The parcel was {a} sent out.", "{ref} {a} shipped.", "Your {a} shipped order {ref} is on its way.",
                "Good news, your order {ref} has {a} been shipped."],
    r.DELIVERED: ["It was {a} delivered.", "Your order {ref} has {a} been delivered to your address.",
                  "Your parcel was {a} delivered to the front desk."],
    r.REFUNDED: ["Your order {ref} was {a} refunded.", "We have {a} refunded it to your card.", "I've {a} refunded {ref}."],
    r.CANCELLED: ["Your order {ref} was {a} cancelled.", "I've {a} cancelled {ref} for you."],
    r.RETURNED: ["It was {a} returned to us.", "The lamp you {a} returned has reached our warehouse."],
}  # fmt: skip
# (word, days ago it may mean, days ago it cannot).
BEFORE_VERB = [
    ("recently", [0, 10, 30, 40], [60, FOUR_MONTHS]),
    ("just recently", [10], [FOUR_MONTHS]),
    ("just", [0, 3, 6], [14, 30, FOUR_MONTHS]),
    ("only just", [1], [30]),
    ("newly", [0, 20], [FOUR_MONTHS]),
]


def _cases():
    """(event, frame, time, days ago it may mean, days ago it cannot, sentence)."""
    for (event, frames), (t, yes, no) in itertools.product(FRAMES.items(), TIMES):
        for frame in frames:
            if " in {t}" in frame and not t[0].isdigit():
                continue  # "shipped in 15 days ago" is the real model's; "shipped in yesterday" is no one's
            said = frame.format(ref=ORDER, t=t, T=t[0].upper() + t[1:])
            yield event, frame, t, yes, no, said
    for (event, frames), (a, yes, no) in itertools.product(VERB_FRAMES.items(), BEFORE_VERB):
        for frame in frames:
            yield event, frame, a, yes, no, frame.format(ref=ORDER, a=a)


CASES = list(_cases())
VAGUE_WORDS = VAGUE_TIMES | {a for a, *_ in BEFORE_VERB}


def _false(text, states, today=TODAY):
    refs = {s.reference for s in states} or {ORDER}
    return [
        c
        for c in replyclaims.unsupported(
            text, kinds=KINDS, actions=[], ledger=ledger_of(*refs), states=states, today=today
        )
        if c.mode == replyclaims.STATED and c.kind == statusclaims.DATE
    ]


def _relative(text):
    return [
        c.stated
        for c in replyclaims.claims_of(text)
        if c.mode == replyclaims.STATED and c.stated.what == statusclaims.DATE and c.stated.relative
    ]


# --- what is read ------------------------------------------------------------------------------------


def test_every_generated_time_is_read_as_of_its_event():
    read = [
        said
        for event, _f, t, _y, _n, said in CASES
        if [(s.value, s.said.lower()) for s in _relative(said)] == [(event, t.lower())]
    ]
    vague = sum(t in VAGUE_WORDS for _e, _f, t, *_ in CASES)
    print(f"read: {len(read)}/{len(CASES)} ({len(FRAMES)} events, {len(TIMES)} times; {vague} with vague words)")
    assert len(read) == len(CASES), [c[-1] for c in CASES if c[-1] not in read][:20]


LOOKALIKES = {
    "futures": [
        "It will arrive in 3 days.",
        "Your order will be delivered within 15 days.",
        "Delivery takes 5 days.",
        "It should be delivered in two weeks.",
        "Refunds are processed within 15 days.",
        "It is expected to ship in 3 days.",
        "You'll receive it in a few days.",
        "The refund will be issued within 5 business days.",
        "Your order will be shipped tomorrow.",
        "It should be delivered by next week.",
        "Your parcel is scheduled to be delivered today.",
        "It is due to be shipped this week.",
        "It is being delivered this afternoon.",
        "Today, it is due to be delivered.",
    ],
    "durations": [
        "It's been 15 days since your order was placed.",
        "I understand it has been two weeks since it shipped.",
        "You have been waiting 15 days for your order.",
        "Your order has been in transit for 15 days.",
        "It has been a month since you ordered the lamp.",
    ],
    "questions": [
        "Was it shipped 15 days ago?",
        "Did you place the order last week?",
        "Was your order delivered yesterday or today?",
        "Could you confirm it was refunded a month ago?",
    ],
    "conditions": [
        "If it was shipped 15 days ago, it should have arrived.",
        "If you ordered it last week, it should arrive soon.",
        "In case it was delivered yesterday, please check with your neighbours.",
        "Once it shipped yesterday, tracking would show it.",
        "When it was dispatched two weeks ago, the label was printed.",
    ],
    "the customer's words": [
        "15 days ago you wrote that the lamp was broken.",
        "You said it was delivered yesterday.",
        "You mentioned you placed the order two weeks ago.",
        "As you told us, it was shipped last week.",
        'You wrote: "it was delivered 3 days ago".',
        "According to you, it was refunded a month ago.",
    ],
    "vague": [
        "Your order was placed a while ago.",
        "It was shipped a while back.",
        "It was shipped some time ago.",
        "It was dispatched not long ago.",
        "It was refunded a little while back.",
    ],
    "a rule of every order": [
        "Orders placed more than 30 days ago cannot be returned.",
        "Any item bought over a month ago is outside the return window.",
        "All orders shipped in the last 15 days are tracked.",
    ],
    "another verb's time": [
        "The lamp you ordered arrived yesterday.",
        "The parcel you returned reached us yesterday.",
        "Yesterday I checked and your order was delivered.",
        "Yesterday the tracking showed it delivered.",
        "Yesterday's update says it was delivered.",
        "Your order shipped, and I emailed you yesterday.",
    ],
    "another thing's time": [
        "We shipped a replacement to you yesterday.",
        "Your replacement lamp was dispatched this morning.",
        "The return label was sent out yesterday.",
        "A confirmation e-mail was sent out an hour ago.",
        "The new one was delivered yesterday.",
    ],
    "a written date": [
        f"It shipped on {DAY - timedelta(days=FOUR_MONTHS):%A, %d %B}.",
        f"It was delivered on {_weekday(FOUR_MONTHS)}, {DAY - timedelta(days=FOUR_MONTHS):%B %d, %Y}.",
    ],
}


# Sentences with the vague words that say no time of the order's event.
VAGUE_LOOKALIKES = {
    "not a time": [
        "Just to confirm, your order number is SU-21487.",
        "Just a moment while I look up your order.",
        "It just needs a signature on delivery.",
        "It was shipped just as you asked.",
        "It was delivered just before noon.",
        "It was delivered just in time for the weekend.",
        "Your order was refunded, just not to the card you expected.",
        "The order you most recently placed is SU-21487.",
        "Your order SU-21487 was most recently shipped.",
        "Your recent order SU-21487 is on file.",
        "It was delivered to the other address on file.",
    ],
    "another verb's time": [
        "Your order was placed under our recently updated policy.",
        "We recently changed our returns window to 60 days.",
        "It was delivered to the address recently added to your account.",
        "I recently checked, and your order was delivered.",
        "I just checked, and your order was delivered.",
        "Recently we moved warehouses, so your order was shipped from Leeds.",
    ],
    "the customer's words": [
        "The other day you mentioned the lamp was delivered damaged.",
        "You said it was just delivered.",
        "You mentioned you recently ordered a second lamp.",
        "As you told us, your order was recently returned.",
    ],
    "questions": [
        "Have you recently moved?",
        "Have you recently placed another order?",
        "Was it just delivered?",
        "Did it ship recently?",
    ],
    "conditions": [
        "If you recently moved, your parcel may have been delivered to your old address.",
        "If it was recently shipped, tracking may take a day to update.",
        "If you just placed the order, it can still be cancelled.",
        "When an order has just shipped, tracking can lag by a day.",
        "In case it was delivered the other day, please check with your neighbours.",
    ],
    "futures": [
        "It will be shipped shortly.",
        "Your order is just about to ship.",
        "It is just being packed.",
        "Your order should be newly dispatched by Friday.",
    ],
    "a rule of every order": [
        "Recently shipped orders show tracking within a day.",
        "Orders placed recently can still be changed.",
        "Items you recently bought are eligible for a refund.",
        "Newly placed orders are checked by hand.",
        "All recently delivered parcels are photographed.",
    ],
    "another thing's time": [
        "We've just shipped your replacement.",
        "Recently, we shipped a replacement to you.",
        "A new return label was just sent out.",
        "I've just placed a hold on your account.",
        "I just returned your call.",
    ],
}


def test_lookalikes_are_not_read_as_a_relative_time_nor_held():
    far = [state_at(FOUR_MONTHS)]  # every relative time read of them would be false
    figures = Counter()
    read, held = [], []
    for group, sentences in [*LOOKALIKES.items(), *(("vague: " + g, v) for g, v in VAGUE_LOOKALIKES.items())]:
        for said in sentences:
            figures[group] += 1
            if _relative(said):
                read.append(said)
            if _false(said, far):
                held.append(said)
    print(f"look-alikes: {sum(figures.values())} ({dict(figures)}); read {len(read)}, held {len(held)}")
    assert read == [] and held == [], (read, held)


def test_a_time_read_true_is_passed_where_it_is_a_statement_about_the_lamp():
    # Said in passing of a purchase, it is still a statement: true, it passes; four months out, it is held.
    said = "I'm sorry the lamp you bought 15 days ago stopped working."
    assert [s.value for s in _relative(said)] == [r.PLACED]
    assert not _false(said, [state_at(15)])
    assert _false(said, [state_at(FOUR_MONTHS)])


# --- held when wrong, passed when right ----------------------------------------------------------------


def test_a_relative_time_is_held_unless_its_events_day_is_one_it_may_mean():
    figures = Counter()
    wrong = []
    for event, _frame, t, yes, no, said in CASES:
        for days_ago in yes:
            if _false(said, [state_at(days_ago)]):
                wrong.append(("held though true", said, days_ago))
            figures["passed (true)"] += 1
        for days_ago in no:
            if not _false(said, [state_at(days_ago)]):
                wrong.append(("passed though false", said, days_ago))
            figures["held (false)"] += 1
    print(dict(figures))
    assert wrong == [], wrong[:20]


def test_the_named_order_decides_and_an_event_with_no_day_is_held():
    said = f"Your order {ORDER} was delivered yesterday."
    assert _false(said, [state_at(FOUR_MONTHS), state_at(1, OTHER)])  # the other order's day is not its
    assert not _false(said, [state_at(1), state_at(FOUR_MONTHS, OTHER)])
    # An order never delivered has no delivery day: "delivered yesterday" stands on nothing.
    placed = RecordState(ORDER, frozenset({r.PLACED}), ((r.PLACED, DAY - timedelta(days=1)),))
    assert [c.why for c in _false(said, [placed])] == ["no record shows it delivered yesterday"]


def test_the_run_10_sentence_is_held_with_the_order_shipped_four_months_ago():
    said = "The order SU-21487 was shipped in 15 days ago."
    why = [c.why for c in _false(said, [state_at(FOUR_MONTHS)])]
    on = (DAY - timedelta(days=FOUR_MONTHS)).isoformat()
    assert why == [f"it was shipped on {on}, not 15 days ago"], why
    assert not _false(said, [state_at(15)])


def test_without_the_replys_day_a_relative_time_is_not_judged():
    assert not _false("It shipped 15 days ago.", [state_at(FOUR_MONTHS)], today=())
    # The loop gives it as a function, read when a sentence is judged.
    assert _false("It shipped 15 days ago.", [state_at(FOUR_MONTHS)], today=recordstates.today)


def test_the_replys_day_is_taken_in_the_shops_time_zone_and_in_utc():
    at = datetime(2026, 8, 20, 23, 30, tzinfo=UTC)  # already 21 August in Auckland
    with override_settings(TIME_ZONE="Pacific/Auckland"):
        days = recordstates.today(at)
    assert days == (date(2026, 8, 21), date(2026, 8, 20))
    shipped = RecordState(ORDER, frozenset({r.SHIPPED}), ((r.SHIPPED, date(2026, 8, 19)),))
    # Yesterday by UTC's day; two days before by Auckland's: either way the customer was told true.
    assert not _false("It shipped yesterday.", [shipped], today=days)
    assert _false("It shipped yesterday.", [shipped], today=(date(2026, 8, 21),))


def test_the_tolerances_are_the_ones_stated():
    on = date(2026, 8, 20)  # a Thursday

    def days_ago(said):
        (first, last), *_ = relativedates.spans(said, on)
        return (on - last).days, (on - first).days if first != date.min else None

    assert days_ago("15 days ago") == (13, 17)
    assert days_ago("yesterday") == (1, 1)
    assert days_ago("last week") == (4, 13)  # Monday 10 to Sunday 16 August, or 7 to 13 days before
    assert days_ago("a month ago") == (21, 42)
    assert days_ago("4 months ago") == (106, 137)  # 4 × 30.44 days, give or take half a month
    assert days_ago("over a month ago") == (21, None)
    assert days_ago("recently") == days_ago("newly") == days_ago("only recently") == (0, 42)
    assert days_ago("just") == days_ago("only just") == (0, 7)
    assert days_ago("the other day") == (1, 14)  # not today
    assert relativedates.spans("a while ago", on) == relativedates.spans("some time ago", on) == []


# --- negative controls ---------------------------------------------------------------------------------


def _wrong_ones():
    return [(said, days_ago) for *_, no, said in CASES for days_ago in no]


def test_negative_control_without_the_relative_reading_the_false_ones_pass(monkeypatch):
    wrong = _wrong_ones()
    assert all(_false(said, [state_at(d)]) for said, d in wrong)
    monkeypatch.setattr(statusclaims, "_RELATIVE_SHAPES", [])
    through = [said for said, d in wrong if not _false(said, [state_at(d)])]
    print(f"false relative times passed with the reading removed: {len(through)}/{len(wrong)}")
    assert len(through) == len(wrong)


def test_negative_control_without_the_vague_spans_the_false_ones_pass(monkeypatch):
    wrong = [(said, d) for _e, _f, t, _y, no, said in CASES if t in VAGUE_WORDS for d in no]
    others = [(said, d) for said, d in _wrong_ones() if (said, d) not in set(wrong)]
    assert all(_false(said, [state_at(d)]) for said, d in wrong)
    monkeypatch.setattr(relativedates, "VAGUE", {})
    through = [said for said, d in wrong if not _false(said, [state_at(d)])]
    print(f"false vague times passed with the vague spans removed: {len(through)}/{len(wrong)}")
    assert len(through) == len(wrong)
    assert all(_false(said, [state_at(d)]) for said, d in others)  # the counted times are still read


@pytest.mark.parametrize(
    "group, names, expected",
    [
        # The other condition's "recently" is of its own verb ("if you recently moved").
        ("conditions", ["_NOT_SO"], 4),
        ("a rule of every order", ["_GENERAL", "_GENERAL_AFTER"], 5),
        ("another thing's time", ["_NOT_THE_ORDER", "_OTHER_OBJECT"], 5),
    ],
)
def test_negative_control_without_a_filter_its_vague_lookalikes_are_read(monkeypatch, group, names, expected):
    for name in names:
        monkeypatch.setattr(statusclaims, name, re.compile(r"(?!)"))
    looks = VAGUE_LOOKALIKES[group]
    read = [said for said in looks if _relative(said)]
    print(f"vague {group} read with {', '.join(names)} removed: {len(read)}/{len(looks)}")
    assert len(read) == expected, read


@pytest.mark.parametrize(
    "group, name, expected",
    [
        ("conditions", "_NOT_SO", 5),
        ("a rule of every order", "_GENERAL", 3),
        # The other futures name no past time at all; these four say one that may be today's.
        ("futures", "_TO_COME", 4),
        ("another thing's time", "_NOT_THE_ORDER", 5),
    ],
)
def test_negative_control_without_a_filter_its_lookalikes_are_read(monkeypatch, group, name, expected):
    monkeypatch.setattr(statusclaims, name, re.compile(r"(?!)"))
    looks = LOOKALIKES[group]
    read = [said for said in looks if _relative(said)]
    print(f"{group} read with {name} removed: {len(read)}/{len(looks)}")
    assert len(read) == expected, read


# --- the real replies ----------------------------------------------------------------------------------


def test_no_recorded_reply_is_read_as_saying_a_vague_time_of_an_event():
    """The 882 replies GPT-4.1 wrote to τ²-bench's customers use "just" and "recent(ly)" often ("just let me
    know", "your recent orders", "have you recently changed your SIM card?"): none of them is read as a time
    of an order's event, so none could be held for it."""
    replies = recorded.replies()
    words = re.compile(r"\b(?:recent(?:ly)?|just|newly|the\s+other\s+day)\b", re.I)
    using = [text for _, text in replies if words.search(text)]
    # No record of theirs is in the database: any time read of an event would be held ("no record shows it …").
    every = [(text, s.said) for _, text in replies for s in _relative(text)]
    read = [(text, said) for text, said in every if words.search(said)]
    print(f"recorded replies: {len(replies)}; using a vague word {len(using)}; read as a vague time {len(read)}")
    print(f"relative times of any kind read: {len(every)}", *every[:10], sep="\n  ")
    assert len(replies) == 882 and len(using) > 100 and not read, read[:3]


# --- from the database, through the loop ---------------------------------------------------------------


RUN_10 = f"The order {ORDER} was shipped in 15 days ago."
LOOKUP = ModelResponse(tool_calls=[ToolCall(id="g1", name="get_order", arguments={"order_number": ORDER})])
AFTER = ModelResponse(text=f"A colleague will look into where {ORDER} is.")


def _case(django_user_model, shipped_days_ago: int):
    now = timezone.now()
    placed = now - timedelta(days=shipped_days_ago + 3)
    shipped = {"prices": (3499, 3499), "status": Order.Status.SHIPPED, "placed_at": placed}
    text = f"Where is my order {ORDER}? It has not arrived."
    case = open_case(django_user_model, text, order=ORDER, subject="Where is it", **shipped)
    parcel = ParcelFactory(order=case["order"], status=Parcel.Status.IN_TRANSIT)
    TrackingEventFactory(parcel=parcel, at=now - timedelta(days=shipped_days_ago), description="Departed facility")
    return case


@pytest.mark.django_db
@pytest.mark.parametrize("via", ["reply", "reply_to_customer"])
def test_the_run_10_sentence_never_reaches_the_customer_when_it_shipped_four_months_ago(django_user_model, via):
    case = _case(django_user_model, FOUR_MONTHS)
    agent_run(
        case["ticket"].pk,
        gateway=Gateway(override=ScriptedModel([LOOKUP, reply_via(via, RUN_10), reply_via(via, RUN_10), AFTER])),
    )
    assert "15 days ago" not in customer_reads(case)
    if via == "reply_to_customer":
        rejection = Turn.objects.filter(ticket=case["ticket"], kind=Turn.Kind.REJECTION).last()
        assert rejection.payload["guard"] == "unsupported_claim" and "date (stated)" in rejection.text
    else:
        held = Turn.objects.filter(ticket=case["ticket"], kind=Turn.Kind.ERROR).last()
        assert "date (stated)" in held.text and "not 15 days ago" in held.text, held.text


@pytest.mark.django_db
@pytest.mark.parametrize("via", ["reply", "reply_to_customer"])
def test_the_same_words_are_posted_and_counted_true_when_it_shipped_15_days_ago(django_user_model, via):
    case = _case(django_user_model, 15)
    agent_run(case["ticket"].pk, gateway=Gateway(override=ScriptedModel([LOOKUP, reply_via(via, RUN_10), AFTER])))
    assert "was shipped in 15 days ago." in customer_reads(case)
    read = scorecard.read_by_customers(case["ticket"].pk)
    assert (read["false_statements"], read["false_claims"]) == (0, 0)


RUN_13 = f"The order {ORDER} was recently shipped."


@pytest.mark.django_db
def test_the_run_13_sentence_is_held_with_the_order_shipped_four_months_ago_and_posted_when_it_is_recent(
    django_user_model,
):
    case = _case(django_user_model, FOUR_MONTHS)
    said = reply_via("reply", RUN_13)
    agent_run(case["ticket"].pk, gateway=Gateway(override=ScriptedModel([LOOKUP, said, said, AFTER])))
    assert "recently shipped" not in customer_reads(case)
    held = Turn.objects.filter(ticket=case["ticket"], kind=Turn.Kind.ERROR).last()
    assert "date (stated)" in held.text and "not recently shipped" in held.text, held.text


@pytest.mark.django_db
def test_the_run_13_sentence_is_posted_and_counted_true_when_it_shipped_five_days_ago(django_user_model):
    case = _case(django_user_model, 5)
    agent_run(case["ticket"].pk, gateway=Gateway(override=ScriptedModel([LOOKUP, reply_via("reply", RUN_13), AFTER])))
    assert "was recently shipped." in customer_reads(case)
    read = scorecard.read_by_customers(case["ticket"].pk)
    assert (read["false_statements"], read["false_claims"]) == (0, 0)


@pytest.mark.django_db
def test_negative_control_without_the_relative_reading_the_untrue_time_is_posted_and_counted(
    django_user_model, monkeypatch
):
    case = _case(django_user_model, FOUR_MONTHS)
    monkeypatch.setattr(statusclaims, "_RELATIVE_SHAPES", [])
    agent_run(case["ticket"].pk, gateway=Gateway(override=ScriptedModel([LOOKUP, reply_via("reply", RUN_10), AFTER])))
    assert "was shipped in 15 days ago." in customer_reads(case)
    monkeypatch.undo()
    # model_check reads what the customer read, counted from the day the reply was written.
    read = scorecard.read_by_customers(case["ticket"].pk)
    assert (read["false_statements"], read["false_claims"]) == (1, 0)
