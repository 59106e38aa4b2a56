"""The budget lab: the class admin says how much of each request is fixed and warns when a budget leaves
compaction no room; the lab page replays a class's recorded steps under a proposed budget.

The replay is checked against figures worked out by hand on a small history (every turn 100 tokens,
six steps), and at the class's own settings against the requests the offline agent really sent.
"""

from __future__ import annotations

import re
from decimal import Decimal

import genai_prices
import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from sundry.agent.loop import agent_run
from sundry.agent.models import AgentStep
from sundry.agent.services import customer_message_post
from sundry.context.lanes import TurnData
from sundry.desk.admin import TicketClassForm
from sundry.desk.budgetfit import fixed_part
from sundry.desk.budgetlab import run_lab
from sundry.desk.budgetreplay import Budget, History, StepRecord, replay
from sundry.desk.lifecycle import ticket_create
from sundry.shop.demo import ensure_classes
from sundry.tickets.models import Ticket, TicketClass, Turn
from tests.factories import CustomerFactory, TicketClassFactory, TicketFactory

pytestmark = pytest.mark.django_db
GPT = "openai:gpt-4.1-mini"


def _client(*, admin: bool) -> Client:
    client = Client()
    name = "root" if admin else "desk"
    client.force_login(get_user_model().objects.create_user(name, password="pw", is_staff=True, is_superuser=admin))
    return client


def _class_post(tclass: TicketClass, **changes) -> dict:
    data = {
        "name": tclass.name,
        "slug": tclass.slug,
        "description": tclass.description,
        "token_budget": str(tclass.token_budget),
        "trigger_fraction": str(tclass.trigger_fraction),
        "recent_turns_kept": str(tclass.recent_turns_kept),
        "ledger_share": str(tclass.ledger_share),
        "pinned_rules_cap": str(tclass.pinned_rules_cap),
        "working_model": tclass.working_model,
        "summariser_model": tclass.summariser_model,
        "approval_rules": "{}",
        "approval_window_hours": "24",
        "confirmation_minutes": "60",
        "first_response_minutes": "60",
        "next_response_minutes": "240",
    }
    data.update({k: str(v) for k, v in changes.items()})
    return data


# --- the class admin -----------------------------------------------------------------------


def test_the_fixed_part_is_the_system_prompt_and_tool_schemas_as_a_step_counts_them():
    standard = ensure_classes()["standard"]
    fit = fixed_part(standard)
    assert (fit.system, fit.tools) == (606, 3052)  # what the desk's Budget panel shows for a new ticket
    assert fit.fixed == 3730 and fit.fixed_share == 47 and fit.left == 6400 - 3730
    lowered = fixed_part(standard, budget=6000)
    assert lowered.fixed_share == 62 and lowered.left == 4800 - 3730
    # Control: a longer class policy is in the system prompt, so the fixed part grows with it.
    assert fixed_part(standard, description=standard.description + " Be brief." * 40).system > fit.system


def test_the_form_warns_at_6000_tokens_and_not_at_8000_for_the_seeded_standard_class():
    standard = ensure_classes()["standard"]
    lowered = TicketClassForm(_class_post(standard, token_budget=6000), instance=standard)
    assert not lowered.is_valid()
    error = " ".join(lowered.errors["token_budget"])
    assert (
        "3,730 tokens" in error and "62% of the 6,000-token budget" in error and "cannot bring requests under" in error
    )
    # The control: the class as seeded, with a budget field edited (so the check runs), is accepted silently.
    kept = TicketClassForm(_class_post(standard, token_budget=8000, recent_turns_kept=7), instance=standard)
    assert kept.is_valid(), kept.errors
    assert kept.budget_warning == ""


def test_saving_the_tight_budget_asks_first_then_keeps_it_with_a_warning():
    standard = ensure_classes()["standard"]
    admin = _client(admin=True)
    url = f"/admin/tickets/ticketclass/{standard.pk}/change/"
    refused = admin.post(url, _class_post(standard, token_budget=6000))
    assert refused.status_code == 200 and "Save this budget anyway" in refused.content.decode()
    assert "62% of the 6,000-token budget" in refused.content.decode()
    assert TicketClass.objects.get(pk=standard.pk).token_budget == 8000  # nothing saved until asked
    accepted = admin.post(url, _class_post(standard, token_budget=6000, accept_tight_budget="on"), follow=True)
    assert TicketClass.objects.get(pk=standard.pk).token_budget == 6000
    assert "Saved against the warning" in accepted.content.decode()


def test_an_impossible_budget_is_refused_even_when_the_admin_accepts_warnings():
    standard = ensure_classes()["standard"]
    form = TicketClassForm(_class_post(standard, token_budget=4000, accept_tight_budget="on"), instance=standard)
    assert not form.is_valid()
    assert "a request needs 4,330" in " ".join(form.errors["token_budget"])  # 3,730 + 200 + 8 × 50 > 3,200
    # Control: the same budget with few turns kept and a high trigger fits (with a warning to accept).
    fits = TicketClassForm(
        _class_post(standard, token_budget=5000, trigger_fraction=0.95, recent_turns_kept=2, accept_tight_budget="on"),
        instance=standard,
    )
    assert fits.is_valid(), fits.errors


def test_the_change_page_shows_the_room_and_links_the_lab():
    standard = ensure_classes()["standard"]
    page = _client(admin=True).get(f"/admin/tickets/ticketclass/{standard.pk}/change/").content.decode()
    assert "fixed part of 3,730 tokens" in page and "leaves 2,670 tokens" in page
    assert f"/desk/figures/lab/{standard.pk}/" in page


# --- the replay, by hand -------------------------------------------------------------------

# Twelve turns of 100 tokens (108 with the per-turn framing the trigger assumes); step k shows turns
# 1 … 2k−1, appends turn 2k and resolves. Each request: 1,000 tokens of lanes plus its turns.
TURNS = [TurnData(n, "customer" if n % 2 else "agent", "message", "", {}, 100) for n in range(1, 13)]
RECORDED = [1000 + 108 * (2 * k - 1) for k in range(1, 7)]  # 1,108 1,324 1,540 1,756 1,972 2,188
STEPS = [
    StepRecord(
        number=k,
        request_tokens=RECORDED[k - 1],
        summary_tokens=0,
        ledger_tokens=0,
        first_turn=1,
        last_turn=2 * k - 1,
        appended_through=2 * k,
        resolution=True,
        output_tokens=20,
    )
    for k in range(1, 7)
]
CURRENT = Budget(8000, 0.8, 8, 0.3)
PROPOSED = Budget(2000, 0.8, 2, 0.3)  # trigger 1,600
# Worked out by hand: step 3's next request (1,648) is over the trigger, but turns 1–4 (400 tokens) are
# under the 600-token floor; step 4's (1,864) compacts turns 1–6 (cut before the 2 kept turns): 648
# tokens out, a 200-token summary in. Step 5: 1,972 − 972 + 324 + 200 = 1,524; step 6: 1,740.
PROPOSED_REQUESTS = [1108, 1324, 1540, 1756, 1524, 1740]


def test_the_replay_matches_the_figures_worked_out_by_hand():
    history = History(1, TURNS, STEPS, ledger_allowance=2400)
    proposed = replay(history, PROPOSED)
    assert [n for _, n in proposed.requests] == PROPOSED_REQUESTS
    assert proposed.compacted_after == [4]
    # The control: at the recorded settings nothing compacts and every request is the recorded one.
    current = replay(history, CURRENT)
    assert [n for _, n in current.requests] == RECORDED and current.compacted_after == []


def test_a_smaller_ledger_share_trims_the_ledger_and_counts_the_steps():
    steps = [StepRecord(**{**s.__dict__, "ledger_tokens": 700}) for s in STEPS]
    history = History(1, TURNS, steps, ledger_allowance=2400)
    trimmed = replay(history, Budget(8000, 0.8, 8, 0.05))  # allowance 400: 300 tokens archived per step
    assert [n for _, n in trimmed.requests] == [n - 300 for n in RECORDED] and trimmed.ledger_over == 6
    # Control: the recorded share trims nothing.
    assert replay(history, CURRENT).ledger_over == 0


@pytest.fixture
def recorded_class():
    """The hand-worked history, stored as the agent stores it."""
    tclass = TicketClassFactory(
        token_budget=8000, trigger_fraction=0.8, recent_turns_kept=8, ledger_share=0.3, working_model="offline"
    )
    ticket = TicketFactory(ticket_class=tclass)
    for t in TURNS:
        Turn.objects.create(ticket=ticket, number=t.number, author=t.author, kind="message", text="x", tokens=100)
    for s in STEPS:
        lanes = {
            "lanes": {"system": 600, "ledger": 0, "summary": 0, "recent": 0},
            "tools": 300,
            "first_turn": s.first_turn,
            "last_turn": s.last_turn,
        }
        AgentStep.objects.create(
            ticket=ticket,
            number=s.number,
            model="offline",
            offline=True,
            request_tokens=s.request_tokens,
            lane_tokens=lanes,
            output_tokens=20,
            outcome="reply",
            is_resolution=True,
            first_turn=s.appended_through,
            last_turn=s.appended_through,
        )
    return tclass


def test_the_lab_sums_the_replay_and_prices_it_with_genai_prices(recorded_class):
    lab = run_lab(recorded_class, PROPOSED, price_as=GPT)
    assert (lab.tickets, lab.tickets_with_steps) == (1, 1)
    assert lab.recorded.peak == 2188 and lab.recorded.over_budget == 0
    assert lab.replayed_current.input_tokens == sum(RECORDED) and lab.replayed_current.compactions == 0
    p = lab.replayed_proposed
    assert (p.steps, p.peak, p.median, p.compactions) == (6, 1756, 1532, 1)
    assert (p.over_budget, p.over_trigger, p.input_tokens) == (0, 2, sum(PROPOSED_REQUESTS))
    # The recorded requests measured against the proposed budget: step 6 (2,188) was over 2,000.
    assert sum(1 for n in RECORDED if n > PROPOSED.budget) == 1
    # Each request priced on its own, as the desk stores a step's cost (six places); no cache recorded.
    direct = sum(
        genai_prices.calc_price(
            genai_prices.Usage(input_tokens=n, output_tokens=20), "gpt-4.1-mini", provider_id="openai"
        ).total_price.quantize(Decimal("0.000001"))
        for n in PROPOSED_REQUESTS
    )
    assert p.cost == direct and p.cost < lab.replayed_current.cost


def test_the_lab_page_shows_the_same_figures_to_admins_only(recorded_class):
    url = f"/desk/figures/lab/{recorded_class.pk}/"
    query = {"budget": 2000, "trigger": 0.8, "kept": 2, "ledger": 0.3, "price_as": GPT}
    page = _client(admin=True).get(url, query)
    assert page.status_code == 200
    html = page.content.decode()

    def row(name):
        cells = re.search(rf'<tr data-figure="{name}">.*?</tr>', html, re.S).group(0)
        return re.findall(r"<td>([^<]*)</td>", cells)

    assert row("peak") == ["2,188", "2,188", "1,756"]
    assert row("compactions") == ["0", "0", "1"]
    assert row("input_tokens") == [f"{sum(RECORDED):,}", f"{sum(RECORDED):,}", f"{sum(PROPOSED_REQUESTS):,}"]
    assert 'id="lab-warning"' in html  # 2,000 tokens cannot hold this class's fixed part and turns
    assert _client(admin=False).get(url, query).status_code == 403
    anonymous = Client().get(url, query)
    assert anonymous.status_code == 302 and "/login" in anonymous["Location"]


def test_the_class_settings_raise_no_warning_and_bad_input_is_refused_with_the_values_kept(recorded_class):
    admin = _client(admin=True)
    url = f"/desk/figures/lab/{recorded_class.pk}/"
    own = admin.get(url)
    assert own.status_code == 200 and 'id="lab-warning"' not in own.content.decode()
    bad = admin.get(url, {"budget": "6e999", "trigger": "0.8", "kept": "8", "ledger": "0.3"})
    assert bad.status_code == 400
    assert 'id="budget-error"' in bad.content.decode() and 'value="6e999"' in bad.content.decode()
    assert admin.get("/desk/figures/lab/999999/").status_code == 404


def test_at_the_class_settings_the_replay_reproduces_what_the_agent_sent():
    tclass = ensure_classes()["standard"]
    ticket = ticket_create(customer=CustomerFactory().person, ticket_class=tclass, subject="Where is my parcel?")
    for text in ("Where is my order?", "It was meant to come on Monday.", "Can you check again please?"):
        customer_message_post(ticket=ticket, text=text, wake=False)
        agent_run(ticket.pk)
    sent = list(AgentStep.objects.filter(ticket=ticket).order_by("number").values_list("request_tokens", flat=True))
    assert len(sent) >= 3
    tclass = Ticket.objects.get(pk=ticket.pk).ticket_class
    lab = run_lab(tclass, Budget(6000, 0.8, 8, 0.3))
    assert lab.recorded.input_tokens == lab.replayed_current.input_tokens == sum(sent)
    assert lab.replayed_current.peak == max(sent)
    assert lab.fit_proposed.tight and not lab.fit_current.tight  # 6,000 is the tight one, as the admin says


def test_the_figures_page_relates_each_class_budget_to_its_requests_cost_and_rating(recorded_class):
    admin = _client(admin=True)

    def row() -> str:
        html = admin.get("/desk/figures/").content.decode()
        return re.search(rf'<tr data-class="{recorded_class.slug}">.*?</tr>', html, re.S).group(0)

    at_8000 = row()
    assert "0 of 6 (0.0%)" in at_8000 and "peak 2188" in at_8000
    assert f"/desk/figures/lab/{recorded_class.pk}/" in at_8000
    # The same history against a 2,000-token budget: step 6 (2,188 tokens) was over it.
    TicketClass.objects.filter(pk=recorded_class.pk).update(token_budget=2000)
    at_2000 = row()
    assert "1 of 6 (16.7%)" in at_2000 and "compaction cannot bring requests under the trigger" in at_2000
    assert "compaction cannot bring" not in at_8000
