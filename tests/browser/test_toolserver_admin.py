"""An admin presses "test connection" on a tool server, in a real browser against the live server.

The server under test is the retail example, started by the web process as a subprocess;
the page lists its tools and the declaration's warnings. The screenshot goes to the docs.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model

from sundry.toolservers.models import ToolServer
from tests.browser.test_live_desk import open_as
from tests.factories import TicketClassFactory
from tests.toolservers.conftest import EXAMPLE, retail_data_dir

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
DOCS = Path(__file__).resolve().parents[2] / "docs" / "screenshots"


def _to_docs(shot: Path) -> None:
    """As the desk's screenshots: the committed copy in docs/ is refreshed on request only."""
    if os.environ.get("SUNDRY_UPDATE_DOC_SCREENSHOTS") == "1":
        DOCS.mkdir(parents=True, exist_ok=True)
        shutil.copy(shot, DOCS / shot.name)


def test_an_admin_tests_a_tool_servers_connection(browser, live_server_url, screenshots):
    data = retail_data_dir()
    if data is None:
        pytest.skip("../shared/corpora/tau2/domains/retail is absent (a fresh clone has no shared corpora)")
    # The example's declaration without one result path, so the page has an identifier warning to show.
    declaration = json.loads((EXAMPLE / "retail.declarations.json").read_text())
    del declaration["tools"]["get_order_details"]["results"]["fulfillments[].item_ids[]"]
    ROOT = Path(__file__).resolve().parents[2]
    path = ROOT / "artifacts" / "retail-without-fulfilment-items.declarations.json"
    path.parent.mkdir(exist_ok=True)
    path.write_text(json.dumps(declaration))  # artifacts/ is a declarations folder of the server's (conftest)
    tclass = TicketClassFactory(name="Retail (τ² over MCP)", slug="retail", approval_rules={})
    # As the README gives it: paths relative to Sundry's directory, `python` as Sundry's interpreter.
    server = ToolServer.objects.create(
        ticket_class=tclass,
        name="retail",
        command="python examples/tau2_retail_mcp/server.py --data ../shared/corpora/tau2/domains/retail",
        declaration_path=str(path.relative_to(ROOT)),
        timeout_seconds=20,
        sample_calls={
            "get_order_details": {"order_id": "#W4316152"},
            "get_user_details": {"user_id": "aarav_anderson_8794"},
            "cancel_pending_order": {"order_id": "#W9300146", "reason": "no longer needed"},
        },
    )
    admin = get_user_model().objects.create_superuser("root", "root@example.com", "pw")

    page = open_as(browser, live_server_url, admin, f"/admin/toolservers/toolserver/{server.pk}/change/")
    assert page.first_response.status == 200
    page.click("#test-connection")
    page.wait_for_selector("#connection-ok", timeout=60000)
    assert page.locator("#tools tbody tr").count() == 16
    warnings = page.locator("#warnings li").all_inner_texts()
    assert any("fulfillments[].item_ids[] holds values that look like identifiers" in w for w in warnings)
    assert any("cancel_pending_order: not sample-called, because it may write." in w for w in warnings)
    page.screenshot(path=str(screenshots / "admin-tool-server-test.png"), full_page=True)
    assert (screenshots / "admin-tool-server-test.png").stat().st_size > 5000
    _to_docs(screenshots / "admin-tool-server-test.png")


def test_the_desk_shows_a_retail_tickets_lanes(browser, live_server_url, screenshots):
    """A retail ticket worked over the MCP server (the agent runs here, beside the live server), then
    opened in the desk: the ledger panel holds the user, order, item and payment-method IDs."""
    from concurrent.futures import ThreadPoolExecutor

    from django.db import connection

    from sundry.agent.loop import agent_run
    from sundry.agent.provider.gateway import Gateway
    from sundry.agent.provider.scripted import ScriptedModel
    from sundry.agent.services import customer_message_post
    from sundry.desk.lifecycle import ticket_create
    from sundry.tooling import mcp_client
    from tests.factories import CustomerFactory, customer_confirms
    from tests.toolservers.test_retail_ticket import EMAIL, EXCHANGE, GIFT_CARD, ORDER, PRODUCT, USER, call

    data = retail_data_dir()
    if data is None:
        pytest.skip("../shared/corpora/tau2/domains/retail is absent (a fresh clone has no shared corpora)")
    tclass = TicketClassFactory(name="Retail", slug="retail", approval_rules={})
    ToolServer.objects.create(
        ticket_class=tclass,
        name="retail",
        timeout_seconds=20,
        command="python examples/tau2_retail_mcp/server.py --data ../shared/corpora/tau2/domains/retail",
        declaration_path="examples/tau2_retail_mcp/retail.declarations.json",
    )
    ticket = ticket_create(
        customer=CustomerFactory(name="Aarav Anderson", email=EMAIL).person,
        ticket_class=tclass,
        subject="Tea kettle exchange",
    )
    from sundry.tooling.messages import ModelResponse

    def work():  # off Playwright's loop: the after-commit pushes need a thread without one
        try:
            customer_message_post(
                ticket=ticket,
                wake=False,
                text=(f"Hi, I'm Aarav ({EMAIL}). Please exchange the tea kettle in order {ORDER} for the steel one."),
            )
            agent_run(
                ticket.pk,
                gateway=Gateway(
                    override=ScriptedModel(
                        [
                            call("find_user_id_by_email", "c1", email=EMAIL),
                            call("get_user_details", "c2", user_id=USER),
                            call("get_order_details", "c3", order_id=ORDER),
                            call("get_product_details", "c4", product_id=PRODUCT),
                            call("exchange_delivered_order_items", "x1", order_id="#W4316153", **EXCHANGE),
                            call("exchange_delivered_order_items", "x2", order_id=ORDER, **EXCHANGE),
                            ModelResponse(text="Please check the card and press Confirm."),
                        ]
                    )
                ),
            )
            # The exchange waits on its card until the customer presses Confirm; then it runs once.
            [card] = customer_confirms(ticket)
            assert card.outcome == "executed", card.outcome
        finally:
            mcp_client.close_all()
            connection.close()

    with ThreadPoolExecutor(max_workers=1) as pool:
        pool.submit(work).result(timeout=180)
    staff = get_user_model().objects.create_user("ann", password="pw", is_staff=True)
    page = open_as(browser, live_server_url, staff, f"/desk/tickets/{ticket.pk}/")
    ledger = page.locator("#panel-ledger").inner_text()
    for value in (USER, ORDER, GIFT_CARD, EXCHANGE["new_item_ids"][0]):
        assert value in ledger, value
    assert "exchange_delivered_order_items" in page.locator("#panel-state").inner_text()
    assert page.get_by_text("one edit away from").count() >= 1 or "mutation" in page.content()
    page.screenshot(path=str(screenshots / "desk-retail-ticket.png"), full_page=True)
    _to_docs(screenshots / "desk-retail-ticket.png")
    # The server's order lookup on the timeline: a card from its declaration file, not JSON.
    card = page.locator('.result-card[data-tool="get_order_details"]')
    card.scroll_into_view_if_needed()
    assert card.is_visible() and "Get order details" in card.inner_text()
    assert f"{ORDER} · Tea Kettle" in card.inner_text() and f"{GIFT_CARD} · gift_card" in card.inner_text()
    turn = page.locator("article.turn", has=card)
    assert not turn.locator("pre.result").first.is_visible()  # the raw result waits behind its "raw" toggle
    turn.screenshot(path=str(screenshots / "desk-toolserver-card.png"))
    assert (screenshots / "desk-toolserver-card.png").stat().st_size > 5000
    _to_docs(screenshots / "desk-toolserver-card.png")
