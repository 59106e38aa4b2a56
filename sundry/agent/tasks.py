"""Thin Celery tasks: each calls one service."""

from celery import shared_task


@shared_task(name="sundry.agent.run", acks_late=True, reject_on_worker_lost=True)
def agent_run_task(ticket_id: int) -> int:
    from sundry.agent.loop import agent_run

    return agent_run(ticket_id)
