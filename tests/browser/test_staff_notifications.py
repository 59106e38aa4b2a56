"""Browser notifications on the desk, in Chromium: asked for only on the button's click, then raised
for a ticket assigned to the staff member that needs attention — live, without a reload — and
never for an unassigned ticket or a colleague's. Under the page's Content-Security-Policy.

The page's `Notification` is the browser's own, wrapped by an init script that records each one
raised (a headless browser shows none on a screen)."""

from __future__ import annotations

import pytest
from django.conf import settings
from django.test import Client

from sundry.desk.lifecycle import ticket_create
from sundry.tickets.attention import attention_flag
from sundry.tickets.versions import ticket_update
from tests.browser.test_live_desk import DESKTOP, LIVE, csp_errors, off_loop, people, wait_until  # noqa: F401  (people: fixture)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

RECORD_NOTIFICATIONS = """
(() => {
  const Real = window.Notification;
  if (!Real) return;
  window.raisedNotifications = [];
  class Recorded extends Real {
    constructor(title, options) {
      window.raisedNotifications.push({ title: title, body: (options || {}).body, tag: (options || {}).tag });
      super(title, options);
    }
  }
  Object.defineProperty(Recorded, "permission", { get: () => Real.permission });
  Recorded.requestPermission = (...args) => Real.requestPermission(...args);
  window.Notification = Recorded;
})();
"""


def titles(page) -> list[str]:
    return [n["title"] for n in page.evaluate("window.raisedNotifications || []")]


def flag(ticket, reason, assignee=None):
    """Assign (if asked) and flag a ticket the way the services do, pushes included."""
    if assignee is not None:
        off_loop(ticket_update, ticket.pk, assigned_to=assignee)
    off_loop(attention_flag, ticket.pk, reason)


def test_staff_are_notified_of_their_own_flagged_tickets_only(browser, live_server_url, people):
    from playwright.sync_api import expect

    ann, ben, alice, tclass = people["ann"], people["ben"], people["alice"], people["tclass"]
    mine = off_loop(ticket_create, customer=alice.person, ticket_class=tclass, subject="Mine")
    unassigned = off_loop(ticket_create, customer=alice.person, ticket_class=tclass, subject="Nobody's")
    flag(mine, "Model unavailable: timed out", assignee=ann)
    flag(unassigned, "Model unavailable: timed out")

    client = Client()
    client.force_login(ann)
    context = browser.new_context(viewport=DESKTOP)  # no permission yet: the page must ask
    context.add_cookies(
        [
            {
                "name": settings.SESSION_COOKIE_NAME,
                "value": client.cookies[settings.SESSION_COOKIE_NAME].value,
                "url": live_server_url,
            }
        ]
    )
    context.add_init_script(script=RECORD_NOTIFICATIONS)
    page = context.new_page()
    sockets = []
    page.on("websocket", lambda ws: sockets.append(ws.url))
    page.console_errors = []
    page.on("console", lambda m: m.type == "error" and page.console_errors.append(m.text))
    page.goto(live_server_url + "/desk/")
    expect(page.locator("#live-status")).to_have_text("Live", timeout=LIVE)
    button = page.locator("#notify-toggle")
    expect(button).to_be_visible()
    assert not any("/ws/desk/attention/" in url for url in sockets)  # nothing before the click
    assert titles(page) == []

    context.grant_permissions(["notifications"], origin=live_server_url)
    button.click()  # the gesture the browser asks from
    expect(button).to_be_hidden()
    assert wait_until(lambda: titles(page), timeout=LIVE / 1000)
    assert titles(page) == [f"Ticket #{mine.pk} needs attention"]
    assert page.evaluate("window.raisedNotifications[0].body") == "Model unavailable"

    # Live: a colleague's ticket raises nothing; one newly assigned to ann does.
    bens = off_loop(ticket_create, customer=alice.person, ticket_class=tclass, subject="Ben's")
    flag(bens, "Customer flagged a detail: item", assignee=ben)
    later = off_loop(ticket_create, customer=alice.person, ticket_class=tclass, subject="Later")
    flag(later, "Follow-up promised (turn 2): call back", assignee=ann)
    assert wait_until(lambda: len(titles(page)) >= 2, timeout=LIVE / 1000)
    assert titles(page) == [f"Ticket #{mine.pk} needs attention", f"Ticket #{later.pk} needs attention"]
    assert page.evaluate("performance.getEntriesByType('navigation').length") == 1  # never reloaded

    # A reload does not repeat what was notified.
    page.reload()
    expect(page.locator("#live-status")).to_have_text("Live", timeout=LIVE)
    # The page's socket is up once its first list came (nothing new in it to raise).
    assert wait_until(lambda: any("/ws/desk/attention/" in u for u in sockets[-2:]), timeout=LIVE / 1000)
    flag(later, "Model unavailable: timed out again")  # a new reason on a notified ticket
    assert wait_until(lambda: titles(page), timeout=LIVE / 1000)
    assert titles(page) == [f"Ticket #{later.pk} needs attention"]
    assert csp_errors(page) == []
    context.close()
