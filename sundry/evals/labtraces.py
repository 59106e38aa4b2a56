"""The budget lab on imported traces: recorded conversations replayed by the harness under the class's
settings and under a proposal.

A trace holds turns, not the requests Sundry would have sent, so each ticket is walked by the safety
harness (`harness.run_ticket`): at every step its request is assembled from the lanes and the turns as
production assembles it, and compacted when production's trigger fires (after resolution steps, and
before a step over the budget) — the harness's "triggered" series. The first column is the same
request never compacted. The harness's checks (IDs, side effects, constraints) come from the same
walk. `comparison` turns per-ticket series into the page's figures; the scenarios use it too.
"""

from __future__ import annotations

import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from sundry.compaction.trigger import EXPECTED_SUMMARY_TOKENS
from sundry.desk.budgetfit import fixed_part
from sundry.desk.budgetlab import SAMPLE_TICKETS, Lab, class_budget, figures, fit_at, lab_json
from sundry.desk.budgetreplay import Budget
from sundry.desk.labcosts import cache_shares, monthly_volume, summariser_cost
from sundry.desk.labsources import TracesRead, TracesUnreadable
from sundry.evals import importers
from sundry.evals.domains import DOMAINS
from sundry.evals.harness import HarnessConfig, run_ticket
from sundry.evals.records import RecordedTicket
from sundry.evals.strategies import TokenCache
from sundry.tickets.models import BudgetProposal, Ticket, TicketClass

TRACES_COLUMNS = ["Never compacted", "Current, replayed", "Proposed, replayed"]
# (figure, numerator, denominator) of the harness's counters for Sundry's own request.
FIDELITY = [
    ("ids", "id_ok", "id_checks", "IDs used later still usable"),
    ("actions", "action_ok", "action_checks", "Side effects still known"),
    ("constraints", "constraint_ok", "constraint_checks", "Stated constraints verbatim"),
]


@dataclass
class Series:
    """One ticket under one setting: each step's request and output tokens, and its compactions."""

    ticket: str
    requests: list[int]
    outputs: list[int]
    compacted_after: list[int] = field(default_factory=list)  # step numbers, 1-based
    replaced: list[int] = field(default_factory=list)  # per compaction: the turns' tokens it replaced


# --- reading a file --------------------------------------------------------------------------


def load(path: Path) -> list[RecordedTicket]:
    """The file's tickets, as the harness imports them; `TracesUnreadable` with the reason otherwise."""
    try:
        tickets = importers.load_any(path)
    except importers.ImportFailed as exc:
        raise TracesUnreadable(str(exc)) from None
    except ValueError as exc:  # our own format with a ticket that does not validate
        raise TracesUnreadable(f"{path} is not a traces file the harness reads: {str(exc).splitlines()[0]}") from None
    tickets = [t for t in tickets if t.turns]  # a conversation with nothing said has nothing to replay
    known = {name for name, _ in DOMAINS.items()}  # the demo shop's declaration loads on first use
    unknown = sorted({t.domain for t in tickets} - known)
    if unknown:
        raise TracesUnreadable(
            f"{path}: the harness has no declaration for {', '.join(unknown)} (known: {', '.join(sorted(known))})."
        )
    return tickets


def read_for_form(path: Path) -> TracesRead:
    tickets = load(path)
    return TracesRead(tickets=len(tickets), domains=sorted({t.domain for t in tickets}))


def proposal_tickets(p: BudgetProposal) -> list[RecordedTicket]:
    """The proposal's traces: its upload's text, or the server file it names; at most its `tickets`."""
    if p.traces_text:
        with tempfile.TemporaryDirectory(prefix="sundry-lab-") as tmp:
            path = Path(tmp) / Path(p.traces_name or "traces.json").name
            path.write_text(p.traces_text, encoding="utf-8")
            found = load(path)
    else:
        found = load(Path(p.traces_name))
    if not found:
        raise TracesUnreadable(f"{p.traces_name} holds no conversation to replay.")
    return found[: p.tickets]


# --- one ticket through the harness ----------------------------------------------------------


def proposal_budget(p: BudgetProposal) -> Budget:
    return Budget(p.token_budget, p.trigger_fraction, p.recent_turns_kept, p.ledger_share)


def harness_config(budget: Budget, model: str, summariser=None) -> HarnessConfig:
    return HarnessConfig(
        budget=budget.budget,
        trigger_fraction=budget.trigger_fraction,
        keep_recent=budget.recent_turns_kept,
        ledger_share=budget.ledger_share,
        model=model,
        plant=False,
        summariser=summariser,
    )


def rates(counts: Counter) -> dict:
    """The harness's counters for Sundry's request as the lab's fidelity figures."""
    out = {}
    for name, ok, checks, label in FIDELITY:
        n = counts[checks]
        out[name] = {
            "label": label,
            "ok": counts[ok],
            "checks": n,
            "rate": round(100 * counts[ok] / n, 1) if n else None,
        }
    return out


def _outputs(ticket: RecordedTicket, steps: list[int], model: str) -> list[int]:
    """What each step wrote: the turn the step is (a reply or a tool call), counted as the model's tokens."""
    cache, turns = TokenCache(model), {t.number: t for t in ticket.turn_data()}
    return [cache.unit([turns[n]]) if n in turns else 0 for n in steps]


def series_of(ticket: RecordedTicket, result, model: str) -> tuple[Series, Series]:
    """(never compacted, compacted as production triggers it) from one harness walk."""
    steps = result.series["turn"]
    outputs = _outputs(ticket, steps, model)
    full = Series(ticket.id, list(result.series["full"]), outputs)
    triggered = Series(
        ticket.id,
        list(result.series["triggered"]),
        outputs,
        # A compaction before step k's request follows step k − 1.
        compacted_after=[k - 1 for k in result.triggered_steps if k > 1],
        replaced=list(result.triggered_replaced),
    )
    return full, triggered


# --- the comparison ----------------------------------------------------------------------------


def _price_models(tclass: TicketClass, price_as: str, working_model: str, summariser_model: str):
    model = price_as or tclass.working_model
    proposed = working_model if working_model and working_model != "offline" else model

    def summariser(name: str, working: str) -> str:
        return working if name == "offline" else name  # an offline summariser is priced as the working model

    return (
        model,
        proposed,
        summariser(tclass.summariser_model, model),
        summariser(summariser_model or tclass.summariser_model, proposed),
    )


def _samples(first: list[Series], current: list[Series], proposed: list[Series]) -> list[dict]:
    chosen = sorted(range(len(first)), key=lambda i: (-len(first[i].requests), first[i].ticket))[:SAMPLE_TICKETS]
    return [
        {
            "ticket": first[i].ticket,
            "steps": list(range(1, len(first[i].requests) + 1)),
            "recorded": first[i].requests,
            "recorded_compactions": first[i].compacted_after,
            "current": current[i].requests,
            "current_compactions": current[i].compacted_after,
            "proposed": proposed[i].requests,
            "proposed_compactions": proposed[i].compacted_after,
        }
        for i in sorted(chosen)
    ]


def comparison(
    tclass: TicketClass,
    proposed: Budget,
    *,
    first: list[Series],
    current: list[Series],
    proposed_runs: list[Series],
    price_as: str,
    working_model: str = "",
    summariser_model: str = "",
    ledger_peak: int = 0,
    started: float,
    source: dict,
    columns: list[str],
) -> dict:
    """The page's comparison from per-ticket series: the first column at the current budget, then the
    current settings and the proposal, priced as the window's are (genai-prices, the class's cache shares)."""
    now = class_budget(tclass)
    model, proposed_model, summariser_now, summariser_proposed = _price_models(
        tclass, price_as, working_model, summariser_model
    )
    shares = cache_shares(tclass)
    summary = EXPECTED_SUMMARY_TOKENS

    def column(runs: list[Series], budget: Budget, price: str, summariser: str):
        return figures(
            [n for r in runs for n in r.requests],
            budget,
            compactions=sum(len(r.replaced) for r in runs),
            outputs=[n for r in runs for n in r.outputs],
            model=price,
            shares=shares,
            summariser=summariser_cost(summariser, [n for r in runs for n in r.replaced], summary),
        )

    opened = list(
        Ticket.objects.filter(ticket_class=tclass).order_by("-created_at").values_list("created_at", flat=True)[:200]
    )
    lab = Lab(
        tclass=tclass,
        current=now,
        proposed=proposed,
        tickets=len(first),
        tickets_with_steps=len(first),
        recorded=column(first, now, model, summariser_now),
        replayed_current=column(current, now, model, summariser_now),
        replayed_proposed=column(proposed_runs, proposed, proposed_model, summariser_proposed),
        fit_current=fixed_part(tclass),
        fit_proposed=fit_at(tclass, proposed),
        price_model=model,
        summary_tokens=summary,
        summary_measured=False,
        ledger_peak=ledger_peak,
        seconds=round(time.monotonic() - started, 2),
        samples=_samples(first, current, proposed_runs),
        proposed_price_model=proposed_model,
        summariser_price_model=summariser_now,
        proposed_summariser_price_model=summariser_proposed,
        working_model=working_model,
        summariser_model=summariser_model,
        shares=shares,
        volume=monthly_volume(tclass, opened),
    )
    return {**lab_json(lab), "source": source, "columns": columns}


def traces_figures(
    tclass: TicketClass,
    proposed: Budget,
    tickets: list[RecordedTicket],
    *,
    name: str,
    price_as: str,
    working_model: str = "",
    summariser_model: str = "",
    progress: Callable[[int, int], None] | None = None,
) -> dict:
    """Each imported ticket walked by the harness at the class's settings and at the proposal."""
    started = time.monotonic()
    settings = {"current": class_budget(tclass), "proposed": proposed}
    models = {"current": tclass.working_model, "proposed": working_model or tclass.working_model}
    first: list[Series] = []
    runs: dict[str, list[Series]] = {key: [] for key in settings}
    counts = {key: Counter() for key in settings}
    peak = 0
    for i, ticket in enumerate(tickets, 1):
        for key, budget in settings.items():
            result = run_ticket(ticket, harness_config(budget, models[key]), domain=DOMAINS[ticket.domain])
            full, triggered = series_of(ticket, result, models[key])
            if key == "current":
                first.append(full)
                peak = max(peak, result.stats["sundry"]["ledger_peak"])
            runs[key].append(triggered)
            counts[key].update(result.stats["sundry"])
        if progress:
            progress(i, len(tickets))
    domains = sorted({t.domain for t in tickets})
    out = comparison(
        tclass,
        proposed,
        first=first,
        current=runs["current"],
        proposed_runs=runs["proposed"],
        price_as=price_as,
        working_model=working_model,
        summariser_model=summariser_model,
        ledger_peak=peak,
        started=started,
        source={
            "kind": "traces",
            "text": f"{len(tickets)} imported ticket{'s' if len(tickets) != 1 else ''} from {name} "
            f"({', '.join(domains)})",
            "note": "Each conversation is walked by the safety harness: at every step the request is assembled "
            "from the lanes and the turns as production assembles it (each domain's own policy and tools), and "
            "compacted when production's trigger fires — after resolution steps, and before a step over the "
            "budget — with the offline summariser. Never compacted is the same request with every turn; "
            "output tokens are each step's own reply or call. Summaries are counted at the trigger's estimate. "
            "The room above is this class's own request; a trace's domain brings its own policy and tools.",
        },
        columns=TRACES_COLUMNS,
    )
    out["fidelity"] = {"domain": ", ".join(domains), "checked": True, **{k: rates(c) for k, c in counts.items()}}
    return out
