"""The budget lab on the outcome scenarios: each scenario run through the agent loop at the class's
settings and at a proposal, and judged by what it left in the shop, as `manage.py scenarios` judges it.

The runs need tickets of a class with the settings under test, and the class itself must not change
while its real tickets are open: each setting gets a scratch copy of the class (its policy, rules and
approval thresholds, the budget fields under test, the offline model and summariser so nothing is
billed). The scenarios run on the configured database's demo shop, as `manage.py scenarios --db
current` does: the runner undoes every shop effect after each run, pushes go to a channel prefix of
their own, and the scratch tickets and classes are deleted when the run ends, failed or not.

Per scenario: the never-compacted reference and the triggered run at the current settings, the
triggered run at the proposal. The token figures are the steps' own stored requests; what the agent
still knows is the harness's checks on the runs' tickets, exported as the harness reads them.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable

from django.db import transaction

from sundry.agent.models import AgentStep
from sundry.compaction.models import CompactionRun
from sundry.desk.budgetlab import class_budget
from sundry.desk.budgetreplay import Budget
from sundry.evals.domains import DOMAINS
from sundry.evals.harness import run_ticket
from sundry.evals.labtraces import Series, comparison, harness_config, proposal_budget, rates
from sundry.evals.records import export_ticket
from sundry.evals.scenarios import effects as fx
from sundry.evals.scenarios import schema
from sundry.evals.scenarios.runner import Runner
from sundry.evals.sources import private_pushes
from sundry.tickets.models import BudgetProposal, Ticket, TicketClass
from sundry.tooling.domain import domain_for

DOMAIN = "demo_shop"
SCENARIO_COLUMNS = ["Never compacted", "Current settings", "Proposed"]
# The class's own settings a scratch copy keeps (the budget fields are the setting's under test).
KEPT_FIELDS = (
    "description",
    "pinned_rules_cap",
    "approval_rules",
    "approval_window_hours",
    "confirmation_minutes",
    "denied_tools",
    "text_tool_calls",
)


def scenarios_problem(tclass: TicketClass) -> str | None:
    """Why this class cannot run the outcome scenarios, or None."""
    from sundry.shop.models import Order

    name = domain_for(tclass).name
    if name != DOMAIN:
        return (
            f"The outcome scenarios are written for the demo shop; this class works in {name}. "
            "Replay its recent tickets or imported traces instead."
        )
    if not Order.objects.exists():
        return (
            "The outcome scenarios run on the demo shop's customers and orders, and this database has none "
            "(manage.py seed_demo seeds them)."
        )
    return None


def chosen(which: str) -> list[schema.Scenario]:
    """ "fast" (the CI slice), "all", or scenario ids separated by commas."""
    scenarios = schema.load()
    if which == "all":
        return scenarios
    if which in ("", "fast"):
        return [s for s in scenarios if s.fast]
    wanted = [w.strip() for w in which.split(",") if w.strip()]
    unknown = sorted(set(wanted) - {s.id for s in scenarios})
    if unknown:
        raise ValueError(f"Unknown scenario id(s): {', '.join(unknown)}")
    return [s for s in scenarios if s.id in wanted]


def _scratch(tclass: TicketClass, budget: Budget, tag: str) -> TicketClass:
    copy = TicketClass(
        name=f"{tclass.name[:30]} · lab {tag} {time.time_ns() % 10**9}",
        slug=f"lab-{tag}-{time.time_ns()}",
        token_budget=budget.budget,
        trigger_fraction=budget.trigger_fraction,
        recent_turns_kept=budget.recent_turns_kept,
        ledger_share=budget.ledger_share,
        working_model="offline",
        summariser_model="offline",
        **{name: getattr(tclass, name) for name in KEPT_FIELDS if hasattr(tclass, name)},
    )
    if hasattr(tclass, "domain"):
        copy.domain = tclass.domain
    copy.save()
    return copy


def _remove(classes: list[TicketClass]) -> None:
    """The scratch tickets (their turns, steps, cards and compactions go with them) and classes."""
    with transaction.atomic():
        Ticket.objects.filter(ticket_class__in=classes).delete()
        TicketClass.objects.filter(pk__in=[c.pk for c in classes]).delete()


def _series(run, name: str) -> Series:
    steps = list(
        AgentStep.objects.filter(ticket_id=run.ticket_id)
        .order_by("number")
        .values_list("number", "request_tokens", "output_tokens", "lane_tokens")
    )
    firsts = [(lanes or {}).get("first_turn") or 0 for *_, lanes in steps]
    return Series(
        name,
        [n for _, n, _, _ in steps],
        [o for _, _, o, _ in steps],
        # A compaction shows as the next step's request beginning at a later turn.
        compacted_after=[steps[i - 1][0] for i in range(1, len(steps)) if firsts[i] > firsts[i - 1]],
        replaced=list(
            CompactionRun.objects.filter(
                ticket_id=run.ticket_id, status__in=[CompactionRun.Status.SUCCEEDED, CompactionRun.Status.FALLBACK]
            ).values_list("replaced_tokens", flat=True)
        ),
    )


def _side(run, cast, reference) -> dict:
    lost, extra = fx.damage(reference.effects, run.effects, cast) if reference is not None else ([], [])
    j = run.judgement
    return {
        "verdict": "error" if run.error else ("correct" if j.correct else "wrong"),
        "missing": len(j.missing),
        "forbidden": len(j.forbidden),
        "missing_list": [m.kind + (f" on {{{m.order}}}" if m.order else "") for m in j.missing],
        "forbidden_list": [e.describe(cast) for e in j.forbidden],
        "lost": [e.describe(cast) for e in lost],
        "extra": [e.describe(cast) for e in extra],
        "damage": len(lost) + len(extra),
        "facts_ok": run.facts_ok,
        "facts": len(run.facts),
        "steps": run.steps,
        "compactions": run.compactions,
        "error": run.error,
    }


def _totals(rows: list[dict], key: str) -> dict:
    sides = [r[key] for r in rows]
    return {
        "correct": sum(s["verdict"] == "correct" for s in sides),
        "missing": sum(s["missing"] for s in sides),
        "forbidden": sum(s["forbidden"] for s in sides),
        "damage": sum(s["damage"] for s in sides),
        "facts_ok": sum(s["facts_ok"] for s in sides),
    }


def scenario_figures(
    tclass: TicketClass,
    proposed: Budget,
    *,
    which: str,
    price_as: str,
    working_model: str = "",
    summariser_model: str = "",
    progress: Callable[[int, int], None] | None = None,
) -> dict:
    if problem := scenarios_problem(tclass):
        raise ValueError(problem)
    started = time.monotonic()
    scenarios = chosen(which)
    now = class_budget(tclass)
    domain = DOMAINS[DOMAIN]
    first: list[Series] = []
    runs: dict[str, list[Series]] = {"current": [], "proposed": []}
    counts = {"current": Counter(), "proposed": Counter()}
    rows: list[dict] = []
    not_cast: list[dict] = []
    scratch = [_scratch(tclass, now, "current"), _scratch(tclass, proposed, "proposed")]
    try:
        with private_pushes():
            at_now, at_proposal = Runner(scratch[0]), Runner(scratch[1])
            for i, scenario in enumerate(scenarios, 1):
                here = at_now.run(scenario, ["never", "triggered"])
                there = at_proposal.run(scenario, ["triggered"])
                if here.cast is None or there.cast is None:
                    not_cast.append({"id": scenario.id, "error": here.error or there.error})
                else:
                    reference, current, prop = here.runs["never"], here.runs["triggered"], there.runs["triggered"]
                    first.append(_series(reference, scenario.id))
                    for key, run, budget in (("current", current, now), ("proposed", prop, proposed)):
                        runs[key].append(_series(run, scenario.id))
                        ticket = Ticket.objects.select_related("customer", "ticket_class").get(pk=run.ticket_id)
                        recorded = export_ticket(ticket).model_copy(update={"domain": DOMAIN})
                        counts[key].update(
                            run_ticket(recorded, harness_config(budget, "offline"), domain=domain).stats["sundry"]
                        )
                    rows.append(
                        {
                            "id": scenario.id,
                            "title": scenario.title,
                            "current": _side(current, here.cast, reference),
                            "proposed": _side(prop, here.cast, reference),
                        }
                    )
                if progress:
                    progress(i, len(scenarios))
    finally:
        _remove(scratch)
    out = comparison(
        tclass,
        proposed,
        first=first,
        current=runs["current"],
        proposed_runs=runs["proposed"],
        price_as=price_as,
        working_model=working_model,
        summariser_model=summariser_model,
        started=started,
        source={
            "kind": "scenarios",
            "text": f"{len(rows)} outcome scenario{'s' if len(rows) != 1 else ''} "
            f"({'the fast slice' if which != 'all' else 'all of them'})",
            "note": "Each scenario's scripted customer is answered by the agent loop with the offline model on "
            "the demo shop, never compacted, at the current settings and at the proposal, each compacted as "
            "production triggers it; the token figures are the requests its steps really sent. The outcomes "
            "are below.",
        },
        columns=SCENARIO_COLUMNS,
    )
    out["fidelity"] = {"domain": DOMAIN, "checked": True, **{k: rates(c) for k, c in counts.items()}}
    out["scenarios"] = {
        "which": which,
        "shop": "the configured database's demo shop",
        "cast": len(rows),
        "facts": sum(r["current"]["facts"] for r in rows),
        "not_cast": not_cast,
        "current": _totals(rows, "current"),
        "proposed": _totals(rows, "proposed"),
        "rows": rows,
    }
    return out


def proposal_figures(proposal: BudgetProposal, progress: Callable[[int, int], None] | None = None) -> dict:
    """A kept proposal's run on the scenarios it names (`evals.labrun` calls it for the scenarios source)."""
    return scenario_figures(
        proposal.ticket_class,
        proposal_budget(proposal),
        which=proposal.scenarios or "fast",
        price_as=proposal.price_as,
        working_model=proposal.working_model,
        summariser_model=proposal.summariser_model,
        progress=progress,
    )
