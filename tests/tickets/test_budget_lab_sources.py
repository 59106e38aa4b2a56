"""The budget lab's sources: a proposal replays the class's recent tickets (the window), imported traces
(a file of recorded conversations, as the harness imports them) or the outcome scenarios; the source is
kept on the proposal and shown with its results.

Traces are walked by the harness (production's assembly, trigger and compaction); scenarios run through
the agent loop on a seeded demo shop and are judged by what they left in it. Both are run here by a real
Celery worker over Redis, as the lab page queues them."""

from __future__ import annotations

import io
import json
import re
from decimal import Decimal
from pathlib import Path

import pytest
from django.conf import settings
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import CommandError, call_command

from sundry.desk import lab_views
from sundry.desk.labtext import lab_text
from sundry.evals.labrun import proposal_run
from sundry.evals.scenarios import effects as fx
from sundry.evals.tasks import budget_lab_task
from sundry.shop.demo import ensure_classes
from sundry.tickets.models import BudgetProposal, Ticket, TicketClass
from tests.tickets.test_budget_proposals import GPT, client_for, user
from tests.workers import Worker, wait_for, worker_env  # noqa: F401  (fixture)

FIXTURE = Path(__file__).resolve().parent.parent / "evals" / "fixtures" / "tau2_retail_small.json"
# Tight enough that the retail conversation compacts under it and not at the class's 8,000.
TIGHT = {"budget": 5000, "trigger": 0.6, "kept": 2, "ledger": 0.3, "tickets": 10, "price_as": GPT}
# A damaged item refunded early and asked about much later: at the class's 8,000 tokens it stays correct;
# at 5,000 with two turns kept it compacts twice as often and the refund is never made.
SCENARIO = "air-fryer-status-after-compaction"


def _upload(name: str, body: bytes) -> SimpleUploadedFile:
    return SimpleUploadedFile(name, body, content_type="application/json")


def _run_in_worker(worker_env, tmp_path, *pks: int) -> None:
    for pk in pks:
        budget_lab_task.apply_async(args=[pk], queue=worker_env["SUNDRY_TASK_QUEUE"])
    worker = Worker(worker_env, tmp_path / "worker.log")
    try:
        wait_for(
            lambda: not BudgetProposal.objects.filter(pk__in=pks, status__in=["queued", "running"]).exists(),
            280,
            "the worker to run the proposals",
        )
    finally:
        worker.stop()
    for p in BudgetProposal.objects.filter(pk__in=pks):
        assert p.status == "done", p.error or (tmp_path / "worker.log").read_text()[-3000:]


@pytest.mark.services
@pytest.mark.timeout(600)
@pytest.mark.django_db(transaction=True)
def test_uploaded_traces_and_the_scenarios_each_run_in_a_real_worker_and_keep_their_results(
    worker_env, monkeypatch, tmp_path
):
    from sundry.shop.seed import generate_shop

    generate_shop(seed=settings.DEMO_SEED, customers=200, orders=2000)
    standard = ensure_classes()["standard"]
    monkeypatch.setattr(lab_views, "_enqueue", lambda pk: None)  # queued below, to the test's own worker
    admin = client_for(user("root", admin=True))
    url = f"/desk/figures/lab/{standard.pk}/run"
    sent = admin.post(url, {**TIGHT, "source": "traces", "traces_file": _upload(FIXTURE.name, FIXTURE.read_bytes())})
    assert sent.status_code == 302, sent.content.decode()[-2000:]
    traces = BudgetProposal.objects.get()
    assert (traces.source, traces.traces_name) == ("traces", FIXTURE.name)
    assert traces.traces_text == FIXTURE.read_text()  # kept with the proposal: any worker can read it
    shown = admin.post(url, {**TIGHT, "source": "scenarios", "scenarios": "fast"})
    assert shown.status_code == 302
    scenarios = BudgetProposal.objects.filter(source="scenarios").get()
    assert scenarios.scenarios == "fast"
    BudgetProposal.objects.filter(pk=scenarios.pk).update(scenarios=SCENARIO)  # one scenario keeps the test short
    classes, checkpoint = TicketClass.objects.count(), fx.checkpoint()

    _run_in_worker(worker_env, tmp_path, traces.pk, scenarios.pk)

    # Traces: the one retail conversation, walked by the harness at 8,000 and at 5,000.
    f = BudgetProposal.objects.get(pk=traces.pk).figures
    assert f["source"]["kind"] == "traces" and f["tickets"] == 1
    assert f["source"]["text"] == f"1 imported ticket from {FIXTURE.name} (retail)"
    first, cur, prop = f["recorded"], f["replayed_current"], f["replayed_proposed"]
    assert first["steps"] == cur["steps"] == prop["steps"] > 5
    assert first["compactions"] == cur["compactions"] == 0 and prop["compactions"] >= 1
    assert prop["peak"] < cur["peak"] == first["peak"] and prop["summariser_calls"] == prop["compactions"]
    assert f["fidelity"]["checked"] and f["fidelity"]["proposed"]["ids"]["checks"] > 0
    assert Decimal(prop["cost"]) < Decimal(cur["cost"])
    page = admin.get(f"/desk/figures/lab/{standard.pk}/proposals/{traces.pk}/").content.decode()
    assert f"imported traces: {FIXTURE.name}" in page and '<th scope="col">Never compacted</th>' in page
    assert 'data-source="traces"' in page

    # Scenarios: the outcome beside the figures, judged by the shop; nothing of the runs is left behind.
    s = BudgetProposal.objects.get(pk=scenarios.pk).figures
    assert s["source"]["kind"] == "scenarios" and s["tickets"] == 1
    outcomes = s["scenarios"]
    assert outcomes["cast"] == 1 and [r["id"] for r in outcomes["rows"]] == [SCENARIO]
    row = outcomes["rows"][0]
    assert row["current"]["verdict"] == "correct" and row["current"]["damage"] == 0, row
    assert row["proposed"]["verdict"] == "wrong" and row["proposed"]["missing_list"] == ["refund on {damaged}"], row
    assert row["proposed"]["lost"][0].startswith("refund ") and row["proposed"]["lost"][0].endswith("({damaged})")
    assert row["proposed"]["compactions"] > row["current"]["compactions"] > 0
    assert (outcomes["current"]["correct"], outcomes["proposed"]["correct"]) == (1, 0)
    assert s["replayed_current"]["steps"] == row["current"]["steps"]
    assert s["replayed_proposed"]["compactions"] == row["proposed"]["compactions"]
    assert s["recorded"]["compactions"] == 0 and s["fidelity"]["checked"]
    assert TicketClass.objects.count() == classes and not Ticket.objects.exists()
    assert fx.checkpoint().statuses == checkpoint.statuses
    page = admin.get(f"/desk/figures/lab/{standard.pk}/proposals/{scenarios.pk}/").content.decode()
    assert 'id="lab-scenarios"' in page and f'data-scenario="{SCENARIO}"' in page
    assert re.search(r'scenarios_correct"><th scope="row">Scenarios correct</th><td>1 of 1</td><td>0 of 1</td>', page)
    assert 'data-verdict="wrong"' in page and "Missing: refund on {damaged}" in page
    listed = admin.get(f"/desk/figures/lab/{standard.pk}/").content.decode()
    assert 'data-source="traces"' in listed and 'data-source="scenarios"' in listed and "1 → 0 of 1" in listed
    # `manage.py budget_lab --scenarios` prints the same result.
    text = lab_text(s, standard.name)
    assert _row(text, "scenarios correct") == ["1 of 1", "0 of 1"]
    assert _row(text, SCENARIO)[0].startswith("correct") and _row(text, SCENARIO)[1].startswith("wrong (1 missing")


BAD_FILES = [
    ("notes.txt", b"this is not json\n{", "notes.txt is neither JSON nor JSON lines"),
    ("empty.json", b"[]", "empty.json holds no OpenAI message list"),
    ("binary.json", b"\xff\xfe\x00", "binary.json is not UTF-8 text"),
    (
        "silent.json",
        json.dumps({"simulations": [{"task_id": 1, "messages": []}], "info": {}}).encode(),
        "silent.json holds no conversation to replay",
    ),
]


@pytest.mark.django_db
@pytest.mark.parametrize("name, body, message", BAD_FILES)
def test_a_bad_or_empty_traces_file_is_refused_with_the_reason_and_the_form_keeps_its_values(name, body, message):
    standard = ensure_classes()["standard"]
    admin = client_for(user("root", admin=True))
    url = f"/desk/figures/lab/{standard.pk}/run"
    refused = admin.post(url, {**TIGHT, "source": "traces", "traces_file": _upload(name, body)})
    html = refused.content.decode()
    assert refused.status_code == 400
    assert 'id="traces_file-error"' in html and message in html, re.findall(r'id="traces_file-error">([^<]*)', html)
    assert 'value="5000"' in html and re.search(r'value="traces"[^>]*checked', html)
    assert not BudgetProposal.objects.exists()
    # From the page's own button (htmx) the form is swapped in place with the same message.
    again = admin.post(url, {**TIGHT, "source": "traces", "traces_file": _upload(name, body)}, HTTP_HX_REQUEST="true")
    assert again.status_code == 422 and again["HX-Retarget"] == "#lab-page" and message in again.content.decode()
    # Control: the good file is kept.
    good = admin.post(url, {**TIGHT, "source": "traces", "traces_file": _upload(FIXTURE.name, FIXTURE.read_bytes())})
    assert good.status_code == 302 and BudgetProposal.objects.get().source == "traces"


@pytest.mark.django_db
def test_traces_need_a_file_and_a_server_path_must_be_under_the_allowed_folders(tmp_path, settings):
    standard = ensure_classes()["standard"]
    admin = client_for(user("root", admin=True))
    url = f"/desk/figures/lab/{standard.pk}/run"
    none = admin.post(url, {**TIGHT, "source": "traces"}).content.decode()
    assert "Choose a traces file to upload, or name one on the server." in none
    settings.LAB_TRACE_DIRS = [str(tmp_path / "allowed")]
    (tmp_path / "allowed").mkdir()
    outside = admin.post(url, {**TIGHT, "source": "traces", "traces_path": str(FIXTURE)}).content.decode()
    assert "Only files under these folders can be named here" in outside
    assert not BudgetProposal.objects.exists()
    inside = tmp_path / "allowed" / FIXTURE.name
    inside.write_bytes(FIXTURE.read_bytes())
    assert admin.post(url, {**TIGHT, "source": "traces", "traces_path": str(inside)}).status_code == 302
    kept = BudgetProposal.objects.get()
    assert (kept.traces_name, kept.traces_text) == (str(inside), "")  # read from the server when run
    ran = proposal_run(kept.pk)
    assert ran.status == "done" and ran.figures["source"]["kind"] == "traces" and ran.figures["tickets"] == 1


@pytest.mark.django_db
def test_the_scenarios_are_refused_without_a_seeded_shop():
    standard = ensure_classes()["standard"]
    admin = client_for(user("root", admin=True))
    html = admin.post(f"/desk/figures/lab/{standard.pk}/run", {**TIGHT, "source": "scenarios"}).content.decode()
    assert 'id="source-error"' in html and "this database has none" in html
    assert not BudgetProposal.objects.exists()


def _command(*args) -> str:
    out = io.StringIO()
    call_command("budget_lab", *args, stdout=out, stderr=io.StringIO())
    return out.getvalue()


def _row(text: str, name: str) -> list[str]:
    line = next(line for line in text.splitlines() if line.strip().startswith(name))
    return re.split(r"\s{2,}", line.strip())[1:]


@pytest.mark.django_db
def test_the_command_replays_a_traces_file_and_refuses_a_bad_one(tmp_path):
    standard = ensure_classes()["standard"]
    args = ["--class", standard.slug, "--budget", "5000", "--trigger", "0.6", "--kept", "2", "--price-as", GPT]
    text = _command(*args, "--traces", str(FIXTURE))
    assert f"Replayed 1 imported ticket from {FIXTURE} (retail)" in text
    heads = next(line for line in text.splitlines() if line.startswith("Replayed "))
    assert heads.split()[1:] == ["never", "compacted", "current", "proposed"] or "never compacted" in heads
    never, current, proposed = _row(text, "compactions")
    assert never == current == "0" and int(proposed) >= 1
    # Control: without --traces the command replays the class's own (empty) window.
    assert "Replayed the latest 0 of 0 tickets" in _command(*args)
    bad = tmp_path / "bad.json"
    bad.write_text("[]")
    with pytest.raises(CommandError, match=r"--traces: .*bad.json holds no OpenAI message list"):
        _command(*args, "--traces", str(bad))
    with pytest.raises(CommandError, match=r"--traces: No file"):
        _command(*args, "--traces", str(tmp_path / "missing.json"))
    with pytest.raises(CommandError, match=r"--scenarios: Unknown scenario id\(s\): nope"):
        _command(*args, "--scenarios", "nope")


@pytest.mark.django_db
def test_desk_tickets_exported_and_replayed_as_traces_give_back_the_requests_the_agent_sent(tmp_path):
    """The traces replay assembles and counts requests as production does: at the class's own settings, the
    harness's walk over the desk's own tickets (Sundry's export format, uploaded) reproduces every request."""
    from sundry.agent.models import AgentStep
    from sundry.evals.records import dump, export_ticket
    from tests.tickets.test_budget_proposals import worked_history

    standard = ensure_classes()["standard"]
    tickets = worked_history(standard, 2)
    sent = [
        list(AgentStep.objects.filter(ticket=t).order_by("number").values_list("request_tokens", flat=True))
        for t in tickets
    ]
    path = dump([export_ticket(t) for t in tickets], tmp_path / "desk.json")
    admin = client_for(user("root", admin=True))
    own = {**TIGHT, "budget": 8000, "trigger": 0.8, "kept": 8, "source": "traces"}
    admin.post(f"/desk/figures/lab/{standard.pk}/run", {**own, "traces_file": _upload("desk.json", path.read_bytes())})
    f = proposal_run(BudgetProposal.objects.get().pk).figures
    assert [s["current"] for s in f["samples"]] == [s["recorded"] for s in f["samples"]] == sent
    assert f["replayed_current"]["input_tokens"] == sum(map(sum, sent)) and f["replayed_current"]["compactions"] == 0
    # Control: the same tickets under a budget that compacts give other requests.
    BudgetProposal.objects.all().delete()
    r = admin.post(
        f"/desk/figures/lab/{standard.pk}/run",
        {**own, "budget": 4500, "trigger": 0.8, "kept": 2, "traces_file": _upload("desk.json", path.read_bytes())},
    )
    assert r.status_code == 302, re.findall(r'-error">([^<]*)', r.content.decode())
    tight = proposal_run(BudgetProposal.objects.get().pk).figures
    assert tight["replayed_proposed"]["compactions"] > 0
    assert [s["proposed"] for s in tight["samples"]] != sent
