"""A promise that staff will follow up flags the ticket: queue filters, desk header, and staff clearing it."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model

from sundry.agent.loop import agent_run
from sundry.agent.provider.gateway import Gateway
from sundry.agent.provider.scripted import ScriptedModel
from sundry.agent.services import customer_message_post
from sundry.desk.lifecycle import ticket_create
from sundry.desk.selectors import queue_for
from sundry.tickets.attention import FOLLOW_UP_PREFIX, REASON_LIMIT, with_follow_up, without_follow_up
from sundry.tickets.models import Turn
from sundry.tooling.messages import ModelResponse, ToolCall
from tests.factories import CustomerFactory, TicketClassFactory

REASON = "second refund on the air fryer order needs a decision"


def test_a_follow_up_is_added_after_another_reason_and_replaces_an_earlier_follow_up():
    line = f"{FOLLOW_UP_PREFIX} (turn 4): {REASON}"
    assert with_follow_up("", line) == line
    breaker = "Compaction breaker: 3 compactions in a row failed"
    both = with_follow_up(breaker, line)
    assert both.startswith(breaker) and both.endswith(REASON)  # the breaker's prefix still trips its filter
    again = with_follow_up(both, f"{FOLLOW_UP_PREFIX} (turn 9): call the customer after 6pm")
    assert again.count(FOLLOW_UP_PREFIX) == 1 and again.endswith("after 6pm") and again.startswith(breaker)
    assert without_follow_up(again) == breaker and without_follow_up(line) == ""
    long = with_follow_up("x" * 190, f"{FOLLOW_UP_PREFIX} (turn 4): " + "y" * 400)
    assert long.startswith("x" * 190 + " · ") and len(long) <= 190 + 3 + REASON_LIMIT  # each reason bounded


@pytest.mark.django_db
def test_the_agent_promising_a_follow_up_flags_the_ticket_for_the_queue_and_the_desk(client):
    User = get_user_model()
    staff = User.objects.create_user("desk", password="pw", is_staff=True)
    ticket = ticket_create(customer=CustomerFactory().person, ticket_class=TicketClassFactory(), subject="Air fryer")
    customer_message_post(ticket=ticket, text="Please refund another 10.00 USD on the air fryer.", wake=False)
    model = ScriptedModel(
        [
            ModelResponse(tool_calls=[ToolCall(id="f1", name="request_staff_follow_up", arguments={"reason": REASON})]),
            ModelResponse(text="A member of our support staff will follow up with you shortly."),
        ]
    )
    agent_run(ticket.pk, gateway=Gateway(override=model))
    ticket.refresh_from_db()
    assert ticket.attention.startswith(FOLLOW_UP_PREFIX) and ticket.attention.endswith(REASON)
    assert "request_staff_follow_up" in {t.name for t in model.requests[0].tools}
    assert ticket in queue_for(staff, needs="attention") and ticket in queue_for(staff, needs="followup")
    assert ticket not in queue_for(staff, needs="flagged")

    client.force_login(staff)
    assert "follow-up" in client.get("/desk/?needs=followup").content.decode()
    page = client.get(f"/desk/tickets/{ticket.pk}/").content.decode()
    head = page[page.index('class="ticket-head"') : page.index("</section>", page.index('class="ticket-head"'))]
    assert REASON in head and "Mark handled" in head

    client.post(f"/desk/tickets/{ticket.pk}/attention/clear")
    ticket.refresh_from_db()
    assert ticket.attention == "" and ticket not in queue_for(staff, needs="attention")
    assert Turn.objects.filter(ticket=ticket, payload__follow_up_resolved=True).exists()
