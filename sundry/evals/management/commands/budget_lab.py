from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from sundry.desk.budgetlab import DEFAULT_TICKETS, MAX_TICKETS
from sundry.desk.labform import ProposalForm, initial_values, proposed_budget
from sundry.desk.labtext import lab_text
from sundry.evals.labrun import lab_figures
from sundry.evals.labtraces import load, traces_figures
from sundry.evals.scenarios.lab import chosen, scenario_figures
from sundry.tickets.models import TicketClass

# The form's fields the command names otherwise.
FLAGS = {"confirm_cost": "yes", "traces_path": "traces", "source": "scenarios"}


class Command(BaseCommand):
    help = (
        "Replay a ticket class's recorded tickets under a proposed budget and print it beside the class's "
        "current settings: request tokens, compactions, cost, and the harness's checks (the budget lab)."
    )

    def add_arguments(self, parser):
        parser.add_argument("--class", dest="slug", required=True, help="The class's slug, e.g. standard.")
        parser.add_argument("--budget", help="Proposed token budget (default: the class's).")
        parser.add_argument("--trigger", help="Proposed trigger fraction (default: the class's).")
        parser.add_argument("--kept", help="Proposed recent turns kept (default: the class's).")
        parser.add_argument("--ledger", help="Proposed ledger share (default: the class's).")
        parser.add_argument(
            "--tickets",
            help=f"The class's latest tickets with recorded steps to replay "
            f"(default {DEFAULT_TICKETS}, at most {MAX_TICKETS}).",
        )
        parser.add_argument(
            "--price-as",
            help="Price the tokens as this model (default: the class's working model; "
            "an offline class is priced as the lab page prices it).",
        )
        parser.add_argument("--working-model", help="Proposed working model (priced by genai-prices).")
        parser.add_argument("--summariser-model", help="Proposed summariser model (priced by genai-prices).")
        parser.add_argument(
            "--call-summariser",
            action="store_true",
            help="The harness's compactions call the summariser model instead of the offline summariser. "
            "A billed model's cost is estimated first; the run needs --yes.",
        )
        parser.add_argument("--yes", action="store_true", help="Accept the summariser's estimated cost.")
        source = parser.add_mutually_exclusive_group()
        source.add_argument(
            "--traces",
            metavar="FILE",
            help="Replay this file of recorded conversations (τ²-bench results, OpenAI message lists, Sundry's "
            "export) with the harness instead of the class's recent tickets; --tickets caps how many of its "
            "conversations.",
        )
        source.add_argument(
            "--scenarios",
            nargs="?",
            const="fast",
            metavar="fast|all|ID,ID",
            help="Run the outcome scenarios on this database's demo shop at the current settings and at the "
            "proposal, and print their outcomes: the fast slice (the default), all of them, or these ids.",
        )

    def handle(self, *args, slug, **options):
        tclass = TicketClass.objects.filter(slug=slug).first()
        if tclass is None:
            known = ", ".join(TicketClass.objects.order_by("slug").values_list("slug", flat=True)) or "none"
            raise CommandError(f"No ticket class {slug!r}. Classes: {known}.")
        given = {
            key: options[key]
            for key in (
                "budget",
                "trigger",
                "kept",
                "ledger",
                "tickets",
                "price_as",
                "working_model",
                "summariser_model",
            )
            if options.get(key) is not None
        }
        given.update(call_summariser=options["call_summariser"], confirm_cost=options["yes"])
        if options.get("traces"):
            given.update(source="traces", traces_path=options["traces"])
        elif options.get("scenarios"):
            given.update(source="scenarios", scenarios="all" if options["scenarios"] == "all" else "fast")
            try:
                chosen(options["scenarios"])
            except ValueError as exc:
                raise CommandError(f"--scenarios: {exc}") from None
        # The page's bounds and messages; the operator may name any file they can read.
        form = ProposalForm({**initial_values(tclass), **given}, tclass=tclass, anywhere=True)
        if not form.is_valid():
            raise CommandError(
                "; ".join(
                    f"--{FLAGS.get(name, name.replace('_', '-'))}: {' '.join(errors)}"
                    for name, errors in form.errors.items()
                )
            )
        data = form.cleaned_data
        if form.summariser_estimate:
            self.stdout.write(f"Summariser: {form.summariser_estimate['text']} Accepted (--yes).")
        common = {
            "price_as": data["price_as"] or initial_values(tclass)["price_as"],
            "working_model": data["working_model"],
            "summariser_model": data["summariser_model"],
            "progress": self._progress,
        }
        tickets = data["tickets"] or DEFAULT_TICKETS
        if data["source"] == "traces":
            path = form.traces[0]
            lab = traces_figures(tclass, proposed_budget(data), load(Path(path))[:tickets], name=path, **common)
        elif data["source"] == "scenarios":
            lab = scenario_figures(tclass, proposed_budget(data), which=options["scenarios"], **common)
        else:
            lab = lab_figures(
                tclass, proposed_budget(data), tickets=tickets, call_summariser=data["call_summariser"], **common
            )
        self.stdout.write(lab_text(lab, tclass.name), ending="")

    def _progress(self, done: int, total: int) -> None:
        self.stderr.write(f"  {done} of {total}", ending="\r" if done < total else "\n")
