"""An HTTP tool server that refuses our credentials: the reason is said plainly, and a header whose
environment variable is unset is never sent empty."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from sundry.toolservers import checks
from sundry.toolservers.models import ToolServer
from tests.factories import TicketClassFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def refusing():
    """A loopback server answering every request 401 (or 403), keeping the headers it was sent."""
    seen: list[dict] = []
    state = {"status": 401}

    class Handler(BaseHTTPRequestHandler):
        def _refuse(self):
            seen.append({k.lower(): v for k, v in self.headers.items()})
            self.send_response(state["status"])
            self.send_header("Content-Length", "0")
            self.end_headers()

        do_POST = do_GET = do_DELETE = _refuse

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield {"url": f"http://127.0.0.1:{server.server_address[1]}/mcp", "seen": seen, "state": state}
    server.shutdown()
    server.server_close()


@pytest.mark.parametrize("status", [401, 403])
def test_refused_credentials_are_said_plainly_and_an_unset_header_is_not_sent(refusing, monkeypatch, status):
    refusing["state"]["status"] = status
    monkeypatch.delenv("SUNDRY_TOOL_CRM_TOKEN", raising=False)
    server = ToolServer.objects.create(
        ticket_class=TicketClassFactory(),
        name="crm",
        transport="http",
        url=refusing["url"],
        header_env={"Authorization": "SUNDRY_TOOL_CRM_TOKEN"},
        timeout_seconds=5,
    )
    report = checks.test_connection(server)
    assert not report.ok and f"refused our credentials (HTTP {status}" in report.error, report.error
    assert refusing["seen"] and all("authorization" not in h for h in refusing["seen"])
    assert "Environment variables not set here: SUNDRY_TOOL_CRM_TOKEN." in report.warnings


def test_control_a_set_header_is_sent(refusing, monkeypatch):
    monkeypatch.setenv("SUNDRY_TOOL_CRM_TOKEN", "Bearer t0ken")
    server = ToolServer.objects.create(
        ticket_class=TicketClassFactory(),
        name="crm",
        transport="http",
        url=refusing["url"],
        header_env={"Authorization": "SUNDRY_TOOL_CRM_TOKEN"},
        timeout_seconds=5,
    )
    checks.test_connection(server)
    assert refusing["seen"] and refusing["seen"][0].get("authorization") == "Bearer t0ken"
