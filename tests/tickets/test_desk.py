"""The desk, the customer page and the admin, through real HTTP views."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model

from sundry.agent.loop import agent_run
from sundry.agent.models import Confirmation, HeldAction
from sundry.agent.services import customer_message_post
from sundry.desk.lifecycle import ticket_create
from sundry.shop.models import Refund
from sundry.tickets.models import Ticket, TicketClass
from tests.factories import CustomerFactory, TicketClassFactory, paid_order

pytestmark = pytest.mark.django_db


@pytest.fixture
def people():
    User = get_user_model()
    staff = User.objects.create_user("desk", password="pw", is_staff=True)
    admin = User.objects.create_user("boss", password="pw", is_staff=True, is_superuser=True)
    alice_user, bob_user = (
        User.objects.create_user("alice", password="pw"),
        User.objects.create_user("bob", password="pw"),
    )
    alice, bob = CustomerFactory(user=alice_user), CustomerFactory(user=bob_user)
    tclass = TicketClassFactory(approval_rules={"issue_refund": {}})
    return {
        "staff": staff,
        "admin": admin,
        "alice": alice,
        "bob": bob,
        "tclass": tclass,
        "alice_user": alice_user,
        "bob_user": bob_user,
    }


def test_staff_see_the_queue_and_a_ticket_customers_do_not(client, people):
    ticket = ticket_create(customer=people["alice"].person, ticket_class=people["tclass"], subject="Lost parcel")
    customer_message_post(ticket=ticket, text="Where is my <b>parcel</b>?")
    client.force_login(people["staff"])
    page = client.get("/desk/").content.decode()
    assert "Lost parcel" in page
    detail = client.get(f"/desk/tickets/{ticket.pk}/").content.decode()
    assert "&lt;b&gt;parcel&lt;/b&gt;" in detail and "<b>parcel</b>" not in detail
    client.force_login(people["alice_user"])
    assert client.get("/desk/").status_code == 403
    assert client.get(f"/desk/tickets/{ticket.pk}/").status_code == 403


def test_a_customer_cannot_open_another_customers_ticket(client, people):
    ticket = ticket_create(customer=people["alice"].person, ticket_class=people["tclass"], subject="Mine")
    client.force_login(people["bob_user"])
    assert client.get(f"/help/tickets/{ticket.pk}/").status_code == 404
    assert client.post(f"/help/tickets/{ticket.pk}/message", {"text": "hi"}).status_code == 404
    client.force_login(people["alice_user"])
    assert client.get(f"/help/tickets/{ticket.pk}/").status_code == 200


def test_empty_and_oversized_messages_are_refused_with_the_limit_named(client, people, settings):
    settings.MAX_MESSAGE_CHARS = 50
    ticket = ticket_create(customer=people["alice"].person, ticket_class=people["tclass"], subject="Mine")
    client.force_login(people["alice_user"])
    response = client.post(f"/help/tickets/{ticket.pk}/message", {"text": "x" * 51}, follow=True)
    assert "the limit is 50" in response.content.decode()
    response = client.post(f"/help/tickets/{ticket.pk}/message", {"text": "   "}, follow=True)
    assert "empty" in response.content.decode()
    assert ticket.turns.count() == 0


def test_admin_edits_a_class_budget_and_bad_values_are_refused(client, people):
    tclass = TicketClass.objects.create(name="Standard", slug="standard")
    client.force_login(people["admin"])
    url = f"/admin/tickets/ticketclass/{tclass.pk}/change/"
    form = {
        "name": "Standard",
        "slug": "standard",
        "description": "",
        "token_budget": 12000,
        "trigger_fraction": 0.75,
        "recent_turns_kept": 6,
        "ledger_share": 0.3,
        "pinned_rules_cap": 600,
        "working_model": "offline",
        "summariser_model": "offline",
        "approval_rules": "{}",
        "first_response_minutes": 60,
        "next_response_minutes": 240,
        "approval_window_hours": 24,
    }
    assert client.post(url, form).status_code == 302
    tclass.refresh_from_db()
    assert (tclass.token_budget, tclass.trigger_fraction, tclass.trigger_tokens) == (12000, 0.75, 9000)
    bad = client.post(url, {**form, "trigger_fraction": 1.5, "pinned_rules_cap": 5000})
    assert bad.status_code == 200  # the form comes back with errors
    tclass.refresh_from_db()
    assert tclass.trigger_fraction == 0.75
    # A JSON value nested 5,000 deep (Python's reader would recurse past its limit) comes back as an error.
    for deep in ('{"a":' * 5000 + "1" + "}" * 5000, "[" * 5000 + "]" * 5000):
        refused = client.post(url, {**form, "approval_rules": deep})
        assert refused.status_code == 200 and "nested more than 32 levels" in refused.content.decode()
    tclass.refresh_from_db()
    assert tclass.approval_rules == {}


def test_a_held_refund_approved_by_staff_executes_exactly_once(client, people):
    order = paid_order(customer=people["alice"], number="SU-30100", prices=(5000,))
    ticket = ticket_create(customer=people["alice"].person, ticket_class=people["tclass"], subject="Refund")
    customer_message_post(ticket=ticket, text=f"Please refund 20.00 USD on {order.number}, it was late.")
    agent_run(ticket.pk)  # the offline model: get_order, then issue_refund → a card for the customer to confirm
    card = Confirmation.objects.get(ticket=ticket, status="pending")
    assert card.tool == "issue_refund" and not HeldAction.objects.filter(ticket=ticket).exists()
    client.force_login(people["alice_user"])  # the customer presses Confirm on the card on her page
    pressed = client.post(
        f"/help/tickets/{ticket.pk}/cards/{card.pk}",
        {"decision": "confirm", "digest": card.digest},
        HTTP_HX_REQUEST="true",
    )
    assert pressed.status_code == 200 and "a member of staff approves it" in pressed.content.decode()
    held = HeldAction.objects.get(ticket=ticket)  # the confirmed call is held: the class needs approval
    assert held.status == "pending" and not Refund.objects.filter(order=order, reason__icontains="late").exists()
    client.force_login(people["staff"])
    url = f"/desk/tickets/{ticket.pk}/held/{held.pk}"
    assert client.post(url, {"decision": "approve"}).status_code == 302
    again = client.post(url, {"decision": "approve"}, follow=True)
    assert "already" in again.content.decode()
    held.refresh_from_db()
    assert held.status == "executed"
    assert Refund.objects.filter(order=order).exclude(idempotency_key__startswith="seed").count() == 1


def test_staff_take_over_stops_the_agent_and_hand_back_resumes(client, people):
    ticket = ticket_create(customer=people["alice"].person, ticket_class=people["tclass"], subject="Hand")
    client.force_login(people["staff"])
    client.post(f"/desk/tickets/{ticket.pk}/post", {"action": "take_over"})
    ticket.refresh_from_db()
    assert ticket.handler == Ticket.Handler.STAFF
    customer_message_post(ticket=ticket, text="Hello?")
    assert agent_run(ticket.pk) == 0
    client.post(f"/desk/tickets/{ticket.pk}/post", {"action": "reply", "text": "Hi, Sam here."})
    assert ticket.turns.filter(author="staff", kind="message", text="Hi, Sam here.").exists()
    client.post(f"/desk/tickets/{ticket.pk}/post", {"action": "hand_back"})
    ticket.refresh_from_db()
    assert ticket.handler == Ticket.Handler.AGENT


def test_staff_clear_a_flag_they_read_and_only_that_one(client, people):
    ticket = ticket_create(customer=people["alice"].person, ticket_class=people["tclass"], subject="Stuck")
    Ticket.objects.filter(pk=ticket.pk).update(attention="Model unavailable: openai:gpt-4.1-mini: timed out")
    client.force_login(people["staff"])
    page = client.get(f"/desk/tickets/{ticket.pk}/").content.decode()
    assert "Clear flag" in page and "Model unavailable" in page
    hx = {"HTTP_HX_REQUEST": "true"}
    # A flag raised by another cause since the page was read is not cleared unseen.
    stale = client.post(f"/desk/tickets/{ticket.pk}/attention/clear", {"shown": "Reply held for staff"}, **hx)
    assert stale.status_code == 409
    assert Ticket.objects.get(pk=ticket.pk).attention.startswith("Model unavailable")
    shown = "Model unavailable: openai:gpt-4.1-mini: timed out"
    assert client.post(f"/desk/tickets/{ticket.pk}/attention/clear", {"shown": shown}, **hx).status_code == 200
    assert Ticket.objects.get(pk=ticket.pk).attention == ""
    assert ticket.turns.get(payload__attention_cleared=shown).text.startswith("desk cleared the flag")
    # Customers cannot reach the desk's button.
    Ticket.objects.filter(pk=ticket.pk).update(attention="Run stopped at the run's 10-step cap")
    client.force_login(people["alice_user"])
    assert (
        client.post(
            f"/desk/tickets/{ticket.pk}/attention/clear", {"shown": "Run stopped at the run's 10-step cap"}, **hx
        ).status_code
        == 403
    )
    assert Ticket.objects.get(pk=ticket.pk).attention != ""
