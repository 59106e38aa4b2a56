"""A budget lab run kept as a proposal: the replay's figures beside the harness's checks on the same tickets.

The replay (`budgetlab`) says what a budget does to request sizes and cost; what it does to what
the agent still knows is the safety harness's question, so its own checks answer it here (one
implementation: `evals.harness.run_ticket` on the tickets exported as the harness reads them),
at the class's current settings and at the proposal: IDs used later still accepted by the ID
guard after compaction and ledger eviction, side effects still in the request, stated
constraints still verbatim. Runs in a Celery worker (`evals.tasks`, queued by name from the desk's
lab page), telling the proposal row how far it has got after each ticket so the page can show progress.
It sits with the harness because it runs the harness: this layer calls down into the desk's replay,
never the other way.

The harness compacts with the offline summariser unless the proposal asks for the summariser model
(`call_summariser`, accepted against its estimated cost on the form): then every compaction of the
run calls that model through the gateway, and what it spent and what answered are kept with the
figures (a model with no key configured is answered by the offline summariser, and says so).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import Decimal

from django.db import transaction
from django.utils import timezone

from sundry.agent.provider.gateway import Gateway, ModelCallError
from sundry.compaction.offline import OfflineSummariser
from sundry.desk.budgetlab import MAX_TICKETS, class_budget, histories, lab_json, run_lab
from sundry.desk.budgetreplay import Budget
from sundry.evals.domains import DOMAINS
from sundry.evals.harness import run_ticket
from sundry.evals.labtraces import harness_config, proposal_budget, proposal_tickets, rates, traces_figures
from sundry.evals.records import export_ticket
from sundry.tickets.models import BudgetProposal, Ticket, TicketClass
from sundry.tooling.domain import domain_for
from sundry.tooling.messages import ModelRequest, ModelResponse


@dataclass
class ModelSummariser:
    """A summariser model behind the gateway, for the harness's compactor, tallying what it spent.

    A failed call answers nothing, so the compactor falls back to its deterministic trim, as production does."""

    model: str
    gateway: Gateway = field(default_factory=lambda: Gateway(offline=OfflineSummariser()))
    calls: int = 0
    failed: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost: Decimal = Decimal(0)
    answered: Counter = field(default_factory=Counter)  # what answered: the model, or "offline"

    def complete(self, request: ModelRequest) -> ModelResponse:
        self.calls += 1
        try:
            call = self.gateway.call(request, model=self.model)
        except ModelCallError:
            self.failed += 1
            return ModelResponse(text="", model=self.model)
        self.answered[call.response.model or self.model] += 1
        self.input_tokens += call.response.usage.input_tokens
        self.output_tokens += call.response.usage.output_tokens
        self.cost += call.cost_usd
        return call.response

    def as_json(self) -> dict:
        return {
            "model": self.model,
            "calls": self.calls,
            "failed": self.failed,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cost": str(self.cost),
            "answered": dict(self.answered),
        }


def fidelity(
    tclass: TicketClass,
    ticket_ids: list[int],
    settings: dict[str, Budget],
    progress: Callable[[int, int], None] | None = None,
    *,
    models: dict[str, str] | None = None,
    summariser: ModelSummariser | None = None,
) -> dict:
    """The harness's checks on these tickets under each of `settings` (name → budget), each with its
    working model (`models`, name → model; default the class's), compacting with `summariser` if given."""
    name = domain_for(tclass).name
    try:
        domain = DOMAINS[name]
    except KeyError:
        return {"domain": name, "checked": False}
    counts = {key: Counter() for key in settings}
    tickets = Ticket.objects.filter(pk__in=ticket_ids).select_related("customer", "ticket_class")
    for i, ticket in enumerate(tickets, 1):
        recorded = export_ticket(ticket).model_copy(update={"domain": name})
        for key, budget in settings.items():
            counts[key].update(
                run_ticket(
                    recorded,
                    harness_config(budget, (models or {}).get(key) or tclass.working_model, summariser),
                    domain=domain,
                ).stats["sundry"]
            )
        if progress:
            progress(i, len(ticket_ids))
    out = {"domain": name, "checked": True, **{key: rates(c) for key, c in counts.items()}}
    if summariser is not None:
        out["summariser"] = summariser.as_json()
    return out


def lab_figures(
    tclass: TicketClass,
    proposed: Budget,
    *,
    tickets: int,
    price_as: str,
    working_model: str = "",
    summariser_model: str = "",
    call_summariser: bool = False,
    progress: Callable[[int, int], None] | None = None,
) -> dict:
    """The whole comparison as plain JSON: the replay's figures, then the harness's checks.

    `call_summariser`: the harness's compactions call the summariser model (the proposal's, else the
    class's) rather than the offline summariser; the caller has had its estimated cost accepted."""
    lab = run_lab(
        tclass,
        proposed,
        tickets=tickets,
        price_as=price_as,
        working_model=working_model,
        summariser_model=summariser_model,
    )
    found, _ = histories(tclass, min(tickets, MAX_TICKETS))
    result = lab_json(lab)
    model = summariser_model or tclass.summariser_model
    result["fidelity"] = fidelity(
        tclass,
        [h.ticket_id for h in found],
        {"current": class_budget(tclass), "proposed": proposed},
        progress,
        models={"proposed": working_model},
        summariser=ModelSummariser(model) if call_summariser and model != "offline" else None,
    )
    return result


# Sources whose runs live above the harness's package (the outcome scenarios build on it): kind → the
# function that runs a proposal on it, registered by their own app when it is ready.
_SOURCES: dict[str, Callable[[BudgetProposal, Callable[[int, int], None] | None], dict]] = {}


def register_source(kind: str, run: Callable) -> None:
    _SOURCES[kind] = run


def proposal_figures(proposal: BudgetProposal, progress: Callable[[int, int], None] | None = None) -> dict:
    """The proposal's comparison on the source it names: the window, its traces, or the scenarios."""
    common = {
        "price_as": proposal.price_as,
        "working_model": proposal.working_model,
        "summariser_model": proposal.summariser_model,
        "progress": progress,
    }
    tclass, budget = proposal.ticket_class, proposal_budget(proposal)
    if proposal.source == BudgetProposal.Source.TRACES:
        return traces_figures(tclass, budget, proposal_tickets(proposal), name=proposal.traces_name, **common)
    if proposal.source in _SOURCES:
        return _SOURCES[proposal.source](proposal, progress)
    if proposal.source != BudgetProposal.Source.WINDOW:
        raise ValueError(f"No run is registered for the {proposal.get_source_display()} source.")
    return lab_figures(tclass, budget, tickets=proposal.tickets, call_summariser=proposal.call_summariser, **common)


def proposal_run(proposal_id: int) -> BudgetProposal:
    """Run a queued proposal, saying how far it has got as it goes. A failure is kept on the row."""
    proposal = BudgetProposal.objects.select_related("ticket_class").get(pk=proposal_id)
    if proposal.status == BudgetProposal.Status.DONE:
        return proposal  # a redelivered task: the figures are already kept

    def progress(done: int, total: int) -> None:
        BudgetProposal.objects.filter(pk=proposal_id).update(done=done, total=total)

    BudgetProposal.objects.filter(pk=proposal_id).update(status=BudgetProposal.Status.RUNNING, done=0, error="")
    try:
        figures = proposal_figures(proposal, progress)
    except Exception as exc:
        BudgetProposal.objects.filter(pk=proposal_id).update(
            status=BudgetProposal.Status.FAILED, error=f"{type(exc).__name__}: {exc}", finished_at=timezone.now()
        )
        raise
    with transaction.atomic():
        BudgetProposal.objects.filter(pk=proposal_id).update(
            status=BudgetProposal.Status.DONE,
            figures=figures,
            total=figures["tickets"],
            done=figures["tickets"],
            finished_at=timezone.now(),
        )
    proposal.refresh_from_db()
    return proposal
