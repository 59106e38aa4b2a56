"""An admin tries 6,000 tokens for the seeded Standard class in the budget lab, in a real browser.

The class's history is a few tickets the offline agent worked; the page must say the fixed part
leaves compaction no room, show the recorded, current and proposed figures side by side, and pass
axe-core. The screenshot goes to the docs.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest
from django.contrib.auth import get_user_model
from django.db import connection

from sundry.agent.loop import agent_run
from sundry.agent.models import AgentStep
from sundry.agent.services import customer_message_post
from sundry.desk.lifecycle import ticket_create
from sundry.shop.demo import ensure_classes
from tests.browser.test_desk_pages import axe_violations
from tests.browser.test_live_desk import LIVE, open_as
from tests.browser.test_toolserver_admin import _to_docs
from tests.factories import CustomerFactory, paid_order

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_an_admin_proposes_6000_tokens_for_standard(browser, live_server_url, screenshots):
    from playwright.sync_api import expect

    standard = ensure_classes()["standard"]

    opened = []

    def work():  # off Playwright's loop: the after-commit pushes need a thread without one
        try:
            for n in range(3):
                customer = CustomerFactory()
                order = paid_order(customer=customer, number=f"SU-7110{n}")
                ticket = ticket_create(customer=customer.person, ticket_class=standard, subject="Where is my order?")
                for text in (f"Where is {order.number}?", "It was meant to arrive on Monday.", "What did I order?"):
                    customer_message_post(ticket=ticket, text=text, wake=False)
                    agent_run(ticket.pk)
                opened.append(ticket.pk)
        finally:
            connection.close()

    with ThreadPoolExecutor(max_workers=1) as pool:
        pool.submit(work).result(timeout=180)
    admin = get_user_model().objects.create_superuser("root", "root@example.com", "pw")

    page = open_as(browser, live_server_url, admin, f"/desk/figures/lab/{standard.pk}/")
    assert page.first_response.status == 200
    page.fill("#id_budget", "6000")
    page.click("#lab-replay")
    page.wait_for_url("**budget=6000**")
    assert "62% of the 6,000-token budget" in page.inner_text("#lab-warning")
    steps = str(AgentStep.objects.filter(ticket__ticket_class=standard).count())
    assert page.locator('#lab-figures tr[data-figure="steps"] td').all_inner_texts() == [steps] * 3
    # Cost per ticket and per month, priced for the offline class at the page's model. The class is new, so its
    # volume is the window's rate: three tickets within a day (counted as one day) are 90 a month.
    per_month = page.locator('#lab-figures tr[data-figure="cost_per_month"]')
    assert "(90 tickets)" in per_month.inner_text() and all(
        t.startswith("$") for t in per_month.locator("td").all_inner_texts()
    )
    assert [v["id"] for v in axe_violations(page)] == []
    page.screenshot(path=str(screenshots / "budget-lab.png"), full_page=True)
    _to_docs(screenshots / "budget-lab.png")

    # Kept: the server's worker runs it with the harness's checks; the page shows progress, then the figures.
    page.click("#lab-keep")
    page.wait_for_url("**/proposals/*/")
    expect(page.locator("#lab-fidelity")).to_be_visible(timeout=LIVE)
    assert page.locator("svg[role=img] title").count() == 2 + 3  # cost, fidelity, three tickets' lives
    assert [v["id"] for v in axe_violations(page)] == []
    page.screenshot(path=str(screenshots / "budget-proposal.png"), full_page=True)
    _to_docs(screenshots / "budget-proposal.png")

    # Applied: an open ticket's Budget panel, on another admin's desk page, changes without a reload.
    desk = open_as(browser, live_server_url, admin, f"/desk/tickets/{opened[0]}/")
    expect(desk.locator("#panel-budget")).to_contain_text("of 8000 tokens")
    page.check("input[name=accept_tight_budget]")
    page.click("#lab-apply button[type=submit]")
    expect(page.locator("#lab-applied")).to_be_visible()
    expect(desk.locator("#panel-budget")).to_contain_text("of 6000 tokens · compaction at 4800", timeout=LIVE)


def test_an_admin_replays_an_uploaded_traces_file(browser, live_server_url, screenshots, tmp_path):
    """The page's own button sends the file (htmx, multipart); a bad file's reason is shown in place with the
    other values kept, nothing kept; the good file's proposal runs and shows its source beside its figures."""
    from pathlib import Path

    from playwright.sync_api import expect

    from sundry.tickets.models import BudgetProposal

    standard = ensure_classes()["standard"]
    admin = get_user_model().objects.create_superuser("root", "root@example.com", "pw")
    bad = tmp_path / "notes.json"
    bad.write_text("[]")
    good = Path(__file__).resolve().parent.parent / "evals" / "fixtures" / "tau2_retail_small.json"

    page = open_as(browser, live_server_url, admin, f"/desk/figures/lab/{standard.pk}/")
    page.fill("#id_budget", "5000")
    page.fill("#id_trigger", "0.6")
    page.fill("#id_kept", "2")
    page.check("input[name=source][value=traces]")
    page.set_input_files("#id_traces_file", str(bad))
    page.click("#lab-keep")
    expect(page.locator("#traces_file-error")).to_contain_text("notes.json holds no OpenAI message list")
    assert page.input_value("#id_budget") == "5000" and page.is_checked("input[name=source][value=traces]")
    assert not BudgetProposal.objects.exists()

    page.set_input_files("#id_traces_file", str(good))
    page.click("#lab-keep")
    page.wait_for_url("**/proposals/*/")
    expect(page.locator("#lab-figures")).to_be_visible(timeout=LIVE)
    assert page.inner_text("#lab-source") == f"imported traces: {good.name} (at most 50 tickets)"
    assert page.locator("#lab-figures thead th").all_inner_texts()[1] == "Never compacted"
    never, current, proposed = page.locator('#lab-figures tr[data-figure="compactions"] td').all_inner_texts()
    assert never == current == "0" and int(proposed) > 0  # the proposal's trigger, 3,000, fires on this ticket
    assert "1 imported ticket from tau2_retail_small.json (retail)" in page.inner_text("#lab-source-note")
    assert [v["id"] for v in axe_violations(page)] == []
    page.screenshot(path=str(screenshots / "budget-proposal-traces.png"), full_page=True)
    _to_docs(screenshots / "budget-proposal-traces.png")
