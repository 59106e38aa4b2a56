"""Re-run the summariser on a stored compaction record. Executes no tool and writes nothing."""

from django.core.management.base import BaseCommand, CommandError

from sundry.compaction.services import compaction_replay


class Command(BaseCommand):
    help = "Replay a compaction run's stored summariser input and report whether the output validates."

    def add_arguments(self, parser):
        parser.add_argument("run_id", type=int)
        parser.add_argument("--model", help="Summariser model to use instead of the one recorded")

    def handle(self, *args, run_id, model=None, **options):
        try:
            verdict = compaction_replay(run_id, model=model)
        except Exception as exc:
            raise CommandError(str(exc)) from exc
        for line in verdict.details:
            self.stdout.write(line)
        if verdict.ok:
            self.stdout.write(self.style.SUCCESS(f"VALID: schema-valid summary, {verdict.tokens} tokens"))
        else:
            self.stdout.write(self.style.ERROR(f"INVALID: {', '.join(verdict.reasons)}"))
            raise SystemExit(1)
