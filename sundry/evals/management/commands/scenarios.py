"""`manage.py scenarios`: the outcome scenario suite (see sundry/evals/scenarios)."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from sundry.evals.scenarios import reporting, schema
from sundry.evals.scenarios.modes import MODES

FAST_MODES = ["never", "triggered", "every"]


class Command(BaseCommand):
    help = (
        "Exits 1 on any forbidden effect, compaction damage or scenario that could not be cast. "
        "Run scripted customer conversations on the demo shop through the agent loop — never compacted, "
        "compacted as production triggers it, compacted at every step, and sliding-window / prose-only "
        "baselines at equal tokens — and judge each by the refunds, cancellations, returns, replacements, "
        "emails and calls it left in the shop and by what the replies said."
    )

    def add_arguments(self, parser):
        parser.add_argument("--model", default=None, help="Working model name (default: the class's, i.e. offline)")
        parser.add_argument("--modes", default=None, help=f"Comma-separated, from {', '.join(MODES)} (default: all)")
        parser.add_argument("--only", default=None, help="Comma-separated scenario ids")
        parser.add_argument("--files", nargs="*", default=None, help="Scenario files (default: the shipped ones)")
        parser.add_argument(
            "--fast", action="store_true", help="The CI slice: scenarios marked fast, modes never/triggered/every"
        )
        parser.add_argument(
            "--db",
            choices=["fresh", "current"],
            default="fresh",
            help="fresh: a throwaway database with a newly seeded demo shop (default); current: "
            "the configured database, whose shop must be seeded (its rows are left as found)",
        )
        parser.add_argument("--customers", type=int, default=600, help="Shop size when seeding fresh")
        parser.add_argument("--orders", type=int, default=6000, help="Shop size when seeding fresh")
        parser.add_argument("--out", default=None, help="Report folder (default: var/reports)")
        parser.add_argument("--fail-on-any", action="store_true", help="Also exit 1 when an expected effect is missing")

    def handle(self, *args, **opts):
        try:
            scenarios = schema.load([Path(p) for p in opts["files"]] if opts["files"] else None)
        except (ValueError, OSError) as exc:
            raise CommandError(f"Cannot load the scenarios: {exc}") from None
        if opts["only"]:
            wanted = {s.strip() for s in opts["only"].split(",") if s.strip()}
            unknown = wanted - {s.id for s in scenarios}
            if unknown:
                raise CommandError(f"Unknown scenario id(s): {', '.join(sorted(unknown))}")
            scenarios = [s for s in scenarios if s.id in wanted]
        elif opts["fast"]:
            scenarios = [s for s in scenarios if s.fast]
        modes = (
            [m.strip() for m in opts["modes"].split(",")]
            if opts["modes"]
            else (FAST_MODES if opts["fast"] else list(MODES))
        )
        bad = [m for m in modes if m not in MODES]
        if bad:
            raise CommandError(f"Unknown mode(s): {', '.join(bad)}; known: {', '.join(MODES)}")
        if opts["db"] == "fresh":
            from sundry.evals.sources import throwaway_database

            with throwaway_database():
                self._seed(opts)
                outcome = self._run(scenarios, modes, opts)
        else:
            outcome = self._run(scenarios, modes, opts)
        if outcome:
            sys.exit(1)

    def _seed(self, opts) -> None:
        from sundry.shop.seed import generate_shop

        started = time.perf_counter()
        self.stdout.write(
            f"Seeding the demo shop (seed {settings.DEMO_SEED}, {opts['customers']} customers, "
            f"{opts['orders']} orders) in a throwaway database …"
        )
        generate_shop(seed=settings.DEMO_SEED, customers=opts["customers"], orders=opts["orders"])
        self.stdout.write(f"  done in {time.perf_counter() - started:.1f} s")

    def _run(self, scenarios, modes, opts) -> bool:
        from sundry.evals.scenarios.runner import Runner
        from sundry.shop.demo import ensure_classes

        say = self.stdout.write
        tclass = ensure_classes()["standard"]
        if opts["model"]:
            from sundry.agent.provider.gateway import validate_model_name

            try:
                validate_model_name(opts["model"])
            except ValueError as exc:
                raise CommandError(str(exc)) from None
            tclass.working_model = opts["model"]
            tclass.save(update_fields=["working_model"])
        runner = Runner(tclass)
        say(
            f"Running {len(scenarios)} scenario(s) × {len(modes)} mode(s) ({', '.join(modes)}) with model "
            f"{tclass.working_model} …"
        )
        started = time.perf_counter()
        results = []
        for i, scenario in enumerate(scenarios, 1):
            result = runner.run(scenario, modes)
            results.append(result)
            secs = sum(r.seconds for r in result.runs.values())
            say(f"[{i:>2}/{len(scenarios)}] " + reporting.progress_line(result, modes) + f"  ({secs:.1f} s)")
            sys.stdout.flush()
        seconds = time.perf_counter() - started
        say("")
        say(reporting.table(results, modes))
        config = {
            "model": tclass.working_model,
            "class": tclass.name,
            "budget": tclass.token_budget,
            "trigger_fraction": tclass.trigger_fraction,
            "recent_turns": tclass.recent_turns_kept,
            "seed": settings.DEMO_SEED,
            "shop": "fresh" if opts["db"] == "fresh" else "current database",
            "fast": opts["fast"],
        }
        data = reporting.as_json(results, modes, config=config, seconds=seconds)
        out = Path(opts["out"] or Path(settings.VAR_DIR) / "reports")
        name = "scenarios_fast" if opts["fast"] else "scenarios"
        json_path = reporting.write_json(data, out / f"{name}.json")
        html_path = reporting.write_html(data, out / f"{name}.html")
        say("")
        problems = reporting.failed(results)
        if opts["fail_on_any"]:
            problems += [
                f"{r.scenario.id} [{n}]: expected effect missing: {m.model_dump(exclude_none=True)}"
                for r in results
                for n, run in r.runs.items()
                for m in run.judgement.missing
            ]
        for line in problems:
            say(self.style.ERROR(line))
        say(f"Reports: {json_path}  {html_path}  ({seconds:.1f} s)")
        return bool(problems)
