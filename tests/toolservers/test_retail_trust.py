"""Trust over a tool server's tools: rules forbid the server's tools (not the demo shop's), and money
its tools move counts towards the class's running approval totals.

The retail example runs as a real subprocess; an obedient scripted model makes the calls; what
must hold is judged from the store (asked through the same server) and the lanes.
"""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model

from sundry.agent.models import HeldAction
from sundry.agent.services import customer_message_post
from sundry.context import services as lanes
from sundry.context.models import ActionTaken, PinnedRule
from sundry.tickets.services import ticket_create
from sundry.tooling.messages import ModelResponse
from tests.factories import CustomerFactory
from tests.toolservers.test_retail_ticket import EMAIL, USER, call, rejections, results, run, store_order

pytestmark = pytest.mark.django_db(transaction=True)

LAMP = "#W9300146"  # Aarav's one pending order: a desk lamp, 153.23 USD from his gift card


@pytest.fixture
def ticket(retail_server):
    customer = CustomerFactory(name="Aarav Anderson", email=EMAIL)
    return ticket_create(customer=customer, ticket_class=retail_server.ticket_class, subject="My orders")


def _ask_about_the_lamp_and_cancel(ticket):
    customer_message_post(ticket=ticket, wake=False,
                          text=f"Hi, I'm Aarav ({EMAIL}). Where is my desk lamp, order {LAMP}? It has not shipped yet.")
    run(ticket, call("find_user_id_by_email", "c1", email=EMAIL), call("get_user_details", "c2", user_id=USER),
        call("get_order_details", "c3", order_id=LAMP),
        call("cancel_pending_order", "k1", order_id=LAMP, reason="no longer needed"),  # what the rule forbids
        ModelResponse(text="Your lamp has not shipped yet."))


# --- 1. rules target the class's own tools ---------------------------------------------------------------


def test_a_customers_rule_against_cancelling_blocks_the_servers_cancellation(ticket, retail_server):
    customer_message_post(ticket=ticket, wake=False, text="Whatever you do, never cancel any of my orders.")
    rule = PinnedRule.objects.get(ticket=ticket)
    # Mapped onto the tools the class really has (the server's), as staff and the model read it.
    assert rule.status == PinnedRule.Status.CANDIDATE
    assert rule.enforcement == {"block_tools": ["cancel_pending_order"]}
    staff = get_user_model().objects.create_user("ann", password="pw", is_staff=True)
    lanes.rule_decide(ticket=ticket, rule_id=rule.pk, decision="confirm", user=staff, turn=1)

    _ask_about_the_lamp_and_cancel(ticket)

    refused = rejections(ticket)
    assert [(r["call_id"], r["guard"]) for r in refused] == [("k1", "rule")], refused
    assert refused[0]["details"]["rule_id"] == rule.pk
    assert not results(ticket, "cancel_pending_order")  # never sent to the server
    assert store_order(retail_server, LAMP)["status"] == "pending"
    assert not ActionTaken.objects.filter(ticket=ticket).exists()
    assert not HeldAction.objects.filter(ticket=ticket).exists()


def test_a_rule_mapped_onto_other_tools_still_blocks_the_servers_cancellation(ticket, retail_server):
    """A rule whose stored check names the demo shop's tools (made where the class's tools were not
    known: a summary's candidate, a rule carried from another class) is read again at check time
    against the tools of the call."""
    rule = lanes.rule_add_candidate(ticket=ticket, text="Whatever you do, never cancel any of my orders.", turn=0,
                                    source="summariser")
    assert rule.enforcement == {"block_tools": ["cancel_order"]}  # the class's in-process domain's tool

    _ask_about_the_lamp_and_cancel(ticket)

    refused = rejections(ticket)
    assert [(r["call_id"], r["guard"]) for r in refused] == [("k1", "rule")], refused
    assert "Rule flagged (unconfirmed" in refused[0]["reason"]  # a candidate is enforced fail-safe
    assert store_order(retail_server, LAMP)["status"] == "pending"
    assert not ActionTaken.objects.filter(ticket=ticket).exists()

