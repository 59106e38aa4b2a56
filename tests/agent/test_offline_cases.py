"""The offline agent's answers a newcomer would check, through the real loop and the demo shop's tools.

What the customer asks to have done is proposed on a card; they press Confirm (`confirm`) and the agent
goes on. Questions and statements propose nothing, and nothing runs without a confirmation."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model

from sundry.agent.loop import agent_run
from sundry.agent.models import Confirmation, HeldAction
from sundry.agent.services import customer_message_post, ticket_set_handler
from sundry.context.models import PinnedRule, StateValue, Summary
from sundry.desk.lifecycle import ticket_create
from sundry.shop.models import Order, Refund
from tests.agent.test_offline_end_to_end import confirm, last_reply, shop_calls, tools_called
from tests.factories import CustomerFactory, ParcelFactory, TicketClassFactory, TrackingEventFactory, paid_order

pytestmark = pytest.mark.django_db


def named(order, name):
    for item in order.items.all():
        item.product.name = name
        item.product.save(update_fields=["name"])
    return order


@pytest.fixture
def shop():
    customer = CustomerFactory()
    fryer = named(paid_order(customer=customer, number="SU-25386", prices=(12999,)), "Air Fryer 5.5L")
    grinder = named(
        paid_order(customer=customer, number="SU-27531", status=Order.Status.SHIPPED, prices=(4499,)),
        "Burr Coffee Grinder",
    )
    parcel = ParcelFactory(order=grinder, status="in_transit")
    TrackingEventFactory(parcel=parcel, location="Leeds hub", description="In transit")
    tclass = TicketClassFactory(approval_rules={})
    return {"customer": customer, "fryer": fryer, "grinder": grinder, "tclass": tclass}


def say(ticket, text):
    customer_message_post(ticket=ticket, text=text, wake=False)
    agent_run(ticket.pk)
    return last_reply(ticket)


def open_ticket(shop, text):
    ticket = ticket_create(customer=shop["customer"].person, ticket_class=shop["tclass"], subject="Help")
    say(ticket, text)
    return ticket


def no_open_card(ticket):
    return not Confirmation.objects.filter(ticket=ticket, status=Confirmation.Status.PENDING).exists()


def test_status_questions_never_create_a_refund(shop):
    ticket = open_ticket(shop, "My air fryer from SU-25386 arrived cracked. Please refund 40.00 USD.")
    confirm(ticket)
    assert Refund.objects.filter(order=shop["fryer"], amount_cents=4000).count() == 1
    for question in (
        "Is the refund for the air fryer done?",
        "Is the refund for the grinder approved yet?",
        "has my cancellation gone through?",
    ):
        say(ticket, question)
        assert no_open_card(ticket), question  # a question proposes nothing to confirm
    assert Refund.objects.count() == 1 and not HeldAction.objects.filter(ticket=ticket).exists()
    assert Order.objects.get(number="SU-27531").status == Order.Status.SHIPPED
    # The last answers say what was and was not done.
    replies = [t.text for t in ticket.turns.filter(author="agent", kind="message").order_by("number")][-3:]
    assert "40.00 USD" in replies[0] and "SU-25386" in replies[0]
    assert replies[1].startswith("No") and "SU-27531" in replies[1]
    assert "cancellation" in replies[2]


def test_after_compaction_a_status_question_still_moves_no_money(shop):
    ticket = open_ticket(shop, "My air fryer from SU-25386 arrived cracked. Please refund 40.00 USD.")
    confirm(ticket)
    say(ticket, "Where is SU-27531?")
    ticket.refresh_from_db()
    # Everything so far leaves the request behind a summary that names no order.
    Summary.objects.create(
        ticket=ticket,
        covers_through_turn=ticket.last_turn_number,
        fields={},
        text="The customer reported damage and asked about a parcel.",
    )
    reply = say(ticket, "Is the refund for the air fryer done?")
    assert Refund.objects.count() == 1 and not HeldAction.objects.filter(ticket=ticket).exists()
    assert no_open_card(ticket)
    assert "SU-25386" in reply and "40.00 USD" in reply and "SU-27531" not in reply


def test_refund_another_amount_is_a_new_partial_refund_held_by_policy(shop):
    ticket = open_ticket(shop, "The air fryer from SU-25386 arrived cracked. Please refund 40.00 USD.")
    confirm(ticket)
    say(ticket, "Please refund another 10.00 USD on the air fryer order.")
    assert no_open_card(ticket)  # a second refund on the order goes to staff, not onto a card
    held = HeldAction.objects.get(ticket=ticket, status=HeldAction.Status.PENDING)
    assert held.tool == "issue_refund" and held.arguments["amount"] == "10.00"
    assert held.arguments["order_number"] == "SU-25386"
    staff = get_user_model().objects.create_user("approver", is_staff=True)
    from sundry.agent.services import held_action_decide

    held_action_decide(held_id=held.pk, ticket=ticket, approve=True, user=staff, wake=False)
    agent_run(ticket.pk)
    assert sorted(Refund.objects.filter(order=shop["fryer"]).values_list("amount_cents", flat=True)) == [1000, 4000]


def test_facts_are_recorded_for_staff_to_confirm_and_a_constraint_is_acknowledged(shop):
    ticket = open_ticket(shop, "My air fryer from SU-25386 arrived cracked.")
    reply = say(ticket, "please never email me, phone only")
    assert reply.startswith("Understood — we'll only contact you by phone.")
    assert "Thanks for getting in touch" not in reply
    assert PinnedRule.objects.filter(ticket=ticket, text="please never email me, phone only").exists()
    say(ticket, "A refund of 40.00 USD please, I'll keep it.")
    confirm(ticket)
    current = {v.name: v for v in StateValue.objects.filter(ticket=ticket, is_current=True)}
    assert current["contact_preference"].value == "phone" and current["contact_preference"].source == "customer"
    assert current["issue"].value.startswith("Item arrived damaged — order SU-25386")
    assert current["resolution"].value == "refund" and current["amount"].value == "40.00 USD"
    assert not any(v.confirmed for v in current.values())  # inferred until staff confirm
    assert Refund.objects.filter(order=shop["fryer"], amount_cents=4000).count() == 1


def test_orders_are_listed_compactly(shop):
    for i in range(7):
        paid_order(customer=shop["customer"], number=f"SU-3000{i}", prices=(1000,))
    reply = open_ticket(shop, "What else did I order?").turns.filter(author="agent", kind="message").last().text
    assert len([line for line in reply.splitlines() if line.startswith("- ")]) == 5
    assert "and 4 more" in reply


def test_a_lost_parcel_is_met_with_the_remedies_the_shop_allows(shop):
    parcel = shop["grinder"].parcels.get()
    parcel.status = "lost"
    parcel.save(update_fields=["status"])
    ticket = open_ticket(shop, "My grinder from SU-27531 never arrived, it seems lost.")
    reply = last_reply(ticket)
    assert "lost" in reply and "replacement" in reply and "44.99 USD" in reply
    issue = StateValue.objects.get(ticket=ticket, name="issue", is_current=True).value
    assert issue.startswith(("Parcel lost", "Parcel not delivered")) and "SU-27531" in issue
    say(ticket, "A replacement please.")
    assert shop_calls(ticket)[-1] == "offer_replacement"


def test_the_follow_up_questions_of_a_lost_parcel_case_are_answered_not_met_with_a_clarifying_question(shop):
    """ "What are my options?", "When will I see the money?", "Could you check … too?" each get their answer."""
    parcel = shop["grinder"].parcels.get()
    parcel.status = "lost"
    parcel.save(update_fields=["status"])
    ticket = open_ticket(shop, "Where is my order SU-27531? It's been ages.")
    options = say(ticket, "What are my options?")
    assert "replacement" in options and "refund of 44.99 USD" in options and "SU-27531" in options
    say(ticket, "I'd like a full refund for SU-27531 please.")
    confirm(ticket)
    assert Refund.objects.filter(order=shop["grinder"], amount_cents=4499).count() == 1
    when = say(ticket, "When will I see the money?")
    assert "44.99 USD" in when and "original payment method" in when and "bank" in when
    assert Refund.objects.count() == 1 and no_open_card(ticket)  # a question about the money moves none
    other = say(ticket, "Could you check SU-25386 too?")
    assert "SU-25386" in other and "not sure" not in other
    assert shop_calls(ticket)[-1] == "get_order"


def test_what_happened_what_can_you_offer_keep_and_ship_questions_get_answers(shop):
    parcel = shop["grinder"].parcels.get()
    parcel.status = "lost"
    parcel.save(update_fields=["status"])
    ticket = open_ticket(shop, "Hi, order SU-27531 never arrived.")
    for question in ("What happened to it?", "What can you offer?"):
        answer = say(ticket, question)
        assert "lost" in answer and "replacement" in answer and "44.99 USD" in answer, (question, answer)
    say(ticket, "What else did I order?")  # the orders, with what is in them, are in the request now
    kept = say(ticket, "Keep the Air Fryer 5.5L order, I still want it.")
    assert kept == "Understood — I'll leave order SU-25386 as it is."
    placed = named(
        paid_order(customer=shop["customer"], number="SU-27990", status=Order.Status.PLACED, prices=(2500,)),
        "Ceramic Planter",
    )
    assert placed.status == Order.Status.PLACED
    shipping = say(ticket, "When will the Ceramic Planter ship?")
    assert "SU-27990" in shipping and "placed" in shipping, shipping
    assert not Refund.objects.exists() and not HeldAction.objects.filter(ticket=ticket).exists()


def test_negative_control_without_a_case_on_record_options_get_the_clarifying_question(shop):
    ticket = open_ticket(shop, "Hello.")
    assert "not sure" in say(ticket, "What are my options?") or "what you need" in last_reply(ticket)
    assert not Refund.objects.exists()


def test_after_a_hand_back_the_question_asked_during_the_take_over_is_answered(shop):
    ticket = open_ticket(shop, "My air fryer from SU-25386 arrived cracked. Please refund 40.00 USD.")
    staff = get_user_model().objects.create_user("sam", is_staff=True)
    ticket_set_handler(ticket=ticket, handler="staff", user=staff)
    customer_message_post(ticket=ticket, text="Where is my order SU-27531?")  # the agent is not woken
    before = len(tools_called(ticket))
    ticket_set_handler(ticket=ticket, handler="agent", user=staff)
    agent_run(ticket.pk)
    assert tools_called(ticket)[before:][-1] == "track_parcel"
    assert "SU-27531" in last_reply(ticket) and "in transit" in last_reply(ticket)


# --- the three scenarios every mode missed ------------------------------------------------------


def test_a_replacement_asked_for_instead_of_a_refund_is_arranged_once(shop):
    from sundry.shop.models import Contact

    ticket = open_ticket(shop, "The Air Fryer 5.5L from SU-25386 arrived broken.")
    say(ticket, "I was going to ask for my money back, but")
    assert not Refund.objects.exists() and no_open_card(ticket)  # half a sentence proposes nothing
    reply = say(ticket, "actually, not a refund — I'd rather have a replacement.")
    assert "replacement" in reply and "SU-25386" in reply
    [card] = confirm(ticket)
    assert card.tool == "offer_replacement" and card.outcome == "executed"
    again = say(ticket, "Yes, a replacement of the Air Fryer 5.5L.")
    assert "already arranged" in again
    offers = Contact.objects.filter(kind=Contact.Kind.REPLACEMENT_OFFER, order=shop["fryer"])
    assert offers.count() == 1 and not Refund.objects.exists()
    assert not HeldAction.objects.filter(ticket=ticket).exists()
    assert "SU-25386" in say(ticket, "Is the replacement arranged?")


def test_dont_cancel_one_order_leaves_the_other_cancellable(shop):
    customer = shop["customer"]
    keep = named(
        paid_order(customer=customer, number="SU-27849", status=Order.Status.PLACED, prices=(3000,)), "Ceramic Planter"
    )
    drop = named(
        paid_order(customer=customer, number="SU-27887", status=Order.Status.PLACED, prices=(2500,)),
        "Insulated Travel Mug",
    )
    ticket = open_ticket(shop, "Whatever you do, don't cancel SU-27849, I need it for a birthday.")
    say(ticket, "What else did I order recently?")
    say(ticket, "Please cancel the order with the Insulated Travel Mug.")
    [card] = confirm(ticket)
    assert card.arguments["order_number"] == "SU-27887" and card.outcome == "executed"
    reply = last_reply(ticket)
    assert "SU-27887" in reply and "cancelled" in reply
    drop.refresh_from_db(), keep.refresh_from_db()
    assert (drop.status, keep.status) == (Order.Status.CANCELLED, Order.Status.PLACED)
    assert "SU-27887" in say(ticket, "Did that work?")
    # The order the rule names stays protected.
    say(ticket, "Please cancel SU-27849.")
    keep.refresh_from_db()
    assert keep.status == Order.Status.PLACED
    # Asked for in spite of their own flagged rule: the call waits on a card quoting the rule, for them to decide.
    [asked] = Confirmation.objects.filter(ticket=ticket, status=Confirmation.Status.PENDING)
    assert asked.arguments["order_number"] == "SU-27849"
    assert [r["text"] for r in asked.card["rules"]] == [
        "Whatever you do, don't cancel SU-27849, I need it for a birthday."
    ]


def test_an_approved_lost_parcel_refund_is_reported_and_its_amount_answered(shop):
    from sundry.agent.services import held_action_decide

    lost = named(
        paid_order(customer=shop["customer"], number="SU-25847", status=Order.Status.SHIPPED, prices=(40196,)),
        "True Wireless Earbuds",
    )
    ParcelFactory(order=lost, status="lost")
    shop["tclass"].approval_rules = {"issue_refund": {"above": {"USD": 10000}}}
    shop["tclass"].save(update_fields=["approval_rules"])
    ticket = open_ticket(shop, "Where is SU-25847?")
    say(ticket, "It says lost. I want my money back, the full amount.")
    [card] = confirm(ticket)  # confirmed, and then held by the class's threshold
    assert card.outcome == "held"
    reply = last_reply(ticket)
    assert "needs a quick check" in reply and "SU-25847" in reply
    assert "still waiting" in say(ticket, "Is it approved?")
    staff = get_user_model().objects.create_user("desk", is_staff=True)
    held = HeldAction.objects.get(ticket=ticket, status=HeldAction.Status.PENDING)
    held_action_decide(held_id=held.pk, ticket=ticket, approve=True, user=staff, wake=False)
    agent_run(ticket.pk)
    assert "401.96 USD" in last_reply(ticket) and "SU-25847" in last_reply(ticket)
    assert Refund.objects.filter(order=lost, amount_cents=40196).count() == 1
    answer = say(ticket, "How much was it?")
    assert "401.96 USD" in answer and "SU-25847" in answer
    assert "original payment method" in say(ticket, "And it goes to my original card?")
    assert say(ticket, "OK.").startswith("Alright")


def test_a_product_bought_twice_is_answered_from_the_order_that_had_the_refund(shop):
    named(
        paid_order(customer=shop["customer"], number="SU-27932", status=Order.Status.PLACED, prices=(9999,)),
        "Air Fryer 5.5L",
    )
    ticket = open_ticket(shop, "My air fryer from SU-25386 arrived cracked. Please refund 40.00 USD.")
    confirm(ticket)
    say(ticket, "Please refund 5.00 USD on SU-27531, the grinder box was torn.")
    confirm(ticket)
    say(ticket, "What else did I order?")
    reply = say(ticket, "Is the refund for the air fryer done?")
    assert "SU-25386" in reply and "40.00 USD" in reply and "SU-27932" not in reply and "SU-27531" not in reply
    assert Refund.objects.count() == 2 and not HeldAction.objects.filter(ticket=ticket).exists()


# --- questions about what was done, answered from the actions lane -------------------------------

_NOUNS = {
    "refund": ("refunds", "refunded", "refund"),
    "cancel": ("cancellations", "cancelled", "cancel"),
    "return": ("returns", "returned", "return"),
    "replace": ("replacements", "replaced", "replace"),
}
_ASKED = [
    "How many {plural} have you made?",
    "How many {plural} are there on my case?",
    "List my {plural}, please.",
    "Can you list all the {plural}?",
    "What has been {past} so far?",
    "What have you {past}?",
    "How many orders did you {verb}?",
    "Tell me the {plural} you did.",
    "what {plural} have I had?",
]
_NOT_ASKED = [
    "Please {verb} SU-25386.",
    "Can you {verb} my order?",
    "I want a {verb} for the lamp.",
    "Is the {verb} done?",
    "How much was it?",
    "Where is my parcel?",
    "Thanks, that's all.",
]


def test_every_generated_question_about_what_was_done_is_read_with_its_kind():
    from sundry.shop.offline import words as words

    asked = [
        (kind, t.format(plural=p, past=past, verb=verb)) for kind, (p, past, verb) in _NOUNS.items() for t in _ASKED
    ]
    read = [(kind, text) for kind, text in asked if words.actions_question(text) == kind]
    print(f"questions read: {len(read)}/{len(asked)}")
    assert read == asked
    plain = [t.format(verb=verb) for _p, _past, verb in _NOUNS.values() for t in _NOT_ASKED]
    assert [t for t in plain if words.actions_question(t)] == []


def test_how_many_refunds_is_answered_from_the_actions_lane_with_the_total(shop):
    ticket = open_ticket(shop, "My air fryer from SU-25386 arrived cracked. Please refund 40.00 USD.")
    confirm(ticket)
    say(ticket, "Please also refund 10.00 USD on SU-25386 for the delay.")  # a second refund: held by policy
    from sundry.agent.services import held_action_decide

    staff = get_user_model().objects.create_user("sam", is_staff=True)
    held_action_decide(
        held_id=HeldAction.objects.get(ticket=ticket).pk, ticket=ticket, approve=True, user=staff, wake=False
    )
    assert sorted(Refund.objects.filter(order=shop["fryer"]).values_list("amount_cents", flat=True)) == [1000, 4000]
    answer = say(ticket, "How many refunds have you made so far?")
    assert answer.startswith("2 refunds on this case") and "40.00 USD on order SU-25386" in answer
    assert "10.00 USD on order SU-25386" in answer and "In all: 50.00 USD" in answer
    assert no_open_card(ticket) and Refund.objects.count() == 2  # a question proposes and moves nothing
    assert say(ticket, "How many orders did you cancel?") == "No cancellation has been made on this case so far."
