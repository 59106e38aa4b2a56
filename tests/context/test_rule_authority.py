"""Rules have authority (staff > customer-stated > model), and flagged candidates are enforced at once."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
from django.contrib.auth import get_user_model

from sundry.agent.loop import agent_run
from sundry.agent.models import Confirmation
from sundry.agent.provider.gateway import Gateway
from sundry.agent.provider.scripted import ScriptedModel
from sundry.agent.services import customer_message_post
from sundry.context import services as lanes
from sundry.context.models import PinnedRule
from sundry.context.rules import RuleRefused, check_scope, plan_pin
from sundry.desk.lifecycle import ticket_create
from sundry.shop.models import Contact
from sundry.tickets.models import Turn
from sundry.tooling.messages import ModelResponse, ToolCall
from tests.factories import CustomerFactory, TicketClassFactory, customer_confirms


def existing(status="active", source="staff", scope="customer", scope_ref="", confirmed=True):
    return SimpleNamespace(status=status, source=source, scope=scope, scope_ref=scope_ref, confirmed=confirmed)


def test_the_model_adds_candidates_and_widens_but_never_narrows_moves_or_revives():
    assert plan_pin(None, source="model", scope="ticket", scope_ref="").status == "candidate"
    assert plan_pin(None, source="staff", scope="ticket", scope_ref="").status == "active"
    with pytest.raises(RuleRefused, match="may not narrow"):
        plan_pin(existing(), source="model", scope="ticket", scope_ref="")
    with pytest.raises(RuleRefused, match="may not narrow"):
        plan_pin(existing(scope="order", scope_ref="SU-1"), source="model", scope="order", scope_ref="SU-2")
    with pytest.raises(RuleRefused, match="dismissed"):
        plan_pin(existing(status="dismissed"), source="model", scope="customer", scope_ref="")
    widened = plan_pin(
        existing(status="candidate", source="customer", scope="ticket", confirmed=False),
        source="model",
        scope="customer",
        scope_ref="",
    )
    assert (widened.create, widened.status, widened.scope) == (False, "candidate", "customer")
    # Staff may do what they decide.
    assert plan_pin(existing(), source="staff", scope="ticket", scope_ref="").scope == "ticket"


def test_scope_ref_must_name_a_verified_order_of_the_ticket():
    assert check_scope("order", "SU-1", orders={"SU-1"}) == "SU-1"
    with pytest.raises(RuleRefused, match="not a verified order"):
        check_scope("order", "SU-404", orders={"SU-1"})
    with pytest.raises(RuleRefused, match="needs scope_ref"):
        check_scope("order", "", orders={"SU-1"})
    with pytest.raises(RuleRefused, match="goes with scope 'order'"):
        check_scope("ticket", "SU-1", orders={"SU-1"})
    with pytest.raises(RuleRefused, match="Scope must be"):
        check_scope("galaxy", "", orders=set())


@pytest.fixture
def case(db):
    customer = CustomerFactory()
    tclass = TicketClassFactory(approval_rules={})
    return {
        "customer": customer,
        "tclass": tclass,
        "ticket": ticket_create(customer=customer.person, ticket_class=tclass, subject="Air fryer"),
        "staff": get_user_model().objects.create_user("desk", password="pw", is_staff=True),
    }


def _run(ticket, *steps):
    model = ScriptedModel(list(steps))
    agent_run(ticket.pk, gateway=Gateway(override=model))
    return model


def _call(name, _id="c1", **arguments):
    return ModelResponse(tool_calls=[ToolCall(id=_id, name=name, arguments=arguments)])


def test_a_flagged_candidate_nobody_pinned_blocks_send_email_and_is_in_the_rules_block(case):
    """A candidate the customer stated (nobody pinned it) is in force at once: the e-mail it forbids is never
    sent on the model's say-so; the customer's card quotes their own rule and only their Confirm could send
    it. Once staff confirm the rule it refuses outright — no card, nothing the customer could press."""
    ticket, customer_id = case["ticket"], case["customer"].customer_id
    customer_message_post(ticket=ticket, text="Please never email me, phone only. Send me the summary.", wake=False)
    rule = PinnedRule.objects.get(ticket=ticket)
    assert rule.status == "candidate" and rule.enforcement == {"block_tools": ["send_email"]}
    model = _run(
        ticket,
        _call("send_email", customer_id=customer_id, subject="Summary", body="..."),
        ModelResponse(text="We can call you instead, if that suits you."),
    )
    rules_block = next(m.content for m in model.requests[0].messages if m.lane == "rules")
    assert "Please never email me, phone only." in rules_block and "unconfirmed" in rules_block
    # Not sent: a card for the customer, quoting the rule the e-mail goes against.
    card = Confirmation.objects.get(ticket=ticket, status="pending")
    assert card.tool == "send_email"
    assert card.card["rules"] == [{"id": rule.pk, "text": rule.text, "turn": rule.turn}]
    result = Turn.objects.get(ticket=ticket, kind=Turn.Kind.TOOL_RESULT, payload__confirmation=card.pk)
    assert json.loads(result.text)["awaiting_customer_confirmation"] is True and result.payload["ok"] is False
    assert not Contact.objects.filter(customer=case["customer"], kind=Contact.Kind.EMAIL).exists()
    # The customer keeps to their rule (Not now): nothing is ever sent.
    assert [c.status for c in customer_confirms(ticket, decline=True)] == ["declined"]
    assert not Contact.objects.filter(customer=case["customer"], kind=Contact.Kind.EMAIL).exists()
    # Staff confirm the rule: now it refuses the e-mail outright, with no card to confirm.
    lanes.rule_decide(ticket=ticket, rule_id=rule.pk, decision="confirm", user=case["staff"], turn=5)
    customer_message_post(ticket=ticket, text="Send me the summary anyway?", wake=False)
    _run(
        ticket,
        _call("send_email", _id="c2", customer_id=customer_id, subject="Summary", body="..."),
        ModelResponse(text="I can't e-mail you; I'll call."),
    )
    rejection = Turn.objects.get(ticket=ticket, kind=Turn.Kind.REJECTION)
    assert rejection.payload["guard"] == "rule" and "Pinned rule" in rejection.text and rule.text in rejection.text
    assert not Confirmation.objects.filter(ticket=ticket, status="pending").exists()
    assert not Contact.objects.filter(customer=case["customer"], kind=Contact.Kind.EMAIL).exists()
    # Staff dismiss it: the check is lifted; the e-mail is an ordinary card, sent once the customer confirms.
    lanes.rule_decide(ticket=ticket, rule_id=rule.pk, decision="dismiss", user=case["staff"], turn=8)
    customer_message_post(ticket=ticket, text="Actually email is fine now, send it.", wake=False)
    _run(
        ticket,
        _call("send_email", _id="c3", customer_id=customer_id, subject="Summary", body="..."),
        ModelResponse(text="Please confirm the card."),
    )
    card = Confirmation.objects.get(ticket=ticket, status="pending")
    assert card.card["rules"] == []
    assert not Contact.objects.filter(customer=case["customer"], kind=Contact.Kind.EMAIL).exists()
    assert [c.outcome for c in customer_confirms(ticket)] == ["executed"]
    assert Contact.objects.filter(customer=case["customer"], kind=Contact.Kind.EMAIL).count() == 1


def test_the_model_cannot_rescope_a_staff_customer_wide_rule(case):
    ticket = case["ticket"]
    lanes.rule_pin(
        ticket=ticket, text="Do not email me ever again.", turn=1, source="staff", scope="customer", user=case["staff"]
    )
    customer_message_post(ticket=ticket, text="Hello again.", wake=False)
    _run(
        ticket,
        _call("pin_constraint", text="Do not email me ever again.", scope="ticket"),
        ModelResponse(text="Noted."),
    )
    rule = PinnedRule.objects.get(ticket=ticket)
    assert (rule.scope, rule.status, rule.source) == ("customer", "active", "staff")
    result = Turn.objects.filter(ticket=ticket, kind=Turn.Kind.TOOL_RESULT).last()
    assert result.text.startswith("ERROR") and "may not narrow" in result.text
    customer_message_post(ticket=ticket, text="And one more thing.", wake=False)
    _run(
        ticket,
        _call("pin_constraint", _id="c2", text="Never text me.", scope="order", scope_ref="SU-00000"),
        ModelResponse(text="Noted."),
    )
    assert not PinnedRule.objects.filter(ticket=ticket, text="Never text me.").exists()


def test_model_pinned_customer_rules_carry_to_new_tickets_only_once_staff_confirm(case):
    ticket = case["ticket"]
    customer_message_post(ticket=ticket, text="I sleep late.", wake=False)
    _run(
        ticket,
        _call("pin_constraint", text="Never call me before noon.", scope="customer"),
        ModelResponse(text="Noted."),
    )
    rule = PinnedRule.objects.get(ticket=ticket)
    assert (rule.status, rule.source, rule.scope) == ("candidate", "model", "customer")
    second = ticket_create(customer=case["customer"].person, ticket_class=case["tclass"], subject="Another")
    assert not PinnedRule.objects.filter(ticket=second).exists()
    lanes.rule_decide(ticket=ticket, rule_id=rule.pk, decision="confirm", user=case["staff"], turn=3)
    third = ticket_create(customer=case["customer"].person, ticket_class=case["tclass"], subject="A third")
    carried = PinnedRule.objects.get(ticket=third)
    assert (carried.text, carried.status) == ("Never call me before noon.", "active")
