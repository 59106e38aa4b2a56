"""The budget lab's proposal form: the page and `manage.py budget_lab` check a proposal with the same bounds
and messages."""

from __future__ import annotations

import tempfile
from pathlib import Path

from django import forms
from django.conf import settings

from sundry.agent.provider.gateway import validate_model_name
from sundry.compaction.summariser import MAX_ATTEMPTS
from sundry.desk.budgetlab import DEFAULT_TICKETS, MAX_TICKETS, run_lab
from sundry.desk.budgetreplay import Budget
from sundry.desk.labcosts import price_problem, summariser_cost, template_tokens
from sundry.desk.labsources import (
    SCENARIO_SETS,
    SCENARIOS,
    TRACES,
    WINDOW,
    TracesRead,
    TracesUnreadable,
    allowed_path,
    read_traces,
    scenarios_problem,
)
from sundry.tickets.models import BudgetProposal, TicketClass

# An offline class costs nothing: its figures are priced as this model unless the admin names another.
PRICE_AS_OFFLINE = "openai:gpt-4.1-mini"


class ProposalForm(forms.Form):
    source = forms.ChoiceField(
        choices=BudgetProposal.Source.choices,
        initial=WINDOW,
        widget=forms.RadioSelect,
        label="Replay",
        help_text="The class's recent tickets answer at once; imported traces and the outcome scenarios are "
        "replayed by the harness in a worker (Run and keep).",
    )
    traces_file = forms.FileField(
        required=False,
        label="Traces file",
        help_text="Recorded conversations, as the harness imports them: a τ²-bench results file, OpenAI "
        "message lists (JSON or JSON lines), or Sundry's recorded-ticket export.",
    )
    traces_path = forms.CharField(
        max_length=500,
        required=False,
        widget=forms.TextInput(attrs={"list": "lab-server-traces", "size": 60}),
        label="Or a traces file on the server",
        help_text="Its full path, under the folders the lab may read (SUNDRY_LAB_TRACE_DIRS).",
    )
    scenarios = forms.ChoiceField(
        choices=SCENARIO_SETS,
        required=False,
        initial="fast",
        label="Scenarios",
        help_text="Run on the demo shop at the current settings, never compacted, and at the proposal, with "
        "the offline model; judged by what they left in the shop.",
    )
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
        help_text=f"The class's latest tickets with recorded steps, or a traces file's first conversations; "
        f"at most {MAX_TICKETS}.",
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

    def __init__(self, *args, tclass: TicketClass | None = None, anywhere: bool = False, **kwargs):
        super().__init__(*args, **kwargs)
        self.tclass = tclass
        self.anywhere = anywhere  # the command's operator may name any file they can read
        self.summariser_estimate: dict | None = None
        # The traces the form read: (name, the upload's text or "" for a server path, what was read).
        self.traces: tuple[str, str, TracesRead] | None = None

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
        source = data.get("source") or WINDOW
        if source == TRACES:
            self._clean_traces(data)
        elif source == SCENARIOS:
            self._clean_scenarios(data)
        if source != WINDOW and data.get("call_summariser"):
            self.add_error(
                "call_summariser",
                "Calling the summariser model is offered on the class's recent tickets only: imported traces "
                "and the scenarios are compacted by the offline summariser.",
            )
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

    def _clean_traces(self, data: dict) -> None:
        upload, path = data.get("traces_file"), (data.get("traces_path") or "").strip()
        if upload and path:
            self.add_error("traces_path", "Upload a file or name one on the server, not both.")
        elif not upload and not path:
            self.add_error("traces_file", "Choose a traces file to upload, or name one on the server.")
        elif upload:
            self._read_upload(upload)
        else:
            try:
                found = allowed_path(path, anywhere=self.anywhere)
                self.traces = (str(found), "", _read(found))
            except TracesUnreadable as exc:
                self.add_error("traces_path", str(exc))

    def _read_upload(self, upload) -> None:
        name = Path(upload.name or "traces.json").name
        limit = settings.ATTACHMENT_MAX_BYTES
        if upload.size > limit:
            self.add_error(
                "traces_file",
                f"{name} is {upload.size / 1e6:.1f} MB; uploads are limited to {limit / 1e6:.0f} MB. "
                "Put a larger file on the server and name its path.",
            )
            return
        try:
            text = upload.read().decode("utf-8")
        except UnicodeDecodeError:
            self.add_error("traces_file", f"{name} is not UTF-8 text: not a traces file.")
            return
        with tempfile.TemporaryDirectory(prefix="sundry-lab-") as tmp:
            saved = Path(tmp) / name
            saved.write_text(text, encoding="utf-8")
            try:
                self.traces = (name, text, _read(saved))
            except TracesUnreadable as exc:
                # The importers name the file by its path: the admin knows it by the name they chose.
                self.add_error("traces_file", str(exc).replace(str(saved), name))

    def _clean_scenarios(self, data: dict) -> None:
        if not data.get("scenarios"):
            data["scenarios"] = "fast"
        if self.tclass is not None and (problem := scenarios_problem(self.tclass)):
            self.add_error("source", problem)


def _read(path: Path) -> TracesRead:
    read = read_traces(path)
    if not read.tickets:
        raise TracesUnreadable(f"{path} holds no conversation to replay.")
    return read


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
        "source": WINDOW,
        "scenarios": "fast",
        "tickets": DEFAULT_TICKETS,
        "price_as": PRICE_AS_OFFLINE if tclass.working_model == "offline" else tclass.working_model,
    }
