"""A reply that states an order's status, a date of it or a figure of it is judged on the records.

The statements come from a grammar (record named or not × status words × status shapes;
event × date form; amount phrasing × amount form), not written for the rule; each is
judged against generated record states (`RecordState`, what the shop's records hook
gives): held where the record does not have that status, that date or that figure,
passed where it does — on the record the sentence names, else on any of the ticket's.
Look-alikes made from the same statements — a question, a condition, a future, the
customer's words said back or quoted — are not read. Negative controls: with each
reading taken out, its false statements pass. Through the real loop with the scripted
model, a false status never reaches the customer's page, by a plain reply or by
`reply_to_customer`; with the order in that status the same words are posted, and
`model_check`'s reading counts them a false statement once the order's status differs.
"""

from __future__ import annotations

import itertools
import json
import re
from collections import Counter
from datetime import UTC, date, datetime, timedelta

import pytest

from sundry.agent import recordstates
from sundry.agent.guards import replyclaims, statusclaims
from sundry.agent.guards.statusclaims import RESULT_BREAK
from sundry.agent.loop import agent_run
from sundry.agent.provider.gateway import Gateway
from sundry.agent.provider.scripted import ScriptedModel
from sundry.evals import scorecard
from sundry.shop.models import Order
from sundry.tickets.models import Turn
from sundry.tooling import records as r
from sundry.tooling.domain import get_domain
from sundry.tooling.messages import ModelResponse, ToolCall
from sundry.tooling.records import RecordState
from tests.agent.claimcase import customer_reads, open_case, reply_via
from tests.agent.test_claim_modes import ledger_of

ORDER, OTHER = "SU-41001", "SU-41002"
KINDS = replyclaims.kinds_of(get_domain().tools)
PLACED_ON, SHIPPED_ON, DELIVERED_ON, REFUNDED_ON = (
    date(2026, 8, 10),
    date(2026, 8, 12),
    date(2026, 8, 15),
    date(2026, 8, 20),
)
STATUS_OF = {  # what each order status makes true (as the shop's hook says it)
    "placed": {r.PLACED},
    "shipped": {r.SHIPPED},
    "lost": {r.SHIPPED, r.LOST},
    "delivered": {r.SHIPPED, r.DELIVERED},
    "cancelled": {r.CANCELLED},
}
DATES_OF = {
    "placed": {r.PLACED: PLACED_ON},
    "shipped": {r.PLACED: PLACED_ON, r.SHIPPED: SHIPPED_ON},
    "lost": {r.PLACED: PLACED_ON, r.SHIPPED: SHIPPED_ON},
    "delivered": {r.PLACED: PLACED_ON, r.SHIPPED: SHIPPED_ON, r.DELIVERED: DELIVERED_ON},
    "cancelled": {r.PLACED: PLACED_ON, r.CANCELLED: REFUNDED_ON, r.REFUNDED: REFUNDED_ON},
}
FIGURES = ((3499, "USD"), (6998, "USD"))  # a line, and the total paid


def state(status: str, ref: str = ORDER, refunded: bool = False) -> RecordState:
    statuses = STATUS_OF[status] | ({r.REFUNDED} if refunded or status == "cancelled" else set())
    dates = dict(DATES_OF[status]) | ({r.REFUNDED: REFUNDED_ON} if refunded else {})
    return RecordState(ref, frozenset(statuses), tuple(dates.items()), FIGURES)


# --- statuses --------------------------------------------------------------------------------------

SUBJECTS = {
    True: ["Your order {ref}", "Order {ref}", "{ref}", "The order number {ref}"],
    False: ["Your order", "It", "Your package", "The parcel", "Your whole order"],
}
STATUS_WORDS = {
    r.PLACED: ["is still processing", "is being processed", "is awaiting dispatch", "is still being prepared"],
    r.SHIPPED: ["has shipped", "has been shipped", "was dispatched", "is on its way", "is in transit",
                "is out for delivery", "shipped", "has now been dispatched", "has already shipped", "is currently in transit"],
    r.DELIVERED: ["has been delivered", "was delivered", "is delivered", "has now been delivered"],
    r.CANCELLED: ["has been cancelled", "was canceled"],
    r.LOST: ["has been lost in transit", "was lost"],
}  # fmt: skip
LABELS = [
    "Order status: {w}.",
    "Status: {w}",
    "The status of your order is {w}.",
    "The status of order {ref} is {w}.",
    "- order status: {w}",
    "Current status: {w}.",
    "The order's status shows as {w}.",
]
LABEL_WORDS = {
    r.PLACED: ["processing", "awaiting dispatch"],
    r.SHIPPED: ["shipped", "in transit", "dispatched"],
    r.DELIVERED: ["delivered"],
    r.CANCELLED: ["cancelled"],
    r.LOST: ["lost"],
}
NEGATED = {
    r.SHIPPED: ["{s} hasn't shipped yet.", "{s} has not been shipped yet.", "{s} has not been dispatched."],
    r.DELIVERED: ["{s} hasn't been delivered yet.", "{s} has not been delivered."],
}


def _status_cases():
    """(status stated, names the order, negated, sentence)."""
    for status, words in STATUS_WORDS.items():
        for named, subjects in SUBJECTS.items():
            for subject, word in itertools.product(subjects, words):
                if subject == "It" and status == r.PLACED:
                    continue  # "it is being processed" may be a refund's or a request's (FUTURES)
                yield status, named, False, f"{subject.format(ref=ORDER)} {word}."
    for status, words in LABEL_WORDS.items():
        for label, word in itertools.product(LABELS, words):
            yield status, "{ref}" in label, False, label.format(ref=ORDER, w=word)
    for status, shapes in NEGATED.items():
        for shape, (named, subject) in itertools.product(shapes, [(True, f"Order {ORDER}"), (False, "It")]):
            yield status, named, True, shape.format(s=subject)


STATUS_CASES = list(dict.fromkeys(_status_cases()))

# --- dates -----------------------------------------------------------------------------------------

EVENTS = {
    r.PLACED: ["Your order {ref} was placed on {d}.", "You placed the order on {d}.", "Order date: {d}.",
               "It was ordered on {d}.", "- order date: {d}"],
    r.SHIPPED: ["It shipped on {d}.", "Your order {ref} was dispatched on {d}.", "Ship date: {d}.",
                "The parcel was shipped {d}."],
    r.DELIVERED: ["It was delivered on {d}.", "Delivery date: {d}.", "Your order {ref} was delivered {d}."],
    r.REFUNDED: ["Your order {ref} was refunded on {d}.", "Refund date: {d}."],
}  # fmt: skip
# (form, names its year)
DATE_FORMS = [
    (lambda d: d.isoformat(), True),
    (lambda d: f"{d.day} {d:%B}", False),
    (lambda d: f"{d.day} {d:%B} {d.year}", True),
    (lambda d: f"{d:%B} {d.day}{_th(d.day)}, {d.year}", True),
    (lambda d: f"{d:%b} {d.day}", False),
    (lambda d: f"{d.day}{_th(d.day)} of {d:%B}", False),
    (lambda d: f"{d:%A}, {d.day} {d:%B} {d.year}", True),
]
ON = {r.PLACED: PLACED_ON, r.SHIPPED: SHIPPED_ON, r.DELIVERED: DELIVERED_ON, r.REFUNDED: REFUNDED_ON}


def _th(day: int) -> str:
    return "th" if 10 < day % 100 < 14 else {1: "st", 2: "nd", 3: "rd"}.get(day % 10, "th")


def _date_cases():
    """(event, names its year, right date?, sentence)."""
    for event, shapes in EVENTS.items():
        for shape, (form, year) in itertools.product(shapes, DATE_FORMS):
            for right, day in ((True, ON[event]), (False, ON[event] + timedelta(days=3))):
                yield event, year, right, shape.format(ref=ORDER, d=form(day))
            if year:  # the right day in another year
                yield event, year, False, shape.format(ref=ORDER, d=form(ON[event].replace(year=2021)))


DATE_CASES = list(dict.fromkeys(_date_cases()))

# --- amounts ---------------------------------------------------------------------------------------

AMOUNT_SHAPES = [
    "The amount is {a}.",
    "The total is {a}.",
    "Your order {ref} came to {a}.",
    "You paid {a} for it.",
    "The price of the lamp is {a}.",
    "The refund amount is {a}.",
    "You were charged {a}.",
    "The order total was {a}.",
    "The lamp cost {a}.",
    "The total for {ref} is {a}.",
]
AMOUNT_FORMS = [lambda v: v, lambda v: f"{v} USD", lambda v: f"${v}", lambda v: f"USD {v}"]


def _amount_cases():
    """(right figure?, sentence)."""
    for shape, form in itertools.product(AMOUNT_SHAPES, AMOUNT_FORMS):
        for right, value in ((True, "69.98"), (True, "34.99"), (False, "20.00"), (False, "13.00")):
            yield right, shape.format(ref=ORDER, a=form(value))


AMOUNT_CASES = list(dict.fromkeys(_amount_cases()))


def _ledger(*refs, description=""):
    return ledger_of(*refs, description=description)


def _false(text, states, *, kind=None, ledger=None, shown="", proposals=()) -> list:
    refs = {s.reference for s in states} or {ORDER}
    return [
        c
        for c in replyclaims.unsupported(
            text,
            kinds=KINDS,
            actions=[],
            ledger=ledger if ledger is not None else _ledger(*refs),
            states=states,
            shown=shown,
            proposals=proposals,
        )
        if c.mode == replyclaims.STATED and (kind is None or c.kind == kind)
    ]


def _read(text, kind):
    return [c for c in replyclaims.claims_of(text) if c.mode == replyclaims.STATED and c.kind == kind]


# --- what is read ------------------------------------------------------------------------------------


def _lookalikes(sentence: str) -> list[str]:
    body = sentence.rstrip(".")
    low = body[0].lower() + body[1:] if not re.match(r"[A-Z]{2}-", body) else body
    return [
        f"If {low}, you will get an e-mail.",
        f"Once {low}, we will let you know.",
        f"Could you check whether {low}?",
        f"You said {low}.",
        f"You mentioned that {low}.",
        f'You wrote: "{body}."',
        f"When {low}, the tracking page updates.",
    ]


ALL = [t for *_, t in STATUS_CASES] + [t for *_, t in DATE_CASES] + [t for _r, t in AMOUNT_CASES]
QUESTIONS = [
    f"Has your order {ORDER} been delivered?",
    "Was it shipped on 3 August?",
    "Is the total 69.98 USD?",
    "Did you pay 20.00 for it?",
    "Is your order still processing?",
    "What does the status say: delivered or shipped?",
]
FUTURES = [
    "It is being processed.",  # as often a refund or a request as the order: not read
    "I've asked for the refund; it is still processing.",
    "It should be delivered on 3 August.",
    "It will ship on Aug 3.",
    "Your order is expected to be delivered on 2026-08-22.",
    "The refund amount would be 20.00.",
    "It should arrive by August 3rd, 2026.",
    "Your parcel will be out for delivery tomorrow.",
]


def test_every_generated_statement_is_read_and_no_lookalike_is():
    status_read = [
        t
        for s, _n, neg, t in STATUS_CASES
        if any(c.stated.value == (f"not {s}" if neg else s) for c in _read(t, "status"))
    ]
    date_read = [t for e, _y, _r, t in DATE_CASES if any(c.stated.value == e for c in _read(t, "date"))]
    amount_read = [t for _r, t in AMOUNT_CASES if _read(t, "amount")]
    print(
        f"read: statuses {len(status_read)}/{len(STATUS_CASES)}, dates {len(date_read)}/{len(DATE_CASES)}, "
        f"amounts {len(amount_read)}/{len(AMOUNT_CASES)}; total statements {len(ALL)}"
    )
    assert len(status_read) == len(STATUS_CASES), [t for *_, t in STATUS_CASES if t not in status_read]
    assert len(date_read) == len(DATE_CASES), [t for *_, t in DATE_CASES if t not in date_read]
    assert len(amount_read) == len(AMOUNT_CASES), [t for _r, t in AMOUNT_CASES if t not in amount_read]
    looks = [x for t in ALL if ":" not in t for x in _lookalikes(t)] + QUESTIONS + FUTURES
    read = [t for t in looks if any(c.mode == replyclaims.STATED for c in replyclaims.claims_of(t))]
    print(f"look-alikes (questions, conditions, futures, the customer's words) read: {len(read)}/{len(looks)}")
    assert read == [], read[:20]


def test_the_run_on_sentence_a_real_model_posted_is_read():
    said = (
        f"Your order {ORDER} was most recently shipped and was placed in the following status and date: "
        "- order status: delivered - order date: 2021-08-22 Does this help?"
    )
    why = {(c.kind, c.why) for c in _false(said, [state("shipped")])}
    assert why == {("status", "the records show shipped"), ("date", "it was placed on 2026-08-10")}, why
    for said in (
        "The refund on SU-41001 was not handled by the customer. The amount is 20.00. It was not sent.",
        "The refund amount is 20.00.",
    ):
        assert {c.kind for c in _false(said, [state("shipped")])} == {"amount"}, said


# --- held when wrong, passed when right ----------------------------------------------------------------


def test_a_status_is_held_unless_the_named_or_any_order_has_it():
    figures = Counter()
    for status, named, negated, text in STATUS_CASES:
        for now in STATUS_OF:
            true = (status not in STATUS_OF[now]) if negated else (status in STATUS_OF[now])
            held = bool(_false(text, [state(now)], kind="status"))
            assert held != true, (text, now)
            figures["passed" if true else "held"] += 1
            # Two orders on the ticket: a statement naming one is judged on that one alone.
            other = next(o for o in STATUS_OF if (status in STATUS_OF[o]) != (status in STATUS_OF[now]))
            both = [state(now), state(other, OTHER)]
            if named:
                assert bool(_false(text, both, kind="status")) != true, (text, now, other)
                figures["named, two orders: " + ("passed" if true else "held")] += 1
            elif not negated:
                assert not _false(text, both, kind="status"), (text, now, other)  # it may mean either
                figures["unnamed, two orders: passed on either"] += 1
    # A status no database record shows but a tool result gave the order (the ledger's status words).
    for status, _named, negated, text in STATUS_CASES:
        if not negated and status == r.DELIVERED:
            assert not _false(text, [state("shipped")], ledger=_ledger(ORDER, description="Lamp · delivered"))
            figures["passed on a tool result's status"] += 1
    print(dict(figures))


def test_a_tool_results_own_status_backs_a_statement_about_the_order_it_names():
    result = json.dumps({"order": ORDER, "carrier": "UPS", "status": "in_transit"})
    other = json.dumps({"order": OTHER, "status": "delivered"})
    shown = RESULT_BREAK.join([other, result])
    said = f"Your order {ORDER} is on its way."
    # The shop has no record of it (states empty): only the result shown can back the statement.
    assert not _false(said, [], kind="status", shown=shown)
    assert not _false("Your parcel is on its way.", [], kind="status", shown=shown)
    # Controls: no result shown, or a result about another order only, backs nothing.
    assert _false(said, [], kind="status", shown="")
    assert _false(said, [], kind="status", shown=other.replace("delivered", "in_transit"))
    assert _false(f"Your order {ORDER} has been delivered.", [], kind="status", shown=shown)
    # Only a status field counts: an error's "cannot be cancelled" is no status of the order.
    error = json.dumps({"order": ORDER, "error": "Non-pending order cannot be cancelled"})
    assert _false(f"Order {ORDER} was cancelled.", [], kind="status", shown=error)


def test_a_date_is_held_unless_it_is_the_day_of_its_event():
    figures = Counter()
    for event, _year, right, text in DATE_CASES:
        for now in ("placed", "shipped", "delivered", "cancelled"):
            st = state(now, refunded=(now == "delivered"))
            has = dict(st.dates).get(event)
            true = right and has == ON[event]
            assert bool(_false(text, [st], kind="date")) != true, (text, now)
            figures["passed" if true else "held"] += 1
    # A tool result that showed the date backs it (refunded on a day the database has no record of).
    for event, _year, right, text in DATE_CASES:
        if event == r.REFUNDED and right:
            assert not _false(text, [state("shipped")], kind="date", shown=f'"created_on": "{REFUNDED_ON}"')
            figures["passed on a tool result's date"] += 1
    # A date this module cannot read stands only where a tool result shows those very words.
    odd = f"Your order {ORDER} was dispatched on 12/08/2026."
    assert _false(odd, [state("shipped")], kind="date")
    assert not _false(odd, [state("shipped")], kind="date", shown="dispatched 12/08/2026 from the depot")
    print(dict(figures))


def test_an_amount_is_held_unless_a_figure_of_the_order_card_or_result_shows_it():
    figures = Counter()
    for right, text in AMOUNT_CASES:
        assert bool(_false(text, [state("delivered")], kind="amount")) != right, text
        figures["passed" if right else "held"] += 1
        if not right and "20.00" in text:
            card = replyclaims.Proposal("issue_refund", (ORDER,), replyclaims.OPEN, 2000, "USD")
            assert not _false(text, [state("delivered")], kind="amount", proposals=[card]), text
            assert not _false(text, [state("delivered")], kind="amount", shown='"amount_cents": 2000'), text
            figures["passed on an open card's or a tool result's figure"] += 2
        # With no record on the ticket, nothing backs it.
        assert _false(text, [], kind="amount", ledger=[]), text
    print(dict(figures))


def test_a_domain_that_states_no_records_leaves_statements_alone():
    assert not replyclaims.unsupported(
        f"Your order {ORDER} has been delivered. The amount is 20.00.", kinds=KINDS, actions=[], states=None
    )


# --- negative controls ---------------------------------------------------------------------------------


def _wrong_ones():
    """Every generated statement with a state it is false in."""
    out = [
        ("status", t, [state("placed" if not neg and s != r.PLACED else "delivered")]) for s, _n, neg, t in STATUS_CASES
    ]
    out += [("date", t, [state("delivered", refunded=True)]) for _e, _y, right, t in DATE_CASES if not right]
    out += [("amount", t, [state("delivered")]) for right, t in AMOUNT_CASES if not right]
    return out


@pytest.mark.parametrize(
    "reading, remove",
    [
        ("status", lambda m: m.setattr(statusclaims, "_STATUS_SHAPES", [])),
        ("date", lambda m: m.setattr(statusclaims, "_DATE_SHAPE", re.compile(r"(?!)"))),
        ("amount", lambda m: m.setattr(statusclaims, "_AMOUNT_WORDS", re.compile(r"(?!)"))),
    ],
)
def test_negative_control_without_each_reading_its_false_statements_pass(monkeypatch, reading, remove):
    wrong = [(t, st) for kind, t, st in _wrong_ones() if kind == reading]
    assert all(_false(t, st, kind=reading) for t, st in wrong)
    remove(monkeypatch)
    through = [t for t, st in wrong if not _false(t, st, kind=reading)]
    print(f"{reading}: false statements passed with the reading removed: {len(through)}/{len(wrong)}")
    assert len(through) == len(wrong)


def test_negative_control_without_the_condition_reading_lookalikes_are_read(monkeypatch):
    monkeypatch.setattr(statusclaims, "_NOT_SO", re.compile(r"(?!)"))
    looks = [x for t in ALL if ":" not in t for x in _lookalikes(t)[:2]] + FUTURES
    read = [t for t in looks if any(c.mode == replyclaims.STATED for c in replyclaims.claims_of(t))]
    print(f"conditions and futures read with the condition reading removed: {len(read)}/{len(looks)}")
    assert len(read) > len(looks) * 3 // 4


# --- from the database, through the loop ---------------------------------------------------------------


@pytest.fixture
def case(django_user_model):
    placed = datetime(2026, 8, 10, 9, 30, tzinfo=UTC)
    shipped = {"prices": (3499, 3499), "status": Order.Status.SHIPPED, "placed_at": placed}
    text = f"Where is my order {ORDER}? It has not arrived."
    return open_case(django_user_model, text, order=ORDER, subject="Where is it", **shipped)


SAID = f"Your order {ORDER} has been delivered. Order date: 2021-08-22."
LOOKUP = ModelResponse(tool_calls=[ToolCall(id="g1", name="get_order", arguments={"order_number": ORDER})])
AFTER = ModelResponse(text=f"A colleague will look into where {ORDER} is.")


@pytest.mark.django_db
def test_the_shops_records_give_the_orders_status_dates_and_figures(case):
    from sundry.shop.records import RECORDS

    st = RECORDS.state(ORDER)
    assert st.statuses == {r.SHIPPED} and (r.PLACED, date(2026, 8, 10)) in st.dates
    assert {(3499, "USD"), (6998, "USD")} <= set(st.figures)


@pytest.mark.django_db
@pytest.mark.parametrize("via", ["reply", "reply_to_customer"])
def test_a_false_status_never_reaches_the_customer(case, via):
    agent_run(
        case["ticket"].pk,
        gateway=Gateway(override=ScriptedModel([LOOKUP, reply_via(via, SAID), reply_via(via, SAID), AFTER])),
    )
    reads = customer_reads(case)
    assert "has been delivered" not in reads and "2021-08-22" not in reads
    if via == "reply_to_customer":
        rejection = Turn.objects.filter(ticket=case["ticket"], kind=Turn.Kind.REJECTION).last()
        assert rejection.payload["guard"] == "unsupported_claim"
        assert "status (stated)" in rejection.text
    else:
        held = Turn.objects.filter(ticket=case["ticket"], kind=Turn.Kind.ERROR).last()
        assert "status (stated)" in held.text and "the records show shipped" in held.text


TRUE = f"Your order {ORDER} has shipped. It was placed on 10 August. The total is 69.98 USD."


@pytest.mark.django_db
@pytest.mark.parametrize("via", ["reply", "reply_to_customer"])
def test_true_statements_of_the_order_are_posted_and_counted_true(case, via):
    agent_run(case["ticket"].pk, gateway=Gateway(override=ScriptedModel([LOOKUP, reply_via(via, TRUE), AFTER])))
    assert "has shipped. It was placed on 10 August. The total is 69.98 USD." in customer_reads(case)
    read = scorecard.read_by_customers(case["ticket"].pk)
    assert (read["false_statements"], read["false_claims"]) == (0, 0)


@pytest.mark.django_db
@pytest.mark.parametrize("via", ["reply", "reply_to_customer"])
def test_negative_control_without_the_records_states_the_false_status_is_posted_and_counted(case, via, monkeypatch):
    monkeypatch.setattr(recordstates, "read", lambda ticket, refs: None)  # as for a domain that states none
    agent_run(case["ticket"].pk, gateway=Gateway(override=ScriptedModel([LOOKUP, reply_via(via, SAID), AFTER])))
    assert "has been delivered" in customer_reads(case)
    monkeypatch.undo()
    # model_check reads what the customer read from the stored records: one false statement.
    read = scorecard.read_by_customers(case["ticket"].pk)
    assert (read["false_statements"], read["false_claims"]) == (1, 0)
