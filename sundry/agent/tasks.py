"""Thin Celery tasks: each calls one service.

An agent run is cut into slices that start no step past `AGENT_SLICE_SECONDS`, so the task's
time limits, the broker's visibility timeout and the claim's TTL are each sized for one step
(settings.py), not for a whole run. A run that cannot finish — the soft time limit, retries
used up on a database that stays away, an unexpected error — leaves an error turn and an
attention flag (`failures.run_failed`) and has let go of its claim; a run whose worker died
is taken over once its claim lapses (`failures.run_recovered`), queued again by the sweep.
"""

import logging
import time

from celery import shared_task
from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings
from django.db import InterfaceError, OperationalError

from sundry.agent import claims, failures, outbox
from sundry.agent.loop import CLAIM_TTL, claimed_elsewhere, run_slice

log = logging.getLogger("sundry.agent")

# A run the database failed under (a restart, a dropped connection) rolled its step back; it
# is tried again after these many seconds, then again, longer each time (settings.py).
DB_RETRY_COUNTDOWNS = settings.AGENT_DB_RETRY_COUNTDOWNS
DB_MAX_RETRIES = settings.AGENT_DB_RETRIES


def _give_up(ticket_id: int, reason: str, owners: tuple[str, ...] = ()) -> None:
    """Record the failure where staff look, and let go of any claim the run's attempts (`owners`)
    kept; if even that cannot be written (the database is still away), the outbox mark stays and
    the sweep queues the ticket again later."""
    try:
        failures.run_failed(ticket_id, reason)
        claims.release_owned(ticket_id, owners)
    except (OperationalError, InterfaceError):
        log.exception("could not record the failed run of ticket %s; the sweep will queue it again", ticket_id)


@shared_task(bind=True, name="sundry.agent.run", acks_late=True, reject_on_worker_lost=True, max_retries=DB_MAX_RETRIES)
def agent_run_task(self, ticket_id: int, resume: list[str] | tuple[str, ...] = ()) -> int:
    # The slice is sized by the limits this worker applies (its own settings, or the ones the caller
    # passed), not by the settings of whoever queued the task.
    soft = self.limits_in_force()[1]
    slice_seconds = settings.AGENT_SLICE_SECONDS if not soft else max(0, soft - settings.AGENT_STEP_SECONDS)
    deadline = None if self.request.is_eager else time.monotonic() + slice_seconds
    # The task's id and attempt are the run's identity in its claim. `resume` names the attempts
    # whose database failed under them (each queued the next retry itself, alive): a claim one of
    # them could not let go of is taken back at once. Any other claim — the same attempt delivered
    # again after its worker died included — is another run's, waited out until it lapses.
    owner = f"task-{self.request.id}#{self.request.retries or 0}" if self.request.id else ""
    try:
        steps, cut = run_slice(ticket_id, deadline=deadline, owner=owner, earlier=tuple(resume))
    except (OperationalError, InterfaceError) as exc:
        if self.request.is_eager:
            raise
        claims.note_cause(owner, claims.DATABASE_CAUSE)  # for a run that takes over a claim this one kept
        if self.request.retries >= DB_MAX_RETRIES:
            tries = DB_MAX_RETRIES + 1
            _give_up(
                ticket_id,
                f"the database failed {tries} time{'s' if tries > 1 else ''}: {exc}"[:150],
                owners=(*resume, owner),
            )
            return 0
        countdown = DB_RETRY_COUNTDOWNS[min(self.request.retries, len(DB_RETRY_COUNTDOWNS) - 1)]
        raise self.retry(exc=exc, countdown=countdown, args=[ticket_id], kwargs={"resume": [*resume, owner]})
    except SoftTimeLimitExceeded:
        failures.discard_connection()  # the limit may have landed mid-statement
        log.error("agent run on ticket %s passed the soft time limit", ticket_id)
        soft = self.limits_in_force()[1]
        _give_up(ticket_id, f"it ran past the {soft:g} s time limit" if soft else "it ran past its time limit")
        return 0
    except Exception as exc:  # noqa: BLE001 — any failure must reach staff, never vanish in a log
        log.exception("agent run on ticket %s failed", ticket_id)
        _give_up(ticket_id, f"unexpected error: {type(exc).__name__}")
        if self.request.is_eager:
            raise
        return 0
    if cut:
        # The slice ended with work left: the rest runs as a task of its own, under fresh limits.
        agent_run_task.apply_async(args=[ticket_id])
    elif not steps and not self.request.is_eager and claimed_elsewhere(ticket_id):
        # Another run holds the ticket (or this same attempt did, before its worker died and the
        # broker delivered it again: a claim to wait out like any other). Alive, it answers this input before it lets go
        # (and the retry finds nothing to do); killed, its claim lapses within the TTL
        # and the retry answers instead.
        raise self.retry(countdown=CLAIM_TTL.total_seconds() + 1)
    return steps


@shared_task(name="sundry.agent.sweep", ignore_result=True)
def agent_sweep_task() -> int:
    """Queue again every ticket whose wake-up was lost (see `outbox`). Run by Celery beat."""
    due = outbox.forgotten()
    for ticket_id in due:
        agent_run_task.apply_async(args=[ticket_id])
    if due:
        log.warning("sweep: queued %d ticket(s) whose agent wake-up was lost: %s", len(due), due)
    return len(due)
