"""An admin presses "test connection" on a tool server, in a real browser against the live server.

The server under test is the retail example, started by the web process as a subprocess;
the page lists its tools and the declaration's warnings. The screenshot goes to the docs.
"""

from __future__ import annotations

import json
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
    path.write_text(json.dumps(declaration))
    tclass = TicketClassFactory(name="Retail (τ² over MCP)", slug="retail", approval_rules={})
    # As the README gives it: paths relative to Sundry's directory, `python` as Sundry's interpreter.
    server = ToolServer.objects.create(
        ticket_class=tclass, name="retail",
        command="python examples/tau2_retail_mcp/server.py --data ../shared/corpora/tau2/domains/retail",
        declaration_path=str(path.relative_to(ROOT)),
        timeout_seconds=20, sample_calls={"get_order_details": {"order_id": "#W4316152"},
                                          "get_user_details": {"user_id": "aarav_anderson_8794"},
                                          "cancel_pending_order": {"order_id": "#W9300146", "reason": "no longer needed"}})
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
    DOCS.mkdir(parents=True, exist_ok=True)
    shutil.copy(screenshots / "admin-tool-server-test.png", DOCS / "admin-tool-server-test.png")
