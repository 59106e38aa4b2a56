"""An order is told only a status its records support: status words the shop does not use, and an order's
condition ("SU-23710 is a damaged order.").

The statements come from a grammar (order named or not × copula × status word, bare or "a <word> order";
"status:" labels), the words taken from the vocabulary and from every status the shop's models and the
example tool server use. Each is judged against the record states of every order status the shop has:
held, unless a tool result's status field shown to the model says that very word. Look-alikes — a
question, a condition, the customer's words said back, sorrow at their report, an item's or a parcel's
condition, a refund's or a return's status — are not read. Through the real loop with the scripted
model, the false statement never reaches the customer's page (a plain reply or `reply_to_customer`);
negative controls: with the reading taken out, the same words are posted and `model_check`'s reading
counts nothing.
"""

from __future__ import annotations

import ast
import functools
import itertools
import json
import re
from datetime import UTC, datetime
from pathlib import Path

import pytest

from sundry.agent.guards import statusclaims
from sundry.agent.loop import agent_run
from sundry.agent.provider.gateway import Gateway
from sundry.agent.provider.scripted import ScriptedModel
from sundry.evals import scorecard
from sundry.shop import models as shop
from sundry.shop.models import Order
from sundry.tickets.models import Turn
from sundry.tooling import records as r
from tests.agent.claimcase import customer_reads, looked_up_then_said, open_case
from tests.agent.test_claim_status import STATUS_OF, _false, state
from tests.factories import ParcelFactory, paid_order

ORDER = "SU-41001"
ROOT = Path(__file__).resolve().parents[2]

OTHER_WORDS = ["completed", "complete", "on hold", "unconfirmed", "pending", "fulfilled", "backordered",
               "awaiting payment", "closed", "failed", "return requested", "exchange requested", "label created",
               "ready for pickup", "undeliverable"]  # fmt: skip
CONDITIONS = ["damaged", "broken", "defective", "faulty", "stolen"]
SUBJECTS = {True: ["Your order {ref}", "Order {ref}", "{ref}", "The order number {ref}", "Your purchase {ref}"],
            False: ["Your order", "The order", "This order", "Your whole order"]}  # fmt: skip
COPULAS = ["is", "is now", "was", "has been", "has already been", "is currently", "has been marked as", "'s"]
SHAPES = ["{h} {w}.", "{h} a {w} order.", "{h} {w}, and we are looking into it."]
LABELS = ["Order status: {w}.", "Order status: - {W} - On hold - Unconfirmed", "The status of your order is {w}.",
          "The status of order {ref} is {w}.", "Status: {w}"]  # fmt: skip


def _cases():
    """(word, names the order, sentence)."""
    for word in OTHER_WORDS + CONDITIONS:
        for named, subjects in SUBJECTS.items():
            for subject, copula, shape in itertools.product(subjects, COPULAS, SHAPES):
                head = subject.format(ref=ORDER) + (copula if copula == "'s" else f" {copula}")
                if copula == "'s" and " a " in shape:
                    continue
                yield word, named, re.sub(r"\ba ([aeiou])", r"an \1", shape.format(h=head, w=word))
        for label in LABELS:
            yield word, "{ref}" in label, label.format(ref=ORDER, w=word, W=word.title())


CASES = list(dict.fromkeys(_cases()))


def lookalikes(word: str) -> list[str]:
    """Sentences with the same words that tell the order no status."""
    return [
        f"If your order {ORDER} is {word}, we will replace it.",
        f"Is your order {ORDER} {word}?",
        f"Could you check whether order {ORDER} is {word}?",
        f"You said your order {ORDER} was {word}.",
        f"You mentioned that the order is {word}.",
        f'You wrote: "My order is {word}."',
        f"I'm sorry your order {ORDER} is {word}.",
        f"I'm sorry to hear that your order was {word}.",
        f"Once your order is {word}, you will get an e-mail.",
        f"Your order {ORDER} arrived {word}.",  # what the customer reported it came as: no status of the records
        f"The parcel is {word}.",
        f"Your lamp is {word}.",
        f"It is {word}.",
        f"The refund for order {ORDER} is {word}.",
        f"The return for {ORDER} is {word}.",
        f"Refund status: {word}.",
        f"Your order {ORDER} is {word} by the courier's own account of it, they say.",
    ]


def test_every_generated_statement_is_read_as_the_word_said():
    missed = [t for w, _n, t in CASES if [s.value for s in statusclaims.statements(t)][:1] != [w.replace("-", " ")]]
    print(f"statements of other status words read: {len(CASES) - len(missed)}/{len(CASES)}")
    assert not missed, missed[:10]


def test_no_lookalike_is_read():
    looks = [t for w in OTHER_WORDS + CONDITIONS for t in lookalikes(w)]
    read = [t for t in looks if statusclaims.statements(t)]
    print(f"look-alikes read: {len(read)}/{len(looks)}")
    assert not read, read[:10]


@pytest.mark.parametrize("status", sorted(STATUS_OF))
def test_other_status_words_are_held_whatever_the_orders_status(status):
    # No order status of the shop makes "completed", "on hold" or "damaged" so.
    held = [t for _w, _n, t in CASES if _false(t, [state(status)], kind=statusclaims.STATUS)]
    assert len(held) == len(CASES), [t for _w, _n, t in CASES if t not in held][:5]


def test_a_tool_results_status_field_saying_the_very_word_backs_it():
    for word, _named, text in CASES:
        field = json.dumps({"order_number": ORDER, "status": word.replace(" ", "_")})
        assert not _false(text, [state("shipped")], shown=field), text
        # Another word in the field, or the word outside a status field, backs nothing.
        other = json.dumps({"order_number": ORDER, "status": "in_transit", "note": word})
        assert _false(text, [state("shipped")], shown=other), text


def test_a_refunds_or_returns_reference_is_not_judged_as_an_order():
    assert not _false(f"{ORDER}-RF01 is pending.", [state("shipped")], shown="")
    assert _false(f"{ORDER} is pending.", [state("shipped")], shown="")


def test_a_lost_order_is_missing_and_a_lost_order_it_is():
    lost, shipped = [state("lost")], [state("shipped")]
    for text in (f"Your order {ORDER} is missing.", f"{ORDER} is a lost order.", f"Order {ORDER} is a lost parcel."):
        assert not _false(text, lost), text
    assert _false(f"Your order {ORDER} is missing.", shipped) and _false(f"{ORDER} is a lost order.", shipped)
    assert not _false(f"{ORDER} is a shipped order.", shipped)


def _status_words_in_use() -> set[str]:
    """Every status the shop's models and the example tool server give a record."""
    words = {
        v.replace("_", " ")
        for model in (shop.Order, shop.Parcel, shop.Payment, shop.Refund, shop.Return)
        for v in model.Status.values
    }
    server = (ROOT / "examples" / "tau2_retail_mcp" / "server.py").read_text()
    for node in ast.walk(ast.parse(server)):
        # `order.status = "return requested"`, `order.status != "pending"`
        if isinstance(node, ast.Assign | ast.Compare):
            targets = node.targets if isinstance(node, ast.Assign) else [node.left]
            if any(isinstance(t, ast.Attribute) and t.attr == "status" for t in targets):
                values = [node.value] if isinstance(node, ast.Assign) else node.comparators
                words |= {v.value for v in values if isinstance(v, ast.Constant) and isinstance(v.value, str)}
    return {re.sub(r"\s*\(.*\)", "", w) for w in words}


# Said of an order, these are read the shop's way or not at all: "received" (as often "we received your
# order") and "placed" (an order is placed whatever its status now); "lost" is read by the shop's words.
NOT_READ = {"received", "placed"}


def test_every_status_word_of_the_shop_and_the_tool_server_is_read():
    words = _status_words_in_use()
    assert {"in transit", "label created", "authorised", "booked", "pending", "return requested"} <= words
    unread = sorted(w for w in words - NOT_READ if not statusclaims.statements(f"Your order {ORDER} is {w}."))
    assert not unread


def test_negative_control_without_the_reading_the_statements_pass(monkeypatch):
    monkeypatch.setattr(statusclaims, "_OTHER_SHAPES", [])
    passed = [t for _w, _n, t in CASES if not _false(t, [state("shipped")], kind=statusclaims.STATUS)]
    print(f"other-word statements passed without the reading: {len(passed)}/{len(CASES)}")
    assert len(passed) > len(CASES) * 9 // 10


RUN_6 = (  # posted by a real model for a shipped order whose parcel is lost (docs/real-model.md, run 6)
    "The order {ref} has been around for a few years. It's been assigned to the customer and the tracking "
    "number 1Z... Order status: - Completed - On hold - Unconfirmed Order details: - Product names: Kitchen, "
    "Air fryer, Stove - Carrier events: 32% reduction - Refund method: Cashback - Resolution: No"
)


def test_the_run_6_reply_is_read_as_a_status_the_records_do_not_show():
    (claim,) = _false(RUN_6.format(ref=ORDER), [state("lost")])
    assert claim.stated.value == "completed" and claim.why == "the records show lost, shipped"


@pytest.mark.django_db
@pytest.mark.parametrize("status", Order.Status.values)
@pytest.mark.parametrize("parcel", [None, *shop.Parcel.Status.values])
def test_every_real_order_status_makes_none_of_them_so(status, parcel):
    """On the shop's own records (`ShopRecords.state`) for every order status and parcel status its models
    have: the shop's word for it stands, no other word and no condition does."""
    from sundry.shop.records import RECORDS

    order = paid_order(number=ORDER, status=status)
    if parcel:
        ParcelFactory(order=order, status=parcel)
    states = [RECORDS.state(ORDER)]
    sample = CASES[::11]  # every word and shape, a tenth of the wordings: 30 record states
    held = [t for _w, _n, t in sample if _false(t, states, kind=statusclaims.STATUS)]
    assert len(held) == len(sample), [t for _w, _n, t in sample if t not in held][:5]
    assert not _false(f"Your order {ORDER} is a {status} order.", states)


# --- from the database, through the loop ---------------------------------------------------------------


@pytest.fixture
def case(django_user_model):
    placed = datetime(2026, 8, 10, 9, 30, tzinfo=UTC)
    shipped = {"prices": (3499, 3499), "status": Order.Status.SHIPPED, "placed_at": placed}
    return open_case(django_user_model, f"Where is {ORDER}?", order=ORDER, subject="Where is it", **shipped)


POSTED = {  # what a real model posted (docs/real-model.md, runs 6 and 8)
    "status": f"The order {ORDER} has been around for a while. Order status: - Completed - On hold - Unconfirmed",
    "condition": f"{ORDER} is a damaged order.",
}
TRUE = f"Your order {ORDER} has shipped and is on its way to you."
AFTER = f"A colleague will look into where {ORDER} is."


_answers = functools.partial(looked_up_then_said, order=ORDER, after=AFTER)


@pytest.mark.django_db
@pytest.mark.parametrize("via", ["reply", "reply_to_customer"])
@pytest.mark.parametrize("what", sorted(POSTED))
def test_the_posted_statements_never_reach_the_customer(case, via, what):
    agent_run(case["ticket"].pk, gateway=Gateway(override=ScriptedModel(_answers(via, POSTED[what]))))
    reads = customer_reads(case)
    assert "Completed" not in reads and "damaged order" not in reads
    if via == "reply_to_customer":
        rejection = Turn.objects.filter(ticket=case["ticket"], kind=Turn.Kind.REJECTION).last()
        assert rejection.payload["guard"] == "unsupported_claim" and "status (stated)" in rejection.text
    else:
        held = Turn.objects.filter(ticket=case["ticket"], kind=Turn.Kind.ERROR).last()
        assert "status (stated)" in held.text and "the records show shipped" in held.text


@pytest.mark.django_db
@pytest.mark.parametrize("via", ["reply", "reply_to_customer"])
def test_the_shops_own_words_for_its_status_are_posted(case, via):
    agent_run(case["ticket"].pk, gateway=Gateway(override=ScriptedModel(_answers(via, TRUE, again=False))))
    assert TRUE in customer_reads(case)
    read = scorecard.read_by_customers(case["ticket"].pk)
    assert (read["false_statements"], read["false_claims"]) == (0, 0)


@pytest.mark.django_db
@pytest.mark.parametrize("via", ["reply", "reply_to_customer"])
@pytest.mark.parametrize("what", sorted(POSTED))
def test_negative_control_without_the_reading_they_are_posted_and_not_counted(case, via, what, monkeypatch):
    monkeypatch.setattr(statusclaims, "_OTHER_SHAPES", [])
    agent_run(case["ticket"].pk, gateway=Gateway(override=ScriptedModel(_answers(via, POSTED[what]))))
    assert POSTED[what].split(". ")[-1] in customer_reads(case)
    read = scorecard.read_by_customers(case["ticket"].pk)
    assert read["false_statements"] == 0


@pytest.mark.django_db
def test_model_check_counts_a_posted_one_a_false_statement(case, monkeypatch):
    monkeypatch.setattr(statusclaims, "_OTHER_SHAPES", [])
    agent_run(case["ticket"].pk, gateway=Gateway(override=ScriptedModel(_answers("reply", POSTED["condition"]))))
    monkeypatch.undo()  # posted by the check without the reading; read back by the check with it
    read = scorecard.read_by_customers(case["ticket"].pk)
    assert (read["false_statements"], read["false_claims"]) == (1, 0)


def test_every_order_status_of_the_shop_is_a_status_the_records_hook_states():
    # The shop's own words are judged on its records; none of them is among the words only a result backs.
    assert set(r.STATUSES) >= set(Order.Status.values)
    assert not any(statusclaims.is_other(v) for v in Order.Status.values)
