from django.core.management.base import BaseCommand, CommandError

from sundry.desk.budgetlab import DEFAULT_TICKETS, MAX_TICKETS
from sundry.desk.budgetreplay import Budget
from sundry.desk.labform import ProposalForm, initial_values
from sundry.desk.labtext import lab_text
from sundry.evals.labrun import lab_figures
from sundry.tickets.models import TicketClass


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

    def handle(self, *args, slug, **options):
        tclass = TicketClass.objects.filter(slug=slug).first()
        if tclass is None:
            known = ", ".join(TicketClass.objects.order_by("slug").values_list("slug", flat=True)) or "none"
            raise CommandError(f"No ticket class {slug!r}. Classes: {known}.")
        given = {
            key: options[key]
            for key in ("budget", "trigger", "kept", "ledger", "tickets", "price_as")
            if options.get(key) is not None
        }
        form = ProposalForm({**initial_values(tclass), **given})  # the page's bounds and messages
        if not form.is_valid():
            raise CommandError(
                "; ".join(f"--{name.replace('_', '-')}: {' '.join(errors)}" for name, errors in form.errors.items())
            )
        data = form.cleaned_data
        proposed = Budget(data["budget"], data["trigger"], data["kept"], data["ledger"])
        lab = lab_figures(
            tclass,
            proposed,
            tickets=data["tickets"] or DEFAULT_TICKETS,
            price_as=data["price_as"] or initial_values(tclass)["price_as"],
        )
        self.stdout.write(lab_text(lab, tclass.name), ending="")
