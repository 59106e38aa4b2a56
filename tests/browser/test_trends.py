"""An admin reads a class's weekly trends in a real browser and follows a week's figure to its tickets.

The history is generated over eight weeks for two classes (as `tests/tickets/test_trends.py` makes it,
in the server's own time zone); the page must pass axe-core, a point on a chart must open the tickets
behind that week's figure, and a ticket there must open in the desk.
"""

from __future__ import annotations

import random
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, time, timedelta
from zoneinfo import ZoneInfo

import pytest
from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import connection

from sundry.desk import trends
from sundry.tickets.models import TicketClassChange
from tests.browser.test_desk_pages import axe_violations
from tests.browser.test_live_desk import open_as
from tests.browser.test_toolserver_admin import _to_docs
from tests.factories import TicketClassFactory
from tests.tickets.test_trends import _history

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_an_admin_follows_a_weeks_figure_to_its_tickets(browser, live_server_url, screenshots):
    zone = ZoneInfo(settings.TIME_ZONE)  # the server's: its weeks are the ones drawn
    mondays = trends.week_starts(8)

    def make():  # off Playwright's loop: the rows' after-commit pushes need a thread without one
        try:
            rng = random.Random(31)
            alpha, beta = TicketClassFactory(name="Alpha"), TicketClassFactory(name="Beta")
            _history(alpha, zone, rng, mondays, skip={4})
            _history(beta, zone, rng, mondays)
            change = TicketClassChange.objects.create(ticket_class=alpha, changes={"token_budget": [8000, 6000]})
            noon = datetime.combine(mondays[-3] + timedelta(days=2), time(12), tzinfo=zone)
            TicketClassChange.objects.filter(pk=change.pk).update(changed_at=noon)
            return alpha, get_user_model().objects.create_superuser("root", "root@example.com", "pw")
        finally:
            connection.close()

    with ThreadPoolExecutor(max_workers=1) as pool:
        alpha, admin = pool.submit(make).result(timeout=120)

    page = open_as(browser, live_server_url, admin, f"/desk/figures/trends/{alpha.pk}/?weeks=8")
    assert page.first_response.status == 200
    assert page.locator("svg.lab-chart[role=group]").count() == len(trends.FIGURES)
    assert page.locator("#chart-trend-tokens line.gap").count() == 1  # the empty week, a gap
    assert page.locator("#chart-trend-cost line.change-mark").get_attribute("data-week") == mondays[-3].isoformat()
    assert [v["id"] for v in axe_violations(page)] == []
    page.screenshot(path=str(screenshots / "figures-trends.png"), full_page=True)
    _to_docs(screenshots / "figures-trends.png")

    last = mondays[-1]
    page.locator(f'#chart-trend-cost a.point[data-week="{last.isoformat()}"]').click()
    page.wait_for_url(f"**/desk/figures/trends/{alpha.pk}/{last.isoformat()}/cost/")
    expected = [r.ticket_id for r in trends.week_tickets(alpha, "cost", last)]
    listed = page.locator("#trend-drill tbody tr").evaluate_all("rows => rows.map(r => +r.dataset.ticket)")
    assert listed == expected and expected
    assert [v["id"] for v in axe_violations(page)] == []
    page.screenshot(path=str(screenshots / "figures-trends-week.png"), full_page=True)
    _to_docs(screenshots / "figures-trends-week.png")

    page.locator("#trend-drill tbody tr th a").first.click()
    page.wait_for_url(f"**/desk/tickets/{expected[0]}/")
