"""Adding a tool server to a class in the admin, its declaration file, and "test connection"."""

from __future__ import annotations

import json

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from sundry.toolservers import catalog, declfile
from sundry.toolservers.models import ToolServer
from tests.factories import TicketClassFactory
from tests.toolservers.conftest import EXAMPLE, FIXTURES, odd_command, retail_command

pytestmark = pytest.mark.django_db
RETAIL_DECL = EXAMPLE / "retail.declarations.json"


@pytest.fixture
def admin_client():
    client = Client()
    client.force_login(get_user_model().objects.create_superuser("root", "root@example.com", "pw"))
    return client


def test_the_declaration_file_is_validated_with_clear_messages(tmp_path):
    assert len(declfile.load(RETAIL_DECL).tools) == 16
    cases = {
        "{not json": "not JSON",
        json.dumps({"name": "x", "tools": {"a": {"name": "a", "writes": True}}}): "tools.a.writes: Extra inputs",
        json.dumps(
            {"name": "x", "tools": {"a": {"name": "a", "args": {"id": "order"}, "target": "order_id"}}}
        ): "target 'order_id' is not one of its ID arguments",
        json.dumps({"name": "x", "id_patterns": {"order": "(#W"}}): "id pattern 'order'",
        json.dumps({"name": "x", "typed_forms": {"order": ["(W", "#W"]}}): "typed form 'order'",
        json.dumps({"name": "x", "tools": {"a": {"name": "b"}}}): "tool 'a' declares name 'b'",
        json.dumps({"name": "x", "tools": {"a": {"name": "a", "consent": "delete"}}}): "tools.a.consent",
    }
    for text, expected in cases.items():
        path = tmp_path / "d.json"
        path.write_text(text)
        with pytest.raises(declfile.DeclarationError, match=expected.replace("(", r"\(").replace(".", r"\.")):
            declfile.load(path)
    with pytest.raises(declfile.DeclarationError, match="cannot read it"):
        declfile.load(tmp_path / "missing.json")


def test_the_retail_declaration_reads_a_real_result():
    decls = declfile.load(RETAIL_DECL)
    user = {
        "user_id": "aarav_anderson_8794",
        "name": {"first_name": "Aarav", "last_name": "Anderson"},
        "email": "a@example.com",
        "orders": ["#W4316152"],
        "payment_methods": {"gift_card_7245904": {"source": "gift_card", "id": "gift_card_7245904", "balance": 17}},
    }
    tool = decls.tools["get_user_details"]
    assert {(k, v) for _p, k, v in tool.ids(user)} == {
        ("user", "aarav_anderson_8794"),
        ("order", "#W4316152"),
        ("payment_method", "gift_card_7245904"),
    }
    assert (
        tool.descriptions(user, owner_kind=decls.owner_kind)["aarav_anderson_8794"] == "Aarav Anderson · a@example.com"
    )
    assert decls.tools["find_user_id_by_email"].ids("aarav_anderson_8794") == [("", "user", "aarav_anderson_8794")]
    assert decls.typed_ids("it's order W4316152, not #W1234567") == [("order", "#W1234567"), ("order", "#W4316152")]


def _form(**overrides):
    tclass = TicketClassFactory()
    data = {
        "ticket_class": tclass.pk,
        "name": "retail",
        "enabled": "on",
        "transport": "stdio",
        "command": "python examples/tau2_retail_mcp/server.py --data ../shared/corpora/tau2/domains/retail",
        "working_dir": "",
        "env_names": "",
        "url": "",
        "header_env": "{}",
        "timeout_seconds": "15",
        "declaration_path": str(RETAIL_DECL),
        "hold_undeclared_writes": "on",
        "sample_calls": "{}",
    }
    return {**data, **overrides}


def test_the_admin_adds_a_server_and_refuses_bad_settings_with_reasons(admin_client):
    ok = admin_client.post("/admin/toolservers/toolserver/add/", _form())
    assert ok.status_code == 302 and ToolServer.objects.filter(name="retail").exists()
    cases = [
        (dict(declaration_path="examples/nowhere.json"), "cannot read it"),  # inside the folder: said plainly
        (dict(env_names="sk-live-123"), "never the values"),
        (dict(header_env='{"Authorization": "Bearer abc"}'), "never the secret itself"),
        (dict(transport="http", url=""), "An HTTP server needs its URL"),
        (dict(command=""), "needs the command that starts it"),
        (dict(sample_calls='{"get_order_details": "#W1"}'), "tool → arguments"),
        (dict(sample_calls="[" * 5000 + "]" * 5000), "nested more than 32 levels"),
        (dict(header_env='{"a":' * 5000 + "1" + "}" * 5000), "nested more than 32 levels"),
    ]
    for overrides, message in cases:
        page = admin_client.post("/admin/toolservers/toolserver/add/", _form(name="other", **overrides))
        assert page.status_code == 200 and message in page.content.decode(), overrides
    assert not ToolServer.objects.filter(name="other").exists()


def test_secrets_come_from_the_environment_never_the_database(monkeypatch, tool_limits):
    tool_limits.TOOL_HOSTS = ["tools.example.com"]
    server = ToolServer.objects.create(
        ticket_class=TicketClassFactory(),
        name="s",
        command=odd_command(),
        env_names="SUNDRY_TOOL_ODD_TOKEN",
        transport="stdio",
    )
    monkeypatch.setenv("SUNDRY_TOOL_ODD_TOKEN", "s3cret-value")
    assert dict(catalog.server_spec(server).env) == {"SUNDRY_TOOL_ODD_TOKEN": "s3cret-value"}
    http = ToolServer.objects.create(
        ticket_class=server.ticket_class,
        name="h",
        transport="http",
        url="https://tools.example.com/mcp",
        header_env={"Authorization": "SUNDRY_TOOL_ODD_TOKEN"},
    )
    assert dict(catalog.server_spec(http).headers) == {"Authorization": "s3cret-value"}
    stored = json.dumps(list(ToolServer.objects.values()), default=str)
    assert "s3cret-value" not in stored and "SUNDRY_TOOL_ODD_TOKEN" in stored


def _test(client, server):
    return client.post(f"/admin/toolservers/toolserver/{server.pk}/test-connection/")


def test_test_connection_lists_the_tools_with_no_warnings_for_a_full_declaration(admin_client, retail_server):
    page = _test(admin_client, retail_server)
    html = page.content.decode()
    assert page.status_code == 200 and "Connected: 16 tools listed." in html
    assert 'id="warnings-none"' in html, html[html.find("Warnings") :][:800]
    assert "exchange_delivered_order_items" in html and "undeclared</strong>" not in html


def test_test_connection_warns_of_undeclared_id_fields_and_paths_that_never_occur(
    admin_client, retail_server, tmp_path, tool_limits
):
    tool_limits.TOOL_DECLARATIONS_DIRS = [tmp_path]
    data = json.loads(RETAIL_DECL.read_text())
    results = data["tools"]["get_order_details"]["results"]
    del results["fulfillments[].item_ids[]"]
    results["refund_ids[]"] = "refund"
    del data["tools"]["calculate"]
    path = tmp_path / "retail.json"
    path.write_text(json.dumps(data))
    ToolServer.objects.filter(pk=retail_server.pk).update(declaration_path=str(path))
    retail_server.refresh_from_db()
    html = _test(admin_client, retail_server).content.decode()
    assert "get_order_details: result field fulfillments[].item_ids[] holds values that look like identifiers" in html
    assert "get_order_details: declared result path refund_ids[] does not occur in the sample result." in html
    assert "calculate: undeclared" in html and "undeclared</strong>" in html


def test_test_connection_never_sample_calls_a_write(admin_client):
    server = ToolServer.objects.create(
        ticket_class=TicketClassFactory(),
        name="odd",
        command=odd_command(),
        timeout_seconds=5,
        connect_timeout_seconds=20,
        declaration_path=str(FIXTURES / "odd.declarations.json"),
        sample_calls={"stamp_record": {"ref": "REC-10001", "note": "x"}, "lookup_ticket": {"ref": "REC-10001"}},
    )
    html = _test(admin_client, server).content.decode()
    assert "stamp_record: not sample-called, because it may write." in html
    assert "STAMP-" not in html


def test_test_connection_says_why_it_could_not_connect(admin_client, tool_limits):
    tool_limits.TOOL_COMMANDS = ["python -c 'import sys; sys.exit(4)'"]  # allowed, so it starts, and exits
    server = ToolServer.objects.create(
        ticket_class=TicketClassFactory(),
        name="broken",
        timeout_seconds=3,
        command="python -c 'import sys; sys.exit(4)'",
    )
    html = _test(admin_client, server).content.decode()
    assert 'id="connection-error"' in html and "Could not connect" in html
    assert "SUNDRY_TOOL_COMMANDS" not in html  # it ran and failed; the limits did not stop it


def test_only_admins_may_test_a_connection_and_only_by_post(admin_client, retail_dir):
    server = ToolServer.objects.create(ticket_class=TicketClassFactory(), name="r", command=retail_command(retail_dir))
    staff = Client()
    staff.force_login(get_user_model().objects.create_user("ann", password="pw", is_staff=True))
    assert _test(staff, server).status_code == 403
    anonymous = _test(Client(), server)
    assert anonymous.status_code == 302 and "/login/" in anonymous["Location"]
    assert admin_client.get(f"/admin/toolservers/toolserver/{server.pk}/test-connection/").status_code == 405
    class_page = admin_client.get(f"/admin/tickets/ticketclass/{server.ticket_class_id}/change/")
    assert class_page.status_code == 200
    assert f'href="/admin/toolservers/toolserver/{server.pk}/change/">r</a>' in class_page.content.decode()


def test_a_class_may_hold_its_servers_tools_for_approval():
    from django.forms.models import model_to_dict

    from sundry.desk.admin import TicketClassForm

    tclass = TicketClassFactory()
    rules = {"cancel_pending_order": {}}

    def form_errors():
        data = {**model_to_dict(tclass), "approval_rules": json.dumps(rules)}
        form = TicketClassForm(data=data, instance=tclass)
        return form.errors.get("approval_rules", [])

    assert any("'cancel_pending_order' is not a tool" in e for e in form_errors())  # no server lists it yet
    ToolServer.objects.create(
        ticket_class=tclass, name="retail", command=odd_command(), listed_tools=[{"name": "cancel_pending_order"}]
    )
    assert form_errors() == []


def test_test_connection_shows_the_tail_of_a_server_that_fails_to_start(admin_client):
    server = ToolServer.objects.create(
        ticket_class=TicketClassFactory(), name="broken", timeout_seconds=10, command=odd_command() + " --fail-at-start"
    )
    html = _test(admin_client, server).content.decode()
    assert 'id="connection-error"' in html
    stderr = html[html.index('id="server-stderr"') :]
    assert "cannot open the records database at /nonexistent/records.db" in stderr[: stderr.index("</pre>")]
    # Control: the same server started normally connects and shows no stderr.
    ToolServer.objects.filter(pk=server.pk).update(command=odd_command())
    server.refresh_from_db()
    html = _test(admin_client, server).content.decode()
    assert 'id="connection-ok"' in html and 'id="server-stderr"' not in html


def test_samples_run_in_the_order_typed_each_labelled_by_its_own_result(admin_client):
    tclass = TicketClassFactory()
    typed = (
        '{"lookup_ticket": {"ref": "REC-10001"}, "crash": {"ref": "REC-10001"}, "peek": {"ref": "REC-10002"}, '
        '"stamp_record": {"ref": "REC-10001", "note": "x"}, "no_such_tool": {}}'
    )
    form = _form(
        name="odd",
        ticket_class=tclass.pk,
        command=odd_command(),
        timeout_seconds="10",
        declaration_path=str(FIXTURES / "odd.declarations.json"),
        sample_calls=typed,
    )
    assert admin_client.post("/admin/toolservers/toolserver/add/", form).status_code == 302
    server = ToolServer.objects.get(name="odd")
    html = _test(admin_client, server).content.decode()
    samples = html[html.index('id="samples"') : html.index("</ol>")]
    lines = [line.split("</li>")[0] for line in samples.split("<li")[1:]]
    assert [line.split("<code>")[1].split("</code>")[0] for line in lines] == [
        "lookup_ticket",
        "crash",
        "peek",
        "stamp_record",
        "no_such_tool",
    ]
    assert lines[0].endswith(": ok") and ": failed: odd: " in lines[1]
    assert lines[2].endswith(": ok"), "a sample after the one that killed the server runs on a fresh connection"
    assert lines[3].endswith(": not called: it may write")
    assert lines[4].endswith(": not called: the server does not list this tool")
    # Control: the same samples kept as a JSON object come back in jsonb's key order, not as typed.
    ToolServer.objects.filter(pk=server.pk).update(sample_calls=json.loads(typed))
    server.refresh_from_db()
    assert [name for name, _ in server.sample_list()][:2] == ["peek", "crash"]


def test_the_third_party_example_declaration_loads_with_its_writes_opaque():
    decls = declfile.load(EXAMPLE.parent / "sqlite_reference" / "sqlite.declarations.json")
    assert {n for n, t in decls.tools.items() if t.write and t.opaque} == {"write_query", "create_table"}
    assert {n for n, t in decls.tools.items() if t.lookup} == {"list_tables", "describe_table", "read_query"}
