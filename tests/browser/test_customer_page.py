"""The customer page (and the desk's composer) as people use them: a flagged detail reads "You
reported this" until staff handle it, a refused message is explained next to the box that holds
it, and a long conversation opens at its latest message."""

from __future__ import annotations

import pytest
from django.conf import settings

from sundry.agent.failures import run_failed
from sundry.context import services as lanes
from sundry.desk.lifecycle import ticket_create
from sundry.tickets.models import Turn
from sundry.tickets.services import turn_append
from tests.browser.test_live_desk import LIVE, open_as, people  # noqa: F401  (people: fixture)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

IN_VIEW = "(el) => { const r = el.getBoundingClientRect(); return r.bottom > 0 && r.top < window.innerHeight; }"


def test_a_reported_detail_says_so_until_staff_handle_it(browser, live_server_url, people):
    from playwright.sync_api import expect

    ticket = ticket_create(customer=people["alice"].person, ticket_class=people["tclass"], subject="Refund method")
    lanes.state_set(ticket=ticket, name="refund_method", value="store_credit", turn=0, source="staff", confirmed=True)
    customer = open_as(browser, live_server_url, people["alice_user"], f"/help/tickets/{ticket.pk}/")
    details = customer.locator("#panel-details")
    expect(details.locator(".reported")).to_have_count(0)
    details.locator("summary", has_text="That's wrong").click()
    details.locator("input[name=note]").fill("I paid by card")
    details.locator("button", has_text="Tell the team").click()
    expect(details.locator(".reported")).to_have_text("You reported this", timeout=LIVE)
    expect(details.locator("summary", has_text="That's wrong")).to_have_count(0)

    staff = open_as(browser, live_server_url, people["ann"], f"/desk/tickets/{ticket.pk}/")
    staff.locator("#panel-head button", has_text="Mark handled").click()
    expect(staff.locator("#flash")).to_contain_text("Flag marked as handled", timeout=LIVE)
    # Pushed to the customer's open page: no reload.
    expect(details.locator(".reported")).to_have_count(0, timeout=LIVE)
    expect(details.locator("summary", has_text="That's wrong")).to_have_count(1)


def test_a_report_made_while_another_flag_is_up_is_handled_on_its_own(browser, live_server_url, people):
    # The ticket already needs attention for another cause (its run stopped). The customer's
    # report is a reason of its own: "Mark handled" on it ends "You reported this", and the
    # other reason stays with its own button.
    from playwright.sync_api import expect

    ticket = ticket_create(customer=people["alice"].person, ticket_class=people["tclass"], subject="Refund method")
    lanes.state_set(ticket=ticket, name="refund_method", value="store_credit", turn=0, source="staff", confirmed=True)
    turn_append(ticket=ticket, author="customer", text="Where is my refund?")
    assert run_failed(ticket.pk, "it ran past the 270 s time limit")
    customer = open_as(browser, live_server_url, people["alice_user"], f"/help/tickets/{ticket.pk}/")
    details = customer.locator("#panel-details")
    details.locator("summary", has_text="That's wrong").click()
    details.locator("button", has_text="Tell the team").click()
    expect(details.locator(".reported")).to_have_text("You reported this", timeout=LIVE)

    staff = open_as(browser, live_server_url, people["ann"], f"/desk/tickets/{ticket.pk}/")
    notes = staff.locator("#panel-head .attention-note")
    expect(notes).to_have_count(2)
    report = notes.filter(has_text="Customer flagged")
    report.locator("button", has_text="Mark handled").click()
    expect(staff.locator("#flash")).to_contain_text("Flag marked as handled", timeout=LIVE)
    expect(details.locator(".reported")).to_have_count(0, timeout=LIVE)  # pushed to the customer's page
    expect(notes).to_have_count(1, timeout=LIVE)
    expect(notes).to_contain_text("Agent run stopped")
    expect(notes.locator("button")).to_have_text("Clear flag")


def test_a_refused_message_is_explained_next_to_the_composer(browser, live_server_url, people):
    from playwright.sync_api import expect

    ticket = ticket_create(customer=people["alice"].person, ticket_class=people["tclass"], subject="Long story")
    too_long = "x" * (settings.MAX_MESSAGE_CHARS + 1)
    customer = open_as(browser, live_server_url, people["alice_user"], f"/help/tickets/{ticket.pk}/")
    staff = open_as(browser, live_server_url, people["ann"], f"/desk/tickets/{ticket.pk}/")
    for page, box, button in ((customer, "#message-text", "Send"), (staff, "#composer-text", "Add note for the agent")):
        page.fill(box, too_long)
        page.locator("button", has_text=button).click()
        error = page.locator(".composer .form-error")
        expect(error).to_contain_text("the limit is", timeout=LIVE)
        expect(page.locator("#flash")).to_have_text("")  # not at the top of the page
        expect(page.locator(box)).to_have_value(too_long)  # nothing typed is lost
        box_bottom = page.locator(box).bounding_box()
        error_box = error.bounding_box()
        assert 0 <= error_box["y"] - (box_bottom["y"] + box_bottom["height"]) < 120  # right under the box
    # A message that is accepted afterwards clears the old error.
    customer.fill("#message-text", "Short now.")
    customer.locator("button", has_text="Send").click()
    expect(customer.locator(".composer .form-error")).to_have_count(0, timeout=LIVE)
    assert Turn.objects.filter(ticket=ticket, text="Short now.").count() == 1


def test_a_long_ticket_opens_at_its_latest_message(browser, live_server_url, people):
    ticket = ticket_create(customer=people["alice"].person, ticket_class=people["tclass"], subject="A long story")
    for n in range(1, 61):
        turn_append(ticket=ticket, author="customer" if n % 2 else "agent", text=f"Message {n} of a long story.")
    for user, path in ((people["ann"], "/desk/tickets/"), (people["alice_user"], "/help/tickets/")):
        page = open_as(browser, live_server_url, user, f"{path}{ticket.pk}/")
        turns = page.locator("#panel-conversation .turn")
        assert turns.count() == 50  # the latest (live.panels.window); earlier ones load on scroll
        assert page.locator("#panel-conversation .turn-item").first.get_attribute("id").endswith("-11")
        assert turns.last.evaluate(IN_VIEW), path
        assert not turns.first.evaluate(IN_VIEW), path


def test_a_resolved_conversation_asks_for_a_rating_and_the_desk_shows_it(browser, live_server_url, people, screenshots):
    from playwright.sync_api import expect

    from sundry.desk.lifecycle import ticket_set_status
    from tests.browser.test_live_desk import off_loop

    ticket = ticket_create(customer=people["alice"].person, ticket_class=people["tclass"], subject="Kettle replaced")
    turn_append(ticket=ticket, author="customer", text="My kettle arrived broken.")
    turn_append(ticket=ticket, author="agent", text="A replacement is on its way; it arrives on Friday.")
    customer = open_as(browser, live_server_url, people["alice_user"], f"/help/tickets/{ticket.pk}/")
    staff = open_as(browser, live_server_url, people["ann"], f"/desk/tickets/{ticket.pk}/")
    rating = customer.locator("#panel-rating")
    expect(rating).to_be_hidden()  # open: nothing to rate yet
    off_loop(ticket_set_status, ticket=ticket, status="resolved", user=people["ann"])
    expect(rating).to_contain_text("How did we do?", timeout=LIVE)  # pushed: no reload
    rating.locator("label.score", has=customer.locator("input[value='4']")).click()
    rating.locator("textarea[name=comment]").fill("Quick, and the new one works.")
    rating.screenshot(path=str(screenshots / "customer-rating.png"))
    rating.locator("button", has_text="Send rating").click()
    expect(rating.locator(".rated")).to_contain_text("4 of 5 — Good", timeout=LIVE)
    expect(customer.locator("#flash")).to_contain_text("Thank you for rating us.")
    expect(staff.locator("#panel-head .rating-line")).to_contain_text("4 of 5 — Good", timeout=LIVE)
    expect(staff.locator("#panel-head .rating-line")).to_contain_text("credited to AI agent")
