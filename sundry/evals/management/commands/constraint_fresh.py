"""`manage.py constraint_fresh`: the constraint classifier on the never-read instruction sentences
of the τ²-bench tasks without a trace, against two blind readers and their adjudication
(`evals.freshscore`)."""

from __future__ import annotations

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from sundry.evals import freshscore


class Command(BaseCommand):
    help = "Score the constraint classifier on fresh sentences labelled by two blind readers."

    def add_arguments(self, parser):
        parser.add_argument("--corpora", help="the τ²-bench folder (default: ../shared/corpora/tau2)")

    def handle(self, *args, **opts):
        try:
            self.stdout.write(freshscore.report(Path(opts["corpora"]) if opts["corpora"] else None))
        except (FileNotFoundError, ValueError) as exc:
            raise CommandError(str(exc)) from None
