"""Thin Celery tasks: each calls one service."""

from celery import shared_task
from django.db import InterfaceError, OperationalError

from sundry.agent.loop import CLAIM_TTL, agent_run, claimed_elsewhere

# A run the database failed under (a restart, a dropped connection) rolled its step back; it
# is tried again after these many seconds, then again, longer each time.
DB_RETRY_COUNTDOWNS = (2, 5, 15, 30, 60)


@shared_task(bind=True, name="sundry.agent.run", acks_late=True, reject_on_worker_lost=True, max_retries=8)
def agent_run_task(self, ticket_id: int) -> int:
    try:
        steps = agent_run(ticket_id)
    except (OperationalError, InterfaceError) as exc:
        if self.request.is_eager:
            raise
        countdown = DB_RETRY_COUNTDOWNS[min(self.request.retries, len(DB_RETRY_COUNTDOWNS) - 1)]
        raise self.retry(exc=exc, countdown=countdown)
    if not steps and not self.request.is_eager and claimed_elsewhere(ticket_id):
        # Another run holds the ticket. Alive, it answers this input before it lets go
        # (and the retry finds nothing to do); killed, its claim lapses within the TTL
        # and the retry answers instead.
        raise self.retry(countdown=CLAIM_TTL.total_seconds() + 1)
    return steps
