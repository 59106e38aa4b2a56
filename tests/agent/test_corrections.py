"""Corrections supersede: "wrong number, it's …" or a staff correction marks the earlier ledger entry,
and a write on it goes to a card naming both. Judged by the ledger's rows, the cards and the shop's rows."""

from __future__ import annotations

import itertools
import random

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from sundry.agent.loop import agent_run
from sundry.agent.models import Confirmation
from sundry.agent.provider.gateway import Gateway
from sundry.agent.provider.scripted import ScriptedModel
from sundry.agent.services import confirmation_decide, customer_message_post
from sundry.context import corrections
from sundry.context.models import LedgerEntry
from sundry.context.render import render_ledger
from sundry.context.selectors import lane_snapshot
from sundry.desk.lifecycle import ticket_create
from sundry.shop.models import Order, Refund
from sundry.tickets.models import Ticket
from sundry.tooling.messages import ModelResponse, ToolCall
from tests.factories import CustomerFactory, TicketClassFactory, paid_order

# --- which messages correct: wordings from a grammar, not from one case -----------------------------

OLD, NEW = "SU-10480", "SU-10490"
_OPENERS = ["", "Sorry, ", "Oops, ", "Ah, ", "Hi again. ", "Apologies — "]
_SAYS_WRONG = [
    "wrong number",
    "I gave you the wrong order number",
    "that was a typo",
    "I mistyped it",
    "my mistake",
    "my bad",
    "I misread the receipt",
    "scratch that",
    "that number is incorrect",
    "I mixed up the numbers",
]
_GIVES_NEW = [
    "it's {new}",
    "the right one is {new}",
    "it should be {new}",
    "the correct number is {new}",
    "I meant {new}",
    "actually it is {new}",
    "use {new}",
]
_NAMES_BOTH = [
    "It's {new}, not {old}.",
    "Not {old} — I meant {new}.",
    "Please use {new} instead of {old}.",
    "{old} was a typo, it should be {new}.",
    "The order is {new}; I wrote {old} by mistake.",
    "Correction: {new} rather than {old}.",
]
# Messages that bring a second order beside the first: never a correction.
_ADDS = [
    "Also, {new} is late too.",
    "I have another order, {new}, with the same problem.",
    "Sorry, one more thing: {new} also arrived broken.",
    "And my second order {new} hasn't shipped.",
    "Could you check {new} as well?",
    "Both {old} and {new} are missing.",
    "Actually I have two orders: {old} and {new}.",
]
# Plain messages with a new order and no word of a mistake: no correction (the card still shows what it acts on).
_PLAIN = [
    "What about {new}?",
    "{new} is the one with the lamp.",
    "Can you look at {new}?",
    "My order {new} never came.",
    "Where is {new}?",
]


def _wordings():
    corrects = [f"{o}{w}, {g.format(new=NEW)}." for o, w, g in itertools.product(_OPENERS, _SAYS_WRONG, _GIVES_NEW)]
    corrects += [t.format(new=NEW, old=OLD) for t in _NAMES_BOTH]
    others = [t.format(new=NEW, old=OLD) for t in _ADDS + _PLAIN]
    return corrects, others


def _plan(text):
    found = [(v, "order") for v in (OLD, NEW) if v in text]
    return corrections.plan(text, found, [corrections.Known(OLD, "order", 3)])


def test_corrections_are_read_from_a_grammar_of_wordings_and_additions_are_not():
    corrects, others = _wordings()
    assert len(corrects) >= 400
    hits = sum(_plan(t) == [corrections.Correction(OLD, NEW, "order")] for t in corrects)
    false = [t for t in others if _plan(t)]
    print(
        f"\ncorrections read: {hits}/{len(corrects)}; additions or plain taken as corrections: "
        f"{len(false)}/{len(others)} {false}"
    )
    assert hits / len(corrects) >= 0.95
    assert not false
    # Negative control: the same correcting wordings with the old number unknown to the ledger correct nothing.
    assert not any(corrections.plan(t, [(NEW, "order")], []) for t in random.Random(7).sample(corrects, 50))


def test_two_new_numbers_or_two_orders_in_play_correct_nothing_by_guess():
    known = [corrections.Known("SU-1", "order", 3), corrections.Known("SU-2", "order", 3)]
    assert corrections.plan("Wrong number, it's SU-3.", [("SU-3", "order")], known) == []  # which one? tie
    assert (
        corrections.plan(
            "Sorry, typo: SU-3 or SU-4.",
            [("SU-3", "order"), ("SU-4", "order")],
            [corrections.Known("SU-1", "order", 3)],
        )
        == []
    )
    newer = [corrections.Known("SU-1", "order", 3), corrections.Known("SU-2", "order", 5)]
    assert corrections.plan("Wrong number, it's SU-3.", [("SU-3", "order")], newer) == [
        corrections.Correction("SU-2", "SU-3", "order")
    ]


# --- end to end: the ledger, the card, the desk ----------------------------------------------------


def call(name, _id, **arguments):
    return ModelResponse(tool_calls=[ToolCall(id=_id, name=name, arguments=arguments)])


def run(ticket, *steps):
    agent_run(
        ticket.pk, gateway=Gateway(override=ScriptedModel([*steps, ModelResponse(text="Please check the card.")]))
    )


@pytest.fixture
def shop(db):
    customer = CustomerFactory(user=get_user_model().objects.create_user("alice", password="pw"))
    first = paid_order(customer=customer, number=OLD, prices=(6000, 4000))
    second = paid_order(customer=customer, number=NEW, prices=(5000,))
    ticket = ticket_create(customer=customer.person, ticket_class=TicketClassFactory(approval_rules={}), subject="Lamp")
    customer_message_post(ticket=ticket, text=f"My order {OLD} arrived broken.", wake=False)
    run(ticket, call("get_order", "g1", order_number=OLD))
    return {"customer": customer, "ticket": ticket, "first": first, "second": second}


def fresh(ticket):
    return Ticket.objects.select_related("ticket_class", "customer").get(pk=ticket.pk)


def refund_on(order, _id="r1"):
    return call("issue_refund", _id, order_number=order, amount="10.00", currency="USD", reason="damaged")


def test_a_customer_correction_supersedes_and_a_write_on_the_old_number_names_both(shop):
    ticket = shop["ticket"]
    turn = customer_message_post(ticket=ticket, text=f"Sorry, wrong number — it's {NEW}.", wake=False)
    old = LedgerEntry.objects.get(ticket=ticket, value=OLD)
    assert (old.superseded_by, old.superseded_at_turn, old.superseded_source) == (NEW, turn.number, "customer")
    assert LedgerEntry.objects.filter(ticket=ticket, value=NEW, verified=False).exists()
    line = next(x for x in render_ledger(lane_snapshot(fresh(ticket)).ledger).splitlines() if OLD in x)
    assert f"superseded by {NEW} at turn {turn.number}" in line

    run(ticket, refund_on(OLD))  # an obedient model acts on the old number anyway
    card = Confirmation.objects.get(ticket=ticket, status=Confirmation.Status.PENDING)
    assert card.card["corrections"] == [
        {"id": OLD, "by": NEW, "turn": turn.number, "source": "customer", "by_description": ""}
    ]
    assert f"acts on a corrected number ({OLD} was corrected to {NEW})" in card.card["why"]
    assert not Refund.objects.exists()
    # The customer's page names both numbers on the card.
    page = Client()
    page.force_login(shop["customer"].user)
    html = page.get(f"/help/tickets/{ticket.pk}/").content.decode()
    assert f'gave <code class="id">{NEW}</code>' in html and f'This acts on <code class="id">{OLD}</code>' in html
    # Confirming it is the customer's choice, and runs it once.
    confirmation_decide(
        card_id=card.pk, ticket=fresh(ticket), confirm=True, digest=card.digest, via=Confirmation.Via.BUTTON, wake=False
    )
    assert list(Refund.objects.values_list("order__number", flat=True)) == [OLD]


def test_a_write_on_the_corrected_number_carries_no_correction_note(shop):
    ticket = shop["ticket"]
    customer_message_post(ticket=ticket, text=f"Oops, I meant {NEW}.", wake=False)
    run(ticket, call("get_order", "g2", order_number=NEW), refund_on(NEW, "r2"))
    card = Confirmation.objects.get(ticket=ticket, status=Confirmation.Status.PENDING)
    assert card.card["corrections"] == [] and card.arguments["order_number"] == NEW


def test_without_a_correction_the_card_names_no_second_number(shop):
    """Negative control: the same call after a message that adds an order, not corrects one."""
    ticket = shop["ticket"]
    customer_message_post(ticket=ticket, text=f"Also, {NEW} is late too.", wake=False)
    assert not LedgerEntry.objects.filter(ticket=ticket).exclude(superseded_by="").exists()
    run(ticket, refund_on(OLD))
    card = Confirmation.objects.get(ticket=ticket, status=Confirmation.Status.PENDING)
    assert card.card["corrections"] == [] and "corrected" not in card.card["why"]


def test_a_correction_retires_the_open_card_on_the_old_number(shop):
    ticket = shop["ticket"]
    customer_message_post(ticket=ticket, text="Can you sort it out?", wake=False)
    run(ticket, refund_on(OLD))
    card = Confirmation.objects.get(ticket=ticket, status=Confirmation.Status.PENDING)
    customer_message_post(ticket=ticket, text=f"Wait, wrong order! It should be {NEW}.", wake=False)
    card.refresh_from_db()
    assert card.status == Confirmation.Status.SUPERSEDED and "corrected" in card.note
    assert not Refund.objects.exists()


def test_staff_correct_an_entry_from_the_desk_with_their_name_and_bad_input_changes_nothing(shop):
    ticket = shop["ticket"]
    staff = get_user_model().objects.create_user("ann", password="x", is_staff=True)
    desk = Client()
    desk.force_login(staff)
    url = f"/desk/tickets/{ticket.pk}/ledger/correct"
    for bad, says in (
        ({"value": OLD, "correct_to": ""}, "Give the value"),
        ({"value": OLD, "correct_to": OLD}, "cannot replace itself"),
        ({"value": "SU-00000", "correct_to": NEW}, "is not in this ticket"),
    ):
        r = desk.post(url, bad, HTTP_HX_REQUEST="true")
        assert r.status_code == 422 and says in r.content.decode(), bad
    assert not LedgerEntry.objects.filter(ticket=ticket).exclude(superseded_by="").exists()

    customer_message_post(ticket=ticket, text="Can you sort it out?", wake=False)
    run(ticket, refund_on(OLD))
    card = Confirmation.objects.get(ticket=ticket, status=Confirmation.Status.PENDING)
    r = desk.post(url, {"value": OLD, "correct_to": NEW}, HTTP_HX_REQUEST="true")
    assert r.status_code == 200 and "corrected to" in r.content.decode()
    old = LedgerEntry.objects.get(ticket=ticket, value=OLD)
    assert (old.superseded_by, old.superseded_source, old.superseded_by_user) == (NEW, "staff", staff)
    card.refresh_from_db()
    assert card.status == Confirmation.Status.SUPERSEDED
    customer_message_post(ticket=ticket, text="Any news?", wake=False)
    run(ticket, refund_on(OLD, "r3"))
    again = Confirmation.objects.get(ticket=ticket, status=Confirmation.Status.PENDING)
    assert again.card["corrections"][0]["source"] == "staff"
    # The customer cannot reach the desk's correction.
    other = Client()
    other.force_login(shop["customer"].user)
    assert other.post(url, {"value": NEW, "correct_to": OLD}).status_code in (302, 403, 404)
    assert not LedgerEntry.objects.get(ticket=ticket, value=NEW).superseded_by
    assert Order.objects.get(number=OLD).status != Order.Status.CANCELLED
