"""A held reply never leaves the customer silent: Sundry's own hand-off, in full once per standing flag.

Through the agent loop with a scripted model whose reply the check holds (an invented refund reference,
asked again, held again): the customer's latest message unanswered gets `handoff.TEXT`, code's words
marked `via: handoff`, on their page and the desk, never in the model's next request as its own words.
Not when a reply answered the message; while the reply-held flag stands and staff have not acted, each
later held message gets the short `handoff.STILL_WITH_TEAM`; the full line again once staff replied, took
the ticket over and back, or cleared the flag; nothing under takeover. The scorecard counts such a
message as handed to staff, not answered.
"""

from __future__ import annotations

import dataclasses

import pytest
from django.test import Client

from sundry.agent import handoff
from sundry.agent.loop import agent_run
from sundry.agent.provider.gateway import Gateway
from sundry.agent.provider.scripted import ScriptedModel
from sundry.agent.services import customer_message_post, staff_reply_post, ticket_set_handler
from sundry.agent.step import agent_step
from sundry.desk.lifecycle import ticket_create
from sundry.evals import scorecard
from sundry.portal.selectors import customer_turns
from sundry.tickets.attention import attention_dismiss, reasons
from sundry.tickets.models import Ticket, Turn
from sundry.tooling.messages import ModelResponse, ToolCall
from tests.factories import CustomerFactory, TicketClassFactory, paid_order

pytestmark = pytest.mark.django_db

# Names a refund reference no record holds: asked again, then held for staff.
INVENTED = ModelResponse(text="Your refund SU-26675-RF01 for 40.00 USD has been issued.")
TRUE = ModelResponse(text="Thanks for your patience; I have your order SU-26675 here.")


@pytest.fixture
def case(django_user_model):
    user = django_user_model.objects.create_user("dana", password="pw")
    staff = django_user_model.objects.create_user("sam", password="pw", is_staff=True)
    customer = CustomerFactory(user=user)
    paid_order(customer=customer, number="SU-26675", prices=(4000,))
    tclass = TicketClassFactory(approval_rules={})
    ticket = ticket_create(customer=customer.person, ticket_class=tclass, subject="Refund")
    page, desk = Client(), Client()
    page.force_login(user)
    desk.force_login(staff)
    return {"ticket": ticket, "staff": staff, "page": page, "desk": desk}


def ask(case, text="Did my refund for SU-26675 go through?", *answers) -> ScriptedModel:
    customer_message_post(ticket=case["ticket"], text=text, wake=False)
    model = ScriptedModel(list(answers))
    agent_run(case["ticket"].pk, gateway=Gateway(override=model))
    return model


def held(case, text="Did my refund for SU-26675 go through?") -> ScriptedModel:
    return ask(case, text, INVENTED, INVENTED)


def handoffs(case) -> list[Turn]:
    return list(
        Turn.objects.filter(ticket=case["ticket"], kind=Turn.Kind.MESSAGE, payload__via="handoff").order_by("number")
    )


def said(case) -> list[str]:
    return [t.text for t in customer_turns(case["ticket"]) if t.author != Turn.Author.CUSTOMER]


def test_a_hold_that_leaves_the_message_unanswered_tells_the_customer_once_in_codes_words(case):
    held(case)
    [turn] = handoffs(case)
    assert turn.text == handoff.TEXT and turn.author == Turn.Author.AGENT
    assert "SU-26675-RF01" not in turn.text  # never the model's text
    notice = Turn.objects.get(ticket=case["ticket"], kind=Turn.Kind.ERROR, payload__has_key="held_reply")
    assert turn.payload["held_turn"] == notice.number < turn.number
    assert said(case) == [handoff.TEXT]
    page = case["page"].get(f"/help/tickets/{case['ticket'].pk}/").content.decode()
    assert "passed your message to our team" in page and "SU-26675-RF01" not in page
    desk = case["desk"].get(f"/desk/tickets/{case['ticket'].pk}/").content.decode()
    assert "passed your message to our team" in desk and "hand-off" in desk
    ticket = Ticket.objects.get(pk=case["ticket"].pk)
    assert any(r.startswith("Reply held for staff") for r in reasons(ticket.attention))  # staff still flagged


def test_the_model_never_reads_the_hand_off_as_its_own_words(case):
    held(case)
    case["ticket"].refresh_from_db()
    model = ask(case, "Hello? Any news on SU-26675?", TRUE)
    shown = [(m.role, m.content or "") for m in model.requests[0].messages]
    assert not any("passed your message to our team" in c for _r, c in shown)
    # The held reply's own notice tells the model what happened, as Sundry's notice.
    assert any(r == "system" and "[system notice] A reply was held for staff" in c for r, c in shown)
    assert said(case) == [handoff.TEXT, TRUE.text]


def test_a_posted_reply_answers_and_no_hand_off_follows(case):
    ask(case, "Did my refund for SU-26675 go through?", TRUE)
    assert not handoffs(case)


def test_a_hold_after_the_message_was_answered_tells_nothing(case):
    """Words posted with a call answer the message: a held reply after them in the same run leaves
    nobody silent."""
    lookup = ModelResponse(
        text="Let me look at order SU-26675.",
        tool_calls=[ToolCall(id="c1", name="get_order", arguments={"order_number": "SU-26675"})],
    )
    ask(case, "Did my refund for SU-26675 go through?", lookup, INVENTED, INVENTED)
    assert Turn.objects.filter(ticket=case["ticket"], payload__has_key="held_reply").exists()
    assert not handoffs(case) and said(case) == ["Let me look at order SU-26675."]


def test_while_the_flag_stands_each_later_message_gets_the_short_line_not_the_apology_again(case):
    held(case)
    held(case, "Hello? Is anyone there?")
    held(case, "Please answer me.")
    assert [t.text for t in handoffs(case)] == [handoff.TEXT, handoff.STILL_WITH_TEAM, handoff.STILL_WITH_TEAM]
    assert Turn.objects.filter(ticket=case["ticket"], payload__has_key="held_reply").count() == 3
    read = scorecard.read_by_customers(case["ticket"].pk)
    assert read["unanswered"] == 0 and read["handed_off"] == 3  # every message answered, none by the agent
    assert "SU-26675-RF01" not in " ".join(said(case))


def test_negative_control_without_the_short_line_later_messages_go_unanswered(case, monkeypatch):
    """The behaviour before: once the full line stood, later held messages got nothing."""
    full = handoff.due
    monkeypatch.setattr(
        handoff, "due", lambda ticket_id: "" if full(ticket_id) == handoff.STILL_WITH_TEAM else full(ticket_id)
    )
    held(case)
    held(case, "Hello? Is anyone there?")
    read = scorecard.read_by_customers(case["ticket"].pk)
    assert len(handoffs(case)) == 1 and read["unanswered"] == 1


def test_told_again_once_staff_cleared_the_flag(case):
    held(case)
    ticket = Ticket.objects.get(pk=case["ticket"].pk)
    shown = next(r for r in reasons(ticket.attention) if r.startswith("Reply held for staff"))
    assert attention_dismiss(ticket=ticket, user=case["staff"], shown=shown)
    held(case, "Hello? Is anyone there?")
    assert [t.text for t in handoffs(case)] == [handoff.TEXT, handoff.TEXT]


def test_told_again_once_staff_replied(case):
    held(case)
    staff_reply_post(ticket=case["ticket"], text="Looking into it now.", user=case["staff"])
    held(case, "Thanks, any news?")
    assert len(handoffs(case)) == 2 and said(case)[-1] == handoff.TEXT


def test_told_again_once_staff_took_the_ticket_over_and_back(case):
    held(case)
    ticket_set_handler(ticket=case["ticket"], handler=Ticket.Handler.STAFF, user=case["staff"])
    ticket_set_handler(ticket=case["ticket"], handler=Ticket.Handler.AGENT, user=case["staff"])
    held(case, "Hello? Is anyone there?")
    assert [t.text for t in handoffs(case)] == [handoff.TEXT, handoff.TEXT]


def test_nothing_under_takeover(case):
    """A step that still ends on a held reply once staff hold the ticket: a person has it, Sundry says nothing."""
    ticket = case["ticket"]
    customer_message_post(ticket=ticket, text="Did my refund for SU-26675 go through?", wake=False)
    ticket_set_handler(ticket=ticket, handler=Ticket.Handler.STAFF, user=case["staff"])
    ticket = Ticket.objects.get(pk=ticket.pk)
    agent_step(ticket, gateway=Gateway(override=ScriptedModel([INVENTED, INVENTED])))
    assert Turn.objects.filter(ticket=ticket, payload__has_key="held_reply").exists()
    assert not handoffs(case)


def test_the_scorecard_counts_the_message_handed_to_staff_not_answered(case):
    held(case)
    read = scorecard.read_by_customers(case["ticket"].pk)
    assert read["unanswered"] == 0 and read["handed_off"] == 1 and read["false_claims"] == 0
    card = scorecard.Scorecard(model="m", runs=1, correct=1, tickets=1, handed_off=read["handed_off"])
    assert "1 handed to staff" in scorecard.render(card)
    assert dataclasses.asdict(card)["handed_off"] == 1
    assert scorecard.verdict(card).startswith("NOT READY") and "handed to staff" in scorecard.verdict(card)


def test_negative_control_switched_off_the_customer_reads_nothing(case, monkeypatch):
    monkeypatch.setattr(handoff, "ENABLED", False)
    held(case)
    assert not handoffs(case) and said(case) == []
    read = scorecard.read_by_customers(case["ticket"].pk)
    assert read["unanswered"] == 1 and read["handed_off"] == 0


def test_after_the_hand_off_a_wake_with_no_new_input_leaves_the_ticket_to_staff(case, monkeypatch):
    """The hand-off answers the message for the run loop too (an agent message, as after a reply whose
    held rest is staff's): a later wake with nothing new does not ask the model again; a new message does."""
    held(case)
    idle = ScriptedModel([])
    agent_run(case["ticket"].pk, gateway=Gateway(override=idle))
    assert idle.requests == []
    ask(case, "Hello? Any news on SU-26675?", TRUE)
    assert said(case) == [handoff.TEXT, TRUE.text]
