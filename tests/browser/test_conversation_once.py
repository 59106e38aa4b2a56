"""A customer's message appears exactly once on the customer's page and on the desk."""

from __future__ import annotations

import pytest

from sundry.desk.lifecycle import ticket_create
from sundry.tickets.models import Turn
from tests.browser.test_live_desk import LIVE, LIVE_FRAME, open_as, people, wait_until  # noqa: F401  (people: fixture)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

DUPLICATE_IDS = """(sel) => { const seen = {}; const dup = [];
  document.querySelectorAll(sel).forEach((el) => { if (seen[el.id]) dup.push(el.id); seen[el.id] = 1; });
  return dup; }"""


def test_a_sent_message_shows_once_on_both_pages(browser, live_server_url, people):
    from playwright.sync_api import expect

    ticket = ticket_create(customer=people["alice"].person, ticket_class=people["tclass"], subject="Once")
    # The desk holds the ticket, so no agent reply lands between the sends.
    Ticket = type(ticket)
    Ticket.objects.filter(pk=ticket.pk).update(handler="staff", assigned_to=people["ann"])
    customer = open_as(browser, live_server_url, people["alice_user"], f"/help/tickets/{ticket.pk}/")
    staff = open_as(browser, live_server_url, people["ann"], f"/desk/tickets/{ticket.pk}/")
    texts = [f"Message number {n}: is my lamp on its way?" for n in range(1, 5)]
    for text in texts:
        customer.fill("#message-text", text)
        customer.locator("button", has_text="Send").click()
        expect(customer.locator("#message-text")).to_have_value("", timeout=LIVE)
        expect(staff.locator("#panel-conversation")).to_contain_text(text, timeout=LIVE)
        customer.wait_for_timeout(400)  # the HTTP answer and the push have both landed
        for page in (customer, staff):
            expect(page.locator("#panel-conversation .turn", has_text=text)).to_have_count(1)
            assert page.evaluate(DUPLICATE_IDS, "#panel-conversation [id]") == []
    assert Turn.objects.filter(ticket=ticket, author="customer").count() == len(texts)
    # What each page holds is exactly what a reload shows.
    for page in (customer, staff):
        before = page.locator("#panel-conversation .turn .text").all_inner_texts()
        page.reload()
        page.wait_for_selector(LIVE_FRAME, state="attached")
        assert page.locator("#panel-conversation .turn .text").all_inner_texts() == before


ORDER = """(sel) => Array.from(document.querySelectorAll(sel)).map((el) => +el.id.split("-").pop())"""


def test_a_long_conversation_opens_at_its_latest_turns_and_loads_earlier_ones_on_scroll(
    browser, live_server_url, people
):
    from playwright.sync_api import expect

    from sundry.live.panels import window

    ticket = ticket_create(customer=people["alice"].person, ticket_class=people["tclass"], subject="Long")
    total, n = 120, window()
    Turn.objects.bulk_create(
        Turn(ticket=ticket, number=i, author="customer" if i % 2 else "agent", text=f"Line {i} of a long conversation.")
        for i in range(1, total + 1)
    )
    type(ticket).objects.filter(pk=ticket.pk).update(last_turn_number=total, handler="staff", assigned_to=people["ann"])
    staff = open_as(browser, live_server_url, people["ann"], f"/desk/tickets/{ticket.pk}/")
    customer = open_as(browser, live_server_url, people["alice_user"], f"/help/tickets/{ticket.pk}/")
    for page, item in ((staff, "turn"), (customer, "msg")):
        selector = "#panel-conversation > .turn-item"
        assert page.evaluate(ORDER, selector) == list(range(total - n + 1, total + 1))  # the latest only
        expect(page.locator(f"#{item}-{total} article")).to_be_in_viewport()  # opened at the end
        for first in (total - 2 * n + 1, 1):  # scrolling up brings the earlier ones, a window at a time
            page.locator("#panel-conversation a[data-earlier]").scroll_into_view_if_needed()
            expect(page.locator(f"#{item}-{first}")).to_be_attached(timeout=LIVE)
        expect(page.locator("#panel-conversation a[data-earlier]")).to_have_count(0)  # nothing earlier is left
        assert page.evaluate(ORDER, selector) == list(range(1, total + 1))
        # A page that finds itself behind gets a snapshot of the latest turns; the earlier ones stay.
        page.evaluate("""() => { const m = document.getElementById("live-version");
            m.dataset.version = "-5"; m.dataset.kind = "diff";
            document.dispatchEvent(new Event("visibilitychange")); }""")
        expect(page.locator('#live-version[data-kind="snapshot"]')).to_be_attached(timeout=LIVE)
        assert page.evaluate(ORDER, selector) == list(range(1, total + 1))
        assert page.evaluate(DUPLICATE_IDS, "#panel-conversation [id]") == []

    customer.fill("#message-text", "And one more thing: the lid is cracked too.")
    customer.locator("button", has_text="Send").click()
    for page, item in ((staff, "turn"), (customer, "msg")):
        expect(page.locator(f"#{item}-{total + 1}")).to_contain_text("the lid is cracked", timeout=LIVE)
        page.wait_for_timeout(400)  # the HTTP answer and the push have both landed
        assert page.evaluate(ORDER, "#panel-conversation > .turn-item") == list(range(1, total + 2))  # once, in order
        assert page.evaluate(DUPLICATE_IDS, "#panel-conversation [id]") == []


def test_a_sent_message_shows_whether_the_page_socket_is_up_or_down(browser, live_server_url, people):
    """With its socket open the page's post is answered with the status line alone and the push brings
    the message; with the socket down (refused here) the post's answer brings it."""
    from playwright.sync_api import expect

    ticket = ticket_create(customer=people["alice"].person, ticket_class=people["tclass"], subject="Socket")
    Ticket = type(ticket)
    Ticket.objects.filter(pk=ticket.pk).update(handler="staff", assigned_to=people["ann"])

    live = open_as(browser, live_server_url, people["alice_user"], f"/help/tickets/{ticket.pk}/")
    with live.expect_response(lambda r: r.url.endswith("/message")) as answer:
        live.fill("#message-text", "Sent with the socket up.")
        live.locator("button", has_text="Send").click()
    assert answer.value.request.headers.get("x-sundry-live") == "1"
    assert "panel-conversation" not in answer.value.text()
    expect(live.locator("#panel-conversation .turn", has_text="Sent with the socket up.")).to_have_count(
        1, timeout=LIVE
    )
    expect(live.locator("#flash")).to_contain_text("Sent.")

    down = live.context.new_page()
    down.route_web_socket("**/ws/**", lambda ws: ws.close())  # the live socket never opens
    down.goto(f"{live_server_url}/help/tickets/{ticket.pk}/")
    down.wait_for_load_state("networkidle")
    with down.expect_response(lambda r: r.url.endswith("/message")) as answer:
        down.fill("#message-text", "Sent with the socket down.")
        down.locator("button", has_text="Send").click()
    assert answer.value.request.headers.get("x-sundry-live") is None
    expect(down.locator("#panel-conversation .turn", has_text="Sent with the socket down.")).to_have_count(1)
    expect(down.locator("#message-text")).to_have_value("")
    expect(down.locator("#live-status")).not_to_have_text("Live")
