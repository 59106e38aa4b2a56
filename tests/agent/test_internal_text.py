"""Outgoing text that quotes internal-only state or staff notes is held for staff, never sent.

Judged from what the customer can read: the stored customer-visible turns and
the customer page's HTML.
"""

from __future__ import annotations

import pytest
from django.test import Client

from sundry.agent import answer
from sundry.agent.guards import callguards as guards
from sundry.agent.loop import agent_run
from sundry.agent.models import HeldAction
from sundry.agent.provider.gateway import Gateway
from sundry.agent.provider.scripted import ScriptedModel
from sundry.agent.services import customer_message_post, held_action_decide, staff_note_post
from sundry.context import internaltext
from sundry.context import services as lanes
from sundry.context.internaltext import gather, quotes
from sundry.desk.lifecycle import ticket_create
from sundry.portal.selectors import customer_turns
from sundry.shop.models import Contact
from sundry.tickets.models import Ticket, Turn
from sundry.tooling.messages import ModelResponse, ToolCall
from tests.factories import CustomerFactory, TicketClassFactory, paid_order

NOTE = "Account under fraud review"


def _internal(*notes, public=()):
    return gather(internal=[("internal note", n) for n in notes], public=list(public))


# --- the check itself ----------------------------------------------------------------------------


def test_a_short_internal_note_quoted_whole_is_caught():
    assert quotes("Hello! Your account under fraud review, sorry.", _internal(NOTE))


def test_three_words_with_two_distinctive_ones_are_caught():
    found = quotes("We can't refund while it is under fraud review.", _internal(NOTE))
    assert [q.text for q in found] == ["under fraud review"]


def test_six_words_of_a_long_note_are_caught_unless_the_customer_wrote_them_too():
    note = "Customer has called four times this week about the same delayed lamp order and is upset"
    reply = "I see you have called four times this week about the lamp."
    assert quotes(reply, _internal(note))
    assert not quotes(reply, _internal(note, public=["I have called four times this week about the lamp!"]))


def test_common_words_and_words_the_customer_used_are_not_a_quote():
    internal = _internal("Refund the lamp order in full once it is back", public=["Can I get a refund for the lamp?"])
    assert not quotes("I have refunded the lamp order.", internal)


def test_what_staff_tell_the_agent_to_say_is_meant_for_the_customer():
    note = "Tell the customer the replacement ships on Monday from Leeds. Don't tell them about the supplier recall."
    internal = gather(internal=[("staff note", internaltext.for_staff_only(note))], public=[])
    assert not quotes("Good news: the replacement ships on Monday from Leeds.", internal)
    assert quotes("It was delayed by the supplier recall.", internal)


# --- through the loop, judged from what the customer reads ---------------------------------------


@pytest.fixture
def case(django_user_model):
    user = django_user_model.objects.create_user("carol", password="pw")
    staff = django_user_model.objects.create_user("sam", password="pw", is_staff=True)
    customer = CustomerFactory(user=user)
    paid_order(customer=customer, number="SU-41001", prices=(12999,))
    ticket = ticket_create(
        customer=customer.person, ticket_class=TicketClassFactory(approval_rules={}), subject="Refund?"
    )
    lanes.state_set(ticket=ticket, name="internal_note", value=NOTE, turn=0, source="staff", confirmed=True, user=staff)
    staff_note_post(ticket=ticket, text="Chargeback history on this card; be careful with refunds.", user=staff)
    customer_message_post(ticket=ticket, text="Why has my refund not come through?", wake=False)
    page = Client()
    page.force_login(user)
    return {"ticket": ticket, "page": page, "customer": customer, "staff": staff}


def _call(name, _id, **arguments):
    return ModelResponse(tool_calls=[ToolCall(id=_id, name=name, arguments=arguments)])


def _customer_reads(case) -> str:
    turns = " ".join(t.text for t in customer_turns(case["ticket"]))
    html = case["page"].get(f"/help/tickets/{case['ticket'].pk}/").content.decode()
    emails = " ".join(c.body for c in Contact.objects.filter(customer=case["customer"]))
    return f"{turns}\n{html}\n{emails}".lower()


LEAKS = [
    ModelResponse(text=f"I'm sorry: {NOTE}, so refunds wait."),
    _call("reply_to_customer", "r1", message=f"Our notes say: {NOTE.lower()}."),
    _call("reply_to_customer", "r1", message="There is a chargeback history on this card, so we are careful."),
]


@pytest.mark.django_db
@pytest.mark.parametrize("leak", LEAKS, ids=["plain-reply", "reply_to_customer", "staff-note"])
def test_a_reply_quoting_internal_text_is_held_and_the_ticket_flagged(case, leak):
    agent_run(
        case["ticket"].pk,
        gateway=Gateway(override=ScriptedModel([leak, ModelResponse(text="A colleague will reply.")])),
    )
    reads = _customer_reads(case)
    assert "fraud review" not in reads and "chargeback history" not in reads
    ticket = Ticket.objects.get(pk=case["ticket"].pk)
    assert "internal_text" in ticket.attention
    if leak.tool_calls:
        held = HeldAction.objects.get(ticket=ticket)
        assert held.status == HeldAction.Status.PENDING and "quotes internal-only text" in held.reason
    else:
        error = Turn.objects.filter(ticket=ticket, kind=Turn.Kind.ERROR).last()
        assert "internal_text" in error.text and "the internal note" in error.text and NOTE in error.text


@pytest.mark.django_db
def test_an_email_quoting_the_internal_note_is_held(case):
    agent_run(
        case["ticket"].pk,
        gateway=Gateway(
            override=ScriptedModel(
                [
                    _call(
                        "send_email",
                        "e1",
                        customer_id=case["customer"].customer_id,
                        subject="Your refund",
                        body=f"Status: {NOTE}.",
                    ),
                    ModelResponse(text="We will be in touch."),
                ]
            )
        ),
    )
    assert not Contact.objects.filter(customer=case["customer"]).exists()
    assert HeldAction.objects.get(ticket=case["ticket"], tool="send_email").status == HeldAction.Status.PENDING


@pytest.mark.django_db
def test_staff_may_approve_the_held_reply_and_then_it_is_sent(case):
    agent_run(case["ticket"].pk, gateway=Gateway(override=ScriptedModel([LEAKS[1], ModelResponse(text="Bye.")])))
    held = HeldAction.objects.get(ticket=case["ticket"])
    held_action_decide(held_id=held.pk, ticket=case["ticket"], approve=True, user=case["staff"], wake=False)
    assert "fraud review" in _customer_reads(case)  # staff chose to send it: their call


@pytest.mark.django_db
def test_an_ordinary_reply_is_posted(case):
    agent_run(
        case["ticket"].pk,
        gateway=Gateway(
            override=ScriptedModel(
                [
                    # (No claim about the refund itself: "your refund is being looked at" with nothing held or
                    # proposed would be an unsupported pending claim, which the reply check asks again.)
                    ModelResponse(text="Sorry for the wait; a colleague will get back to you about it soon.")
                ]
            )
        ),
    )
    assert "a colleague will get back to you" in _customer_reads(case)
    assert "internal_text" not in Ticket.objects.get(pk=case["ticket"].pk).attention


@pytest.mark.django_db
@pytest.mark.parametrize("leak", LEAKS[:2], ids=["plain-reply", "reply_to_customer"])
def test_negative_control_without_the_check_the_note_reaches_the_page(case, leak, monkeypatch):
    """The judge can fail: with the check switched off, the same leak is on the customer's page."""
    monkeypatch.setattr(answer.internaltext, "quotes", lambda text, internal: [])
    monkeypatch.setattr(guards, "quotes", lambda text, internal: [])
    agent_run(case["ticket"].pk, gateway=Gateway(override=ScriptedModel([leak, ModelResponse(text="Bye.")])))
    assert "fraud review" in _customer_reads(case)
