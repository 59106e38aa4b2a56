"""Staff edits through the desk's htmx views: conflicts, refusals, CSRF, escaping, filters, admin figures."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from sundry.context import services as lanes
from sundry.context.models import LedgerEntry, StateValue
from sundry.desk.lifecycle import ticket_create
from sundry.desk.selectors import ChartPoint, budget_chart
from sundry.tickets.models import Ticket, TicketClass
from sundry.tickets.services import turn_append
from tests.factories import CustomerFactory, TicketClassFactory, paid_order

pytestmark = pytest.mark.django_db
HX = {"HTTP_HX_REQUEST": "true"}
XSS = '<img src=x onerror="alert(1)"> <button hx-get="/desk/" hx-trigger="load">go</button>'


@pytest.fixture
def desk():
    users = get_user_model().objects
    ann, ben = (
        users.create_user("ann", password="pw", is_staff=True),
        users.create_user("ben", password="pw", is_staff=True),
    )
    admin = users.create_user("root", password="pw", is_staff=True, is_superuser=True)
    alice_user = users.create_user("alice", password="pw")
    alice = CustomerFactory(user=alice_user)
    paid_order(customer=alice, number="SU-51111")
    paid_order(customer=alice, number="SU-52222")
    ticket = ticket_create(customer=alice.person, ticket_class=TicketClassFactory(), subject="Refund please")
    clients = {}
    for name, user in (("ann", ann), ("ben", ben), ("admin", admin), ("alice", alice_user)):
        clients[name] = Client()
        clients[name].force_login(user)
    return {"ticket": ticket, "c": clients, "ann": ann, "alice": alice}


def _post(client, url, data):
    return client.post(url, data, **HX)


def test_two_staff_saving_one_field_the_second_gets_a_conflict_and_the_current_value(desk):
    ticket, c = desk["ticket"], desk["c"]
    seen = lanes.state_set(ticket=ticket, name="order_number", value="SU-51111", turn=1, source="model")
    url = f"/desk/tickets/{ticket.pk}/state"
    first = _post(
        c["ann"], url, {"name": "order_number", "action": "correct", "value": "SU-52222", "value_id": seen.pk}
    )
    assert first.status_code == 200
    second = _post(
        c["ben"], url, {"name": "order_number", "action": "correct", "value": "SU-51111", "value_id": seen.pk}
    )
    assert second.status_code == 409
    body = second.content.decode()
    assert 'id="flash"' in body and "SU-52222" in body and "not saved" in body
    assert 'id="panel-state"' in body  # the panel comes back fresh, showing the current value
    current = StateValue.objects.get(ticket=ticket, name="order_number", is_current=True)
    assert (current.value, current.source, current.confirmed) == ("SU-52222", "staff", True)
    # The first value was superseded, not overwritten: history keeps it.
    old = StateValue.objects.get(pk=seen.pk)
    assert not old.is_current and old.superseded_by_id == current.pk


def test_confirming_a_value_someone_already_superseded_is_a_conflict(desk):
    ticket, c = desk["ticket"], desk["c"]
    old = lanes.state_set(ticket=ticket, name="item", value="Kettle", turn=1, source="model")
    lanes.state_set(ticket=ticket, name="item", value="Toaster", turn=2, source="customer")
    r = _post(c["ann"], f"/desk/tickets/{ticket.pk}/state", {"name": "item", "action": "confirm", "value_id": old.pk})
    assert r.status_code == 409 and "Toaster" in r.content.decode()
    assert not StateValue.objects.get(ticket=ticket, name="item", is_current=True).confirmed


def test_an_invalid_staff_edit_is_refused_with_the_reason_and_nothing_changes(desk):
    ticket, c = desk["ticket"], desk["c"]
    r = _post(
        c["ann"],
        f"/desk/tickets/{ticket.pk}/state",
        {"name": "order_number", "action": "correct", "value": "SU-99999", "value_id": ""},
    )
    assert r.status_code == 422 and "does not exist for this customer" in r.content.decode()
    assert not StateValue.objects.filter(ticket=ticket, name="order_number").exists()


def test_ledger_rename_and_rule_decisions_refuse_stale_versions(desk):
    ticket, c = desk["ticket"], desk["c"]
    entry = LedgerEntry.objects.get(ticket=ticket, role="customer")
    url = f"/desk/tickets/{ticket.pk}/ledger/rename"
    assert _post(c["ann"], url, {"value": entry.value, "role": "buyer", "version": entry.version}).status_code == 200
    stale = _post(c["ben"], url, {"value": entry.value, "role": "client", "version": entry.version})
    assert stale.status_code == 409 and "buyer" in stale.content.decode()
    assert LedgerEntry.objects.get(pk=entry.pk).role == "buyer"

    rule = lanes.rule_flag_candidates(ticket=ticket, turn=1, text="Never email me, phone only.", source="customer")[0]
    url = f"/desk/tickets/{ticket.pk}/rules/{rule.pk}"
    # An order scope names an order of this ticket, or nothing is changed.
    wrong = _post(
        c["ann"], url, {"decision": "confirm", "version": rule.version, "scope": "order", "scope_ref": "SU-51111"}
    )
    assert wrong.status_code >= 400 and "not a verified order of this ticket" in wrong.content.decode()
    rule.refresh_from_db()
    assert rule.status == "candidate"
    lanes.ledger_record_system_id(ticket=ticket, kind="order", value="SU-51111", role="order", turn=1)
    ok = _post(
        c["ann"], url, {"decision": "confirm", "version": rule.version, "scope": "order", "scope_ref": "SU-51111"}
    )
    assert ok.status_code == 200
    late = _post(c["ben"], url, {"decision": "dismiss", "version": rule.version})
    assert late.status_code == 409
    rule.refresh_from_db()
    assert (rule.status, rule.scope, rule.scope_ref) == ("active", "order", "SU-51111")


def test_every_state_changing_request_needs_the_csrf_token(desk):
    ticket = desk["ticket"]
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(desk["ann"])
    page = strict.get(f"/desk/tickets/{ticket.pk}/")
    token = re.search(r'"X-CSRFToken": "([^"]+)"', page.content.decode()).group(1)
    posts = [
        (f"/desk/tickets/{ticket.pk}/post", {"action": "note", "text": "hello"}),
        (f"/desk/tickets/{ticket.pk}/state", {"name": "item", "action": "correct", "value": "Kettle", "value_id": ""}),
        (f"/desk/tickets/{ticket.pk}/ledger/rename", {"value": "x", "role": "y"}),
        ("/logout/", {}),
    ]
    for url, data in posts:
        assert strict.post(url, data, **HX).status_code == 403, url
    assert not ticket.turns.exists()
    # The header htmx sends from <body hx-headers> is accepted.
    ok = strict.post(posts[1][0], posts[1][1], HTTP_X_CSRFTOKEN=token, **HX)
    assert ok.status_code == 200


def test_agent_and_customer_text_render_inert_for_staff_and_customer(desk):
    ticket, c = desk["ticket"], desk["c"]
    turn_append(ticket=ticket, author="customer", text=XSS)
    turn_append(ticket=ticket, author="agent", text="Sure! " + XSS)
    for client, url in ((c["ann"], f"/desk/tickets/{ticket.pk}/"), (c["alice"], f"/help/tickets/{ticket.pk}/")):
        body = client.get(url).content.decode()
        assert "<img src=x" not in body and 'hx-get="/desk/"' not in body and 'hx-trigger="load"' not in body
        assert "&lt;img src=x onerror=&quot;alert(1)&quot;&gt;" in body
        assert body.count("hx-disable") >= 2  # and htmx would ignore the bodies anyway


def test_staff_can_take_over_reply_and_hand_back_over_htmx(desk):
    ticket, c = desk["ticket"], desk["c"]
    url = f"/desk/tickets/{ticket.pk}/post"
    r = _post(c["ann"], url, {"action": "take_over"})
    assert r.status_code == 200 and "Hand back to agent" in r.content.decode()
    assert _post(c["ann"], url, {"action": "reply", "text": ""}).status_code == 422
    assert _post(c["ann"], url, {"action": "reply", "text": "Ann here."}).status_code == 200
    assert _post(c["ann"], url, {"action": "hand_back"}).status_code == 200
    ticket.refresh_from_db()
    assert ticket.handler == "agent" and ticket.turns.filter(author="staff", text="Ann here.").exists()


def test_queue_filters_find_breakers_flags_and_classes(desk):
    ticket, c = desk["ticket"], desk["c"]
    other_class = TicketClassFactory(slug="vip", name="VIP")
    other = ticket_create(customer=desk["alice"].person, ticket_class=other_class, subject="Breaker ticket")
    Ticket.objects.filter(pk=other.pk).update(attention="Compaction breaker tripped after 3 failures")
    Ticket.objects.filter(pk=ticket.pk).update(attention="Customer flagged Order as wrong (turn 2)")

    def subjects(query):
        return c["ann"].get("/desk/?" + query).content.decode()

    assert "Breaker ticket" in subjects("needs=breaker") and "Refund please" not in subjects("needs=breaker")
    assert "Refund please" in subjects("needs=flagged") and "Breaker ticket" not in subjects("needs=flagged")
    assert "Breaker ticket" in subjects("ticket_class=vip") and "Refund please" not in subjects("ticket_class=vip")
    assert "Refund please" in subjects("status=open")


def test_archived_ledger_and_compaction_views_check_the_ticket(desk):
    ticket, c = desk["ticket"], desk["c"]
    assert c["ann"].get(f"/desk/tickets/{ticket.pk}/ledger/archived").status_code == 200
    assert c["alice"].get(f"/desk/tickets/{ticket.pk}/ledger/archived").status_code == 403
    assert c["ann"].get(f"/desk/tickets/{ticket.pk}/compactions/999999").status_code == 404


def test_figures_page_counts_rejections_by_guard_for_admins_only(desk):
    ticket, c = desk["ticket"], desk["c"]
    turn_append(
        ticket=ticket,
        author="system",
        kind="rejection",
        text="unknown id",
        payload={"guard": "id", "name": "get_order"},
    )
    turn_append(
        ticket=ticket, author="system", kind="rejection", text="again", payload={"guard": "id", "name": "get_order"}
    )
    turn_append(ticket=ticket, author="system", kind="rejection", text="too much", payload={"guard": "refund_limit"})
    assert c["ann"].get("/desk/figures/").status_code == 403
    body = c["admin"].get("/desk/figures/").content.decode()
    assert "id 2" in body and "refund_limit 1" in body
    assert "no known price" not in body


def test_figures_name_models_whose_cost_is_unknown(desk):
    from sundry.agent.models import AgentStep

    ticket, c = desk["ticket"], desk["c"]
    for number, model in enumerate(["openai-compatible:in-house-llm", "openai:gpt-4.1-mini"], start=1):
        AgentStep.objects.create(
            ticket=ticket,
            number=number,
            model=model,
            request_tokens=10,
            input_tokens=10,
            output_tokens=5,
            outcome=AgentStep.Outcome.REPLY,
        )
    body = c["admin"].get("/desk/figures/").content.decode()
    assert "no known price: openai-compatible:in-house-llm<" in body  # gpt-4.1-mini has a price


def test_figures_per_model_keep_offline_and_real_model_compactions_apart(desk):
    from sundry.agent.models import AgentStep
    from sundry.compaction.models import CompactionRun
    from sundry.desk.admin_views import model_figures

    ticket, c = desk["ticket"], desk["c"]
    real = "openai-compatible:qwen2.5-1.5b"
    for number, (model, outcome, cached) in enumerate(
        [(real, "reply", 600), (real, "held_reply", 0), ("offline", "reply", 0)], start=1
    ):
        AgentStep.objects.create(
            ticket=ticket,
            number=number,
            model=model,
            request_tokens=1000,
            input_tokens=1000,
            cached_input_tokens=cached,
            output_tokens=5,
            outcome=outcome,
        )
    runs = [
        ("offline", "succeeded", 3000, 1200, "text"),
        (real, "fallback", 2100, 2300, "tool"),
        (real, "succeeded", 2500, 2000, "tool"),
    ]
    for n, (model, status, before, after, path) in enumerate(runs):
        CompactionRun.objects.create(
            ticket=ticket,
            from_turn=n * 10 + 1,
            through_turn=n * 10 + 5,
            context_version=0,
            model=model,
            model_used=model,
            status=status,
            tokens_before=before,
            tokens_after=after,
            output_path=path,
        )
    rows = {r["model"]: r for r in model_figures()}
    assert (rows[real]["compactions"], rows[real]["fallbacks"], rows[real]["fallback_share"]) == (2, 1, 50)
    assert (rows[real]["saved"], rows[real]["grew"], rows[real]["paths"]) == (300, 1, [("tool", 2)])
    assert (rows[real]["held"], rows[real]["cached_share"]) == (1, 30)
    assert (rows["offline"]["saved"], rows["offline"]["fallback_share"]) == (1800, 0)
    # A reply posted as the part its stream had shown, the rest held for staff, counts as held too.
    AgentStep.objects.filter(ticket=ticket, number=1).update(checks={"held_rest": True})
    assert {r["model"]: r for r in model_figures()}[real]["held"] == 2
    body = c["admin"].get("/desk/figures/").content.decode()
    assert "Figures per model" in body and real in body and "1 grew the request" in body


def test_admin_refuses_unknown_models_and_malformed_approval_rules(desk):
    tclass = TicketClass.objects.create(name="Standard", slug="standard")
    url = f"/admin/tickets/ticketclass/{tclass.pk}/change/"
    form = {
        "name": "Standard",
        "slug": "standard",
        "description": "",
        "token_budget": 12000,
        "trigger_fraction": 0.75,
        "recent_turns_kept": 6,
        "ledger_share": 0.3,
        "pinned_rules_cap": 600,
        "working_model": "openai:gpt-4.1-mini",
        "summariser_model": "offline",
        "approval_rules": '{"issue_refund": {"above_cents": 10000}}',
        "first_response_minutes": 60,
        "next_response_minutes": 240,
        "approval_window_hours": 24,
    }
    admin = desk["c"]["admin"]
    assert admin.post(url, form).status_code == 302
    for bad in (
        {"working_model": "gpt-4"},
        {"summariser_model": "acme:thing"},
        {"approval_rules": '{"issue_refund": {"above_cents": -1}}'},
        {"approval_rules": '{"launch_rockets": {}}'},
        {"approval_rules": '["issue_refund"]'},
        {"approval_rules": '{"issue_refund": {"over": 5}}'},
        {"approval_rules": '{"issue_refund": {"above": {"usd": 100}}}'},
        {"approval_rules": '{"issue_refund": {"above": {"USD": 1.5}}}'},
        {"approval_rules": '{"issue_refund": {"above": {}}}'},
    ):
        response = admin.post(url, {**form, **bad})
        assert response.status_code == 200, bad  # the form comes back with its errors
    body = admin.post(url, {**form, "approval_rules": '{"issue_refund": {"over": 5}}'}).content.decode()
    assert "unknown option &#x27;over&#x27;; only above_cents and above are allowed" in body
    tclass.refresh_from_db()
    assert (tclass.working_model, tclass.approval_rules) == (
        "openai:gpt-4.1-mini",
        {"issue_refund": {"above_cents": 10000}},
    )
    per_currency = '{"issue_refund": {"above": {"USD": 20000, "INR": 1500000}, "above_cents": 10000}}'
    assert admin.post(url, {**form, "approval_rules": per_currency}).status_code == 302
    tclass.refresh_from_db()
    assert tclass.approval_rules["issue_refund"]["above"] == {"USD": 20000, "INR": 1500000}


def test_budget_chart_places_the_trigger_line_and_compaction_marks():
    chart = budget_chart(
        [ChartPoint(1, 1000), ChartPoint(2, 7000), ChartPoint(3, 2500)], budget=8000, trigger=6400, compacted_after=[2]
    )
    ys = [d["y"] for d in chart["dots"]]
    assert ys[1] < chart["trigger_y"] < ys[0]  # step 2 went over the trigger, step 1 did not
    assert chart["budget_y"] < chart["trigger_y"] < chart["y0"]
    xs = [d["x"] for d in chart["dots"]]
    assert chart["marks"] == [pytest.approx((xs[1] + xs[2]) / 2, abs=0.2)]
    assert budget_chart([], budget=8000, trigger=6400, compacted_after=[])["line"] == ""


def test_the_budget_panel_figures_equal_the_database_totals(desk):
    from decimal import Decimal

    from django.db.models import Sum

    from sundry.agent.models import AgentStep
    from sundry.desk.selectors import budget

    ticket = desk["ticket"]
    for n, (tokens, cost, latency) in enumerate([(1200, "0.000125", 40), (2300, "0.001500", 75), (900, "0", 12)], 1):
        AgentStep.objects.create(
            ticket=ticket,
            number=n,
            model="m",
            request_tokens=tokens,
            cost_usd=Decimal(cost),
            latency_ms=latency,
            input_tokens=tokens,
            output_tokens=n * 10,
            lane_tokens={"lanes": {"rules": n, "recent": tokens - n}},
            outcome="reply",
        )
    figures = budget(Ticket.objects.select_related("ticket_class").get(pk=ticket.pk))
    totals = AgentStep.objects.filter(ticket=ticket).aggregate(
        cost=Sum("cost_usd"), latency=Sum("latency_ms"), tin=Sum("input_tokens"), tout=Sum("output_tokens")
    )
    assert (figures["cost"], figures["latency_ms"]) == (totals["cost"], totals["latency"]) == (Decimal("0.001625"), 127)
    assert (figures["tokens_in"], figures["tokens_out"], figures["step_count"]) == (totals["tin"], totals["tout"], 3)
    assert figures["avg_latency_ms"] == 42 and figures["last_step"].number == 3
    assert figures["last_step"].lane_tokens == {"lanes": {"rules": 3, "recent": 897}}
    assert [d["tokens"] for d in figures["chart"]["dots"]] == [1200, 2300, 900]
    page = desk["c"]["ann"].get(f"/desk/tickets/{ticket.pk}/")
    html = page.content.decode()
    assert "<dt>Steps</dt><dd>3</dd>" in html
    assert '<tr data-part="rules"><th scope="row">Pinned rules</th><td class="num">3</td>' in html
    assert '<tr data-part="recent"><th scope="row">Recent turns</th><td class="num">897</td>' in html


def _steps(ticket, n):
    from decimal import Decimal

    from sundry.agent.models import AgentStep

    AgentStep.objects.bulk_create(
        AgentStep(
            ticket=ticket,
            number=i,
            model="m",
            request_tokens=1000 + i,
            cost_usd=Decimal("0.0001"),
            latency_ms=10,
            input_tokens=1000 + i,
            output_tokens=5,
            lane_tokens={"lanes": {"recent": 1000 + i}},
            outcome="reply",
        )
        for i in range(1, n + 1)
    )


def _budget_reads(ticket):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from sundry.desk.selectors import budget

    fresh = Ticket.objects.select_related("ticket_class").get(pk=ticket.pk)
    with CaptureQueriesContext(connection) as ctx:
        figures = budget(fresh, runs=[])
    return figures, len(ctx.captured_queries)


def test_the_budget_panel_reads_and_draws_the_same_however_many_steps(desk):
    """Rendered on every push: a ticket's 500th step costs the panel what its 10th did."""
    from sundry.desk import selectors

    ticket = desk["ticket"]
    _steps(ticket, 10)
    short, short_reads = _budget_reads(ticket)
    from sundry.agent.models import AgentStep

    AgentStep.objects.filter(ticket=ticket).delete()
    _steps(ticket, 500)
    long, long_reads = _budget_reads(ticket)
    assert short_reads == long_reads == 2
    assert len(short["chart"]["dots"]) == 10 and len(long["chart"]["dots"]) == selectors.CHART_STEPS
    # The latest steps are drawn, and the totals are every step's.
    assert long["chart"]["last"] == 500 and long["chart"]["first"] == 500 - selectors.CHART_STEPS + 1
    assert long["last_step"].number == 500 and long["step_count"] == 500
    assert long["tokens_in"] == sum(1000 + i for i in range(1, 501)) and long["latency_ms"] == 5000
    assert long["avg_latency_ms"] == 10


def test_negative_control_a_chart_of_every_step_grows_with_the_ticket(desk, monkeypatch):
    from sundry.desk import selectors

    monkeypatch.setattr(selectors, "CHART_STEPS", None)
    _steps(desk["ticket"], 500)
    figures, _ = _budget_reads(desk["ticket"])
    assert len(figures["chart"]["dots"]) == 500
