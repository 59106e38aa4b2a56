"""The budget lab's Celery task: thin. What it runs and records is `labrun.proposal_run`."""

from celery import shared_task

from sundry.tickets.labrun import proposal_run


@shared_task(name="sundry.tickets.budget_lab", acks_late=True, reject_on_worker_lost=True)
def budget_lab_task(proposal_id: int) -> str:
    return proposal_run(proposal_id).status
