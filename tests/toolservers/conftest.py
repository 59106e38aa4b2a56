"""Tool servers for the tests: the retail example as a real subprocess over stdio, and a small
misbehaving server (hangs, dies, undeclared tools). Each test closes the connections it opened,
so every test starts the servers afresh (and the retail store from its db.json).

The deployment's limits (`sundry.toolservers.limits`) are set here as the tests run them: the
development defaults — the retail example's command, loopback hosts, the examples folder — plus
the misbehaving server and its declaration file, which live beside the tests. A test that needs
more widens them itself, through `tool_limits`."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import pytest

from sundry.tooling import mcp_client
from sundry.toolservers import catalog
from sundry.toolservers.models import ToolServer

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "tau2_retail_mcp"
FIXTURES = Path(__file__).resolve().parent


def retail_data_dir() -> Path | None:
    from sundry.evals.sources import shared_dir  # ../shared, or SUNDRY_SHARED_DIR

    shared = shared_dir()
    path = shared / "corpora" / "tau2" / "domains" / "retail" if shared else ROOT.parent / "shared"
    return path if (path / "db.json").is_file() else None


@pytest.fixture
def retail_dir() -> Path:
    path = retail_data_dir()
    if path is None:
        pytest.skip("../shared/corpora/tau2/domains/retail is absent (a fresh clone has no shared corpora)")
    return path


def retail_command(data: Path) -> str:
    return shlex.join([sys.executable, str(EXAMPLE / "server.py"), "--data", str(data)])


def odd_command() -> str:
    return shlex.join([sys.executable, str(FIXTURES / "odd_server.py")])


# The development default of SUNDRY_TOOL_COMMANDS (sundry/settings.py): the example, whatever its arguments.
RETAIL_ENTRY = "python examples/tau2_retail_mcp/server.py"


@pytest.fixture(autouse=True)
def tool_limits(settings):
    settings.TOOL_ENV_PREFIX = "SUNDRY_TOOL_"
    settings.TOOL_COMMANDS = [RETAIL_ENTRY, odd_command()]
    settings.TOOL_HOSTS = ["127.0.0.1", "localhost", "::1"]
    settings.TOOL_DECLARATIONS_DIRS = [ROOT / "examples", FIXTURES]
    return settings


@pytest.fixture(autouse=True)
def fresh_connections():
    catalog.forget()
    yield
    mcp_client.close_all()
    catalog.forget()


@pytest.fixture
def retail_server(retail_dir):
    """A ToolServer row for the retail example, on a class of its own."""
    from tests.factories import TicketClassFactory

    tclass = TicketClassFactory(name="Retail", slug="retail", approval_rules={})
    return ToolServer.objects.create(
        ticket_class=tclass,
        name="retail",
        command=retail_command(retail_dir),
        declaration_path=str(EXAMPLE / "retail.declarations.json"),
        timeout_seconds=20,
        sample_calls={
            "get_order_details": {"order_id": "#W4316152"},
            "get_user_details": {"user_id": "aarav_anderson_8794"},
            "find_user_id_by_email": {"email": "aarav.anderson9752@example.com"},
        },
    )
