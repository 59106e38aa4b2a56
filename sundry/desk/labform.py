"""The budget lab's proposal form: the page and `manage.py budget_lab` check a proposal with the same bounds
and messages."""

from __future__ import annotations

from django import forms

from sundry.agent.provider.gateway import validate_model_name
from sundry.compaction.summariser import MAX_ATTEMPTS
from sundry.desk.budgetlab import DEFAULT_TICKETS, MAX_TICKETS, run_lab
from sundry.desk.budgetreplay import Budget
from sundry.desk.labcosts import price_problem, summariser_cost, template_tokens
from sundry.tickets.models import TicketClass

# An offline class costs nothing: its figures are priced as this model unless the admin names another.
PRICE_AS_OFFLINE = "openai:gpt-4.1-mini"


class ProposalForm(forms.Form):
    # The bounds are the class model's own, so a proposal is one the admin could save.
    budget = forms.IntegerField(min_value=1000, max_value=2_000_000, label="Token budget")
    trigger = forms.FloatField(min_value=0.3, max_value=0.95, label="Trigger fraction")
    kept = forms.IntegerField(min_value=2, max_value=200, label="Recent turns kept")
    ledger = forms.FloatField(min_value=0.01, max_value=0.5, label="Ledger share")
    tickets = forms.IntegerField(
        min_value=1,
        max_value=MAX_TICKETS,
        required=False,
        label="Tickets to replay",
        help_text=f"The class's latest tickets with recorded steps; at most {MAX_TICKETS}.",
    )
    price_as = forms.CharField(max_length=120, required=False, label="Price as model")
    working_model = forms.CharField(
        max_length=120,
        required=False,
        label="Working model",
        help_text="Optional: another model for the agent's steps; the proposal's column is priced at it.",
    )
    summariser_model = forms.CharField(
        max_length=120,
        required=False,
        label="Summariser model",
        help_text="Optional: another model for compaction's summaries; priced per summary the replay makes.",
    )
    call_summariser = forms.BooleanField(
        required=False,
        label="Summarise with the summariser model",
        help_text="When run and kept, the harness's compactions call the summariser model (the proposal's, "
        "else the class's) instead of the offline summariser. A billed model's cost is estimated first.",
    )
    confirm_cost = forms.BooleanField(
        required=False,
        label="I accept the summariser's estimated cost",
        help_text="Needed before a run that calls a billed summariser.",
    )

    def __init__(self, *args, tclass: TicketClass | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        self.tclass = tclass
        self.summariser_estimate: dict | None = None

    def clean_price_as(self):
        name = (self.cleaned_data.get("price_as") or "").strip()
        if name:
            try:
                validate_model_name(name)
            except ValueError as exc:
                raise forms.ValidationError(str(exc)) from exc
        return name

    def _priced_model(self, field: str) -> str:
        name = (self.cleaned_data.get(field) or "").strip()
        if name and (problem := price_problem(name)):
            raise forms.ValidationError(problem)
        return name

    def clean_working_model(self):
        return self._priced_model("working_model")

    def clean_summariser_model(self):
        return self._priced_model("summariser_model")

    def clean(self):
        data = super().clean()
        if self.tclass is None or self.errors or not data.get("call_summariser"):
            return data
        model = data.get("summariser_model") or self.tclass.summariser_model
        if model == "offline":
            return data  # the offline summariser costs nothing: no estimate to accept
        self.summariser_estimate = estimate = summariser_estimate(self.tclass, data, model)
        if not data.get("confirm_cost"):
            self.add_error(
                "confirm_cost",
                estimate["text"]
                + " Tick “I accept the summariser's estimated cost” (on the command: --yes) to run it.",
            )
        return data


def proposed_budget(data: dict) -> Budget:
    return Budget(data["budget"], data["trigger"], data["kept"], data["ledger"])


def summariser_estimate(tclass: TicketClass, data: dict, model: str) -> dict:
    """What a run calling `model` as the summariser would spend: the harness compacts the window's
    tickets at the current settings and at the proposal, so both replays' compactions are counted.

    The harness decides its compactions itself (it also compacts before a step whose request is over
    the budget), so the replay's count is an estimate; the ceiling is every step of both settings
    compacting, each with its retry, each replacing as much as the largest request held."""
    lab = run_lab(
        tclass,
        proposed_budget(data),
        tickets=data.get("tickets") or DEFAULT_TICKETS,
        price_as=data.get("price_as") or initial_values(tclass)["price_as"],
    )
    summary = lab.summary_tokens
    priced = summariser_cost(model, lab.summarised_current + lab.summarised_proposed, summary)
    steps = lab.replayed_current.steps
    largest = max(lab.recorded.peak, lab.replayed_current.peak, lab.replayed_proposed.peak)
    ceiling = summariser_cost(model, [largest] * (2 * steps * MAX_ATTEMPTS), summary)
    text = (
        f"The run would call {model} about {priced.calls} time{'s' if priced.calls != 1 else ''} by the "
        f"replay's count ({priced.input_tokens:,} input and {priced.output_tokens:,} output tokens): "
        + ("no known price" if priced.cost is None else f"about ${priced.cost:.4f}")
        + f"; at most {ceiling.calls} calls (2 settings × {steps} steps × {MAX_ATTEMPTS} attempts) of up to "
        f"{largest + template_tokens(model):,} input tokens: "
        + ("no known price." if ceiling.cost is None else f"at most ${ceiling.cost:.4f}.")
    )
    return {**priced.as_json(), "ceiling": ceiling.as_json(), "text": text}


def initial_values(tclass: TicketClass) -> dict:
    """The form as the class stands: its settings, the default window, the model its cost is priced as."""
    return {
        "budget": tclass.token_budget,
        "trigger": tclass.trigger_fraction,
        "kept": tclass.recent_turns_kept,
        "ledger": tclass.ledger_share,
        "tickets": DEFAULT_TICKETS,
        "price_as": PRICE_AS_OFFLINE if tclass.working_model == "offline" else tclass.working_model,
    }
