"""`manage.py model_check --model NAME`: a qualification scorecard before a class is switched to a model."""

from __future__ import annotations

import sys
import time

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from sundry.evals import scorecard
from sundry.evals.scenarios import schema

DEFAULT_MODES = ["triggered"]


class Command(BaseCommand):
    help = (
        "Run a short set of the outcome scenarios (the fast slice, compacted as production triggers it; "
        "--all for every scenario) against a model and print a scorecard: outcomes correct, forbidden effects, "
        "guard rejections by kind, malformed calls, reply-check holds, summary fallbacks, median step latency, "
        "cost per ticket. Exits 1 when the model caused a forbidden effect."
    )

    def add_arguments(self, parser):
        parser.add_argument("--model", required=True, help="'offline' or '<provider>:<model>', as a class names it")
        parser.add_argument("--summariser", default=None, help="Summariser model (default: the same model)")
        parser.add_argument("--all", action="store_true", help="Every scenario, not just the fast slice")
        parser.add_argument("--only", default=None, help="Comma-separated scenario ids")
        parser.add_argument("--modes", default=",".join(DEFAULT_MODES), help="Comma-separated scenario modes")
        parser.add_argument(
            "--text-tool-calls",
            action="store_true",
            help="Read tool calls the model writes as text (for servers without a tool-call parser)",
        )
        parser.add_argument(
            "--db",
            choices=["fresh", "current"],
            default="fresh",
            help="fresh: a throwaway database with a newly seeded shop (default); current: this one",
        )
        parser.add_argument("--customers", type=int, default=300)
        parser.add_argument("--orders", type=int, default=3000)

    def handle(self, *args, **opts):
        from sundry.agent.provider.gateway import resolve_model, validate_model_name
        from sundry.evals.scenarios.modes import MODES

        try:
            validate_model_name(opts["model"])
            if opts["summariser"]:
                validate_model_name(opts["summariser"])
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        resolved = resolve_model(opts["model"])
        if opts["model"] != "offline" and (resolved.offline or resolved.unavailable):
            raise CommandError(
                f"{opts['model']} is not usable here: {resolved.unavailable or resolved.reason}. "
                "Configure its key or base URL first."
            )
        scenarios = schema.load()
        if opts["only"]:
            wanted = {s.strip() for s in opts["only"].split(",") if s.strip()}
            unknown = wanted - {s.id for s in scenarios}
            if unknown:
                raise CommandError(f"Unknown scenario id(s): {', '.join(sorted(unknown))}")
            scenarios = [s for s in scenarios if s.id in wanted]
        elif not opts["all"]:
            scenarios = [s for s in scenarios if s.fast]
        modes = [m.strip() for m in opts["modes"].split(",") if m.strip()]
        if bad := [m for m in modes if m not in MODES]:
            raise CommandError(f"Unknown mode(s): {', '.join(bad)}; known: {', '.join(MODES)}")
        if opts["db"] == "fresh":
            from sundry.evals.sources import throwaway_database
            from sundry.shop.seed import generate_shop

            with throwaway_database():
                self.stdout.write(
                    f"Seeding a throwaway shop ({opts['customers']} customers, {opts['orders']} orders) …"
                )
                generate_shop(seed=settings.DEMO_SEED, customers=opts["customers"], orders=opts["orders"])
                card = self.score(scenarios, modes, opts)
        else:
            card = self.score(scenarios, modes, opts)
        if card.forbidden:
            sys.exit(1)

    def score(self, scenarios, modes, opts, *, gateway=None) -> scorecard.Scorecard:
        card = run_check(
            opts["model"],
            scenarios,
            modes,
            summariser=opts.get("summariser"),
            text_tool_calls=opts.get("text_tool_calls", False),
            gateway=gateway,
            say=self.stdout.write,
        )
        self.stdout.write("")
        self.stdout.write(scorecard.render(card))
        self.stdout.write(scorecard.verdict(card))
        return card


def run_check(
    model: str,
    scenarios,
    modes,
    *,
    summariser: str | None = None,
    text_tool_calls: bool = False,
    gateway=None,
    label: str = "",
    say=lambda s: None,
) -> scorecard.Scorecard:
    """Run the scenarios under a class of their own pointed at `model`; the scorecard of what happened."""
    from sundry.evals.scenarios.runner import Runner
    from sundry.shop.demo import ensure_classes
    from sundry.tickets.models import TicketClass

    standard = ensure_classes()["standard"]
    tclass, _ = TicketClass.objects.update_or_create(
        slug="model-check",
        defaults=dict(
            name="Model check",
            description=standard.description,
            token_budget=standard.token_budget,
            trigger_fraction=standard.trigger_fraction,
            recent_turns_kept=standard.recent_turns_kept,
            approval_rules=standard.approval_rules,
            working_model=model,
            summariser_model=summariser or model,
            text_tool_calls=text_tool_calls,
        ),
    )
    runner = Runner(tclass, gateway=gateway)
    say(f"Checking {model} on {len(scenarios)} scenario(s) × {', '.join(modes)} …")
    results = []
    for i, scenario in enumerate(scenarios, 1):
        started = time.perf_counter()
        result = runner.run(scenario, modes)
        results.append(result)
        ok = sum(scorecard.run_correct(r) for r in result.runs.values())
        say(
            f"[{i:>2}/{len(scenarios)}] {scenario.id}: {ok}/{len(result.runs)} correct"
            + (f" — {result.error}" if result.error else "")
            + f" ({time.perf_counter() - started:.1f} s)"
        )
    return scorecard.collect(label or model, results)
