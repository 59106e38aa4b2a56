"""The desk and the customer page in a real browser, live over websockets.

Each test drives Chromium contexts (one per person) against the web process + a
Celery worker (see conftest.py), on the committed test database.
"""

from __future__ import annotations

import time

import pytest
from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import transaction
from django.test import Client

from sundry.agent.loop import agent_run
from sundry.agent.models import HeldAction
from sundry.agent.services import customer_message_post
from sundry.context import services as lanes
from sundry.context.models import StateValue, Summary
from sundry.desk.lifecycle import ticket_create
from sundry.portal.selectors import customer_turns
from sundry.shop.models import Order, Refund
from sundry.tickets.models import Ticket, Turn
from tests.factories import (
    CustomerFactory,
    ParcelFactory,
    TicketClassFactory,
    TrackingEventFactory,
    customer_confirms,
    paid_order,
)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
DESKTOP = {"width": 1440, "height": 960}
PHONE = {"width": 390, "height": 844}
# ms: how long a page waits for a push to land. Generous, because the suite runs in parallel on a
# busy machine and a wait ends as soon as the push is there; push latency itself is measured by
# the push benchmark (`python -m bench`), not asserted here.
LIVE = 20000  # a wait for a push, generous for a busy machine; speed is the push benchmark's
# The page's marker once the socket's first frame landed. A socket's first frame is always a
# snapshot, but waiting for data-kind="snapshot" races with any push that follows it: a diff
# re-marks the page "diff", and a wait that looked a moment too late never sees the snapshot.
LIVE_FRAME = '#live-version:not([data-kind="page"])'


@pytest.fixture
def people():
    users = get_user_model().objects
    alice_user = users.create_user("alice", password="pw", first_name="Alice")
    bob_user = users.create_user("bob", password="pw")
    alice = CustomerFactory(user=alice_user, name="Alice Moreau", customer_id="cus_7Hq2Lw9e")
    bob = CustomerFactory(user=bob_user, name="Bob Stone")
    return {
        "ann": users.create_user("ann", password="pw", is_staff=True),
        "ben": users.create_user("ben", password="pw", is_staff=True),
        "alice_user": alice_user,
        "bob_user": bob_user,
        "alice": alice,
        "bob": bob,
        "tclass": TicketClassFactory(name="Standard", slug="standard", approval_rules={"issue_refund": {}}),
    }


def open_as(browser, base, user, path, viewport=DESKTOP):
    """A browser context logged in as `user` (session cookie), on `path`, with its live socket up."""
    client = Client()
    client.force_login(user)
    context = browser.new_context(viewport=viewport, is_mobile=viewport is PHONE)
    context.add_cookies(
        [
            {
                "name": settings.SESSION_COOKIE_NAME,
                "value": client.cookies[settings.SESSION_COOKIE_NAME].value,
                "url": base,
            }
        ]
    )
    page = context.new_page()
    page.set_default_timeout(10000)
    page.frames_seen = []
    page.on("websocket", lambda ws: ws.on("framereceived", lambda payload: page.frames_seen.append(str(payload))))
    page.console_errors = []  # from the first load on: csp_errors() reads them
    page.on("console", lambda message: message.type == "error" and page.console_errors.append(message.text))
    response = page.goto(base + path)
    page.first_response = response
    if response.status == 200 and page.locator("[ws-connect]").count():
        # The socket's first frame: a wait (up to LIVE), not a speed claim — four test processes
        # share two cores.
        page.wait_for_selector(LIVE_FRAME, state="attached", timeout=LIVE)
    return page


def csp_errors(page) -> list[str]:
    """What the page's Content-Security-Policy refused, as Chromium logged it in the console."""
    return [text for text in page.console_errors if "Content Security Policy" in text]


def off_loop(fn, *args, **kwargs):
    """Run a service call on its own thread: Playwright's loop owns this one, and the
    after-commit push (async_to_sync) refuses to run beside a running loop."""
    from concurrent.futures import ThreadPoolExecutor

    from django.db import connection

    def run():
        try:
            return fn(*args, **kwargs)
        finally:
            connection.close()

    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(run).result(timeout=30)


def wait_until(check, timeout=20.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.2)
    return False


def test_customer_message_reaches_staff_live_and_the_agent_reply_and_compaction_follow(
    browser, live_server_url, people, screenshots
):
    from playwright.sync_api import expect

    alice = people["alice"]
    shipped = paid_order(customer=alice, number="SU-40111", status=Order.Status.SHIPPED, prices=(4500,))
    paid_order(customer=alice, number="SU-40110", prices=(3000, 2000))
    parcel = ParcelFactory(order=shipped, status="in_transit")
    TrackingEventFactory(parcel=parcel, location="Leeds hub", description="In transit")
    ticket = ticket_create(customer=alice.person, ticket_class=people["tclass"], subject="Where is my parcel?")
    staff = open_as(browser, live_server_url, people["ann"], f"/desk/tickets/{ticket.pk}/")
    customer = open_as(browser, live_server_url, people["alice_user"], f"/help/tickets/{ticket.pk}/")

    customer.fill("#message-text", "Hello, where is my order SU-40111? Please phone me, never email.")
    started = time.monotonic()
    customer.click("text=Send")
    expect(staff.locator("#panel-conversation")).to_contain_text("where is my order SU-40111", timeout=LIVE)
    seen_after = time.monotonic() - started
    expect(customer.locator("#message-text")).to_have_value("", timeout=LIVE)  # sent: the box is ready for the next
    # Panels moved too: the typed ID is in the ledger, the rule is a candidate.
    expect(staff.locator("#panel-ledger")).to_contain_text("SU-40111", timeout=LIVE)
    expect(staff.locator("#panel-rules")).to_contain_text("never email", timeout=LIVE)
    # The worker runs the agent; its tool calls and reply arrive without a reload.
    expect(staff.locator("#panel-conversation")).to_contain_text("track_parcel", timeout=20000)
    expect(customer.locator("#panel-conversation .turn.agent")).to_be_visible(timeout=20000)
    expect(customer.locator("#panel-conversation")).not_to_contain_text("track_parcel")
    assert wait_until(lambda: not Ticket.objects.filter(pk=ticket.pk, agent_claimed_at__isnull=False).exists())

    # A compaction committed elsewhere (here: by the test, as the worker would) appears live.
    from sundry.compaction.models import CompactionRun
    from sundry.tickets.events import ticket_changed
    from sundry.tickets.services import ticket_touch

    def compacted():
        with transaction.atomic():
            summary = Summary.objects.create(
                ticket=ticket,
                covers_through_turn=2,
                is_current=True,
                fields={},
                text="The customer asked where [order] is and asked for phone contact only.",
            )
            CompactionRun.objects.create(
                ticket=ticket,
                context_version=0,
                from_turn=1,
                through_turn=2,
                model="offline",
                status="succeeded",
                tokens_before=6900,
                tokens_after=2100,
                summary=summary,
            )
            ticket_touch(ticket.pk)
            ticket_changed(ticket.pk)

    off_loop(compacted)
    expect(staff.locator("#panel-conversation .compaction-mark")).to_contain_text("6900 → 2100", timeout=LIVE)
    expect(staff.locator("#panel-summary")).to_contain_text("phone contact only", timeout=LIVE)
    expect(customer.locator("body")).not_to_contain_text("phone contact only")
    # Pushes appended new turns and replaced the covered ones in place: the page holds every
    # turn once, in order, exactly as a reload would show it.
    numbers = list(Turn.objects.filter(ticket=ticket).order_by("number").values_list("number", flat=True))
    assert staff.locator("#panel-conversation .turn .num").all_inner_texts() == [str(n) for n in numbers]
    # The covered turns are marked by their own push, which may land just after the summary's.
    expect(staff.locator("#panel-conversation .turn.compacted .num")).to_have_text(["1", "2"], timeout=LIVE)
    said = [t.text for t in customer_turns(ticket)]
    assert [t.strip() for t in customer.locator("#panel-conversation .turn .text").all_inner_texts()] == said
    # How fast is the push benchmark's to measure (docs/benchmarks.md); here it only has to arrive.
    print(f"\ncustomer message visible on the desk {seen_after:.2f}s after Send")

    staff.screenshot(path=str(screenshots / "desk-ticket.png"), full_page=True)
    customer.screenshot(path=str(screenshots / "customer-page.png"), full_page=True)
    phone = open_as(browser, live_server_url, people["alice_user"], f"/help/tickets/{ticket.pk}/", viewport=PHONE)
    phone.screenshot(path=str(screenshots / "customer-page-phone.png"), full_page=True)
    assert phone.evaluate("document.documentElement.scrollWidth <= window.innerWidth + 1")  # no sideways scroll
    queue = open_as(browser, live_server_url, people["ann"], "/desk/")
    queue.screenshot(path=str(screenshots / "desk-queue.png"), full_page=True)
    # The copies in docs/ come from test_desk_pages.py::test_screenshots_for_the_docs (a fuller desk).


def test_staff_correct_a_value_and_the_customers_confirmed_panel_follows(browser, live_server_url, people):
    from playwright.sync_api import expect

    alice = people["alice"]
    ticket = ticket_create(customer=alice.person, ticket_class=people["tclass"], subject="Refund amount")
    lanes.state_set(ticket=ticket, name="amount", value="40 USD", turn=0, source="customer", confirmed=True)
    lanes.state_set(ticket=ticket, name="item", value="Mystery Toaster", turn=0, source="model")  # inferred
    customer = open_as(browser, live_server_url, people["alice_user"], f"/help/tickets/{ticket.pk}/")
    staff = open_as(browser, live_server_url, people["ann"], f"/desk/tickets/{ticket.pk}/")
    expect(customer.locator("#panel-details")).to_contain_text("40.00 USD")
    expect(customer.locator("body")).not_to_contain_text("Mystery Toaster")

    field = staff.locator("#state-amount")
    field.locator("summary", has_text="Correct or supersede").click()
    field.locator("input[name=value]").fill("45.50 USD")
    field.locator("button", has_text="Save").click()
    expect(customer.locator("#panel-details")).to_contain_text("45.50 USD", timeout=LIVE)
    expect(customer.locator("#panel-details")).not_to_contain_text("40.00 USD")
    # Staff see the old value kept as history, superseded.
    expect(staff.locator("#state-amount")).to_contain_text("1 earlier value", timeout=LIVE)


def test_the_staff_composer_empties_after_a_note_and_keeps_a_refused_message(browser, live_server_url, people):
    from django.conf import settings
    from playwright.sync_api import expect

    ticket = ticket_create(customer=people["alice"].person, ticket_class=people["tclass"], subject="Composer")
    staff = open_as(browser, live_server_url, people["ann"], f"/desk/tickets/{ticket.pk}/")
    box = staff.locator("#composer-text")
    box.fill("Checked with the carrier: the parcel is fine.")
    staff.locator("button", has_text="Add note for the agent").click()
    expect(staff.locator("#panel-conversation")).to_contain_text("the parcel is fine", timeout=LIVE)
    expect(box).to_have_value("", timeout=LIVE)
    too_long = "x" * (settings.MAX_MESSAGE_CHARS + 1)
    box.fill(too_long)
    staff.locator("button", has_text="Add note for the agent").click()
    expect(staff.locator("body")).to_contain_text("the limit is", timeout=LIVE)
    expect(box).to_have_value(too_long)  # refused: nothing typed is lost


def test_two_staff_edit_one_field_and_the_second_gets_the_conflict(browser, live_server_url, people):
    from playwright.sync_api import expect

    ticket = ticket_create(customer=people["alice"].person, ticket_class=people["tclass"], subject="Which item")
    lanes.state_set(ticket=ticket, name="item", value="Kettle", turn=0, source="model")
    ann = open_as(browser, live_server_url, people["ann"], f"/desk/tickets/{ticket.pk}/")
    ben = open_as(browser, live_server_url, people["ben"], f"/desk/tickets/{ticket.pk}/")
    for page, value in ((ann, "Kettle, blue"), (ben, "Kettle, red")):
        field = page.locator("#state-item")
        field.locator("summary", has_text="Correct or supersede").click()
        field.locator("input[name=value]").fill(value)
    ann.locator("#state-item button", has_text="Save").click()
    expect(ann.locator("#flash")).to_contain_text("Item set", timeout=LIVE)
    # Ben is mid-edit: the push does not yank his form away; his save is then refused.
    ben.locator("#state-item button", has_text="Save").click()
    expect(ben.locator("#flash.conflict")).to_contain_text("not saved", timeout=LIVE)
    expect(ben.locator("#flash")).to_contain_text("Kettle, blue")
    expect(ben.locator("#state-item .value")).to_have_text("Kettle, blue", timeout=LIVE)
    assert StateValue.objects.get(ticket=ticket, name="item", is_current=True).value == "Kettle, blue"


def test_a_held_refund_approved_by_staff_executes_exactly_once(browser, live_server_url, people):
    from playwright.sync_api import expect

    order = paid_order(customer=people["alice"], number="SU-30100", prices=(5000,))
    ticket = ticket_create(customer=people["alice"].person, ticket_class=people["tclass"], subject="Late delivery")
    customer_message_post(ticket=ticket, text=f"Please refund 20.00 USD on {order.number}, it was late.", wake=False)
    off_loop(agent_run, ticket.pk)  # the offline model proposes the refund on a card
    off_loop(customer_confirms, ticket)  # the customer confirms; the class holds it for approval
    held = HeldAction.objects.get(ticket=ticket, status="pending")
    staff = open_as(browser, live_server_url, people["ann"], f"/desk/tickets/{ticket.pk}/")
    panel = staff.locator("#panel-held")
    expect(panel).to_contain_text("Refund 20.00 USD on SU-30100")
    expect(panel).to_contain_text("Already refunded")
    expect(panel).to_contain_text("Please refund 20.00 USD on SU-30100, it was late.")  # the customer's words
    expect(panel).not_to_contain_text("Do not retry")  # the model's instructions are not the explanation
    panel.locator("summary", has_text="Exact call").click()
    expect(panel).to_contain_text('"amount": "20.00"')  # the exact arguments
    expect(panel).to_contain_text('"order_number": "SU-30100"')
    # Money moves only after a second, explicit step. Staff approve from the sidebar far down a long
    # page (a short window, scrolled to the latest message): the outcome's flash is out of sight there.
    staff.set_viewport_size({"width": 1440, "height": 360})
    staff.evaluate("window.scrollTo(0, document.body.scrollHeight)")
    assert staff.evaluate("document.getElementById('flash').getBoundingClientRect().bottom < 0")
    panel.locator("summary", has_text="Approve and run").click()
    panel.locator("button", has_text="Confirm: refund 20.00 USD on SU-30100").click()
    # An HTTP answer, not a push: the approval runs the guarded tool inside the request.
    expect(staff.locator("#flash")).to_contain_text("issue_refund approved and executed", timeout=15000)
    # The outcome is brought into view and takes the focus from the button it replaced (read out).
    expect(staff.locator("#flash")).to_be_focused()
    expect(staff.locator("#flash")).to_be_in_viewport(ratio=1)
    again = staff.evaluate(
        """(url) => fetch(url, {method: "POST", headers: {
        "X-CSRFToken": JSON.parse(document.body.getAttribute("hx-headers"))["X-CSRFToken"],
        "HX-Request": "true", "Content-Type": "application/x-www-form-urlencoded"}, body: "decision=approve"})
        .then((r) => r.status)""",
        f"/desk/tickets/{ticket.pk}/held/{held.pk}",
    )
    assert again == 409  # a second approval (double click, second tab) is refused
    expect(staff.locator("#panel-held")).to_be_hidden(timeout=LIVE)
    expect(staff.locator("#panel-conversation")).to_contain_text("approved the held issue_refund call")
    held.refresh_from_db()
    assert held.status == "executed"
    assert Refund.objects.filter(order=order).exclude(idempotency_key__startswith="factory").count() == 1
    # Let the agent run the approval woke finish before the database is flushed.
    assert wait_until(lambda: not Ticket.objects.filter(pk=ticket.pk, agent_claimed_at__isnull=False).exists())
    assert Refund.objects.filter(order=order).exclude(idempotency_key__startswith="factory").count() == 1


def test_a_customer_cannot_reach_another_customers_ticket_and_never_receives_internals(
    browser, live_server_url, people
):
    ticket = ticket_create(customer=people["alice"].person, ticket_class=people["tclass"], subject="Private matter")
    paid_order(customer=people["alice"], number="SU-77001")
    lanes.ledger_record_system_id(ticket=ticket, kind="payment", value="pay_Q8SECRET", role="payment", turn=0)
    lanes.state_set(ticket=ticket, name="order_number", value="SU-77001", turn=0, source="model")  # inferred
    lanes.state_set(
        ticket=ticket, name="internal_note", value="Watch for fraud", turn=0, source="staff", confirmed=True
    )
    bob = open_as(browser, live_server_url, people["bob_user"], f"/help/tickets/{ticket.pk}/")
    assert bob.first_response.status == 404
    result = bob.evaluate(
        """(path) => new Promise((resolve) => {
        const ws = new WebSocket(`ws://${location.host}${path}`); const got = [];
        ws.onmessage = (e) => got.push(e.data);
        ws.onclose = (e) => resolve({code: e.code, got});
        setTimeout(() => resolve({code: -1, got}), 5000);
    })""",
        f"/ws/help/tickets/{ticket.pk}/",
    )
    assert result == {"code": 4403, "got": []}
    staff_path = bob.evaluate(
        """(path) => new Promise((resolve) => {
        const ws = new WebSocket(`ws://${location.host}${path}`);
        ws.onmessage = () => resolve('message'); ws.onclose = (e) => resolve(e.code);
    })""",
        f"/ws/desk/tickets/{ticket.pk}/",
    )
    assert staff_path == 4403

    alice = open_as(browser, live_server_url, people["alice_user"], f"/help/tickets/{ticket.pk}/")
    source = alice.first_response.text()
    off_loop(lanes.state_set, ticket=ticket, name="item", value="Unconfirmed Widget", turn=0, source="model")
    alice.wait_for_timeout(800)
    received = source + alice.content() + "".join(alice.frames_seen)
    assert alice.frames_seen  # the snapshot and the push did arrive
    for internal in (
        "pay_Q8SECRET",
        "Watch for fraud",
        "Unconfirmed Widget",
        'value="SU-77001" checked',
        "panel-ledger",
        "panel-state",
    ):
        assert internal not in received, internal


def test_an_agent_reply_with_markup_renders_inert(browser, live_server_url, people):
    from playwright.sync_api import expect

    from sundry.tickets.services import turn_append

    ticket = ticket_create(customer=people["alice"].person, ticket_class=people["tclass"], subject="Odd reply")
    staff = open_as(browser, live_server_url, people["ann"], f"/desk/tickets/{ticket.pk}/")
    customer = open_as(browser, live_server_url, people["alice_user"], f"/help/tickets/{ticket.pk}/")
    figures_requests = []
    for page in (staff, customer):
        page.on("request", lambda r: figures_requests.append(r.url) if "/desk/figures" in r.url else None)
    evil = (
        'Here you go <img src=x onerror="window.__pwned=1"> '
        '<div hx-get="/desk/figures/" hx-trigger="load" hx-swap-oob="true" id="panel-head">boom</div>'
    )
    off_loop(turn_append, ticket=ticket, author=Turn.Author.AGENT, text=evil)  # pushed to both pages
    for page in (staff, customer):
        conversation = page.locator("#panel-conversation")
        expect(conversation).to_contain_text('<img src=x onerror="window.__pwned=1">', timeout=LIVE)
        assert conversation.locator("img").count() == 0
        assert page.locator("[hx-get='/desk/figures/']").count() == 0
        assert page.evaluate("window.__pwned") is None
    page = open_as(browser, live_server_url, people["ann"], f"/desk/tickets/{ticket.pk}/")  # and on a fresh load
    assert page.locator("#panel-conversation img").count() == 0 and page.evaluate("window.__pwned") is None
    staff.wait_for_timeout(300)
    assert figures_requests == []
