"""The budget lab's costs: per ticket and per month at the class's volume, with the prompt cache at the
class's recorded shares and the summariser's calls, each figure against genai-prices computed here by
hand; a proposal's own working and summariser models, the summariser's cost accepted before a run
calls it, and applying the models with the audit record.

The history is the hand-worked one of `test_budget_lab` (twelve turns of 100 tokens, six steps),
recorded as a provider answered it: each step reported its input tokens, 60% read from the prompt
cache and 10% written to it.
"""

from __future__ import annotations

import io
import re
from datetime import timedelta
from decimal import Decimal

import genai_prices
import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from sundry.agent.models import AgentStep
from sundry.compaction.trigger import EXPECTED_SUMMARY_TOKENS
from sundry.desk.budgetlab import lab_json, run_lab
from sundry.desk.labcosts import template_tokens
from sundry.desk.labform import ProposalForm, initial_values
from sundry.evals.labrun import proposal_run
from sundry.tickets.models import BudgetProposal, Ticket, TicketClass, TicketClassChange, Turn
from tests.factories import TicketClassFactory, TicketFactory
from tests.tickets.test_budget_lab import PROPOSED, PROPOSED_REQUESTS, RECORDED, STEPS, TURNS
from tests.tickets.test_budget_proposals import client_for, user

pytestmark = pytest.mark.django_db

HAIKU = "anthropic:claude-3-5-haiku-latest"
READ, WRITE = 0.6, 0.1
OUTPUT = 20
SIX = Decimal("0.000001")


def _haiku(input_tokens: int, output_tokens: int, read: int = 0, write: int = 0) -> Decimal:
    """One request's price straight from genai-prices, as the desk stores a step's (six places)."""
    usage = genai_prices.Usage(
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        cache_read_tokens=read or None,
        cache_write_tokens=write or None,
    )
    return genai_prices.calc_price(usage, "claude-3-5-haiku-latest", provider_id="anthropic").total_price.quantize(SIX)


def _with_cache(requests: list[int]) -> Decimal:
    return sum((_haiku(n, OUTPUT, round(n * READ), round(n * WRITE)) for n in requests), Decimal(0))


def _history(tclass: TicketClass, *, opened_days_ago: float = 0) -> Ticket:
    ticket = TicketFactory(ticket_class=tclass)
    for t in TURNS:
        Turn.objects.create(ticket=ticket, number=t.number, author=t.author, kind="message", text="x", tokens=100)
    for s in STEPS:
        AgentStep.objects.create(
            ticket=ticket,
            number=s.number,
            model=HAIKU,
            offline=False,
            request_tokens=s.request_tokens,
            input_tokens=s.request_tokens,
            cached_input_tokens=round(s.request_tokens * READ),
            cache_write_tokens=round(s.request_tokens * WRITE),
            lane_tokens={"lanes": {}, "first_turn": s.first_turn, "last_turn": s.last_turn},
            output_tokens=OUTPUT,
            outcome="reply",
            is_resolution=True,
            first_turn=s.appended_through,
            last_turn=s.appended_through,
        )
    if opened_days_ago:
        Ticket.objects.filter(pk=ticket.pk).update(created_at=timezone.now() - timedelta(days=opened_days_ago))
    return ticket


@pytest.fixture
def cached_class():
    tclass = TicketClassFactory(
        token_budget=8000,
        trigger_fraction=0.8,
        recent_turns_kept=8,
        ledger_share=0.3,
        working_model=HAIKU,
        summariser_model="offline",
    )
    _history(tclass, opened_days_ago=10)
    return tclass


def test_the_cost_includes_cache_reads_and_writes_at_genai_prices_own_figure(cached_class):
    lab = run_lab(cached_class, PROPOSED, price_as=HAIKU)
    assert (lab.shares.read, lab.shares.write, lab.shares.steps) == (READ, WRITE, 6)
    assert lab.replayed_current.cost == _with_cache(RECORDED) == lab.recorded.cost
    assert lab.replayed_proposed.cost == _with_cache(PROPOSED_REQUESTS)
    # Control: the same requests priced as if nothing were cached come to another, higher figure.
    uncached = sum((_haiku(n, OUTPUT) for n in RECORDED), Decimal(0))
    assert uncached > lab.replayed_current.cost
    # Control: a class whose requests reported no cache use is priced without it.
    AgentStep.objects.filter(ticket__ticket_class=cached_class).update(cached_input_tokens=0, cache_write_tokens=0)
    assert run_lab(cached_class, PROPOSED, price_as=HAIKU).replayed_current.cost == uncached


def test_a_compaction_is_one_summariser_call_priced_at_the_proposed_summariser(cached_class):
    lab = run_lab(cached_class, PROPOSED, price_as=HAIKU, summariser_model=HAIKU)
    p, c = lab.replayed_proposed, lab.replayed_current
    # The proposal compacts once, after step 4: turns 1–6 (600 tokens) and no earlier summary replaced.
    assert (p.summariser_calls, p.summariser_input_tokens) == (1, template_tokens(HAIKU) + 600)
    assert p.summariser_cost == _haiku(template_tokens(HAIKU) + 600, EXPECTED_SUMMARY_TOKENS)
    # Control: at the current settings nothing compacts, so no summariser call is priced.
    assert (c.summariser_calls, c.summariser_cost) == (0, Decimal(0))


def test_cost_per_ticket_and_per_month_at_the_volume_of_the_last_30_days(cached_class):
    TicketClass.objects.filter(pk=cached_class.pk).update(created_at=timezone.now() - timedelta(days=90))
    cached_class.refresh_from_db()
    _history(cached_class, opened_days_ago=5)
    TicketFactory(ticket_class=cached_class)  # opened today, no steps yet: still a ticket of the month
    old = TicketFactory(ticket_class=cached_class)
    Ticket.objects.filter(pk=old.pk).update(created_at=timezone.now() - timedelta(days=45))  # before the month
    out = lab_json(run_lab(cached_class, PROPOSED, price_as=HAIKU, summariser_model=HAIKU))
    assert out["volume"] == {"per_month": 3.0, "basis": "3 tickets in the last 30 days"}
    p = out["replayed_proposed"]
    per_ticket = (_with_cache(PROPOSED_REQUESTS) * 2 + 2 * _haiku(template_tokens(HAIKU) + 600, 200)) / 2
    assert Decimal(p["cost_per_ticket"]) == per_ticket.quantize(SIX)
    assert Decimal(p["cost_per_month"]) == (per_ticket * 3).quantize(SIX)
    c = out["replayed_current"]
    assert Decimal(c["cost_per_ticket"]) == _with_cache(RECORDED).quantize(SIX)
    # Control: a ticket of the month moved before it leaves two a month, and the month's cost follows.
    Ticket.objects.filter(ticket_class=cached_class, steps__isnull=True).exclude(pk=old.pk).update(
        created_at=timezone.now() - timedelta(days=40)
    )
    fewer = lab_json(run_lab(cached_class, PROPOSED, price_as=HAIKU, summariser_model=HAIKU))
    assert fewer["volume"]["per_month"] == 2.0
    assert Decimal(fewer["replayed_proposed"]["cost_per_month"]) == (per_ticket * 2).quantize(SIX)


def test_a_class_younger_than_30_days_is_counted_at_the_replayed_windows_rate(cached_class):
    # The class was made today; its one ticket with steps came in 10 days ago: 1 ticket in 10 days, 3 a month.
    out = lab_json(run_lab(cached_class, PROPOSED, price_as=HAIKU))
    assert out["volume"]["per_month"] == 3.0 and "younger than 30 days" in out["volume"]["basis"]
    assert Decimal(out["replayed_current"]["cost_per_month"]) == (_with_cache(RECORDED) * 3).quantize(SIX)
    # Control: the same ticket opened 2 days ago makes the rate 15 a month.
    Ticket.objects.filter(ticket_class=cached_class).update(created_at=timezone.now() - timedelta(days=2))
    assert lab_json(run_lab(cached_class, PROPOSED, price_as=HAIKU))["volume"]["per_month"] == 15.0


def _form(tclass, **values) -> ProposalForm:
    return ProposalForm({**initial_values(tclass), "budget": 2000, "kept": 2, **values}, tclass=tclass)


def test_a_proposals_models_must_have_a_known_price(cached_class):
    unknown = _form(cached_class, working_model="openai:no-such-model-9")
    assert not unknown.is_valid()
    assert "genai-prices has no price for 'openai:no-such-model-9'" in " ".join(unknown.errors["working_model"])
    malformed = _form(cached_class, summariser_model="haiku")
    assert not malformed.is_valid() and "unknown model 'haiku'" in " ".join(malformed.errors["summariser_model"])
    # Control: priced models (and the free offline one) are accepted.
    assert _form(cached_class, working_model=HAIKU, summariser_model="offline").is_valid()


def test_calling_a_billed_summariser_needs_its_estimated_cost_accepted(cached_class, monkeypatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)  # no billed call can happen here
    asked = _form(cached_class, summariser_model=HAIKU, call_summariser="on")
    assert not asked.is_valid()
    one_call = _haiku(template_tokens(HAIKU) + 600, EXPECTED_SUMMARY_TOKENS)
    error = " ".join(asked.errors["confirm_cost"])
    assert f"The run would call {HAIKU} about 1 time by the replay's count" in error
    assert f"about ${one_call:.4f}" in error
    # The ceiling: both settings' 6 steps, each compacting with its retry, each replacing the largest request.
    largest = _haiku(template_tokens(HAIKU) + max(RECORDED), EXPECTED_SUMMARY_TOKENS)
    assert "at most 24 calls (2 settings × 6 steps × 2 attempts)" in error and f"at most ${largest * 24:.4f}" in error
    # Control: accepted, the form passes; and an offline summariser needs nothing accepted.
    assert _form(cached_class, summariser_model=HAIKU, call_summariser="on", confirm_cost="on").is_valid()
    assert _form(cached_class, call_summariser="on").is_valid()


def _command(*args) -> str:
    out = io.StringIO()
    call_command("budget_lab", *args, stdout=out)
    return out.getvalue()


def _row(text: str, name: str) -> list[str]:
    line = next(line for line in text.splitlines() if line.strip().startswith(name))
    return re.split(r"\s{2,}", line.strip())[1:]


def test_the_command_prints_cost_per_ticket_and_month_and_asks_before_calling_the_summariser(cached_class, monkeypatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    base = ["--class", cached_class.slug, "--budget", "2000", "--kept", "2", "--price-as", HAIKU]
    text = _command(*base, "--summariser-model", HAIKU)
    per_ticket = _with_cache(PROPOSED_REQUESTS) + _haiku(template_tokens(HAIKU) + 600, EXPECTED_SUMMARY_TOKENS)
    assert _row(text, "cost per ticket")[2] == f"${per_ticket:.4f}"
    assert _row(text, "cost per month")[2] == f"${per_ticket * 3:,.2f}"  # 3 tickets a month (the window's rate)
    assert _row(text, "summariser model") == ["offline", HAIKU]
    assert "Prompt cache at the class's recorded shares: 60.0% of input read, 10.0% written" in text
    with pytest.raises(CommandError, match=rf"--yes: The run would call {re.escape(HAIKU)} about 1 time"):
        _command(*base, "--summariser-model", HAIKU, "--call-summariser")
    # Accepted: the harness's compactions call the model through the gateway. With no key here it cannot
    # be billed; the offline summariser answers and the output says so.
    ran = _command(*base, "--summariser-model", HAIKU, "--call-summariser", "--yes")
    assert "Accepted (--yes)." in ran
    spent = re.search(r"Summariser called: (\S+), (\d+) calls \((\d+) failed\); answered by: (.*?); spent \$(\S+)", ran)
    assert spent and spent.group(1) == HAIKU and 1 <= int(spent.group(2)) <= 24  # within the ceiling asked
    assert spent.group(4) == f"offline {spent.group(2)}" and spent.group(5) == "0.0000"


def test_a_stored_proposal_keeps_the_costs_and_applying_it_writes_its_models_with_the_audit(cached_class):
    root = user("root", admin=True)
    proposal = proposal_run(
        BudgetProposal.objects.create(
            ticket_class=cached_class,
            created_by=root,
            token_budget=12000,
            trigger_fraction=0.8,
            recent_turns_kept=8,
            ledger_share=0.3,
            tickets=10,
            price_as=HAIKU,
            summariser_model=HAIKU,
        ).pk
    )
    stored = proposal.figures["replayed_proposed"]
    assert Decimal(stored["cost_per_month"]) == (Decimal(stored["cost_per_ticket"]) * 3).quantize(SIX)
    assert proposal.figures["cache"]["read"] == READ and proposal.figures["volume"]["per_month"] == 3.0
    page = client_for(root)
    assert page.post(f"/desk/figures/lab/{cached_class.pk}/proposals/{proposal.pk}/apply").status_code == 302
    cached_class.refresh_from_db()
    assert (cached_class.token_budget, cached_class.working_model, cached_class.summariser_model) == (
        12000,
        HAIKU,
        HAIKU,
    )
    change = TicketClassChange.objects.get()
    assert change.changes == {"token_budget": [8000, 12000], "summariser_model": ["offline", HAIKU]}
    assert (change.changed_by, change.proposal) == (root, proposal)
    # Control: a proposal naming no model leaves the class's models as they are.
    plain = proposal_run(
        BudgetProposal.objects.create(
            ticket_class=cached_class,
            created_by=root,
            token_budget=10000,
            trigger_fraction=0.8,
            recent_turns_kept=8,
            ledger_share=0.3,
            tickets=10,
            price_as=HAIKU,
        ).pk
    )
    page.post(f"/desk/figures/lab/{cached_class.pk}/proposals/{plain.pk}/apply")
    assert TicketClassChange.objects.filter(proposal=plain).get().changes == {"token_budget": [12000, 10000]}
    cached_class.refresh_from_db()
    assert cached_class.summariser_model == HAIKU


def test_the_page_keeps_a_summariser_run_only_once_its_cost_is_accepted(cached_class, monkeypatch):
    from sundry.desk import lab_views

    monkeypatch.setattr(lab_views, "_enqueue", lambda pk: None)  # kept, not run: the worker test runs one
    admin = client_for(user("root", admin=True))
    url = f"/desk/figures/lab/{cached_class.pk}/"
    values = {**initial_values(cached_class), "budget": 2000, "kept": 2, "summariser_model": HAIKU}
    refused = admin.post(url + "run", {**values, "call_summariser": "on"})
    assert refused.status_code == 400 and "The run would call" in refused.content.decode()
    assert not BudgetProposal.objects.exists()
    shown = admin.get(url, {**values, "call_summariser": "on"})
    assert shown.status_code == 400 and 'id="confirm_cost-error"' in shown.content.decode()
    # Control: with the tick the proposal is kept, to call the summariser.
    admin.post(url + "run", {**values, "call_summariser": "on", "confirm_cost": "on"})
    kept = BudgetProposal.objects.get()
    assert (kept.summariser_model, kept.call_summariser) == (HAIKU, True)
    html = admin.get(url, values).content.decode()
    assert 'data-figure="cost_per_month"' in html and "3 tickets" in html
