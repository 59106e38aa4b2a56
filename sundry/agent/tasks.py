"""Thin Celery tasks: each calls one service."""

from celery import shared_task

from sundry.agent.loop import CLAIM_TTL, agent_run, claimed_elsewhere


@shared_task(bind=True, name="sundry.agent.run", acks_late=True, reject_on_worker_lost=True, max_retries=3)
def agent_run_task(self, ticket_id: int) -> int:
    steps = agent_run(ticket_id)
    if not steps and not self.request.is_eager and claimed_elsewhere(ticket_id):
        # Another run holds the ticket. Alive, it answers this input before it lets go
        # (and the retry finds nothing to do); killed, its claim lapses within the TTL
        # and the retry answers instead.
        raise self.retry(countdown=CLAIM_TTL.total_seconds() + 1)
    return steps
