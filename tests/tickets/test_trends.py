"""A class's figures by week, and the tickets behind each: checked against the rows themselves.

The history is generated (seeded) over eight local weeks for two classes — steps, compactions and
guard rejections at random times, some right at a week's edge in the site's time zone, one week
left empty — and each week's figures are worked out again here in Python from every row, with the
week read off the row's own local time. The site runs in Pacific/Auckland so a UTC week and a local
week disagree.
"""

from __future__ import annotations

import random
import re
from collections import defaultdict
from datetime import datetime, time, timedelta
from decimal import Decimal
from zoneinfo import ZoneInfo

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.utils import timezone

from sundry.agent.models import AgentStep
from sundry.compaction.models import CompactionRun
from sundry.desk import trends
from sundry.tickets.models import TicketClassChange, Turn
from tests.factories import CustomerFactory, TicketClassFactory, TicketFactory

pytestmark = pytest.mark.django_db

ZONE = "Pacific/Auckland"
WEEKS = 8
EMPTY = 3  # weeks back from this one: class A has nothing that week
GUARDS = ["ids", "approval", "schema", "", None]  # blank and missing read as "unknown"
STATUSES = ["succeeded", "succeeded", "fallback", "failed", "stale"]


@pytest.fixture
def site_zone(settings):
    settings.TIME_ZONE = ZONE
    timezone.activate(ZoneInfo(ZONE))
    yield ZoneInfo(ZONE)
    timezone.deactivate()


def _monday(day):
    return day - timedelta(days=day.weekday())


def _local_week(instant, zone):
    return _monday(instant.astimezone(zone).date())


def _at(monday, zone, rng):
    """A random instant in the local week; one in five right at its first or last minute."""
    start = datetime.combine(monday, time.min, tzinfo=zone)
    end = datetime.combine(monday + timedelta(days=7), time.min, tzinfo=zone)
    pick = rng.random()
    if pick < 0.1:
        return start + timedelta(seconds=30)
    if pick < 0.2:
        return end - timedelta(seconds=30)
    return start + (end - start) * rng.random()


def _history(tclass, zone, rng, mondays, skip=()):
    tickets = []
    for i, monday in enumerate(mondays):
        if i in skip:
            continue
        for _ in range(rng.randint(1, 3)):
            ticket = TicketFactory(ticket_class=tclass)
            tickets.append(ticket)
            online = rng.random() < 0.7
            for number in range(1, rng.randint(2, 6)):
                tin = rng.randint(500, 9000) if online else 0
                step = AgentStep.objects.create(
                    ticket=ticket,
                    number=number,
                    model="openai:gpt-4.1-mini" if online else "offline",
                    offline=not online,
                    request_tokens=rng.randint(800, 12000),
                    input_tokens=tin,
                    cached_input_tokens=rng.randint(0, tin),
                    cost_usd=Decimal(rng.randint(0, 90000)) / Decimal(10**6),
                    latency_ms=rng.randint(50, 4000),
                    outcome="reply",
                )
                AgentStep.objects.filter(pk=step.pk).update(created_at=_at(monday, zone, rng))
            for n in range(rng.randint(0, 2)):
                run = CompactionRun.objects.create(
                    ticket=ticket,
                    context_version=0,
                    from_turn=10 * n + 1,
                    through_turn=10 * n + 8,
                    status=rng.choice(STATUSES),
                    model="offline",
                    model_used="offline",
                    tokens_before=9000,
                    tokens_after=3000,
                    cost_usd=Decimal(rng.randint(0, 5000)) / Decimal(10**6),
                )
                CompactionRun.objects.filter(pk=run.pk).update(created_at=_at(monday, zone, rng))
            for number in range(1, rng.randint(1, 5)):
                guard = rng.choice(GUARDS)
                payload = {"name": "issue_refund", "ok": False} | ({} if guard is None else {"guard": guard})
                turn = Turn.objects.create(
                    ticket=ticket, number=number, author="system", kind=Turn.Kind.REJECTION, payload=payload
                )
                Turn.objects.filter(pk=turn.pk).update(created_at=_at(monday, zone, rng))
    return tickets


@pytest.fixture
def history(site_zone):
    rng = random.Random(31)
    a, b = TicketClassFactory(name="Alpha"), TicketClassFactory(name="Beta")
    mondays = trends.week_starts(WEEKS)
    skip = {WEEKS - 1 - EMPTY}
    return {
        "a": a,
        "b": b,
        "mondays": mondays,
        "empty": mondays[WEEKS - 1 - EMPTY],
        "a_tickets": _history(a, site_zone, rng, mondays, skip),
        "b_tickets": _history(b, site_zone, rng, mondays),
        "zone": site_zone,
    }


def recomputed(tclass, zone):
    """Every week's figures from the rows, in Python: {monday: {figure: value}} and who counts in each."""
    weeks = defaultdict(
        lambda: {
            "steps": 0,
            "tokens": 0,
            "latency": 0,
            "cost": Decimal(0),
            "input": 0,
            "cached": 0,
            "compactions": 0,
            "rejections": defaultdict(int),
            "active": False,
            "who": defaultdict(set),
        }
    )
    for s in AgentStep.objects.filter(ticket__ticket_class=tclass):
        w = weeks[_local_week(s.created_at, zone)]
        w["active"] = True
        w["steps"] += 1
        w["tokens"] += s.request_tokens
        w["latency"] += s.latency_ms
        w["cost"] += s.cost_usd
        for figure in ("tokens", "latency", "cost"):
            w["who"][figure].add(s.ticket_id)
        if not s.offline and s.input_tokens:
            w["input"] += s.input_tokens
            w["cached"] += s.cached_input_tokens
            w["who"]["cache"].add(s.ticket_id)
    for r in CompactionRun.objects.filter(ticket__ticket_class=tclass):
        w = weeks[_local_week(r.created_at, zone)]
        w["active"] = True
        w["cost"] += r.cost_usd
        w["who"]["cost"].add(r.ticket_id)
        if r.status in ("succeeded", "fallback"):
            w["compactions"] += 1
            w["who"]["compactions"].add(r.pk)
    for t in Turn.objects.filter(ticket__ticket_class=tclass, kind=Turn.Kind.REJECTION):
        w = weeks[_local_week(t.created_at, zone)]
        w["active"] = True
        kind = t.payload.get("guard") or "unknown"
        w["rejections"][kind] += 1
        w["who"]["rejections"].add((t.ticket_id, t.number))
        w["who"][f"rejections:{kind}"].add((t.ticket_id, t.number))
    out = {}
    for monday, w in weeks.items():
        out[monday] = {
            "tokens": w["tokens"] / w["steps"] if w["steps"] else None,
            "latency": w["latency"] / w["steps"] if w["steps"] else None,
            "cache": 100 * w["cached"] / w["input"] if w["input"] else None,
            "cost": w["cost"] if w["active"] else None,
            "compactions": w["compactions"] if w["active"] else None,
            "rejections": sum(w["rejections"].values()) if w["active"] else None,
            "kinds": dict(w["rejections"]),
            "who": w["who"],
        }
    return out


def admin_client(name: str = "root"):
    c = Client()
    c.force_login(get_user_model().objects.create_user(name, password="pw", is_staff=True, is_superuser=True))
    return c


def test_every_weeks_figures_equal_a_recomputation_from_the_rows(history):
    a, zone = history["a"], history["zone"]
    expected = recomputed(a, zone)
    got = trends.class_trends(a, WEEKS)
    assert [w.start for w in got["weeks"]] == history["mondays"]
    assert set(expected) <= set(history["mondays"])  # the generated history sits inside the window
    checked = 0
    for week in got["weeks"]:
        want = expected.get(week.start)
        for figure in trends.FIGURES:
            value = week.value(figure)
            assert value == (want[figure] if want else None), (week.start, figure)
            checked += value is not None
        kinds = want["kinds"] if want else {}
        assert week.rejections == kinds
        for kind in got["kinds"]:
            assert week.value("rejections", kind) == (kinds.get(kind, 0) if want else None)
    assert checked > 30
    # The empty week is a gap for every figure, not a zero.
    empty = next(w for w in got["weeks"] if w.start == history["empty"])
    assert all(empty.value(f) is None for f in trends.FIGURES)
    assert "unknown" in got["kinds"]  # a blank or missing guard, as the figures page names it


def test_a_row_at_a_local_weeks_edge_counts_in_that_local_week(history):
    """A step half a minute into a local Monday is the previous week in UTC: it counts in the local one."""
    a, zone = history["a"], history["zone"]
    monday = history["mondays"][-2]
    ticket = TicketFactory(ticket_class=a)
    step = AgentStep.objects.create(ticket=ticket, number=1, model="offline", request_tokens=1, outcome="reply")
    edge = datetime.combine(monday, time.min, tzinfo=zone) + timedelta(seconds=30)
    AgentStep.objects.filter(pk=step.pk).update(created_at=edge)
    assert _monday(edge.astimezone(ZoneInfo("UTC")).date()) != monday  # the weeks disagree here
    weeks = {w.start: w for w in trends.class_trends(a, WEEKS)["weeks"]}
    assert weeks[monday].value("tokens") == recomputed(a, zone)[monday]["tokens"]
    assert ticket.pk in {r.ticket_id for r in trends.week_tickets(a, "tokens", monday)}


def _listed(html: str, figure: str) -> set:
    if figure == "compactions":
        return {int(n) for n in re.findall(r'data-run="(\d+)"', html)}
    if figure == "rejections":
        return {(int(t), int(n)) for t, n in re.findall(r'data-ticket="(\d+)" data-turn="(\d+)"', html)}
    return {int(n) for n in re.findall(r'<tr data-ticket="(\d+)"', html)}


def test_each_weeks_drill_down_lists_exactly_what_the_figure_counts_and_no_other_class(history):
    a, b, zone = history["a"], history["b"], history["zone"]
    expected = recomputed(a, zone)
    admin = admin_client()
    b_ids = {t.pk for t in history["b_tickets"]}
    b_runs = set(CompactionRun.objects.filter(ticket__ticket_class=b).values_list("pk", flat=True))
    for monday in history["mondays"]:
        want = expected.get(monday, {"who": defaultdict(set), "kinds": {}})
        for figure in trends.FIGURES:
            page = admin.get(f"/desk/figures/trends/{a.pk}/{monday.isoformat()}/{figure}/")
            assert page.status_code == 200
            listed = _listed(page.content.decode(), figure)
            assert listed == want["who"][figure], (monday, figure)
            if figure == "compactions":
                assert not listed & b_runs
            elif figure == "rejections":
                assert not {ticket for ticket, _ in listed} & b_ids
            else:
                assert not listed & b_ids
        for kind in want["kinds"]:
            page = admin.get(f"/desk/figures/trends/{a.pk}/{monday.isoformat()}/rejections/", {"kind": kind})
            assert _listed(page.content.decode(), "rejections") == want["who"][f"rejections:{kind}"]
        # The per-ticket rows add up to the week's figure, on the page and in the rows it reads.
        cost_page = admin.get(f"/desk/figures/trends/{a.pk}/{monday.isoformat()}/cost/").content.decode()
        if want.get("cost") is not None:
            cells = re.findall(r'<tr data-ticket="\d+">.*?\$([\d.]+)</td></tr>', cost_page, re.S)
            total = re.search(r'<tr id="trend-total">.*\$([\d.]+)</td></tr>', cost_page, re.S).group(1)
            assert sum(Decimal(c) for c in cells) == Decimal(total) == want["cost"]
        rows = trends.week_tickets(a, "tokens", monday)
        if rows:
            assert sum(r.request_tokens for r in rows) / sum(r.steps for r in rows) == want["tokens"]
        cost = trends.week_tickets(a, "cost", monday)
        assert sum((r.cost for r in cost), Decimal(0)) == (want.get("cost") or Decimal(0))


def test_the_page_draws_each_figure_with_gaps_marks_and_a_table_and_links_each_point(history):
    a, b = history["a"], history["b"]
    marked = history["mondays"][-3]
    change = TicketClassChange.objects.create(ticket_class=a, changes={"token_budget": [8000, 6000]})
    TicketClassChange.objects.filter(pk=change.pk).update(
        changed_at=datetime.combine(marked + timedelta(days=2), time(9), tzinfo=history["zone"])
    )
    other = TicketClassChange.objects.create(ticket_class=b, changes={"token_budget": [8000, 12000]})
    TicketClassChange.objects.filter(pk=other.pk).update(changed_at=change.changed_at)
    page = admin_client().get(f"/desk/figures/trends/{a.pk}/", {"weeks": WEEKS})
    assert page.status_code == 200
    html = page.content.decode()
    assert html.count('<svg class="lab-chart"') == html.count('role="group"') == len(trends.FIGURES)
    for figure in trends.FIGURES:
        assert f'<title id="chart-trend-{figure}-title">' in html and f'id="chart-trend-{figure}-desc"' in html
    empty = history["empty"].isoformat()
    assert html.count(f"week of {empty}: no activity") == len(trends.FIGURES)  # a gap on every chart
    assert f'data-week="{empty}">' not in re.sub(r'<tr data-week="[^"]+"', "", html)  # no point in a gap
    row = re.search(rf'<tr data-week="{empty}">.*?</tr>', html, re.S).group(0)
    assert row.count("no activity") == len(trends.FIGURES) and "<a " not in row
    # A week whose steps all ran offline has steps but no cached share: said so, not "no activity".
    offline = [w.start for w in trends.class_trends(a, WEEKS)["weeks"] if w.steps and w.value("cache") is None]
    assert offline  # the seeded history has one
    for monday in offline:
        row = re.search(rf'<tr data-week="{monday.isoformat()}">.*?</tr>', html, re.S).group(0)
        cell = re.search(r'<td data-figure="cache">(.*?)</td>', row).group(1)
        assert "no input sent to a provider" in cell and "<a " not in cell
    assert html.count(f'class="change-mark" data-week="{marked.isoformat()}"') == len(trends.FIGURES)
    assert "token_budget 8000 → 6000" in html and "8000 → 12000" not in html  # only this class's changes
    busy = history["mondays"][-1].isoformat()
    assert f'href="/desk/figures/trends/{a.pk}/{busy}/cost/"' in html
    figures = admin_client("root2").get("/desk/figures/").content.decode()
    assert f'href="/desk/figures/trends/{a.pk}/"' in figures


def test_one_query_per_figure_family_however_many_tickets(history, django_assert_max_num_queries):
    a = history["a"]
    admin = admin_client()
    admin.get("/desk/")  # the session and user rows, loaded once
    # session, user, class, steps, compactions, rejections, changes; a margin for the middleware's own
    with django_assert_max_num_queries(10) as few:
        assert admin.get(f"/desk/figures/trends/{a.pk}/").status_code == 200
    _history(a, history["zone"], random.Random(7), history["mondays"])  # double the history
    with django_assert_max_num_queries(len(few.captured_queries)):
        admin.get(f"/desk/figures/trends/{a.pk}/")


def test_only_admins_see_trends_and_bad_input_is_refused_plainly(history):
    a = history["a"]
    week = history["mondays"][-1].isoformat()
    urls = [f"/desk/figures/trends/{a.pk}/", f"/desk/figures/trends/{a.pk}/{week}/tokens/"]
    staff = Client()
    staff.force_login(get_user_model().objects.create_user("agent", password="pw", is_staff=True))
    customer_user = get_user_model().objects.create_user("cust", password="pw")
    CustomerFactory(user=customer_user)
    customer = Client()
    customer.force_login(customer_user)
    for url in urls:
        anonymous = Client().get(url)
        assert anonymous.status_code == 302 and "/login" in anonymous["Location"]
        assert staff.get(url).status_code == 403
        away = customer.get(url)
        assert away.status_code == 302 and away["Location"] == "/"
    admin = admin_client()
    bad = admin.get(urls[0], {"weeks": "0"})
    assert bad.status_code == 400 and 'id="weeks-error"' in bad.content.decode()
    assert admin.get(urls[0], {"weeks": "53"}).status_code == 400
    tuesday = (history["mondays"][-1] + timedelta(days=1)).isoformat()
    wrong = admin.get(f"/desk/figures/trends/{a.pk}/{tuesday}/tokens/")
    assert wrong.status_code == 400 and f"its week's Monday is {week}" in wrong.content.decode()
    assert admin.get(f"/desk/figures/trends/{a.pk}/2026-02-30/tokens/").status_code == 400
    assert admin.get(f"/desk/figures/trends/{a.pk}/{week}/mood/").status_code == 404
    assert admin.get(f"/desk/figures/trends/999999/{week}/tokens/").status_code == 404
