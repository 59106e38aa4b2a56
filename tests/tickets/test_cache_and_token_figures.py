"""The prompt cache and token counts in the figures, from steps a scripted provider reported usage for.

The scripted providers here stand in for the network model only: each step is a real agent step
(assemble, gateway, reply check, record), and the provider's usage is what a real one would report —
the input tokens its own tokenizer counted, and the tokens it read from its prompt cache.
"""

from __future__ import annotations

import json
from decimal import Decimal

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from sundry.agent import calibration
from sundry.agent.loop import agent_run
from sundry.agent.models import AgentStep
from sundry.agent.provider.gateway import Gateway
from sundry.agent.provider.scripted import ScriptedModel
from sundry.agent.services import customer_message_post
from sundry.agent.step import tool_specs
from sundry.compaction.models import CompactionRun
from sundry.compaction.services import compaction_consider, compaction_run
from sundry.context.assembly import assemble
from sundry.context.selectors import lane_snapshot
from sundry.core.tokens import count_tokens
from sundry.desk.cachefigures import cache_figures, token_counts
from sundry.desk.lifecycle import ticket_create
from sundry.tickets.models import Ticket
from sundry.tooling.messages import ModelRequest, ModelResponse, Usage
from tests.compaction.helpers import long_ticket
from tests.factories import CustomerFactory, TicketClassFactory

pytestmark = pytest.mark.django_db
GPT = "openai:gpt-4.1-mini"  # exact counts (o200k_base); $0.40 per million input tokens, $0.10 cached
HAIKU = "anthropic:claude-3-5-haiku-latest"  # approximate counts (cl100k_base)


@pytest.fixture(autouse=True)
def fresh_calibration():
    calibration.clear()
    yield
    calibration.clear()


def _serialised(request: ModelRequest) -> list[str]:
    return [json.dumps(m.model_dump(), sort_keys=True) for m in request.messages]


REPLIES = [
    "Thanks, noted. We are looking into it.",
    "Thank you, we are checking that now.",
    "Understood, our team will look at it.",
    "Noted, we will get back to you about it.",
    "Thanks, we have added that to your case.",
    "Got it, we are still looking into this.",
]


class PrefixCache:
    """A provider with automatic prefix caching, as OpenAI's: the leading messages identical to the
    previous request's are read from the cache. It counts tokens with its own tokenizer."""

    def __init__(self, *, tokens_per_char: float | None = None):
        self.previous: list[str] = []
        self.tokens_per_char = tokens_per_char
        self.replies = 0

    def tokens(self, text: str) -> int:
        return int(len(text) * self.tokens_per_char) if self.tokens_per_char else count_tokens(text, GPT)

    def __call__(self, request: ModelRequest) -> ModelResponse:
        now = _serialised(request)
        tools = self.tokens(json.dumps([t.model_dump() for t in request.tools]))
        cached = tools if self.previous else 0
        for before, after in zip(self.previous, now):
            if before != after:
                break
            cached += self.tokens(after)
        self.previous = now
        total = tools + sum(self.tokens(m) for m in now)
        # A reply of its own to each message: one reply sent to every message is asked for again (`resent`).
        self.replies += 1
        return ModelResponse(
            text=REPLIES[(self.replies - 1) % len(REPLIES)],
            usage=Usage(input_tokens=total, output_tokens=9, cached_input_tokens=cached),
        )


def _exchange(ticket, model, provider, text):
    customer_message_post(ticket=ticket, text=text, wake=False)
    agent_run(ticket.pk, gateway=Gateway(override=ScriptedModel([provider], name=model)))


def _compact(ticket):
    step = AgentStep.objects.filter(ticket=ticket, is_resolution=True).order_by("-number").first()
    run = compaction_run(compaction_consider(ticket_id=ticket.pk, step_id=step.pk, force=True).pk)
    assert run.status in ("succeeded", "fallback"), run.error


# --- the cache -------------------------------------------------------------------------------------


def test_cached_share_cost_saved_and_what_a_compaction_cost_the_cache_per_class_and_per_model():
    cached_class = TicketClassFactory(approval_rules={}, working_model=GPT, recent_turns_kept=2)
    plain_class = TicketClassFactory(approval_rules={}, working_model=GPT, recent_turns_kept=2)
    customer = CustomerFactory()
    ticket = ticket_create(customer=customer.person, ticket_class=cached_class, subject="Noisy fan")
    provider = PrefixCache()
    questions = [
        "The fan on my heater rattles.",
        "It started after a week.",
        "Is that normal?",
        "Should I send it back?",
        "Thanks for checking.",
    ]
    for text in questions[:3]:
        _exchange(ticket, GPT, provider, text)
    _compact(ticket)  # the summary changes: the next request's cached prefix ends before it
    for text in questions[3:]:
        _exchange(ticket, GPT, provider, text)
    # A class whose provider never caches.
    other = ticket_create(customer=customer.person, ticket_class=plain_class, subject="Other")
    _exchange(
        other,
        GPT,
        lambda r: ModelResponse(text="Noted.", usage=Usage(input_tokens=800, output_tokens=3)),
        "Hello there.",
    )

    steps = list(AgentStep.objects.filter(ticket=ticket).order_by("number"))
    assert [s.model for s in steps] == [GPT] * 5 and steps[0].cached_input_tokens == 0
    before, after, later = steps[2], steps[3], steps[4]
    assert 0 < after.cached_input_tokens < before.cached_input_tokens < later.cached_input_tokens
    by_class, by_model = cache_figures()

    row = by_class[cached_class.pk]
    cached, total = sum(s.cached_input_tokens for s in steps), sum(s.input_tokens for s in steps)
    assert (row["cached_tokens"], row["input_tokens"]) == (cached, total)
    assert row["cached_share"] == round(100 * cached / total)
    # gpt-4.1-mini: a cached token costs 0.10 instead of 0.40 per million (each cost is kept to six places).
    assert abs(row["saved_usd"] - Decimal(cached) * Decimal("0.30") / 1_000_000) <= Decimal("0.000001")
    assert row["after_steps"] == 1 and row["lost_tokens"] == before.cached_input_tokens - after.cached_input_tokens
    assert row["lost_usd"] > 0
    assert row["after_share"] == round(100 * after.cached_input_tokens / after.input_tokens)
    others = [s for s in steps if s is not after]
    assert row["other_share"] == round(
        100 * sum(s.cached_input_tokens for s in others) / sum(s.input_tokens for s in others)
    )

    plain = by_class[plain_class.pk]
    assert (plain["cached_share"], plain["saved_usd"], plain["after_steps"]) == (0, 0, 0)  # negative control
    model = by_model[GPT]
    assert model["cached_tokens"] == cached and model["input_tokens"] == total + 800
    assert model["saved_usd"] == row["saved_usd"] and model["lost_tokens"] == row["lost_tokens"]
    print(
        f"cached share {row['cached_share']}% ({cached} of {total} input tokens), saved ${row['saved_usd']}; "
        f"after the compaction {row['after_share']}% (other steps {row['other_share']}%), "
        f"{row['lost_tokens']} cached tokens lost, ${row['lost_usd']}; uncached class {plain['cached_share']}%"
    )


def test_the_figures_page_shows_the_cache_and_the_token_counts():
    users = get_user_model().objects
    admin = Client()
    admin.force_login(users.create_user("root", password="pw", is_staff=True, is_superuser=True))
    tclass = TicketClassFactory(approval_rules={}, working_model=GPT, recent_turns_kept=2)
    ticket = ticket_create(customer=CustomerFactory().person, ticket_class=tclass, subject="Fan")
    provider = PrefixCache()
    for text in ("The fan rattles.", "Since last week.", "Please advise."):
        _exchange(ticket, GPT, provider, text)
    body = admin.get("/desk/figures/").content.decode()
    row = cache_figures()[0][tclass.pk]
    assert f"{row['cached_share']}% cached" in body and f"saved ${row['saved_usd']:.4f}" in body
    assert 'id="token-counts"' in body and GPT in body and "exact" in body


# --- token counts ------------------------------------------------------------------------------------


def test_calibration_reads_the_median_ratio_and_applies_it_only_to_approximate_models():
    pairs = [(1000, 1180), (2000, 2400), (1500, 1800), (900, 2700)]  # one outlier: the median holds
    haiku = calibration.calibrate(HAIKU, pairs)
    assert haiku.steps == 4 and haiku.factor == pytest.approx(1.2) and haiku.applied == pytest.approx(1.2)
    assert haiku.mean_abs_error == pytest.approx((180 / 1180 + 400 / 2400 + 300 / 1800 + 1800 / 2700) / 4)
    assert haiku.bias < 0  # Sundry counts too few
    # Negative controls: an exact model keeps tiktoken's count; too little evidence applies nothing.
    assert calibration.calibrate(GPT, pairs).applied == 1.0
    assert calibration.calibrate(HAIKU, pairs[:2]).applied == 1.0
    assert calibration.calibrate(HAIKU, [(0, 100), (100, 0)]).steps == 0


def test_each_step_records_the_estimate_and_the_reported_count_and_the_figures_show_the_error():
    tclass = TicketClassFactory(approval_rules={}, working_model=HAIKU)
    ticket = ticket_create(customer=CustomerFactory().person, ticket_class=tclass, subject="Lamp")
    provider = PrefixCache(tokens_per_char=0.3)  # another tokenizer: about 0.3 tokens per character
    for text in ("My lamp flickers.", "It is the desk lamp.", "Can you help?"):
        _exchange(ticket, HAIKU, provider, text)
    steps = list(AgentStep.objects.filter(ticket=ticket).order_by("number"))
    assert all(s.reported_request_tokens == s.input_tokens > 0 for s in steps)
    assert all(s.reported_request_tokens != s.request_tokens for s in steps)
    [row] = [r for r in token_counts() if r["model"] == HAIKU]
    ratios = sorted(s.reported_request_tokens / s.request_tokens for s in steps)
    errors = [abs(s.request_tokens - s.reported_request_tokens) / s.reported_request_tokens for s in steps]
    assert row["steps"] == 3 and not row["exact"]
    assert row["factor"] == round(ratios[1], 3) and row["applied"] == row["factor"]
    assert row["error_pct"] == round(100 * sum(errors) / 3, 1)
    print(
        f"{HAIKU}: Sundry {row['estimated']} / provider {row['reported']} tokens over {row['steps']} steps, "
        f"error {row['error_pct']}%, bias {row['bias_pct']}%, factor {row['factor']} (applied {row['applied']})"
    )


def test_the_compaction_trigger_counts_in_the_providers_tokens_for_an_approximate_model():
    def setup(model):
        tclass = TicketClassFactory(approval_rules={}, working_model=model, recent_turns_kept=4, trigger_fraction=0.8)
        ticket = long_ticket(tclass=tclass)
        total = assemble(lane_snapshot(ticket), model=model, tools=tool_specs()).accounting.total_tokens
        # The trigger sits 10% above Sundry's count of the request: not over it by Sundry's own count.
        tclass.token_budget = int(total * 1.1 / 0.8)
        tclass.save()
        step = AgentStep.objects.create(
            ticket=ticket,
            number=1,
            model=model,
            request_tokens=total,
            outcome="reply",
            is_resolution=True,
            first_turn=ticket.last_turn_number,
            last_turn=ticket.last_turn_number,
        )
        return ticket, step

    def evidence(ticket, model, ratio):
        for n in range(2, 6):  # the provider counted `ratio` times what Sundry did
            AgentStep.objects.create(
                ticket=ticket,
                number=n,
                model=model,
                request_tokens=1000,
                reported_request_tokens=int(1000 * ratio),
                outcome="reply",
            )

    ticket, step = setup(HAIKU)
    assert compaction_consider(ticket_id=ticket.pk, step_id=step.pk) is None  # no evidence yet: factor 1
    evidence(ticket, HAIKU, 1.25)
    calibration.clear()
    run = compaction_consider(ticket_id=ticket.pk, step_id=step.pk)
    assert run is not None and run.status == CompactionRun.Status.QUEUED
    # Negative control: the same evidence for an exact model moves nothing.
    ticket, step = setup(GPT)
    evidence(ticket, GPT, 1.25)
    calibration.clear()
    assert compaction_consider(ticket_id=ticket.pk, step_id=step.pk) is None
    assert Ticket.objects.count() == 2


def test_the_budget_panel_says_when_the_count_is_approximate():
    from django.template.loader import render_to_string

    from sundry.desk.selectors import budget

    def panel(model, ratio):
        ticket = ticket_create(
            customer=CustomerFactory().person, ticket_class=TicketClassFactory(working_model=model), subject="Budget"
        )
        for n in range(1, 5):
            AgentStep.objects.create(
                ticket=ticket,
                number=n,
                model=model,
                request_tokens=1000,
                reported_request_tokens=int(1000 * ratio),
                outcome="reply",
            )
        ticket = Ticket.objects.select_related("ticket_class").get(pk=ticket.pk)
        context = budget(ticket)
        return context, render_to_string("desk/panels/budget.html", {**context, "ticket": ticket})

    context, html = panel(HAIKU, 1.25)
    assert context["token_factor"] == pytest.approx(1.25) and "about ×1.25" in html
    context, html = panel(GPT, 1.25)  # negative control: tiktoken is the model's own count
    assert context["token_factor"] == 1.0 and "token-factor" not in html
