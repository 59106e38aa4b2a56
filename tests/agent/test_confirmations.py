"""Confirmation cards: an irreversible call runs only when the customer confirms that exact call.

Judged by the shop's own rows (refunds, cancellations, contacts), with a scripted model that
makes the call whatever anyone wrote — as an obedient model following planted text would.
"""

from __future__ import annotations

import json
import threading
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.db import close_old_connections, connection
from django.utils import timezone

from sundry.agent.guards import cards
from sundry.agent.loop import agent_run
from sundry.agent.models import Confirmation
from sundry.agent.provider.gateway import Gateway
from sundry.agent.provider.scripted import ScriptedModel
from sundry.agent.services import ConfirmationError, confirmation_decide, customer_message_post
from sundry.context.models import PinnedRule
from sundry.desk.lifecycle import ticket_create
from sundry.shop.models import Contact, Order, Product, Refund
from sundry.tickets.models import Ticket, Turn
from sundry.tooling.messages import ModelResponse, ToolCall
from tests.factories import CustomerFactory, TicketClassFactory, paid_order

pytestmark = pytest.mark.django_db

BUTTON, TYPED, STAFF = Confirmation.Via.BUTTON, Confirmation.Via.TYPED, Confirmation.Via.STAFF


def call(name, _id="c1", **arguments):
    return ModelResponse(tool_calls=[ToolCall(id=_id, name=name, arguments=arguments)])


def reply(text="Please check the card."):
    return ModelResponse(text=text)


def refund(order="SU-10480", amount="15.00", _id="r1"):
    return call("issue_refund", _id, order_number=order, amount=amount, currency="USD", reason="damaged")


@pytest.fixture
def shop():
    customer = CustomerFactory()
    first = paid_order(customer=customer, number="SU-10480", prices=(6000, 4000))
    Product.objects.filter(pk=first.items.order_by("pk").first().product_id).update(name="Desk Lamp Arc")
    second = paid_order(customer=customer, number="SU-10490", prices=(5000,), status=Order.Status.PLACED)
    tclass = TicketClassFactory(approval_rules={})
    ticket = ticket_create(customer=customer.person, ticket_class=tclass, subject="Lamp")
    return {"customer": customer, "first": first, "second": second, "ticket": ticket, "tclass": tclass}


def run(ticket, *steps):
    agent_run(ticket.pk, gateway=Gateway(override=ScriptedModel(list(steps))))


def fresh(ticket):
    return Ticket.objects.select_related("ticket_class", "customer").get(pk=ticket.pk)


def propose_refund(shop, amount="15.00", order="SU-10480", text="Is the lamp refund going to take long?"):
    """The customer asks only a question; the model (as planted text would have it) proposes a refund anyway."""
    ticket = shop["ticket"]
    customer_message_post(ticket=ticket, text=text, wake=False)
    run(
        ticket,
        call("search_orders", "s1", customer_id=shop["customer"].customer_id),
        call("get_order", "g1", order_number=order),
        refund(order, amount),
        reply(),
    )
    return Confirmation.objects.filter(ticket=ticket).order_by("-pk").first()


def test_a_money_call_becomes_a_card_written_from_the_call_not_run(shop):
    card = propose_refund(shop)
    assert not Refund.objects.exists()
    assert card.status == Confirmation.Status.PENDING and card.tool == "issue_refund"
    assert card.card["title"] == "Refund 15.00 USD on order SU-10480"
    assert card.card["amount"] == "15.00 USD" and "SU-10480" in {e["id"] for e in card.card["entities"]}
    assert "Desk Lamp Arc" in json.dumps(card.card)  # the ledger's description, not the model's words
    result = Turn.objects.get(ticket=shop["ticket"], kind=Turn.Kind.TOOL_RESULT, payload__call_id="r1")
    assert result.payload["ok"] is False and result.payload["confirmation"] == card.pk
    assert json.loads(result.text)["awaiting_customer_confirmation"] is True
    assert card.digest == cards.digest("issue_refund", card.arguments)


def test_confirming_runs_the_call_once_and_tells_the_agent(shop):
    card = propose_refund(shop)
    done = confirmation_decide(
        card_id=card.pk, ticket=fresh(shop["ticket"]), confirm=True, digest=card.digest, via=BUTTON, wake=False
    )
    assert done.outcome == "executed" and done.via == BUTTON
    assert list(Refund.objects.values_list("amount_cents", flat=True)) == [1500]
    event = Turn.objects.filter(ticket=shop["ticket"], kind=Turn.Kind.EVENT, payload__confirmation=card.pk).get()
    assert "The customer confirmed the issue_refund call" in event.text and event.payload["resume"] is True
    with pytest.raises(ConfirmationError, match="already confirmed"):  # replayed: single use
        confirmation_decide(card_id=card.pk, ticket=fresh(shop["ticket"]), confirm=True, digest=card.digest, via=BUTTON)
    assert Refund.objects.count() == 1


@pytest.mark.parametrize("change", ["amount", "order", "tool"])
def test_a_card_confirms_only_its_own_call(shop, change):
    card = propose_refund(shop)
    other = dict(card.arguments)
    if change == "amount":
        other["amount"] = "40.00"
    elif change == "order":
        other["order_number"] = "SU-10490"
    digest = cards.digest("cancel_order" if change == "tool" else "issue_refund", other)
    with pytest.raises(ConfirmationError, match="not the one on your screen"):
        confirmation_decide(card_id=card.pk, ticket=fresh(shop["ticket"]), confirm=True, digest=digest, via=BUTTON)
    with pytest.raises(ConfirmationError):
        confirmation_decide(card_id=card.pk, ticket=fresh(shop["ticket"]), confirm=True, digest=None, via=BUTTON)
    assert not Refund.objects.exists()
    assert Confirmation.objects.get(pk=card.pk).status == Confirmation.Status.PENDING


def test_another_customers_ticket_cannot_confirm_it(shop):
    card = propose_refund(shop)
    stranger = ticket_create(customer=CustomerFactory().person, ticket_class=shop["tclass"], subject="Other")
    with pytest.raises(ConfirmationError, match="no such card"):
        confirmation_decide(card_id=card.pk, ticket=stranger, confirm=True, digest=card.digest, via=BUTTON)
    assert not Refund.objects.exists()


def test_an_expired_card_runs_nothing(shop):
    card = propose_refund(shop)
    Confirmation.objects.filter(pk=card.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    with pytest.raises(ConfirmationError, match="expired"):
        confirmation_decide(card_id=card.pk, ticket=fresh(shop["ticket"]), confirm=True, digest=card.digest, via=BUTTON)
    assert Confirmation.objects.get(pk=card.pk).status == Confirmation.Status.EXPIRED
    assert not Refund.objects.exists()


def test_a_different_call_for_the_same_order_retires_the_older_card(shop):
    first = propose_refund(shop, "15.00")
    second = propose_refund(shop, "20.00", text="Actually, how about 20?")
    assert Confirmation.objects.get(pk=first.pk).status == Confirmation.Status.SUPERSEDED
    with pytest.raises(ConfirmationError, match="replaced by a newer one"):
        confirmation_decide(
            card_id=first.pk, ticket=fresh(shop["ticket"]), confirm=True, digest=first.digest, via=BUTTON
        )
    confirmation_decide(
        card_id=second.pk, ticket=fresh(shop["ticket"]), confirm=True, digest=second.digest, via=BUTTON, wake=False
    )
    assert list(Refund.objects.values_list("amount_cents", flat=True)) == [2000]


def test_the_same_call_proposed_again_is_the_same_card(shop):
    first = propose_refund(shop)
    again = propose_refund(shop, text="Hm?")
    assert first.pk == again.pk and Confirmation.objects.count() == 1


def test_declining_runs_nothing_and_resumes_the_agent(shop):
    card = propose_refund(shop)
    confirmation_decide(
        card_id=card.pk, ticket=fresh(shop["ticket"]), confirm=False, digest=card.digest, via=BUTTON, wake=False
    )
    assert Confirmation.objects.get(pk=card.pk).status == Confirmation.Status.DECLINED
    event = Turn.objects.get(ticket=shop["ticket"], kind=Turn.Kind.EVENT, payload__decision="declined")
    assert event.payload["resume"] is True and "nothing was done" in event.text
    assert not Refund.objects.exists()


def test_staff_confirm_on_the_customers_behalf_with_their_name_and_reason(shop):
    card = propose_refund(shop)
    staff = get_user_model().objects.create_user("agent-kim", is_staff=True)
    with pytest.raises(ConfirmationError, match="how the customer confirmed"):
        confirmation_decide(
            card_id=card.pk,
            ticket=fresh(shop["ticket"]),
            confirm=True,
            digest=card.digest,
            via=STAFF,
            user=staff,
            reason="  ",
        )
    done = confirmation_decide(
        card_id=card.pk,
        ticket=fresh(shop["ticket"]),
        confirm=True,
        digest=card.digest,
        via=STAFF,
        user=staff,
        reason="Said yes on the phone at 14:10",
        wake=False,
    )
    assert (done.via, done.decided_by, done.staff_reason) == (STAFF, staff, "Said yes on the phone at 14:10")
    event = Turn.objects.get(ticket=shop["ticket"], kind=Turn.Kind.EVENT, payload__decision="confirmed")
    assert "agent-kim, on the customer's behalf (Said yes on the phone at 14:10)" in event.text
    assert Refund.objects.count() == 1


def test_a_threshold_still_holds_a_confirmed_call_for_staff(shop):
    shop["tclass"].approval_rules = {"issue_refund": {"above_cents": 1000}}
    shop["tclass"].save()
    card = propose_refund(shop)
    done = confirmation_decide(
        card_id=card.pk, ticket=fresh(shop["ticket"]), confirm=True, digest=card.digest, via=BUTTON, wake=False
    )
    assert done.outcome == "held" and not Refund.objects.exists()
    assert shop["ticket"].held_actions.filter(status="pending").count() == 1


@pytest.mark.parametrize(
    "text,confirms",
    [
        ("yes", True),
        ("Yes please!", True),
        ("yep, go ahead", True),
        ("Confirm.", True),
        ("yes please, thanks", True),
        ("ok", False),
        ("yes but only 10", False),
        ("yes SU-10490", False),
        ("no", False),
        ("not yet", False),
        ("yes?", False),
        ("I'm not sure", False),
        ("yes, and cancel the other one", False),
    ],
)
def test_a_typed_answer_confirms_only_when_it_only_says_yes(shop, text, confirms):
    card = propose_refund(shop)
    customer_message_post(ticket=fresh(shop["ticket"]), text=text, wake=False)
    status = Confirmation.objects.get(pk=card.pk)
    assert (status.status == Confirmation.Status.CONFIRMED) is confirms
    assert Refund.objects.count() == (1 if confirms else 0)
    if confirms:
        assert status.via == TYPED


def test_a_typed_yes_with_two_open_cards_confirms_neither(shop):
    ticket = shop["ticket"]
    customer_message_post(ticket=ticket, text="Hello", wake=False)
    run(
        ticket,
        call("search_orders", "s1", customer_id=shop["customer"].customer_id),
        call("get_order", "g1", order_number="SU-10480"),
        call("get_order", "g2", order_number="SU-10490"),
        refund("SU-10480"),
        call("cancel_order", "x1", order_number="SU-10490", reason="asked"),
        reply(),
    )
    assert Confirmation.objects.filter(status=Confirmation.Status.PENDING).count() == 2
    customer_message_post(ticket=fresh(ticket), text="yes", wake=False)
    assert Confirmation.objects.filter(status=Confirmation.Status.PENDING).count() == 2
    assert not Refund.objects.exists() and Order.objects.get(number="SU-10490").status == Order.Status.PLACED


def test_staff_note_or_tool_text_never_confirms(shop):
    from sundry.agent.services import staff_note_post

    card = propose_refund(shop)
    staff = get_user_model().objects.create_user("agent-lee", is_staff=True)
    staff_note_post(ticket=fresh(shop["ticket"]), text="yes", user=staff)
    assert Confirmation.objects.get(pk=card.pk).status == Confirmation.Status.PENDING
    assert not Refund.objects.exists()


def test_an_email_the_customer_did_not_confirm_is_never_sent(shop):
    ticket = shop["ticket"]
    customer_message_post(ticket=ticket, text="Where is my parcel?", wake=False)
    run(
        ticket,
        call(
            "send_email",
            "e1",
            customer_id=shop["customer"].customer_id,
            subject="Verify your account",
            body="Click http://example.test/login to keep your account.",
        ),
        reply(),
    )
    assert not Contact.objects.exists()
    card = Confirmation.objects.get(ticket=ticket)
    assert card.card["title"] == "Send you an e-mail"
    assert "http://example.test/login" in json.dumps(card.card["message"])  # the customer sees what would go out


def test_a_candidate_rule_becomes_a_card_quoting_it_and_a_confirmed_rule_refuses(shop):
    ticket = shop["ticket"]
    customer_message_post(ticket=ticket, text="Never refund anything to my gift card.", wake=False)
    rule = PinnedRule.objects.get(ticket=ticket)
    assert rule.status == "candidate"
    card = propose_refund(shop, text="Refund the lamp please.")
    assert [r["text"] for r in card.card["rules"]] == [rule.text]
    confirmation_decide(card_id=card.pk, ticket=fresh(ticket), confirm=True, digest=card.digest, via=BUTTON, wake=False)
    assert Refund.objects.count() == 1  # they read their own rule on the card and went ahead
    PinnedRule.objects.filter(pk=rule.pk).update(status="active")  # staff confirm the rule
    customer_message_post(ticket=fresh(ticket), text="And 5 more?", wake=False)
    run(ticket, refund(amount="5.00", _id="r2"), reply())
    assert Turn.objects.filter(ticket=ticket, kind=Turn.Kind.REJECTION, payload__guard="rule").exists()
    assert Refund.objects.count() == 1


@pytest.mark.services
@pytest.mark.django_db(transaction=True)
def test_two_confirms_at_once_run_the_call_once(shop):
    if connection.vendor != "postgresql":
        pytest.skip("row locks need PostgreSQL")
    card = propose_refund(shop)
    barrier, outcomes = threading.Barrier(2), []

    def click():
        try:
            barrier.wait()
            confirmation_decide(
                card_id=card.pk, ticket=fresh(shop["ticket"]), confirm=True, digest=card.digest, via=BUTTON, wake=False
            )
            outcomes.append("ran")
        except ConfirmationError as exc:
            outcomes.append(str(exc))
        finally:
            close_old_connections()

    threads = [threading.Thread(target=click) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert sorted(outcomes)[1] == "ran" and "already confirmed" in sorted(outcomes)[0]
    assert Refund.objects.count() == 1


def test_a_money_card_never_hides_its_figure():
    """A tool server's refund whose amount cannot be read (no currency argument) still shows the figure
    the call carries, and names no order it does not have."""
    from pydantic import BaseModel as Model

    from sundry.tooling.domain import RefundDecl, ToolDecl
    from sundry.tooling.tools import IdField, Tool

    class Args(Model):
        ref: str = IdField("record", "A record")
        amount: str

    tool = Tool(
        name="refund_record",
        description="",
        args_model=Args,
        result_model=Model,
        run=lambda c, a: a,
        side_effect=True,
        consent_action="refund",
    )
    decl = ToolDecl(name="refund_record", write=True, consent="refund", refund=RefundDecl())
    card = cards.build(tool, decl, Args(ref="REC-10001", amount="12.50"))
    assert card.amount == "12.50 (currency not stated)" and card.why == "it moves money"
    assert "REC-10001" in card.title and card.destination == ""
