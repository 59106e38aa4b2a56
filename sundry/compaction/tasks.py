"""The compaction task: thin. Idempotency lives in the run row (see services)."""

from celery import shared_task

from sundry.compaction.services import compaction_run


@shared_task(name="sundry.compaction.run", acks_late=True, reject_on_worker_lost=True)
def compaction_task(run_id: int) -> str:
    return compaction_run(run_id).status
