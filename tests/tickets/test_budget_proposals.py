"""Budget lab proposals: kept, run with the harness's checks, applied with an audit record.

The history is tickets the offline agent worked on real orders (so later calls use IDs); the
checks on what the agent still knows are the harness's own, each with a control that loses it.
"""

from __future__ import annotations

import json
import os
from decimal import Decimal

import pytest
from channels.db import database_sync_to_async
from django.contrib.auth import get_user_model
from django.test import Client

from sundry.agent.loop import agent_run
from sundry.agent.provider.gateway import Gateway
from sundry.agent.provider.scripted import ScriptedModel
from sundry.agent.services import customer_message_post
from sundry.desk import lab_views
from sundry.desk.budgetreplay import Budget
from sundry.desk.lifecycle import ticket_create
from sundry.evals.labrun import lab_figures, proposal_run
from sundry.evals.tasks import budget_lab_task
from sundry.shop.demo import ensure_classes
from sundry.tickets.models import BudgetProposal, Ticket, TicketClass, TicketClassChange
from sundry.tooling.messages import ModelResponse
from tests.factories import CustomerFactory, paid_order
from tests.live.test_live_coherence import _cookie, _open, _until, desk
from tests.workers import Worker, wait_for, worker_env  # noqa: F401  (fixture)

GPT = "openai:gpt-4.1-mini"


def worked_history(tclass: TicketClass, tickets: int = 2) -> list[Ticket]:
    """Tickets the offline agent worked: each looks an order up by the number the customer typed."""
    out = []
    for n in range(tickets):
        customer = CustomerFactory()
        order = paid_order(customer=customer, number=f"SU-8120{n}", status="placed")
        ticket = ticket_create(customer=customer.person, ticket_class=tclass, subject="Where is my order?")
        for text in (
            f"Where is {order.number}?",
            "It was meant to arrive on Monday.",
            "It is a present for my son.",
            "Please cancel that order.",
        ):
            customer_message_post(ticket=ticket, text=text, wake=False)
            agent_run(ticket.pk)
        out.append(ticket)
    return out


def user(name: str, *, admin: bool = False, staff: bool = True):
    return get_user_model().objects.create_user(name, password="pw", is_staff=staff, is_superuser=admin)


def client_for(u) -> Client:
    c = Client()
    c.force_login(u)
    return c


PROPOSE = {"budget": 6000, "trigger": 0.8, "kept": 8, "ledger": 0.3, "tickets": 10, "price_as": GPT}


@pytest.mark.services
@pytest.mark.django_db(transaction=True)
def test_a_kept_proposal_runs_in_a_real_worker_with_progress_and_the_harness_checks(worker_env, monkeypatch, tmp_path):
    standard = ensure_classes()["standard"]
    worked_history(standard)
    monkeypatch.setattr(
        lab_views, "_enqueue", lambda pk: budget_lab_task.apply_async(args=[pk], queue=worker_env["SUNDRY_TASK_QUEUE"])
    )
    admin = client_for(user("root", admin=True))
    sent = admin.post(f"/desk/figures/lab/{standard.pk}/run", PROPOSE)
    proposal = BudgetProposal.objects.get()
    page = f"/desk/figures/lab/{standard.pk}/proposals/{proposal.pk}/"
    assert sent.status_code == 302 and sent["Location"] == page
    assert (proposal.token_budget, proposal.tickets, proposal.created_by.username) == (6000, 10, "root")
    waiting = admin.get(page, HTTP_HX_REQUEST="true").content.decode()
    assert "Waiting for a worker" in waiting and 'hx-trigger="every 1s"' in waiting  # asks again until done
    worker = Worker(worker_env, tmp_path / "worker.log")
    try:
        wait_for(lambda: BudgetProposal.objects.get().status in ("done", "failed"), 120, "the worker to run the lab")
    finally:
        worker.stop()
    proposal.refresh_from_db()
    assert proposal.status == "done", proposal.error or (tmp_path / "worker.log").read_text()[-2000:]
    assert (proposal.done, proposal.total, proposal.figures["tickets"]) == (2, 2, 2)
    done = admin.get(page, HTTP_HX_REQUEST="true")
    assert done["HX-Refresh"] == "true"  # the waiting page reloads once, with the figures
    html = admin.get(page).content.decode()
    assert 'id="lab-warning"' in html and 'id="lab-fidelity"' in html
    assert html.count('role="img"') == 2 + 2  # cost, fidelity, one tokens chart per ticket
    assert '<title id="chart-cost-title">Cost per ticket</title>' in html
    fid = proposal.figures["fidelity"]
    assert (
        fid["current"]["ids"]["checks"] == 4 and fid["current"]["ids"]["rate"] == fid["proposed"]["ids"]["rate"] == 100
    )
    # Progress is told per ticket; and the control for the ID figure: a budget that compacts at once,
    # keeps two turns and leaves the ledger 10 tokens loses the IDs the cancellations used.
    seen = []
    starved = lab_figures(
        standard, Budget(1000, 0.3, 2, 0.01), tickets=10, price_as=GPT, progress=lambda d, t: seen.append((d, t))
    )["fidelity"]["proposed"]["ids"]
    assert seen == [(1, 2), (2, 2)]
    assert starved["checks"] == 4 and starved["rate"] == 50  # the lookups' IDs were typed; the cancellations' were not
    listed = admin.get(f"/desk/figures/lab/{standard.pk}/").content.decode()
    assert f'data-proposal="{proposal.pk}"' in listed and "100.0% → 100.0%" in listed


def test_the_desks_lab_page_finds_the_harness_run_by_name_in_a_fresh_process():
    """The page never imports the run (tests/test_layers.py); a process that only loads Django — the web
    process — still has the task registered under the name the page queues, as the harness's own."""
    import subprocess
    import sys

    probe = (
        "import django; django.setup()\n"
        "from celery import current_app\n"
        "from sundry.desk.lab_views import LAB_TASK\n"
        "print(current_app.tasks[LAB_TASK].__module__)\n"
    )
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "sundry.settings"}
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "sundry.evals.tasks"


@pytest.fixture
def small_class(db):
    """A class with one open and one closed ticket, each with a hand-made history of steps."""
    from sundry.agent.models import AgentStep
    from sundry.tickets.models import Turn
    from tests.factories import TicketClassFactory, TicketFactory
    from tests.tickets.test_budget_lab import STEPS, TURNS

    tclass = TicketClassFactory(token_budget=8000, trigger_fraction=0.8, recent_turns_kept=8, ledger_share=0.3)
    for status in ("open", "closed"):
        ticket = TicketFactory(ticket_class=tclass, status=status)
        for t in TURNS:
            Turn.objects.create(ticket=ticket, number=t.number, author=t.author, kind="message", text="x", tokens=100)
        for s in STEPS:
            AgentStep.objects.create(
                ticket=ticket,
                number=s.number,
                model="offline",
                offline=True,
                request_tokens=s.request_tokens,
                output_tokens=20,
                outcome="reply",
                is_resolution=True,
                first_turn=s.appended_through,
                last_turn=s.appended_through,
                lane_tokens={"lanes": {}, "first_turn": s.first_turn, "last_turn": s.last_turn},
            )
    return tclass


def _proposal(tclass, by, **settings) -> BudgetProposal:
    fields = {"token_budget": 6000, "trigger_fraction": 0.8, "recent_turns_kept": 8, "ledger_share": 0.3, **settings}
    return proposal_run(
        BudgetProposal.objects.create(ticket_class=tclass, created_by=by, tickets=10, price_as=GPT, **fields).pk
    )


def test_applying_a_proposal_writes_the_class_and_the_audit_record_and_marks_the_figures(small_class):
    root = user("root", admin=True)
    admin = client_for(root)
    versions = dict(Ticket.objects.filter(ticket_class=small_class).values_list("pk", "version"))
    proposal = _proposal(small_class, root, token_budget=12000, ledger_share=0.25)
    assert proposal.status == "done"
    current = proposal.figures["replayed_current"]  # two tickets: the cost per ticket is half the total
    assert Decimal(current["cost_per_ticket"]) * 2 == Decimal(current["cost"]) > 0
    listed = admin.get(f"/desk/figures/lab/{small_class.pk}/").content.decode()
    assert f"${Decimal(current['cost_per_ticket']):.4f} → " in listed
    url = f"/desk/figures/lab/{small_class.pk}/proposals/{proposal.pk}/"
    assert admin.post(url + "apply").status_code == 302
    small_class.refresh_from_db()
    assert (small_class.token_budget, small_class.ledger_share) == (12000, 0.25)
    change = TicketClassChange.objects.get()
    assert change.changes == {"token_budget": [8000, 12000], "ledger_share": [0.3, 0.25]}
    assert (change.changed_by, change.proposal) == (root, proposal)
    # Every ticket of the class is bumped, so its Budget panel is re-rendered (the open one is pushed).
    assert all(
        v == versions[pk] + 1 for pk, v in Ticket.objects.filter(ticket_class=small_class).values_list("pk", "version")
    )
    page = admin.get(url).content.decode()
    assert 'id="lab-applied"' in page and "Applied." in page
    # Applying it again changes nothing and records nothing.
    admin.post(url + "apply")
    assert TicketClassChange.objects.count() == 1
    # The figures page marks the change on the class's series, on its day.
    figures = admin.get("/desk/figures/").content.decode()
    assert f'data-trend="{small_class.slug}"' in figures and 'class="change-mark"' in figures
    assert "token_budget 8000 → 12000; ledger_share 0.3 → 0.25" in figures
    # Control: a class with no change has a series without a mark.
    TicketClassChange.objects.all().delete()
    assert 'class="change-mark"' not in admin.get("/desk/figures/").content.decode()


def test_a_tight_proposal_is_applied_only_when_the_admin_accepts_and_an_impossible_one_never(small_class):
    root = user("root", admin=True)
    admin = client_for(root)
    tight = _proposal(small_class, root, token_budget=6000)
    url = f"/desk/figures/lab/{small_class.pk}/proposals/{tight.pk}/apply"
    refused = admin.post(url, follow=True).content.decode()
    assert "Apply this budget anyway" in refused and 'id="lab-message"' in refused
    assert TicketClass.objects.get(pk=small_class.pk).token_budget == 8000 and not TicketClassChange.objects.exists()
    admin.post(url, {"accept_tight_budget": "on"})
    assert TicketClass.objects.get(pk=small_class.pk).token_budget == 6000
    queued = BudgetProposal.objects.create(
        ticket_class=small_class,
        created_by=root,
        token_budget=12000,
        trigger_fraction=0.8,
        recent_turns_kept=8,
        ledger_share=0.3,
        tickets=10,
    )
    admin.post(f"/desk/figures/lab/{small_class.pk}/proposals/{queued.pk}/apply")
    assert TicketClass.objects.get(pk=small_class.pk).token_budget == 6000  # not run yet: not applied
    impossible = _proposal(small_class, root, token_budget=4000)
    admin.post(f"/desk/figures/lab/{small_class.pk}/proposals/{impossible.pk}/apply", {"accept_tight_budget": "on"})
    assert TicketClass.objects.get(pk=small_class.pk).token_budget == 6000


@pytest.mark.django_db
def test_the_class_form_records_who_changed_what():
    standard = ensure_classes()["standard"]
    from tests.tickets.test_budget_lab import _class_post

    admin = client_for(user("root", admin=True))
    admin.post(
        f"/admin/tickets/ticketclass/{standard.pk}/change/",
        _class_post(
            standard, token_budget=9000, first_response_minutes=30, approval_rules=json.dumps(standard.approval_rules)
        ),
    )
    change = TicketClassChange.objects.get()
    assert change.changes == {"token_budget": [8000, 9000], "first_response_minutes": [60, 30]}
    assert change.changed_by.username == "root" and change.proposal is None
    # The trail is read only in the admin: listed, never edited or deleted there.
    assert admin.get("/admin/tickets/ticketclasschange/").status_code == 200
    assert admin.post(f"/admin/tickets/ticketclasschange/{change.pk}/delete/", {"post": "yes"}).status_code == 403
    assert TicketClassChange.objects.filter(pk=change.pk).exists()


def test_only_admins_reach_the_lab_customers_are_sent_home(small_class):
    proposal = _proposal(small_class, None, token_budget=12000)
    base = f"/desk/figures/lab/{small_class.pk}/"
    urls = [
        ("get", base),
        ("post", base + "run"),
        ("get", f"{base}proposals/{proposal.pk}/"),
        ("post", f"{base}proposals/{proposal.pk}/apply"),
    ]
    staff = client_for(user("desk"))
    customer_user = user("cust", staff=False)
    CustomerFactory(user=customer_user)
    customer = client_for(customer_user)
    for method, url in urls:
        assert getattr(staff, method)(url, PROPOSE).status_code == 403, url
        away = getattr(customer, method)(url, PROPOSE)
        assert away.status_code == 302 and "/desk" not in away["Location"], url
        assert "/login" in getattr(Client(), method)(url, PROPOSE)["Location"], url
    assert TicketClass.objects.get(pk=small_class.pk).token_budget == 8000
    assert BudgetProposal.objects.count() == 1
    # Control: the admin reaches each; a proposal of another class is not found under this one.
    admin = client_for(user("root", admin=True))
    bad = admin.post(base + "run", {**PROPOSE, "budget": "6e999"})
    assert bad.status_code == 400 and 'id="budget-error"' in bad.content.decode()
    assert BudgetProposal.objects.count() == 1  # nothing kept from bad input
    assert admin.get(f"{base}proposals/{proposal.pk}/").status_code == 200
    assert admin.get(f"/desk/figures/lab/{small_class.pk + 999}/proposals/{proposal.pk}/").status_code == 404


async def test_an_applied_proposal_changes_an_open_tickets_budget_panel_live(transactional_db):
    from tests.compaction.helpers import long_ticket

    ticket = await database_sync_to_async(long_ticket)()
    await database_sync_to_async(agent_run)(
        ticket.pk, gateway=Gateway(override=ScriptedModel([ModelResponse(text="Still moving.")]))
    )
    root = await database_sync_to_async(user)("root", admin=True)
    socket = desk(ticket.pk, await database_sync_to_async(_cookie)(root))
    assert "of 8000 tokens · compaction at 6400" in await _open(socket)

    def apply():
        proposal = BudgetProposal.objects.create(
            ticket_class_id=ticket.ticket_class_id,
            created_by=root,
            token_budget=10000,
            trigger_fraction=0.7,
            recent_turns_kept=8,
            ledger_share=0.3,
            tickets=10,
            status="done",
        )
        response = client_for(root).post(f"/desk/figures/lab/{ticket.ticket_class_id}/proposals/{proposal.pk}/apply")
        return response.status_code

    assert await database_sync_to_async(apply)() == 302
    assert 'id="panel-budget"' in await _until(socket, "of 10000 tokens · compaction at 7000")
    await socket.disconnect()


def test_the_tokens_chart_says_in_words_what_it_draws():
    from sundry.desk.labcharts import tokens_chart
    from tests.tickets.test_budget_lab import PROPOSED_REQUESTS, RECORDED

    sample = {
        "ticket": 7,
        "steps": list(range(1, 7)),
        "recorded": RECORDED,
        "recorded_compactions": [],
        "current": RECORDED,
        "current_compactions": [],
        "proposed": PROPOSED_REQUESTS,
        "proposed_compactions": [4],
    }
    svg = str(tokens_chart(sample, current_trigger=6400, proposed_trigger=1600))
    assert svg.startswith('<svg class="lab-chart" id="chart-tokens-7" role="img"')
    assert '<title id="chart-tokens-7-title">Ticket #7: tokens per request, current vs proposed</title>' in svg
    assert (
        "Current settings: peak 2,188 tokens, 0 of 6 steps over its trigger of 6,400, compacted after no step. "
        "Proposed: peak 1,756 tokens, 2 of 6 steps over its trigger of 1,600, compacted after step 4."
    ) in svg
    assert svg.count("<polygon") == 1 and "<title>compaction after step 4</title>" in svg  # the proposal's ◆
    # Control: with no compaction in the proposal, no mark and the words say so.
    quiet = str(tokens_chart({**sample, "proposed_compactions": []}, current_trigger=6400, proposed_trigger=1600))
    assert "<polygon" not in quiet and "1,600, compacted after no step" in quiet
