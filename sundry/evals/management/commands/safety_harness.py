"""`manage.py safety_harness`: the compaction safety harness over recorded tickets (SPEC §9)."""

from __future__ import annotations

import sys
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from sundry.evals import importers, labels, long_tickets, records, report, sources
from sundry.evals.harness import HarnessConfig, run_all


def _named(tickets: list[records.RecordedTicket], path: Path) -> list[records.RecordedTicket]:
    """Each ticket names the file it was read from (our own export records none, or the file it was
    first imported from), so a labels file can name it (`--labels`: file, ticket, turn, sentence)."""
    for ticket in tickets:
        ticket.meta["file"] = path.name
    return tickets


class _GatewayAgent:
    """A configured model behind the gateway, for diffing next calls on any ticket."""

    def __init__(self, model: str):
        from sundry.agent.provider.gateway import Gateway

        self.gateway, self.model = Gateway(), model

    def complete(self, request):
        return self.gateway.complete(request, model=self.model)


class Command(BaseCommand):
    help = (
        "Force compaction at every step of recorded tickets (τ²-bench traces, the demo shop, exports) and check "
        "IDs, constraints and side effects survive; compare a sliding window and a prose-only summary; "
        "write JSON and HTML reports."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--traces",
            nargs="*",
            default=None,
            help="τ²-bench results files or folders (default: ../shared/corpora/tau2/traces when present, "
            "unless --tickets is given)",
        )
        parser.add_argument(
            "--tickets",
            nargs="*",
            default=[],
            help="Recorded tickets (our export, τ²-bench or OpenAI messages); alone, nothing else is added",
        )
        parser.add_argument(
            "--long",
            action="store_true",
            help="Also chain each τ² user's tasks into one long ticket (the long-ticket set)",
        )
        parser.add_argument(
            "--domain", default=None, help="Domain of OpenAI message files (default: guessed from tool names)"
        )
        parser.add_argument(
            "--demo",
            choices=["fresh", "db", "none"],
            default=None,
            help="Demo-shop tickets: worked now in a throwaway database (fresh, the default unless "
            "--tickets is given), taken from the configured database (db), or none",
        )
        parser.add_argument("--export-demo", default=None, help="Also write the demo tickets to this file (our format)")
        parser.add_argument("--limit", type=int, default=None, help="At most this many tickets per trace file")
        parser.add_argument(
            "--budget", type=int, default=8000, help="Token budget (default: the Standard class's 8,000)"
        )
        parser.add_argument("--keep-recent", type=int, default=8, help="Recent turns never compacted (default 8)")
        parser.add_argument(
            "--ledger-share",
            type=float,
            default=None,
            help="Share of the budget the live ledger may fill (default: as shipped)",
        )
        parser.add_argument(
            "--no-evict-by-need",
            action="store_true",
            help="Evict ledger entries by last use alone (the control for the eviction-by-need rule)",
        )
        parser.add_argument(
            "--no-fit-budget",
            action="store_true",
            help="Compaction always keeps every recent turn, even over the budget (the control)",
        )
        parser.add_argument(
            "--no-compact-before-step",
            action="store_true",
            help="Compact only when the trigger fires after resolution steps, never before a step "
            "over the budget (the control for compacting in place)",
        )
        parser.add_argument("--no-plant", action="store_true", help="Skip the planted-constraint test")
        parser.add_argument(
            "--model",
            default=None,
            help="A configured model to diff next calls on every ticket (default: the offline model, "
            "on demo-shop tickets only)",
        )
        parser.add_argument(
            "--labels",
            default=None,
            help="Your constraint labels for your traces (JSON: file, ticket, turn, sentence; see "
            "sundry/evals/README.md); replaces the dev traces' labels",
        )
        parser.add_argument("--out", default=None, help="Report folder (default: var/reports)")
        parser.add_argument("--fail-on-loss", action="store_true", help="Exit 1 when Sundry's lanes have any failure")

    def handle(self, *args, **opts):
        say = self.stdout.write
        try:
            tickets = self._collect(opts, say)
        except ValueError as exc:  # ImportFailed, or a file whose records fail their schema
            raise CommandError("Cannot import the tickets: " + " ".join(str(exc).splitlines()[:3])) from None
        if not tickets:
            raise CommandError("No tickets to run: give --traces/--tickets, or --demo fresh|db.")
        label_set = None
        if opts["labels"]:
            try:
                label_set = labels.LabelSet.load(opts["labels"])
            except labels.LabelsFileError as exc:
                raise CommandError(f"Cannot read the labels: {exc}") from None
            problems = label_set.problems(tickets)
            say(
                f"Labels: {len(label_set.labels) - len(problems)} of {len(label_set.labels)} constraint label(s) "
                f"found in their tickets ({label_set.path})"
            )
            for line in problems:
                say(self.style.WARNING(f"  {line}"))
        cfg = HarnessConfig(budget=opts["budget"], keep_recent=opts["keep_recent"], plant=not opts["no_plant"])
        cfg.evict_by_need = not opts["no_evict_by_need"]
        cfg.fit_budget = not opts["no_fit_budget"]
        cfg.compact_before_step = not opts["no_compact_before_step"]
        if opts["ledger_share"] is not None:
            cfg.ledger_share = opts["ledger_share"]
        agent_for = self._agents(opts["model"])
        say(f"Running {len(tickets)} ticket(s); compaction forced at every step boundary …")

        def progress(i, n, ticket, result):
            mine = [f for f in result.failures if f.strategy == "sundry"]
            verdict = "ok" if not mine else self.style.ERROR(f"{len(mine)} failure(s)")
            name = ticket.id if len(ticket.id) <= 24 else ticket.id[:23] + "…"
            say(
                f"  [{i:>3}/{n}] {name:<24} {result.turns:>3} turns {result.boundaries:>3} steps "
                f"{result.compactions:>3} compactions  Sundry: {verdict}  ({result.seconds:.2f} s)"
            )
            sys.stdout.flush()

        result = run_all(tickets, cfg, agent_for=agent_for, progress=progress, label_set=label_set)
        say("")
        say(report.summary_table(result))
        say("")
        for line in report.failure_lines(result):
            say(line)
        out = Path(opts["out"] or Path(settings.VAR_DIR) / "reports")
        json_path = report.write_json(result, out / "safety_harness.json")
        html_path = report.write_html(result, out / "safety_harness.html")
        say("")
        say(f"Reports: {json_path}  {html_path}  ({result.seconds:.1f} s)")
        if opts["fail_on_loss"] and result.failures("sundry"):
            sys.exit(1)

    def _collect(self, opts, say) -> list[records.RecordedTicket]:
        tickets = []
        traces, only_tickets = opts["traces"], bool(opts["tickets"])
        demo_mode = opts["demo"] or ("none" if only_tickets else "fresh")
        if traces is None and only_tickets:
            traces = []  # --tickets names exactly what to run
        if traces is None:
            found = sources.tau2_traces_dir()
            if found is None:
                say(
                    self.style.WARNING(
                        "No ../shared/corpora/tau2/traces beside the project: skipping the τ²-bench traces."
                    )
                )
            traces = [found] if found else []
        files = sources.trace_files(traces)
        if files:
            say(f"Importing {len(files)} trace file(s) …")
            for path in files:
                loaded = _named(sources.load_files([path], limit=opts["limit"], domain=opts["domain"]), path)
                say(f"  {path.name}: {len(loaded)} ticket(s)")
                tickets += loaded
        for path in sources.trace_files(opts["tickets"]):
            tickets += _named(sources.load_files([path], domain=opts["domain"]), path)
        if opts["long"]:
            chained = long_tickets.chain(tickets)
            say(f"Long tickets: {len(chained)} (each τ² user's tasks chained)")
            tickets += chained
        if demo_mode != "none":
            say("Demo-shop tickets …")
            demo = sources.fresh_demo_tickets(say=say) if demo_mode == "fresh" else sources.db_demo_tickets()
            say(f"  {len(demo)} demo ticket(s)")
            if opts["export_demo"]:
                say(f"  written to {records.dump(demo, opts['export_demo'])}")
            tickets += demo
        return importers.unique_ids(tickets)

    def _agents(self, model: str | None):
        from sundry.shop.offline import OfflineModel

        if model and model != "offline":
            agent = _GatewayAgent(model)
            return lambda ticket: agent
        offline = OfflineModel()
        # The offline model knows the demo shop's tools only; foreign tickets get no model diff.
        return lambda ticket: offline if ticket.domain == "demo_shop" else None
