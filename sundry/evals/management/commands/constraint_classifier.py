"""`manage.py constraint_classifier`: the constraint classifier's recall and precision on the labelled
dev sentences, by half, beside its controls; then the two readers' agreement on the held-out half
and the figures against each reader's labels and the adjudicated ones (`evals.constraintscore`)."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from sundry.evals import constraintscore, labels, sources


class Command(BaseCommand):
    help = "Score the constraint classifier on the labelled dev sentences (tuning / held-out halves) with controls."

    def add_arguments(self, parser):
        parser.add_argument(
            "--traces", help="the labelled trace files' folder (default: ../shared/corpora/tau2/traces)"
        )
        parser.add_argument(
            "--second-reader",
            default=str(labels.HERE / labels.SECOND_READER),
            help="the second reader's labels of the held-out half (default: labels/constraints_second_reader.json)",
        )
        parser.add_argument(
            "--adjudicated",
            default=str(labels.HERE / labels.ADJUDICATED),
            help="the disputed sentences decided by the definition (default: labels/constraints_adjudicated.json)",
        )

    def handle(self, *args, **opts):
        traces = opts["traces"] or sources.tau2_traces_dir()
        if traces is None:
            raise CommandError("no labelled traces: pass --traces DIR (the folder of the τ²-bench dev files)")
        tickets = constraintscore.customer_sentences(traces)
        if not tickets:
            raise CommandError(f"{traces}: no trace file there is labelled (labels/constraints.json names the files)")
        self.stdout.write(constraintscore.table(tickets))
        self.stdout.write("")
        try:
            table = constraintscore.reader_table(
                tickets,
                labels.second_reader_labels(opts["second_reader"]),
                labels.adjudicated_labels(opts["adjudicated"]),
            )
        except ValueError as exc:
            raise CommandError(f"{opts['second_reader']} / {opts['adjudicated']}: {exc}") from None
        self.stdout.write(table)
