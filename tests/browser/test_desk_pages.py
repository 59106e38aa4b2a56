"""The desk and the customer page as people use them: accessibility (axe-core), phones, wording,
lifecycle and keyboard, search, the typing indicator; and the documentation's screenshots."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from sundry.agent.loop import agent_run
from sundry.agent.services import customer_message_post
from sundry.context import services as lanes
from sundry.context.models import StateValue
from sundry.desk.lifecycle import ticket_create
from sundry.portal.services import detail_flag
from sundry.tickets.attention import follow_up_request
from sundry.tickets.models import CannedReply, Ticket, Turn
from sundry.tickets.services import turn_append
from tests.browser.test_live_desk import DESKTOP, LIVE, PHONE, csp_errors, off_loop, open_as, people, wait_until  # noqa: F401
from tests.factories import customer_confirms, paid_order

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
AXE = Path(__file__).parent / "vendor" / "axe-core" / "axe.min.js"


def axe_violations(page) -> list[dict]:
    """axe-core's serious and critical violations on the page as it is now (WCAG 2.x A and AA rules)."""
    page.evaluate(AXE.read_text())  # through the debugger, so the page's CSP does not apply
    result = page.evaluate("""() => axe.run(document, {runOnly: {type: "tag",
        values: ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa", "best-practice"]}})""")
    return [
        {"id": v["id"], "impact": v["impact"], "help": v["help"], "nodes": [n["target"] for n in v["nodes"]][:5]}
        for v in result["violations"]
        if v["impact"] in ("serious", "critical")
    ]


SMALLEST_TEXT = """() => { let min = 99, where = "";
  for (const el of document.querySelectorAll("body *")) {
    const hasText = Array.from(el.childNodes).some((n) => n.nodeType === 3 && n.textContent.trim());
    if (!hasText || !el.getClientRects().length) continue;
    const size = parseFloat(getComputedStyle(el).fontSize);
    if (size < min) { min = size; where = el.tagName + "." + el.className + ": " + el.textContent.trim().slice(0, 40); }
  }
  return [min, where]; }"""


@pytest.fixture
def busy_ticket(people):
    """A ticket with a conversation, a held refund, a long ID in the ledger and state with history."""
    alice = people["alice"]
    order = paid_order(customer=alice, number="SU-30100", prices=(5000,))
    ticket = ticket_create(customer=alice.person, ticket_class=people["tclass"], subject="Late delivery")
    customer_message_post(ticket=ticket, text=f"Please refund 20.00 USD on {order.number}, it was late.", wake=False)
    off_loop(agent_run, ticket.pk)  # the offline model proposes the refund on a card
    off_loop(customer_confirms, ticket)  # the customer confirms; the class holds it
    lanes.ledger_record_system_id(
        ticket=ticket, kind="payment", value="pay_q8secret12345678", role="second_payment", turn=0
    )
    lanes.state_set(ticket=ticket, name="amount", value="40 USD", turn=0, source="customer", confirmed=True)
    off_loop(
        turn_append,
        ticket=ticket,
        author=Turn.Author.AGENT,
        text="I've refunded 1234.5 USD on order SU-30100 (rfd_ab12cd34ef). Your return ret_zz12yy34xx is booked.",
    )
    return ticket


def test_no_serious_accessibility_violations_on_the_desk_the_customer_page_and_login(
    browser, live_server_url, people, busy_ticket
):
    ticket = busy_ticket
    # What the live parts add is checked too: a colleague on the ticket, a detail the customer reported.
    off_loop(detail_flag, ticket=ticket, value=StateValue.objects.get(ticket=ticket, name="amount", is_current=True))
    colleague = open_as(browser, live_server_url, people["ben"], f"/desk/tickets/{ticket.pk}/")
    pages = {
        "login": open_as(browser, live_server_url, people["ann"], "/login/"),
        "queue": open_as(browser, live_server_url, people["ann"], "/desk/"),
        "ticket": open_as(browser, live_server_url, people["ann"], f"/desk/tickets/{ticket.pk}/"),
        "search": open_as(browser, live_server_url, people["ann"], "/desk/search/?q=refund"),
        "customer": open_as(browser, live_server_url, people["alice_user"], f"/help/tickets/{ticket.pk}/"),
        "customer-phone": open_as(
            browser, live_server_url, people["alice_user"], f"/help/tickets/{ticket.pk}/", viewport=PHONE
        ),
    }
    pages["login"].context.clear_cookies()
    pages["login"].goto(live_server_url + "/login/")
    from playwright.sync_api import expect

    expect(pages["ticket"].locator("#presence")).to_have_text("ben is viewing this ticket", timeout=LIVE)
    expect(colleague.locator("#presence")).to_have_text("ann is viewing this ticket", timeout=LIVE)
    expect(pages["customer"].locator("#panel-details .reported")).to_be_visible()
    expect(pages["queue"].locator('[data-badge="flagged"]')).to_be_visible()
    expect(pages["ticket"].locator("#panel-budget table.breakdown")).to_be_visible()
    # Nothing the pages do, live pushes included, breaks their Content-Security-Policy (inline styles, scripts).
    refused = {name: csp_errors(page) for name, page in {**pages, "colleague": colleague}.items()}
    assert refused == {name: [] for name in refused}, json.dumps(refused, indent=1)
    found = {name: axe_violations(page) for name, page in pages.items()}
    assert found == {name: [] for name in pages}, json.dumps(found, indent=1)
    for name, page in pages.items():
        size, where = page.evaluate(SMALLEST_TEXT)
        assert size >= 12, f"{name}: {size}px text at {where}"
    for name in ("ticket", "customer"):
        conversation = pages[name].locator("#panel-conversation")
        assert conversation.get_attribute("aria-live") == "polite" and conversation.get_attribute("role") == "log"
    # Control: an inline style the policy refuses is logged where the check above looks.
    login = pages["login"]
    with login.expect_console_message(lambda message: "Content Security Policy" in message.text):
        login.evaluate("""document.body.insertAdjacentHTML("beforeend", '<p style="color: red">inline</p>')""")
    assert len(csp_errors(login)) == 1


def test_a_keyboard_user_skips_the_ledger_and_uses_shortcuts(browser, live_server_url, people, busy_ticket):
    from playwright.sync_api import expect

    page = open_as(browser, live_server_url, people["ann"], f"/desk/tickets/{busy_ticket.pk}/")
    # Skip links come first in the tab order and reach the panels past the ledger's Rename buttons.
    page.keyboard.press("Tab")
    page.keyboard.press("Tab")
    expect(page.locator(":focus")).to_have_text("Skip to the conversation")
    for _ in range(4):
        page.keyboard.press("Tab")
    expect(page.locator(":focus")).to_have_text("Skip past the ledger to the summary")
    page.keyboard.press("Enter")
    assert page.evaluate("location.hash") == "#panel-summary"
    # ? opens the help; "a" goes to the approval without running it; "t" takes over.
    page.locator("body").click(position={"x": 5, "y": 300})
    page.keyboard.press("?")
    expect(page.locator("dialog#shortcuts")).to_be_visible()
    page.keyboard.press("Escape")
    page.keyboard.press("a")
    expect(page.locator(":focus")).to_have_text("Approve and run…")
    assert busy_ticket.held_actions.get().status == "pending"
    page.locator("body").click(position={"x": 5, "y": 300})
    page.keyboard.press("t")
    expect(page.locator("#panel-head")).to_contain_text("Hand back to agent", timeout=LIVE)
    busy_ticket.refresh_from_db()
    assert busy_ticket.handler == "staff" and busy_ticket.assigned_to == people["ann"]
    # j/k walk the queue; / goes to search.
    queue = open_as(browser, live_server_url, people["ann"], "/desk/")
    queue.keyboard.press("j")
    expect(queue.locator("tr.selected")).to_have_count(1)
    expect(queue.locator(":focus")).to_contain_text("Late delivery")
    queue.keyboard.press("/")
    queue.keyboard.type("SU-30100")
    queue.keyboard.press("Enter")
    queue.wait_for_url("**/desk/search/?q=SU-30100")
    expect(queue.locator(".search-hits")).to_contain_text("Late delivery")


def test_phones_wording_and_labels(browser, live_server_url, people, busy_ticket):
    from playwright.sync_api import expect

    ticket = busy_ticket
    for n in range(8):
        ticket_create(
            customer=people["bob"].person,
            ticket_class=people["tclass"],
            subject=f"A rather long subject line for ticket number {n} about a parcel",
        )
    queue = open_as(browser, live_server_url, people["ann"], "/desk/", viewport=PHONE)
    assert queue.evaluate("document.documentElement.scrollWidth") <= 391
    lanes.state_set(
        ticket=ticket,
        name="issue",
        value="Parcel lost in transit: tracking stopped at the Leeds hub a week ago",
        turn=0,
        source="customer",
        confirmed=True,
    )
    CannedReply.objects.create(title="Call back", body="Hi {customer_first_name}, I'll call you on {call_day}.")
    desk = open_as(browser, live_server_url, people["ann"], f"/desk/tickets/{ticket.pk}/")
    # A long state value uses the width beside its label, not a label-wide column inside its own box.
    text_width, box_width = desk.locator("#state-issue .value").evaluate("""(value) => {
        const text = document.createRange(); text.selectNodeContents(value);
        return [text.getBoundingClientRect().width, value.getBoundingClientRect().width]; }""")
    assert text_width > 0.8 * box_width, (text_width, box_width)
    # A canned reply goes in filled; a placeholder it cannot fill is a note, selected to type over.
    desk.locator("select[data-macro-into]").select_option(label="Call back")
    expect(desk.locator("#composer-text")).to_have_value(
        "Hi Alice, I'll call you on [unknown placeholder: {call_day}]."
    )
    desk.keyboard.type("Tuesday")
    expect(desk.locator("#composer-text")).to_have_value("Hi Alice, I'll call you on Tuesday.")
    payment = desk.locator("#panel-ledger code.id", has_text="pay_q8secret12345678")
    assert len(payment.evaluate("(el) => Array.from(el.getClientRects())")) == 1  # one line: never split mid-ID
    state = desk.locator("#panel-state").inner_text()
    assert "· ·" not in state and "··" not in state
    # Staff reply as a named person once they hold the ticket.
    desk.locator("#panel-head button", has_text="Take over").click()
    expect(desk.locator("#panel-head")).to_contain_text("Hand back to agent", timeout=LIVE)
    desk.fill("#composer-text", "Hello Alice, I'm looking at this now.")
    desk.locator("button", has_text="Send reply to customer").click()
    expect(desk.locator("#composer-text")).to_have_value("", timeout=LIVE)

    phone = open_as(browser, live_server_url, people["alice_user"], f"/help/tickets/{ticket.pk}/", viewport=PHONE)
    conversation = phone.locator("#panel-conversation")
    expect(conversation).to_contain_text("I've refunded 1,234.50 USD on order SU-30100.")
    expect(conversation).to_contain_text("Your return is booked.")
    expect(phone.locator("body")).not_to_contain_text("rfd_ab12cd34ef")
    expect(phone.locator("body")).not_to_contain_text("ret_zz12yy34xx")
    expect(conversation.locator(".turn.agent header").first).to_contain_text("Sundry assistant")
    expect(conversation.locator(".turn.staff header")).to_contain_text("Support team")  # ann has no first name here
    # On a phone the conversation comes first, the case's details after it; nothing scrolls sideways.
    assert conversation.bounding_box()["y"] < phone.locator("#panel-details").bounding_box()["y"]
    assert phone.evaluate("document.documentElement.scrollWidth <= window.innerWidth + 1")
    # The first message named the order: nothing to ask. Where it did not, the picker starts collapsed.
    expect(phone.locator("#panel-orders details")).to_have_count(0)
    other = ticket_create(customer=people["alice"].person, ticket_class=people["tclass"], subject="Lamp")
    customer_message_post(ticket=other, text="My lamp flickers.", wake=False)
    phone = open_as(browser, live_server_url, people["alice_user"], f"/help/tickets/{other.pk}/", viewport=PHONE)
    picker = phone.locator("#panel-orders details")
    expect(picker).to_have_count(1)
    assert picker.evaluate("(el) => el.open") is False
    picker.locator("summary").click()
    expect(picker.locator("label.order", has_text="SU-30100")).to_be_visible()


def test_staff_replies_carry_their_first_name_and_the_customer_sees_support_typing(browser, live_server_url, people):
    from playwright.sync_api import expect

    people["ann"].first_name = "Ann"
    people["ann"].save()
    paid_order(customer=people["alice"], number="SU-40111")
    ticket = ticket_create(customer=people["alice"].person, ticket_class=people["tclass"], subject="Parcel")
    customer = open_as(browser, live_server_url, people["alice_user"], f"/help/tickets/{ticket.pk}/")
    # The line may show for only a moment (the offline model answers at once): the page notes
    # whether it was ever shown, rather than the test polling for a moment it may miss.
    customer.evaluate(
        """() => { const el = document.getElementById("typing"); window.typingShown = false;
        new MutationObserver(() => { if (!el.hidden) window.typingShown = true; })
          .observe(el, { attributes: true, attributeFilter: ["hidden"] }); }"""
    )
    customer.fill("#message-text", "Where is my order SU-40111?")
    customer.locator("button", has_text="Send").click()
    typing = customer.locator("#typing")
    assert wait_until(lambda: customer.evaluate("() => window.typingShown"))
    # One ellipsis, in the words; nothing drawn after them (dots added there read "typing….....").
    expect(typing).to_have_text("Support is typing…")
    assert typing.evaluate("(el) => getComputedStyle(el, '::after').content") in ("none", "normal")
    expect(customer.locator("#panel-conversation .turn.agent")).to_be_visible(timeout=20000)
    expect(typing).to_be_hidden(timeout=LIVE)
    assert wait_until(lambda: not Ticket.objects.filter(pk=ticket.pk, agent_claimed_at__isnull=False).exists())
    Ticket.objects.filter(pk=ticket.pk).update(handler="staff", assigned_to=people["ann"])
    off_loop(
        turn_append, ticket=ticket, author=Turn.Author.STAFF, text="Ann from the desk here.", payload={"by": "ann"}
    )
    expect(customer.locator("#panel-conversation .turn.staff header")).to_contain_text("Ann", timeout=LIVE)


def test_screenshots_for_the_docs(browser, live_server_url, people, busy_ticket, screenshots):
    ticket = busy_ticket
    for n, subject in enumerate(("Parcel stuck in Leeds", "Wrong size sent", "Refund not received")):
        t = ticket_create(customer=people["bob"].person, ticket_class=people["tclass"], subject=subject)
        customer_message_post(ticket=t, text=f"{subject}: can you help?", wake=False)
    off_loop(detail_flag, ticket=ticket, value=StateValue.objects.get(ticket=ticket, name="amount", is_current=True))
    colleague = open_as(browser, live_server_url, people["ben"], f"/desk/tickets/{ticket.pk}/")
    queue = open_as(browser, live_server_url, people["ann"], "/desk/?sort=waiting")
    late = ticket_create(customer=people["bob"].person, ticket_class=people["tclass"], subject="Lamp arrived broken")
    off_loop(customer_message_post, ticket=late, text="My lamp arrived broken, what now?", wake=False)
    from playwright.sync_api import expect

    expect(queue.locator("tr.arrived")).to_contain_text("Lamp arrived broken", timeout=LIVE)  # pushed in
    # A ticket promised to a person keeps its timer after the agent's own reply: only staff stop it.
    promised = ticket_create(customer=people["bob"].person, ticket_class=people["tclass"], subject="Warranty claim")
    off_loop(customer_message_post, ticket=promised, text="Is the kettle under warranty?", wake=False)
    said = off_loop(turn_append, ticket=promised, author=Turn.Author.AGENT, text="A colleague will follow up.")
    off_loop(follow_up_request, ticket_id=promised.pk, reason="warranty claim", turn=said.number)
    expect(queue.locator("tr", has_text="Warranty claim")).to_contain_text("staff first response", timeout=LIVE)
    shots = {
        "desk-queue.png": queue,
        "desk-ticket.png": open_as(browser, live_server_url, people["ann"], f"/desk/tickets/{ticket.pk}/"),
        "desk-search.png": open_as(browser, live_server_url, people["ann"], "/desk/search/?q=refund"),
        "customer-page.png": open_as(browser, live_server_url, people["alice_user"], f"/help/tickets/{ticket.pk}/"),
        "customer-page-phone.png": open_as(
            browser, live_server_url, people["alice_user"], f"/help/tickets/{ticket.pk}/", viewport=PHONE
        ),
    }
    expect(shots["desk-ticket.png"].locator("#presence")).to_have_text("ben is viewing this ticket", timeout=LIVE)
    for name, page in shots.items():
        page.screenshot(path=str(screenshots / name), full_page=True)
    assert colleague.locator("#presence").is_visible()
    held = shots["desk-ticket.png"].locator("#panel-held")
    held.screenshot(path=str(screenshots / "desk-approval.png"))
    shots["desk-ticket.png"].locator("#panel-budget").screenshot(path=str(screenshots / "desk-budget.png"))
    names = [*shots, "desk-approval.png", "desk-budget.png"]
    assert all((screenshots / n).stat().st_size > 5000 for n in names)
    if os.environ.get("SUNDRY_UPDATE_DOC_SCREENSHOTS") == "1":
        docs = screenshots.parents[1] / "docs" / "screenshots"
        docs.mkdir(parents=True, exist_ok=True)
        for name in names:
            shutil.copy(screenshots / name, docs / name)
