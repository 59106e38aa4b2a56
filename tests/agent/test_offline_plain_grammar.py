"""Plain requests, phrased many ways: the offline model reads each family, and reads nothing into the rest.

Wordings come from a small grammar (openers × templates × how the order or product is named ×
amounts). Each is worked by the offline model over a small shop built from the shop's real
result models, until it replies or proposes a refund; a reading counts as correct only when the
reply (or the proposed call) carries the right facts. Non-requests and other questions sharing
the words are worked the same way and must get none of these answers and propose no refund.
"""

from __future__ import annotations

import itertools
import json
import time
from datetime import date, datetime, timezone

import pytest

from sundry.context import render
from sundry.shop import offline
from sundry.shop import tools as st
from sundry.shop.offline import OfflineModel
from sundry.shop.offline import asks as asks
from sundry.tooling.messages import Message
from tests.agent.test_offline_model import ALL_SPECS, CUSTOMER, CUSTOMER_ENTRY, build, customer

# number: (status, currency, [(product, quantity, unit cents)], parcel status or None)
SHOP = {
    "SU-20481": ("delivered", "USD", [("Air Fryer 5.5L", 1, 12999)], None),
    "SU-20418": ("delivered", "EUR", [("Desk Lamp", 1, 3999)], None),
    "SU-20502": ("shipped", "USD", [("Burr Coffee Grinder", 1, 4499)], "in_transit"),
    "SU-20533": ("placed", "GBP", [("Insulated Travel Mug", 2, 1500), ("Ceramic Planter", 1, 2500)], None),
}
TRACKING = "1ZA8F3K2Q9X7M4N5"
STATUS_SAID = {"SU-20481": "delivered", "SU-20418": "delivered", "SU-20502": "in transit", "SU-20533": "placed"}
MAX_STEPS = 8


def _order(number: str) -> st.OrderResult:
    status, currency, items, parcel = SHOP[number]
    total = sum(q * p for _, q, p in items)
    return st.OrderResult(
        order_number=number,
        customer_id=CUSTOMER,
        status=status,
        placed_on=date(2026, 11, 2),
        currency=currency,
        total_cents=total,
        items=[
            st.ItemOut(
                item_id=f"itm_{number[-5:]}{n:03d}",
                sku=f"SKU-{number[-5:]}{n}",
                product=name,
                quantity=q,
                unit_price_cents=p,
            )
            for n, (name, q, p) in enumerate(items)
        ],
        payments=[
            st.PaymentOut(
                payment_id=f"pay_{number[-5:]}abc",
                payment_method_id="pm_v1s2a3x4",
                method="Visa",
                status="captured",
                amount_cents=total,
            )
        ],
        parcels=[st.ParcelOut(tracking_number=TRACKING, carrier="UPS", status=parcel)] if parcel else [],
        refunds=[],
        returns=[],
        paid_cents=total,
        refunded_cents=0,
        refundable_cents=total,
        refundable=f"{total / 100:.2f}",
    )


def _search(query: str | None, limit: int) -> st.SearchOrdersResult:
    """As the shop searches: every word of the query names some product in the order."""
    words = [w for w in (query or "").lower().split() if len(w) > 1 and w not in ("the", "my", "a", "an")]
    hits = [
        n for n, (_, _, items, _) in SHOP.items() if all(any(w in name.lower() for name, _, _ in items) for w in words)
    ]
    return st.SearchOrdersResult(
        customer_id=CUSTOMER,
        query=query,
        total_matches=len(hits),
        orders=[
            st.OrderSummary(
                order_number=n,
                status=SHOP[n][0],
                placed_on=date(2026, 11, 2),
                total_cents=sum(q * p for _, q, p in SHOP[n][2]),
                currency=SHOP[n][1],
                items=[name for name, _, _ in SHOP[n][2]],
            )
            for n in hits[:limit]
        ],
    )


def _tool(name: str, args: dict) -> str:
    if name == "get_order":
        number = args.get("order_number")
        return (
            _order(number).model_dump_json() if number in SHOP else f"{render.ERROR_PREFIX}: no order {number} exists"
        )
    if name == "search_orders":
        return _search(args.get("query"), args.get("limit", 20)).model_dump_json()
    if name == "track_parcel":
        return st.TrackParcelResult(
            tracking_number=TRACKING,
            order_number="SU-20502",
            carrier="UPS",
            status="in_transit",
            events=[
                st.TrackingEventOut(
                    at=datetime(2026, 11, 3, tzinfo=timezone.utc), location="Leeds hub", description="In transit"
                )
            ],
        ).model_dump_json()
    if name == "record_fact":
        return json.dumps({**args, "source": "model", "superseded": None})
    return f"{render.ERROR_PREFIX}: not available here"


def work(text: str) -> tuple[list[tuple[str, dict]], str | None]:
    """The calls the model makes on `text` and its reply; stops at a proposed refund (a card, in the loop)."""
    model, req, calls = OfflineModel(), build(customer(text), ledger=[CUSTOMER_ENTRY], tools=ALL_SPECS), []
    for _ in range(MAX_STEPS):
        response = model.complete(req)
        if response.text is not None:
            return calls, response.text
        added = [Message(role="assistant", content="", tool_calls=response.tool_calls)]
        for call in response.tool_calls:
            calls.append((call.name, call.arguments))
            if call.name in ("issue_refund", offline.FOLLOW_UP_TOOL):
                return calls, None
            added.append(
                Message(
                    role="tool", content=_tool(call.name, call.arguments), tool_call_id=call.id, tool_name=call.name
                )
            )
        req = req.model_copy(update={"messages": req.messages + added})
    return calls, None


def refunds(calls):
    return [args for name, args in calls if name == "issue_refund"]


# --- the grammar ----------------------------------------------------------------------------------

OPENERS = ["", "Hi, ", "Sorry to bother you. "]
REFS = ["{n}", "order {n}", "my order {n}", "order number {n}"]
STATUS = [
    "What's the status of {r}?",
    "What is the status of {r}?",
    "What's the current status of {r}?",
    "Can you check the status of {r}?",
    "Could you tell me the status of {r}?",
    "Status of {r}?",
    "{r} status?",
    "How is {r} doing?",
    "How's {r} going?",
    "What's happening with {r}?",
    "What's going on with {r}?",
    "Any update on {r}?",
    "Any news on {r}?",
    "Where does {r} stand?",
    "What's the latest on {r}?",
    "I'd like to know the status of {r}.",
]
CONTENTS = [
    "What's in {r}?",
    "What is in {r}?",
    "What was in {r}?",
    "What's inside {r}?",
    "What did I order in {r}?",
    "What did I buy in {r}?",
    "What items are in {r}?",
    "Which items were in {r}?",
    "What products are in {r}?",
    "What does {r} contain?",
    "What's included in {r}?",
    "Can you tell me what's in {r}?",
    "Could you list the items in {r}?",
    "Show me the contents of {r}.",
    "What exactly is in {r}?",
    "What did we get in {r}?",
]
# product words as a customer says them → the order holding them
PRODUCTS = {
    "air fryer": "SU-20481",
    "Air Fryer 5.5L": "SU-20481",
    "desk lamp": "SU-20418",
    "lamp": "SU-20418",
    "coffee grinder": "SU-20502",
    "grinder": "SU-20502",
    "travel mug": "SU-20533",
    "planter": "SU-20533",
}
WHICH = [
    "What was the order number of {p}?",
    "What's the order number for {p}?",
    "What is the order number of {p}?",
    "Which order was {p} in?",
    "Which order had {p}?",
    "Which order did {p} come in?",
    "Which order did I buy {p} in?",
    "In which order did I get {p}?",
    "What order was {p} in?",
    "What order number was {p}?",
    "Do you know the order number of {p}?",
    "Can you tell me the order number for {p}?",
    "I need the order number for {p}.",
    "Could you find the order number of {p}?",
    "What was the order ID for {p}?",
    "Order number for {p}?",
]
# an amount, as the customer writes it, in the order's currency; "" the bare figure
AMOUNTS = {
    "USD": ["15.00 USD", "$15", "15 dollars", "USD 15", "15"],
    "EUR": ["15.00 EUR", "€15", "15 euros", "EUR 15", "15"],
}
BACK = [
    "I'd like {a} back for {p}.",
    "I would like {a} back for {p}, please.",
    "Can I get {a} back for {p}?",
    "Could I have {a} back on {p}?",
    "I want {a} back for {p}.",
    "Please give me {a} back for {p}.",
    "Can you give me {a} back for {p}?",
    "I need {a} back for {p}, it arrived scratched.",
    "{P} arrived with a dent. I'd like {a} back.",
    "{P} has a scratch. Can I get {a} back?",
    "{a} back for {p} please.",
    "I'll keep {p} if I can get {a} off.",
    "Is it possible to get {a} back for {p}?",
]
# how the item is named: (as in a sentence, order)
ITEMS = [
    ("the lamp", "SU-20418"),
    ("my desk lamp", "SU-20418"),
    ("the Desk Lamp from SU-20418", "SU-20418"),
    ("the air fryer", "SU-20481"),
    ("my Air Fryer", "SU-20481"),
    ("the Air Fryer from SU-20481", "SU-20481"),
]

# Plain non-requests and other questions that share these words.
AMOUNT, ITEM, NUMBER = "15.00 USD", "the air fryer", "SU-20481"
NOT_ASKED = [
    "Where is {n}?",
    "When will {n} arrive?",
    "What's the status of the refund on {n}?",
    "Is the refund for {i} done?",
    "Did I get my money back for {i}?",
    "Did you give me {a} back for {i}?",
    "Have you sent {a} back for {i} yet?",
    "I got {a} back for {i}, thanks.",
    "I already received {a} back for {i}.",
    "Don't give me {a} back, I'd rather keep things as they are.",
    "I paid {a} for {i}.",
    "{I} cost {a}.",
    "I was charged {a} for {i}.",
    "Please note I paid {a} back in March.",
    "How much was {i}?",
    "What's my order number?",
    "What was the order number again?",
    "Which order is this about?",
    "What's in it for me?",
    "What's the status?",
    "How is your day going?",
    "The order number of {i} is {n}.",
    "Thanks, that's all.",
    "What's in the news today?",
    "My order number for {i} was wrong.",
    "Can you tell me the order number format?",
    "I'll be back in the office on Monday.",
    "What's the weather like?",
    "Is there anything in {n} I can still change?",
    "I'd like {i} in blue.",
    "I'd like to send 2 back.",
    "Could you send 2 of them back?",
    "Which order was the cheapest?",
    "In what order did I get the emails?",
    "Which order was delivered?",
    "What order should the items come in?",
]


def grammar():
    """(family, wording, expectation) for every generated request."""
    out = []
    # Openers and orders rotate through the wordings rather than multiply them: the suite stays fast.
    refs, openers = itertools.cycle(SHOP), itertools.cycle(OPENERS)
    for ref, template in itertools.product(REFS, STATUS):
        n = next(refs)
        out.append(("status", next(openers) + template.format(r=ref.format(n=n)), n))
    for ref, template in itertools.product(REFS, CONTENTS):
        n = next(refs)
        out.append(("contents", next(openers) + template.format(r=ref.format(n=n)), n))
    for (said, n), det, template in itertools.product(PRODUCTS.items(), ("the", "my"), WHICH):
        out.append(("which", next(openers) + template.format(p=f"{det} {said}"), (n, said)))
    for (item, n), template in itertools.product(ITEMS, BACK):
        currency = SHOP[n][1]
        for amount in AMOUNTS[currency]:
            text = template.format(a=amount, p=item, P=_capital(item))
            out.append(("back", next(openers) + text, (n, "15.00", currency)))
    return out


def _capital(s: str) -> str:
    return s[:1].upper() + s[1:]


def not_asked():
    return [
        opener + _capital(t.format(n=NUMBER, i=ITEM, a=AMOUNT, I=_capital(ITEM)))
        for opener, t in itertools.product(OPENERS, NOT_ASKED)
    ]


def read_right(family: str, text: str, expected) -> bool:
    calls, answer = work(text)
    if family == "back":
        n, amount, currency = expected
        return [(r["order_number"], r["amount"], r["currency"]) for r in refunds(calls)] == [(n, amount, currency)]
    if refunds(calls) or answer is None:
        return False
    if family == "status":
        return expected in answer and STATUS_SAID[expected] in answer
    if family == "contents":
        return expected in answer and all(name in answer for name, _, _ in SHOP[expected][2])
    n, said = expected
    return n in answer and not any(other in answer for other in SHOP if other != n)


# What an answer of these families looks like, for a wording that should get none of them.
_FAMILY_ANSWER = ("It holds", "holds ", "That's order", "orders with", "on a card")


def misread(text: str) -> bool:
    calls, answer = work(text)
    return (
        bool(refunds(calls))
        or any(mark in (answer or "") for mark in _FAMILY_ANSWER)
        or bool(asks.order_question(text) or asks.order_number_of(text) or asks.amount_back(text))
    )


def test_every_generated_plain_request_is_read_and_no_non_request_is():
    started = time.monotonic()
    cases = grammar()
    wrong = [(f, t) for f, t, expected in cases if not read_right(f, t, expected)]
    figures = {f: sum(1 for c in cases if c[0] == f) for f in ("status", "contents", "which", "back")}
    for family, total in figures.items():
        missed = sum(1 for f, _ in wrong if f == family)
        print(f"{family}: {total - missed}/{total} read correctly")
    plain = not_asked()
    misreads = [t for t in plain if misread(t)]
    print(f"non-requests misread: {len(misreads)}/{len(plain)} ({time.monotonic() - started:.1f} s)")
    assert len(cases) > 700 and len(plain) >= 100
    assert wrong == [] and misreads == []


def test_negative_control_without_the_amount_back_reading_the_figures_fail(monkeypatch):
    """The judge can fail: with "<amount> back" no longer read, the family is missed (the reported bug)."""
    monkeypatch.setattr(asks, "amount_back", lambda text: False)
    cases = [c for c in grammar() if c[0] == "back"]
    right = sum(read_right(f, t, e) for f, t, e in cases)
    print(f"amount back, reading switched off: {right}/{len(cases)} read correctly")
    assert right < len(cases) // 4


def test_negative_control_a_model_that_refunds_the_order_total_is_caught(monkeypatch):
    """The judge checks the stated amount: a refund of the whole order instead is not a correct reading."""
    monkeypatch.setattr(offline, "_explicit_amount", lambda v, latest_only=False: None)
    cases = [c for c in grammar() if c[0] == "back"][:40]
    assert not any(read_right(f, t, e) for f, t, e in cases)


@pytest.mark.parametrize("text", ["I'd like 15.00 USD back for the lamp.", "Can I get $15 back for my desk lamp?"])
def test_an_amount_in_another_currency_than_the_order_is_asked_about_never_converted(text):
    calls, answer = work(text)  # the lamp was paid in EUR
    # No refund proposed, and no figure of its own: the customer names the amount in the order's currency.
    assert refunds(calls) == [] and "paid in EUR" in answer and "15" not in answer.replace("SU-20418", "")
