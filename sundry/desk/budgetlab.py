"""The budget lab: what a proposed budget would have done to a class's recorded tickets.

Reads the class's latest tickets with recorded steps (at most `MAX_TICKETS`, so the page answers
in a request), replays each under the class's current settings and under the proposal
(`budgetreplay`), and sums both beside what was recorded: request tokens (median, p95, peak),
steps over the budget, compactions, input tokens, the ledger against its share, the fixed part of
every request (`budgetfit`), and what it costs per ticket and per month at the class's volume,
prompt cache and summariser calls included (`labcosts`). A proposal may name another working or
summariser model: its column is priced at those.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from decimal import Decimal

from django.db.models import Count, Q

from sundry.agent.models import AgentStep
from sundry.compaction.models import CompactionRun
from sundry.compaction.trigger import EXPECTED_SUMMARY_TOKENS
from sundry.context.harvest import class_allowance
from sundry.context.lanes import TurnData
from sundry.desk.budgetfit import Fit, fixed_part
from sundry.desk.budgetreplay import Budget, History, Replayed, StepRecord, replay
from sundry.desk.labcosts import (
    NO_CACHE,
    CacheShares,
    Volume,
    cache_shares,
    monthly_volume,
    per_ticket_and_month,
    price_steps,
    summariser_cost,
)
from sundry.tickets.models import Ticket, TicketClass, Turn

DEFAULT_TICKETS = 50
MAX_TICKETS = 200
# The comparison's three columns for the window; other sources name their first column otherwise.
WINDOW_COLUMNS = ["Recorded", "Current, replayed", "Proposed, replayed"]


@dataclass(frozen=True)
class Figures:
    steps: int
    median: int
    p95: int
    peak: int
    over_budget: int
    over_trigger: int
    compactions: int
    input_tokens: int
    output_tokens: int
    cost: Decimal | None  # the steps, cache included; None: the model has no known price
    ledger_over: int = 0
    summariser_calls: int = 0
    summariser_input_tokens: int = 0
    summariser_cost: Decimal | None = Decimal(0)

    @property
    def over_share(self) -> float:
        return round(100 * self.over_budget / self.steps, 1) if self.steps else 0.0


@dataclass(frozen=True)
class Lab:
    tclass: TicketClass
    current: Budget
    proposed: Budget
    tickets: int  # replayed
    tickets_with_steps: int  # in the class
    recorded: Figures
    replayed_current: Figures
    replayed_proposed: Figures
    fit_current: Fit
    fit_proposed: Fit
    price_model: str  # the recorded and current columns are priced at it
    summary_tokens: int
    summary_measured: bool
    ledger_peak: int
    seconds: float
    samples: list[dict] = field(default_factory=list)  # the charts' tickets, step by step
    proposed_price_model: str = ""  # the proposal's working model, or `price_model`
    summariser_price_model: str = ""  # the class's summariser (an offline one priced as `price_model`)
    proposed_summariser_price_model: str = ""
    working_model: str = ""  # proposed ("": the class's)
    summariser_model: str = ""  # proposed ("": the class's)
    shares: CacheShares = NO_CACHE
    volume: Volume = Volume(0.0, "not counted")
    # What each replayed compaction's summariser call replaced (its input less the template).
    summarised_current: list[int] = field(default_factory=list)
    summarised_proposed: list[int] = field(default_factory=list)

    def per_ticket(self, figures: Figures, attr: str) -> float:
        return round(getattr(figures, attr) / self.tickets, 2) if self.tickets else 0.0


def class_budget(tclass: TicketClass) -> Budget:
    return Budget(tclass.token_budget, tclass.trigger_fraction, tclass.recent_turns_kept, tclass.ledger_share)


def _percentile(values: list[int], q: float) -> int:
    if not values:
        return 0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def fit_at(tclass: TicketClass, proposed: Budget) -> Fit:
    """The class's fixed part under a proposal's budget figures (the lab's replays share it)."""
    return fixed_part(
        tclass,
        budget=proposed.budget,
        trigger_fraction=proposed.trigger_fraction,
        recent_turns_kept=proposed.recent_turns_kept,
        ledger_share=proposed.ledger_share,
    )


def figures(
    requests: list[int],
    budget: Budget,
    *,
    compactions: int,
    outputs: list[int],
    model: str,
    shares: CacheShares = NO_CACHE,
    ledger_over: int = 0,
    summariser=None,
) -> Figures:
    """`outputs`: each step's output tokens, in the order of `requests`; `summariser`: a `SummariserCost`."""
    total = sum(requests)
    return Figures(
        steps=len(requests),
        median=int(statistics.median(requests)) if requests else 0,
        p95=_percentile(requests, 0.95),
        peak=max(requests, default=0),
        over_budget=sum(1 for n in requests if n > budget.budget),
        over_trigger=sum(1 for n in requests if n > budget.trigger),
        compactions=compactions,
        input_tokens=total,
        output_tokens=sum(outputs),
        cost=price_steps(model, list(zip(requests, outputs)), shares),
        ledger_over=ledger_over,
        summariser_calls=summariser.calls if summariser else 0,
        summariser_input_tokens=summariser.input_tokens if summariser else 0,
        summariser_cost=summariser.cost if summariser else Decimal(0),
    )


def histories(tclass: TicketClass, limit: int) -> tuple[list[History], int]:
    """The class's latest `limit` tickets with recorded steps, as plain data, and how many it has."""
    with_steps = Ticket.objects.filter(ticket_class=tclass).annotate(n=Count("steps")).filter(n__gt=0)
    ids = list(with_steps.order_by("-created_at", "-pk").values_list("pk", flat=True)[:limit])
    turns: dict[int, list[TurnData]] = {pk: [] for pk in ids}
    for ticket_id, number, author, kind, tokens, payload in (
        Turn.objects.filter(ticket_id__in=ids)
        .order_by("ticket_id", "number")
        .values_list("ticket_id", "number", "author", "kind", "tokens", "payload")
    ):
        # Only what the cut reads (call ids): a tool result's data is not needed here.
        keep = {k: payload[k] for k in ("calls", "call_id") if isinstance(payload, dict) and k in payload}
        turns[ticket_id].append(TurnData(number, author, kind, "", keep, tokens))
    steps: dict[int, list[StepRecord]] = {pk: [] for pk in ids}
    for ticket_id, number, request, lanes, last_appended, resolution, output in (
        AgentStep.objects.filter(ticket_id__in=ids)
        .order_by("ticket_id", "number")
        .values_list(
            "ticket_id", "number", "request_tokens", "lane_tokens", "last_turn", "is_resolution", "output_tokens"
        )
    ):
        lanes = lanes or {}
        parts = lanes.get("lanes") or {}
        steps[ticket_id].append(
            StepRecord(
                number=number,
                request_tokens=request,
                summary_tokens=int(parts.get("summary") or 0),
                ledger_tokens=int(parts.get("ledger") or 0),
                first_turn=lanes.get("first_turn"),
                last_turn=lanes.get("last_turn"),
                appended_through=max(last_appended, lanes.get("last_turn") or 0),
                resolution=resolution,
                output_tokens=output,
            )
        )
    allowance = class_allowance(tclass)
    return [History(pk, turns[pk], steps[pk], allowance) for pk in ids], with_steps.count()


def _summary_tokens(found: list[History]) -> tuple[int, bool]:
    """What a summary costs in this class: the median of its recorded summaries, else the trigger's estimate."""
    sizes = [s.summary_tokens for h in found for s in h.steps if s.summary_tokens]
    return (int(statistics.median(sizes)), True) if sizes else (EXPECTED_SUMMARY_TOKENS, False)


def _outputs(found: list[History]) -> list[int]:
    return [s.output_tokens for h in found for s in h.steps]


def _replayed(
    found: list[History],
    budget: Budget,
    summary: int,
    runs: list[Replayed],
    *,
    model: str,
    summariser_model: str,
    shares: CacheShares,
) -> Figures:
    return figures(
        [n for r in runs for _, n in r.requests],
        budget,
        compactions=sum(len(r.compacted_after) for r in runs),
        outputs=_outputs(found),
        model=model,
        shares=shares,
        ledger_over=sum(r.ledger_over for r in runs),
        summariser=summariser_cost(summariser_model, [n for r in runs for n in r.summarised], summary),
    )


def _summariser_price_model(summariser: str, working_price: str) -> str:
    """An offline summariser is priced as the working model's price model, as offline steps are."""
    return working_price if summariser == "offline" else summariser


# The charts follow this many tickets, the ones with the most steps (a short ticket shows little).
SAMPLE_TICKETS = 3


def _samples(
    found: list[History], current: list[Replayed], proposed: list[Replayed], compacted: dict[int, list[int]]
) -> list[dict]:
    """Each sample ticket's requests step by step: recorded, replayed at the current and the proposed settings."""
    chosen = sorted(range(len(found)), key=lambda i: (-len(found[i].steps), found[i].ticket_id))[:SAMPLE_TICKETS]
    return [
        {
            "ticket": found[i].ticket_id,
            "steps": [s.number for s in found[i].steps],
            "recorded": [s.request_tokens for s in found[i].steps],
            "recorded_compactions": compacted.get(found[i].ticket_id, []),
            "current": [n for _, n in current[i].requests],
            "current_compactions": current[i].compacted_after,
            "proposed": [n for _, n in proposed[i].requests],
            "proposed_compactions": proposed[i].compacted_after,
        }
        for i in sorted(chosen)
    ]


def run_lab(
    tclass: TicketClass,
    proposed: Budget,
    *,
    tickets: int = DEFAULT_TICKETS,
    price_as: str = "",
    working_model: str = "",
    summariser_model: str = "",
    progress: Callable[[int, int], None] | None = None,
) -> Lab:
    """`progress(done, total)` is told after each ticket is replayed. `working_model`, `summariser_model`:
    the proposal's ("" keeps the class's); the proposed column is priced at them."""
    started = time.monotonic()
    tickets = max(1, min(tickets, MAX_TICKETS))
    model = price_as or tclass.working_model
    proposed_model = working_model if working_model and working_model != "offline" else model
    summariser_current = _summariser_price_model(tclass.summariser_model, model)
    summariser_proposed = _summariser_price_model(summariser_model or tclass.summariser_model, proposed_model)
    current = class_budget(tclass)
    found, total = histories(tclass, tickets)
    summary, measured = _summary_tokens(found)
    shares = cache_shares(tclass)
    done = CompactionRun.objects.filter(
        Q(status__in=["succeeded", "fallback"]), ticket_id__in=[h.ticket_id for h in found]
    )
    opened = list(Ticket.objects.filter(pk__in=[h.ticket_id for h in found]).values_list("created_at", flat=True))
    runs_current: list[Replayed] = []
    runs_proposed: list[Replayed] = []
    for i, h in enumerate(found, 1):
        runs_current.append(replay(h, current, summary_tokens=summary))
        runs_proposed.append(replay(h, proposed, summary_tokens=summary))
        if progress:
            progress(i, len(found))
    recorded = figures(
        [s.request_tokens for h in found for s in h.steps],
        current,
        compactions=done.count(),
        outputs=_outputs(found),
        model=model,
        shares=shares,
        summariser=summariser_cost(summariser_current, list(done.values_list("replaced_tokens", flat=True)), summary),
    )
    return Lab(
        tclass=tclass,
        current=current,
        proposed=proposed,
        tickets=len(found),
        tickets_with_steps=total,
        recorded=recorded,
        replayed_current=_replayed(
            found, current, summary, runs_current, model=model, summariser_model=summariser_current, shares=shares
        ),
        replayed_proposed=_replayed(
            found,
            proposed,
            summary,
            runs_proposed,
            model=proposed_model,
            summariser_model=summariser_proposed,
            shares=shares,
        ),
        fit_current=fixed_part(tclass),
        fit_proposed=fit_at(tclass, proposed),
        price_model=model,
        summary_tokens=summary,
        summary_measured=measured,
        ledger_peak=max((s.ledger_tokens for h in found for s in h.steps), default=0),
        seconds=round(time.monotonic() - started, 2),
        samples=_samples(found, runs_current, runs_proposed, _recorded_steps_compacted(found)),
        proposed_price_model=proposed_model,
        summariser_price_model=summariser_current,
        proposed_summariser_price_model=summariser_proposed,
        working_model=working_model,
        summariser_model=summariser_model,
        shares=shares,
        volume=monthly_volume(tclass, opened),
        summarised_current=[n for r in runs_current for n in r.summarised],
        summarised_proposed=[n for r in runs_proposed for n in r.summarised],
    )


def _recorded_steps_compacted(found: list[History]) -> dict[int, list[int]]:
    """After which recorded step each ticket was compacted: the next step's request began at a later turn."""
    return {
        h.ticket_id: [
            h.steps[i - 1].number
            for i in range(1, len(h.steps))
            if (h.steps[i].first_turn or 0) > (h.steps[i - 1].first_turn or 0)
        ]
        for h in found
    }


def _money(value: Decimal | None) -> str | None:
    return None if value is None else str(value)


def _figures_json(f: Figures, tickets: int, volume: Volume) -> dict:
    per_ticket, per_month = per_ticket_and_month([f.cost, f.summariser_cost], tickets, volume)
    return {
        **asdict(f),
        "cost": _money(f.cost),
        "summariser_cost": _money(f.summariser_cost),
        "over_share": f.over_share,
        "cost_per_ticket": per_ticket,  # the steps and the summariser's calls
        "cost_per_month": per_month,
    }


def _fit_json(fit: Fit) -> dict:
    return {
        **asdict(fit),
        "fixed": fit.fixed,
        "fixed_share": fit.fixed_share,
        "left": fit.left,
        "floor": fit.floor,
        "tight": fit.tight,
        "impossible": fit.impossible,
        "problem": fit.problem(),
    }


def _budget_json(b: Budget) -> dict:
    return {**asdict(b), "trigger": b.trigger, "ledger_allowance": b.ledger_allowance}


def lab_json(lab: Lab) -> dict:
    """The lab's result as plain JSON, the same names the page reads (a proposal stores it)."""
    out = {
        "class": lab.tclass.pk,
        "current": _budget_json(lab.current),
        "proposed": _budget_json(lab.proposed),
        "tickets": lab.tickets,
        "tickets_with_steps": lab.tickets_with_steps,
        "recorded": _figures_json(lab.recorded, lab.tickets, lab.volume),
        "replayed_current": _figures_json(lab.replayed_current, lab.tickets, lab.volume),
        "replayed_proposed": _figures_json(lab.replayed_proposed, lab.tickets, lab.volume),
        "fit_current": _fit_json(lab.fit_current),
        "fit_proposed": _fit_json(lab.fit_proposed),
        "price_model": lab.price_model,
        "summary_tokens": lab.summary_tokens,
        "summary_measured": lab.summary_measured,
        "ledger_peak": lab.ledger_peak,
        "seconds": lab.seconds,
        "samples": lab.samples,
        "proposed_price_model": lab.proposed_price_model or lab.price_model,
        "summariser_price_model": lab.summariser_price_model,
        "proposed_summariser_price_model": lab.proposed_summariser_price_model,
        "models": {
            "current": {"working": lab.tclass.working_model, "summariser": lab.tclass.summariser_model},
            "proposed": {
                "working": lab.working_model or lab.tclass.working_model,
                "summariser": lab.summariser_model or lab.tclass.summariser_model,
            },
        },
        "cache": asdict(lab.shares),
        "volume": lab.volume.as_json(),
        "source": {
            "kind": "window",
            "text": f"the class's latest {lab.tickets} of {lab.tickets_with_steps} tickets with recorded steps",
        },
        "columns": WINDOW_COLUMNS,
    }
    return out
