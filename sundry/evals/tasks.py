"""The budget lab's Celery task: thin. What it runs and records is `labrun.proposal_run`.

The desk's lab page queues it by name (`tickets.lab_views.LAB_TASK`): the run scores a proposal with
the harness's checks, so it lives with the harness and the desk never imports it. The name is the
one it was first registered under, so a proposal queued before the run moved here still runs.
"""

from celery import shared_task

from sundry.evals.labrun import proposal_run


@shared_task(name="sundry.tickets.budget_lab", acks_late=True, reject_on_worker_lost=True)
def budget_lab_task(proposal_id: int) -> str:
    return proposal_run(proposal_id).status
