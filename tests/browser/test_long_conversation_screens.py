"""The desk and the customer page after the reported long conversation on the seeded demo shop:
first with the state the agent inferred (unconfirmed, Confirm on the desk, nothing shown to the
customer), then after staff confirm it in the browser (the customer's "Confirmed details")."""

from __future__ import annotations

import os
import shutil
from concurrent.futures import ThreadPoolExecutor

import pytest
from django.contrib.auth import get_user_model
from django.db import connection

from sundry.compaction.models import CompactionRun
from sundry.context.models import StateValue
from sundry.desk.lifecycle import ticket_create
from sundry.shop.models import Customer
from tests.agent.test_seeded_demo_conversation import replay_confirming
from tests.browser.test_live_desk import LIVE, open_as
from tests.demo_conversation import pick_customer, seed_demo_shop

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
SHOTS = (
    "desk-long-inferred.png",
    "customer-long-inferred.png",
    "desk-long-confirmed.png",
    "customer-long-confirmed.png",
)
# Fields the offline agent records from what the customer says, for staff to confirm.
RECORDED = ("issue", "resolution", "contact_preference", "order_number")


def _off_loop(fn):
    """The replay on its own thread: Playwright's loop owns this one (see test_live_desk.off_loop)."""

    def run():
        try:
            return fn()
        finally:
            connection.close()

    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(run).result(timeout=600)


def shoot(page, panel: str, path) -> None:
    """The screen as a person sees it with `panel` in view (the whole page is many screens long).

    A live push may swap the panel for a fresh rendering between finding and scrolling it, so
    the scroll is retried on a detached element rather than failing the screenshot."""
    from playwright.sync_api import Error

    for attempt in range(5):
        try:
            page.locator(panel).scroll_into_view_if_needed(timeout=5000)
            break
        except Error:
            if attempt == 4:
                raise
            page.wait_for_timeout(200)
    page.screenshot(path=str(path))


@pytest.fixture
def long_ticket():
    def build():
        tclass = seed_demo_shop()
        cast = pick_customer()
        customer = Customer.objects.get(customer_id=cast.customer_id)
        customer.user = get_user_model().objects.create_user("demo-customer", password="pw", first_name="Brandon")
        customer.save(update_fields=["user"])
        ticket = ticket_create(
            customer=customer.person, ticket_class=tclass, subject="Cracked air fryer and other orders"
        )
        replay_confirming(ticket, cast)  # the customer presses Confirm on what they asked for
        return ticket, customer.user, cast

    ticket, user, cast = _off_loop(build)
    # Off the loop too: creating a user pushes to its live groups from synchronous code.
    staff = _off_loop(
        lambda: get_user_model().objects.create_user("desk-staff", password="pw", is_staff=True, first_name="Ann")
    )
    return {"ticket": ticket, "customer": user, "staff": staff, "cast": cast}


def test_inferred_state_then_confirmed_by_staff_after_the_long_conversation(
    browser, live_server_url, long_ticket, screenshots
):
    from playwright.sync_api import expect

    ticket = long_ticket["ticket"]
    assert CompactionRun.objects.filter(ticket=ticket, status__in=["succeeded", "fallback"]).count() >= 3
    inferred = {v.name: v.value for v in StateValue.objects.filter(ticket=ticket, is_current=True, confirmed=False)}
    assert set(RECORDED) <= set(inferred), inferred
    assert inferred["contact_preference"] == "phone"

    desk = open_as(browser, live_server_url, long_ticket["staff"], f"/desk/tickets/{ticket.pk}/")
    page = open_as(browser, live_server_url, long_ticket["customer"], f"/help/tickets/{ticket.pk}/")
    for name in RECORDED:
        field = desk.locator(f"#state-{name}")
        expect(field).to_contain_text("inferred")
        expect(field.locator("button", has_text="Confirm")).to_be_visible()
    # Nothing the agent merely inferred reaches the customer.
    expect(page.locator("#panel-details")).to_contain_text("Nothing confirmed yet")
    expect(page.locator("#panel-details")).to_contain_text("Done on your case")
    shoot(desk, "#panel-state", screenshots / SHOTS[0])
    shoot(page, "#panel-details", screenshots / SHOTS[1])

    for name in sorted(inferred):  # staff confirm everything the agent inferred
        desk.locator(f"#state-{name} button", has_text="Confirm").click()
        expect(desk.locator(f"#state-{name}")).to_contain_text("confirmed", timeout=LIVE)
        expect(desk.locator(f"#state-{name} button", has_text="Confirm")).to_have_count(0, timeout=LIVE)
    details = page.locator("#panel-details")
    expect(details).not_to_contain_text("Nothing confirmed yet", timeout=LIVE)
    expect(details.locator("dt", has_text="Contact by")).to_be_visible()
    expect(details).to_contain_text("phone")
    expect(details).to_contain_text(inferred["order_number"])
    assert set(
        StateValue.objects.filter(ticket=ticket, is_current=True, confirmed=True).values_list("name", flat=True)
    ) == set(inferred)
    expect(desk.locator("#panel-state button", has_text="Confirm")).to_have_count(0)
    shoot(desk, "#panel-state", screenshots / SHOTS[2])
    shoot(page, "#panel-details", screenshots / SHOTS[3])

    assert all((screenshots / n).stat().st_size > 5000 for n in SHOTS)
    if os.environ.get("SUNDRY_UPDATE_DOC_SCREENSHOTS") == "1":
        docs = screenshots.parents[1] / "docs" / "screenshots"
        for name in SHOTS:
            shutil.copy(screenshots / name, docs / name)
