"""The deployment's limits on tool servers, which an admin cannot widen (`sundry.toolservers.limits`).

Each limit is held twice: when the admin saves a server (the form refuses it, naming the setting
that would allow it) and when Sundry connects (a row written some other way is refused before
anything is started, opened or contacted). A refusal reads the same whatever lies outside the
limits: an open port or a closed one, a file that exists or not, a command that exists or not.
"""

from __future__ import annotations

import json
import os
import shlex
import socket
import sys
from contextlib import contextmanager

import pytest
from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.test import Client

from sundry.tooling import mcp_client
from sundry.toolservers import catalog, checks, declfile, limits
from sundry.toolservers.models import ToolServer
from tests.factories import TicketClassFactory
from tests.test_docs import variables_read
from tests.toolservers.conftest import EXAMPLE, FIXTURES, ROOT, odd_command

pytestmark = pytest.mark.django_db
ADD = "/admin/toolservers/toolserver/add/"


@pytest.fixture
def admin_client():
    client = Client()
    client.force_login(get_user_model().objects.create_superuser("root", "root@example.com", "pw"))
    return client


def form(**overrides) -> dict:
    data = {
        "ticket_class": TicketClassFactory().pk,
        "name": "probe",
        "enabled": "on",
        "transport": "stdio",
        "command": odd_command(),
        "working_dir": "",
        "env_names": "",
        "url": "",
        "header_env": "{}",
        "timeout_seconds": "5",
        "declaration_path": "",
        "hold_undeclared_writes": "on",
        "sample_calls": "{}",
    }
    return {**data, **overrides}


def refused_at_save(client, message: str, **overrides) -> None:
    before = ToolServer.objects.count()
    page = client.post(ADD, form(**overrides))
    html = page.content.decode()
    assert page.status_code == 200 and message in html.replace("&#x27;", "'"), (overrides, html[:300])
    assert ToolServer.objects.count() == before


def row(**fields) -> ToolServer:
    """A server written past the admin (a shell, a fixture, a migration): no `clean` ran."""
    defaults = {"ticket_class": TicketClassFactory(), "name": "probe", "timeout_seconds": 5}
    return ToolServer.objects.create(**{**defaults, **fields})


@contextmanager
def listener():
    """A real TCP port on 127.0.0.1 that records whether anyone connected."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(8)
    sock.setblocking(False)
    try:
        yield sock
    finally:
        sock.close()


def connected(sock: socket.socket) -> bool:
    try:
        conn, _ = sock.accept()
    except BlockingIOError:
        return False
    conn.close()
    return True


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # nothing listens once it is closed


# --- environment variables ------------------------------------------------------------------------


def test_sundrys_variables_and_unprefixed_ones_are_refused_at_save(admin_client):
    for name in ("DATABASE_URL", "REDIS_URL", "SUNDRY_SECRET_KEY", "OPENAI_API_KEY"):
        refused_at_save(admin_client, f"{name}: Sundry's own settings", env_names=f"SUNDRY_TOOL_OK, {name}")
        refused_at_save(
            admin_client,
            f"{name}: Sundry's own settings",
            transport="http",
            url="http://127.0.0.1:8765/mcp",
            header_env=json.dumps({"Authorization": name}),
        )
    refused_at_save(
        admin_client,
        "RETAIL_API_TOKEN: a tool server may only read environment variables whose "
        "names start with SUNDRY_TOOL_ (SUNDRY_TOOL_ENV_PREFIX)",
        env_names="RETAIL_API_TOKEN",
    )
    refused_at_save(
        admin_client,
        "start with SUNDRY_TOOL_",
        transport="http",
        url="http://127.0.0.1:8765/mcp",
        header_env='{"Authorization": "HOME"}',
    )
    # The prefix's own variables pass, both ways.
    ok = admin_client.post(ADD, form(env_names="SUNDRY_TOOL_RETAIL_API_TOKEN"))
    assert ok.status_code == 302, ok.content.decode()[:500]
    ok = admin_client.post(
        ADD,
        form(
            name="h",
            transport="http",
            url="http://127.0.0.1:8765/mcp",
            header_env='{"Authorization": "SUNDRY_TOOL_RETAIL_API_TOKEN"}',
        ),
    )
    assert ok.status_code == 302


def test_sundrys_own_variables_never_pass_however_wide_the_prefix(tool_limits):
    tool_limits.TOOL_ENV_PREFIX = ""
    own = variables_read() | {
        "SUNDRY_TOOL_COMMANDS",
        "SUNDRY_TOOL_HOSTS",
        "SUNDRY_TOOL_ENV_PREFIX",
        "SUNDRY_TOOL_DECLARATIONS_DIR",
        "PGPASSWORD",
        "DJANGO_SETTINGS_MODULE",
    }
    assert {"DATABASE_URL", "REDIS_URL", "SUNDRY_SECRET_KEY", "ANTHROPIC_API_KEY"} <= own
    passed = [name for name in sorted(own) if not limits.env_refusal([name])]
    assert passed == [], f"Sundry's own variables a wide prefix lets through: {passed}"
    assert limits.env_refusal(["RETAIL_API_TOKEN"]) == ""  # the wide prefix does widen the rest
    server = ToolServer(
        ticket_class=TicketClassFactory(), name="w", command=odd_command(), env_names="RETAIL_API_TOKEN, DATABASE_URL"
    )
    with pytest.raises(ValidationError) as refused:
        server.full_clean()
    assert refused.value.message_dict == {
        "env_names": ["DATABASE_URL: Sundry's own settings; a tool server never receives it."]
    }


def test_a_row_naming_sundrys_variables_gets_no_value_and_no_connection(monkeypatch):
    monkeypatch.setenv("RETAIL_API_TOKEN", "unprefixed-secret")
    assert os.environ.get("DATABASE_URL")  # the suite runs with it set: there is a value to leak
    with listener() as sock:
        port = sock.getsockname()[1]
        for variable in ("DATABASE_URL", "RETAIL_API_TOKEN"):
            http = row(
                name=f"h-{variable.lower()}",
                transport="http",
                url=f"http://127.0.0.1:{port}/mcp",
                header_env={"Authorization": variable},
            )
            spec = catalog.server_spec(http)
            assert spec.headers == () and variable in spec.refused
            report = checks.test_connection(http)
            assert not report.ok and variable in report.error
            with pytest.raises(mcp_client.ToolServerError, match=variable):
                mcp_client.connection(spec)  # as the agent calls a tool
            assert catalog.class_tools(http.ticket_class).remote == {}
        assert not connected(sock), "a refused server was contacted"
    for variable in ("DATABASE_URL", "RETAIL_API_TOKEN"):
        stdio = row(name=f"s-{variable.lower()}", command=odd_command(), env_names=f"SUNDRY_TOOL_X,{variable}")
        spec = catalog.server_spec(stdio)
        assert spec.env == () and variable in spec.refused
        report = checks.test_connection(stdio)
        assert not report.ok and variable in report.error and report.tools == []
        # However the spec was built, the connection itself refuses to pass the variable on.
        built = mcp_client.ServerSpec(name="odd", command=odd_command(), env=((variable, os.environ[variable]),))
        with pytest.raises(mcp_client.ToolServerError, match=variable):
            mcp_client.Connection(built).open()


# --- stdio commands ---------------------------------------------------------------------------------


def test_a_command_not_on_the_list_is_refused_at_save_and_never_run(admin_client, tmp_path):
    marker = tmp_path / "ran"
    touch = shlex.join([sys.executable, "-c", f"open({str(marker)!r}, 'w').close()"])
    refused_at_save(admin_client, limits.COMMAND_REFUSED, command=touch)
    server = row(command=touch)
    report = checks.test_connection(server)
    assert not report.ok and report.error == limits.COMMAND_REFUSED
    assert catalog.class_tools(server.ticket_class).remote == {}
    with pytest.raises(mcp_client.ToolServerError, match="SUNDRY_TOOL_COMMANDS"):
        mcp_client.Connection(mcp_client.ServerSpec(name="t", command=touch)).open()
    assert not marker.exists(), "a command off the list was run"
    # A command that does not exist reads the same as one that does.
    missing = row(name="missing", command="/nonexistent/bin/mcp-server --stdio")
    assert checks.test_connection(missing).error == report.error


def save_errors(**fields) -> dict:
    """What saving a server with `fields` is refused for (the admin form runs the same `clean`)."""
    try:
        ToolServer(**{"ticket_class": TicketClassFactory(), "name": "x", **fields}).full_clean()
    except ValidationError as exc:
        return exc.message_dict
    return {}


def test_only_the_listed_command_lines_match(tmp_path):
    example = f"python examples/tau2_retail_mcp/server.py --data {tmp_path}"
    assert save_errors(command=example) == {}
    assert save_errors(command=shlex.join([sys.executable, str(EXAMPLE / "server.py")]), working_dir="/") == {}
    for command in (
        "python -c 'import os' examples/tau2_retail_mcp/server.py",  # words before the listed ones
        "python examples/tau2_retail_mcp/../../manage.py shell",  # a path that leaves the listed file
        "python examples/tau2_retail_mcp/server.py.bak",
        "python",
        "sh -c 'python examples/tau2_retail_mcp/server.py'",
    ):
        assert save_errors(command=command) == {"command": [limits.COMMAND_REFUSED]}, command
    assert limits.command_refusal("python 'examples/tau2_retail_mcp/server.py", str(ROOT)) == limits.COMMAND_REFUSED
    # The working directory cannot swap the script: relative paths are read from where it runs.
    assert save_errors(command=example, working_dir=str(tmp_path)) == {"command": [limits.COMMAND_REFUSED]}


def test_with_no_commands_listed_stdio_is_off_and_an_open_connection_is_not_reused(admin_client, tool_limits):
    spec = catalog.server_spec(row(command=odd_command()))
    assert mcp_client.connection(spec).alive  # allowed: it starts
    tool_limits.TOOL_COMMANDS = []
    with pytest.raises(mcp_client.ToolServerError, match="stdio tool servers are off"):
        mcp_client.connection(spec)
    refused_at_save(admin_client, limits.STDIO_OFF, name="other", command=odd_command())


# --- HTTP hosts -------------------------------------------------------------------------------------------


def test_a_host_not_listed_is_refused_alike_whether_its_port_is_open_or_closed(admin_client, tool_limits):
    tool_limits.TOOL_HOSTS = ["tools.example.com", "localhost:1"]
    with listener() as sock:
        urls = [f"http://127.0.0.1:{sock.getsockname()[1]}/mcp", f"http://127.0.0.1:{closed_port()}/mcp"]
        at_save, at_connect = set(), set()
        for url in urls:
            refused_at_save(admin_client, "SUNDRY_TOOL_HOSTS", transport="http", command="", url=url)
            with pytest.raises(ValidationError) as refused:
                ToolServer(ticket_class=TicketClassFactory(), name="x", transport="http", url=url).full_clean()
            at_save.add(json.dumps(refused.value.message_dict))
            report = checks.test_connection(row(name=f"p{url.rsplit(':', 1)[1][:5]}", transport="http", url=url))
            assert not report.ok
            at_connect.add(report.error)
            with pytest.raises(mcp_client.ToolServerError) as failed:
                mcp_client.probe(mcp_client.ServerSpec(name="p", url=url), timeout=5)
            at_connect.add(str(failed.value).removeprefix("p: "))
        assert at_save == {json.dumps({"url": [limits.HOST_REFUSED]})}
        assert at_connect == {limits.HOST_REFUSED}
        assert not connected(sock), "a refused host was contacted"


def test_hosts_match_by_name_and_port_as_the_connection_reads_the_url(tool_limits):
    tool_limits.TOOL_HOSTS = ["tools.example.com:8443", "*.corp.example", "[::1]:9000", "127.0.0.1"]
    allowed = [
        "https://tools.example.com:8443/mcp",
        "http://crm.corp.example/mcp",
        "http://[::1]:9000/mcp",
        "http://127.0.0.1:8765/mcp",
        "HTTP://TOOLS.EXAMPLE.COM:8443/mcp",
    ]
    refused = [
        "https://tools.example.com/mcp",
        "http://corp.example/mcp",
        "http://corp.example.evil.com/mcp",
        "http://[::1]:9001/mcp",
        "http://2130706433/mcp",
        "http://127.1/mcp",
        "http://localhost/mcp",
        "ftp://127.0.0.1/mcp",
        "http://127.0.0.1@evil.example/mcp",
        "file:///etc/passwd",
        "not a url",
    ]
    assert [u for u in allowed if save_errors(transport="http", url=u)] == []
    assert [u for u in refused if limits.HOST_REFUSED not in save_errors(transport="http", url=u).get("url", [])] == []


# --- declaration files ------------------------------------------------------------------------------------


def test_a_declaration_path_outside_the_folder_is_refused_alike_whether_or_not_it_exists(
    admin_client, tool_limits, tmp_path
):
    folder, outside = tmp_path / "declarations", tmp_path / "elsewhere"
    folder.mkdir()
    outside.mkdir()
    text = (FIXTURES / "odd.declarations.json").read_text()
    (folder / "odd.json").write_text(text)
    (outside / "real.json").write_text(text)  # a valid declaration file: only the folder keeps it out
    (folder / "to-real.json").symlink_to(outside / "real.json")
    (folder / "to-missing.json").symlink_to(outside / "missing.json")
    (folder / "loop.json").symlink_to(folder / "loop.json")
    tool_limits.TOOL_DECLARATIONS_DIRS = [folder]
    pairs = [  # (exists, does not)
        (str(outside / "real.json"), str(outside / "missing.json")),
        (str(folder / ".." / "elsewhere" / "real.json"), str(folder / ".." / "elsewhere" / "missing.json")),
        (str(folder / "to-real.json"), str(folder / "to-missing.json")),
        (os.path.relpath(outside / "real.json", ROOT), os.path.relpath(outside / "missing.json", ROOT)),
        ("/etc/passwd", "/etc/no-such-file-here"),
        (str(folder), str(folder / "loop.json")),
    ]
    expected = limits.DECLARATION_REFUSED.format(folders=folder)
    for exists, absent in pairs:
        for path in (exists, absent):
            with pytest.raises(declfile.DeclarationError) as refused:
                catalog.declarations(ToolServer(name="d", declaration_path=path))
            assert str(refused.value) == expected, path
            page = admin_client.post(ADD, form(declaration_path=path)).content.decode().replace("&#x27;", "'")
            assert expected in page and "cannot read it" not in page, path
    assert not ToolServer.objects.filter(name="probe").exists()
    # Inside the folder the file is read, and a missing one said plainly.
    assert set(catalog.declarations(ToolServer(name="d", declaration_path=str(folder / "odd.json"))).tools)
    with pytest.raises(declfile.DeclarationError, match="cannot read it"):
        catalog.declarations(ToolServer(name="d", declaration_path=str(folder / "nope.json")))
    # At connect time a row written past the admin reads nothing outside: its tools are undeclared.
    server = row(command=odd_command(), declaration_path=str(folder / "to-real.json"))
    report = checks.test_connection(server)
    assert report.ok and f"Declaration file: {expected.rstrip('.')}." in " ".join(report.warnings)
    assert all(not t.declared for t in report.tools)
    loaded = catalog.class_tools(server.ticket_class)
    assert loaded.remote and not any(t.declared for t in loaded.remote.values())
    assert any(expected.rstrip(".") in p for p in loaded.problems)


@pytest.mark.django_db
@pytest.mark.parametrize("stamped", [True, False], ids=["stamped", "control-unstamped"])
def test_an_edited_declaration_file_is_read_on_the_next_step(tmp_path, tool_limits, monkeypatch, stamped):
    """A team edits its declaration file: the class's tools follow at once, not after a cache lapses.
    Control: without the file's stamp in the cache key, the old listing is kept."""
    if not stamped:
        monkeypatch.setattr(catalog, "_file_stamp", lambda server: None)
    tool_limits.TOOL_DECLARATIONS_DIRS = [tmp_path]
    decl = json.loads((FIXTURES / "odd.declarations.json").read_text())
    path = tmp_path / "odd.json"
    path.write_text(json.dumps(decl))
    server = ToolServer.objects.create(
        ticket_class=TicketClassFactory(),
        name="odd",
        command=odd_command(),
        timeout_seconds=5,
        connect_timeout_seconds=20,
        declaration_path=str(path),
    )
    first = catalog.class_tools(server.ticket_class)
    assert catalog.class_tools(server.ticket_class) is first  # unchanged: the listing is kept
    name = next(iter(decl["tools"]))
    decl["tools"][name]["description"] = "Edited by the team."
    path.write_text(json.dumps(decl, indent=1))  # another size as well as another time
    again = catalog.class_tools(server.ticket_class)
    assert (again is not first) == stamped
    assert (again.declarations[0].tools[name].description == "Edited by the team.") == stamped
