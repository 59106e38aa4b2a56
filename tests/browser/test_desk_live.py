"""The desk's queue and a ticket's presence, live in a real browser: a customer's new ticket and
the hold it leads to reach an open queue without a reload, with the counts and badges; staff see
who else is on a ticket and typing, and the customer sees "Support is typing"."""

from __future__ import annotations

import pytest

from sundry.agent.models import HeldAction
from sundry.tickets.models import Ticket
from tests.browser.test_live_desk import LIVE, open_as, people, wait_until  # noqa: F401  (people: fixture)
from tests.factories import paid_order

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_a_customers_new_ticket_and_its_hold_appear_in_an_open_queue(browser, live_server_url, people):
    from playwright.sync_api import expect

    paid_order(customer=people["alice"], number="SU-30100", prices=(5000,))
    queue = open_as(browser, live_server_url, people["ann"], "/desk/")
    expect(queue.locator("#live-status")).to_have_text("Live", timeout=LIVE)
    expect(queue.locator('[data-count="all"]')).to_have_text("0")
    expect(queue.locator('[data-badge="held"]')).to_have_count(0)

    customer = open_as(browser, live_server_url, people["alice_user"], "/help/")
    customer.fill("textarea[name=text]", "Please refund 20.00 USD on SU-30100, it was late.")
    customer.locator("button", has_text="Start a conversation").click()
    customer.wait_for_url("**/help/tickets/*/")
    ticket = Ticket.objects.get(customer=people["alice"].person)

    row = queue.locator(f'#queue-table tr[data-ticket="{ticket.pk}"]')
    expect(row).to_contain_text("Please refund 20.00 USD", timeout=LIVE)  # no reload
    expect(row).to_have_class("arrived")
    expect(queue.locator('[data-count="all"]')).to_have_text("1")
    expect(queue.locator('[data-count="unassigned"]')).to_have_text("1")
    # The worker runs the agent: the refund waits on a card on the customer's page; they press Confirm,
    # the class then holds it for a person, and the queue says so.
    confirm = customer.locator("#panel-cards button", has_text="Confirm")
    expect(confirm).to_be_visible(timeout=20000)
    confirm.click()
    expect(queue.locator('[data-badge="held"]')).to_have_text("1 awaiting approval", timeout=20000)
    expect(row).to_contain_text("1 held")
    assert HeldAction.objects.filter(ticket=ticket, status="pending").count() == 1
    assert queue.evaluate("performance.getEntriesByType('navigation').length") == 1  # never reloaded
    assert wait_until(lambda: not Ticket.objects.filter(pk=ticket.pk, agent_claimed_at__isnull=False).exists())


def test_two_staff_see_each_other_and_the_customer_sees_support_typing(browser, live_server_url, people):
    from playwright.sync_api import expect

    from sundry.desk.lifecycle import ticket_create

    ticket = ticket_create(customer=people["alice"].person, ticket_class=people["tclass"], subject="Two at once")
    ann = open_as(browser, live_server_url, people["ann"], f"/desk/tickets/{ticket.pk}/")
    expect(ann.locator("#presence")).to_be_hidden()
    ben = open_as(browser, live_server_url, people["ben"], f"/desk/tickets/{ticket.pk}/")
    expect(ann.locator("#presence")).to_have_text("ben is viewing this ticket", timeout=LIVE)
    expect(ben.locator("#presence")).to_have_text("ann is viewing this ticket", timeout=LIVE)
    customer = open_as(browser, live_server_url, people["alice_user"], f"/help/tickets/{ticket.pk}/")

    # Ben holds the ticket and writes to the customer.
    ben.locator("#panel-head button", has_text="Take over").click()
    expect(ben.locator("#panel-head")).to_contain_text("Hand back to agent", timeout=LIVE)
    ben.locator("#composer-text").press_sequentially("Hello Alice, ", delay=50)
    expect(ann.locator("#presence")).to_contain_text("ben is typing…", timeout=LIVE)
    expect(customer.locator("#staff-typing")).to_be_visible(timeout=LIVE)
    expect(customer.locator("#staff-typing")).to_have_text("Support is typing…")
    expect(customer.locator("body")).not_to_contain_text("ben")
    # He stops (the box loses focus): both pages follow.
    ben.locator("#panel-head").click()
    expect(ann.locator("#presence")).to_have_text("ben is viewing this ticket", timeout=LIVE)
    expect(customer.locator("#staff-typing")).to_be_hidden(timeout=LIVE)
    # He leaves: his mark goes with his page.
    ben.context.close()
    expect(ann.locator("#presence")).to_be_hidden(timeout=LIVE)
