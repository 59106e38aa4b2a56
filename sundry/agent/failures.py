"""What staff see when a run could not finish: an error turn in the conversation and the
ticket flagged for attention. The claim is released by the run itself (`loop.agent_run`
lets go in a `finally`), or lapses if its worker died.

`flag` raises a reason of its own on the ticket's attention line (`tickets.attention`), so one
cause never hides another.

The error turn of a stopped run is also its stop: no run answers the input before it or
goes on with the work it left (staff have it, until they hand it back or new input comes),
and a step that finds one recorded after what it read writes nothing (`step.agent_step`).
"""

from __future__ import annotations

import logging

from django.db import connection, transaction
from django.db.models import Q

from sundry.agent import handoff, outbox
from sundry.tickets.attention import RUN_FAILED, attention_flag
from sundry.tickets.models import Ticket, Turn
from sundry.tickets.services import turn_append
from sundry.tickets.versions import ticket_lock

log = logging.getLogger("sundry.agent")

# The turns that stop a run: `run_failed`'s, and the run's own at its step cap or deadline.
STOPS = Q(kind=Turn.Kind.ERROR, payload__has_key="run_failed") | Q(kind=Turn.Kind.ERROR, payload__has_key="run_stopped")


def is_stop(kind: str, payload: dict | None) -> bool:
    return kind == Turn.Kind.ERROR and bool({"run_failed", "run_stopped"} & set(payload or {}))


def stopped_after(ticket_id: int, number: int) -> bool:
    """A run was stopped after turn `number` (read under the ticket's row lock to be sure)."""
    return Turn.objects.filter(STOPS, ticket_id=ticket_id, number__gt=number).exists()


def discard_connection() -> None:
    """After a time limit: the limit can land while a statement waits on the server (a row
    lock), and the connection then can run nothing else — a claim released or a failure
    recorded on it would fail in turn. The statement is cancelled on the server (so what the
    stopped step sent never commits later) and the connection closed; the next query opens
    a fresh one."""
    raw = connection.connection
    if raw is not None:
        try:
            raw.cancel_safe(timeout=5)  # psycopg; SQLite has nothing to cancel
        except Exception:  # noqa: BLE001 — the connection is being thrown away either way
            log.info("cancelling the stopped run's statement failed", exc_info=True)
    connection.close()


def flag(ticket_id: int, reason: str) -> None:
    """Raise `reason` on the ticket's attention line (inside the caller's transaction)."""
    attention_flag(ticket_id, reason)


def run_failed(ticket_id: int, reason: str) -> bool:
    """A run stopped without answering (a time limit, an unexpected error, retries used up).
    Returns whether it was recorded: a limit that lands once the run's reply is written (or
    as the next task starts) stopped nothing the customer waits for, so nothing is said."""
    with transaction.atomic():
        ticket_lock(ticket_id)  # lock order: the ticket row first
        ticket = Ticket.objects.select_related("ticket_class").get(pk=ticket_id)
        last = Turn.objects.filter(ticket_id=ticket_id).order_by("-number").values_list("kind", "author").first()
        if last is None or (last[0] == Turn.Kind.MESSAGE and last[1] in (Turn.Author.AGENT, Turn.Author.STAFF)):
            log.warning(
                "agent run on ticket %s stopped (%s) after its reply; nothing left unanswered", ticket_id, reason
            )
            return False
        stop = turn_append(
            ticket=ticket,
            author=Turn.Author.SYSTEM,
            kind=Turn.Kind.ERROR,
            text=f"The agent's run stopped before it answered ({reason}). "
            "Staff: please reply by hand, or hand the ticket back to the agent to try again.",
            payload={"run_failed": reason},
        )
        # The customer, if this leaves their message unanswered, is told a person will reply.
        handoff.tell_stopped(ticket, turn_append, stop.number)
        flag(ticket_id, f"{RUN_FAILED}: {reason}"[:120])
        # Staff have it now: the sweep must not start the same run over and over.
        outbox.settle(ticket_id, ticket.last_turn_number)
    return True


# Why the run before let its claim lapse, as the error turn and the attention line say it.
RECOVERED = {
    "": ("its worker was lost", "a lost worker"),
    "database": ("the database failed under it and it could not let go of the ticket", "a database failure"),
}


def run_recovered(ticket: Ticket, cause: str = "") -> None:
    """A run took over a lapsed claim: the run before stopped without letting go — its worker died,
    unless it noted another cause (`claims.note_cause`: the database failed under it)."""
    said, short = RECOVERED.get(cause, RECOVERED[""])
    with transaction.atomic():
        turn_append(
            ticket=ticket,
            author=Turn.Author.SYSTEM,
            kind=Turn.Kind.ERROR,
            text=f"The previous agent run stopped unexpectedly ({said}); a new run has taken the ticket over.",
            payload={"recovered": True, "cause": cause or "worker_lost"},
        )
        flag(ticket.pk, f"Agent run recovered after {short}")
