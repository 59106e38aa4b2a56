"""A run's claim on its ticket: a lease, so one run works a ticket at a time.

The claim is the ticket's `agent_claimed_at`, set by a conditional update, with the run that
holds it in `agent_claimed_by` (its task's id, the same across the task's retries). It
lapses after `CLAIM_TTL`, so a killed worker cannot wedge the ticket; a run renews it at every
step and, while a step waits on the model, from a heartbeat thread (`heartbeat`), so only a
dead worker lets it lapse. A run remembers the stamp it wrote, and renews or lets go only
while the row still holds that stamp: a run whose lease lapsed and was taken over never
touches the new holder's claim. A retry of a run whose database went away mid-step (and
could not let go) takes its own claim back at once: it is the same run, not a lost worker.
"""

from __future__ import annotations

import logging
import threading
import uuid
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.conf import settings
from django.core.cache import cache
from django.db import InterfaceError, OperationalError, close_old_connections, connection
from django.db.models import Q
from django.utils import timezone

from sundry.core.compiledread import CompiledRead
from sundry.tickets.models import Ticket

log = logging.getLogger("sundry.agent")

# See settings.AGENT_CLAIM_TTL_SECONDS: renewed at every step and while a step waits on the
# model, so it measures a dead worker, not a slow call.
CLAIM_TTL = timedelta(seconds=settings.AGENT_CLAIM_TTL_SECONDS)
# How often the heartbeat renews the claim during a step: well inside the TTL.
HEARTBEAT_SECONDS = max(0.2, settings.AGENT_CLAIM_TTL_SECONDS / 3)


@dataclass
class Claim:
    ticket_id: int
    stamp: datetime  # the `agent_claimed_at` this run last wrote
    took_over: bool = False  # the claim had lapsed unreleased and another run held it
    owner: str = ""  # the run's identity (`agent_claimed_by`)
    previous: str = ""  # on a take-over: the run whose claim lapsed
    # Once let go: the ticket's turn counter as the release found it (None: not let go by it).
    released_at_turn: int | None = None
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)


def new_owner() -> str:
    """An identity for a run that is not a task (the in-process executor, a test, a command)."""
    return f"run-{uuid.uuid4().hex}"


def claim(ticket_id: int, owner: str = "", earlier: tuple[str, ...] = ()) -> Claim | None:
    """Claim the ticket for the run `owner`; None if another run holds a live claim (or there is
    no such ticket). `earlier`: this run's earlier attempts (a task's retries before this one);
    a claim one of them still holds — it failed with the database and could not let go — is
    taken back at once and is no take-over. The same attempt delivered again is another run:
    its worker died holding the claim, which must lapse first."""
    owner = owner or new_owner()
    now = timezone.now()
    tickets = Ticket.objects.filter(pk=ticket_id)
    if tickets.filter(Q(agent_claimed_at__isnull=True) | Q(agent_claimed_by__in=[e for e in earlier if e])).update(
        agent_claimed_at=now, agent_claimed_by=owner
    ):
        return Claim(ticket_id, now, owner=owner)
    return _take_over(ticket_id, owner, now)


def _take_over(ticket_id: int, owner: str, now: datetime) -> Claim | None:
    """`claim` once its first UPDATE found the ticket held: take a lapsed claim over."""
    lapsed = Ticket.objects.filter(pk=ticket_id, agent_claimed_at__lt=now - CLAIM_TTL)
    previous = lapsed.values_list("agent_claimed_by", flat=True).first()
    if previous is not None and lapsed.filter(agent_claimed_by=previous).update(
        agent_claimed_at=now, agent_claimed_by=owner
    ):
        return Claim(ticket_id, now, took_over=True, owner=owner, previous=previous)
    return None


def _one_trip() -> bool:
    """Statements can share a round trip: PostgreSQL with client-side binding (Django's default
    cursor, `psycopg.ClientCursor`), whose simple query protocol takes several at once."""
    if connection.vendor != "postgresql":
        return False
    import psycopg

    connection.ensure_connection()
    return issubclass(connection.connection.cursor_factory, psycopg.ClientCursor)


def claim_and_read(
    ticket_id: int, read: CompiledRead, owner: str = "", earlier: tuple[str, ...] = ()
) -> tuple[Claim | None, object | None]:
    """`claim`, and `read` of the ticket (a `CompiledRead` of one placeholder, the ticket's id) sent
    with the claim's UPDATE in one round trip where the database allows (`_one_trip`). Each
    statement of the pair takes its own snapshot, as two round trips would: the read sees the
    claim and all committed before it. The read is returned only if the claim is this run's by
    that UPDATE (a take-over, or no one-trip database: None, and the caller reads it itself)."""
    if not _one_trip():
        return claim(ticket_id, owner, earlier), None
    owner = owner or new_owner()
    now = timezone.now()
    table = connection.ops.quote_name(Ticket._meta.db_table)
    at, by, pk = (
        connection.ops.quote_name(Ticket._meta.get_field(f).column)
        for f in ("agent_claimed_at", "agent_claimed_by", "id")
    )
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {table} SET {at} = %s, {by} = %s WHERE {pk} = %s AND ({at} IS NULL OR {by} = ANY(%s)); {read.sql}",
            [_db(now), owner, ticket_id, [e for e in earlier if e], *read.params_for(ticket_id)],
        )
        took = cursor.rowcount == 1
        cursor.nextset()
        row = cursor.fetchone()
    if took:
        return Claim(ticket_id, now, owner=owner), read.hydrate(row)
    return _take_over(ticket_id, owner, now), None


# Why a run could not let go of its claim, kept beside the database (in the cache, Redis where
# configured) since it is written while the database is away. A run that takes the lapsed claim
# over reads it, so its error turn names the true cause rather than a lost worker.
_CAUSE_KEY = "sundry:claim-cause:{}"
DATABASE_CAUSE = "database"


def note_cause(owner: str, cause: str) -> None:
    if not owner:
        return
    try:
        cache.set(_CAUSE_KEY.format(owner), cause, timeout=7 * 24 * 3600)
    except Exception:  # noqa: BLE001 — a cache that is away too leaves the default wording
        log.warning("could not note why run %s kept its claim", owner, exc_info=True)


def cause_of(owner: str) -> str:
    """Why run `owner` kept its claim, if it said ("" if unknown: its worker died, as far as anyone knows)."""
    if not owner:
        return ""
    try:
        return cache.get(_CAUSE_KEY.format(owner)) or ""
    except Exception:  # noqa: BLE001
        return ""


def release_owned(ticket_id: int, owners: tuple[str, ...]) -> bool:
    """Let go of a claim one of `owners` (a task's attempts) still holds: a run that gives up after
    the database failed under it must not leave its claim to lapse and be taken for a dead worker's."""
    mine = [o for o in owners if o]
    return bool(mine) and bool(
        Ticket.objects.filter(pk=ticket_id, agent_claimed_by__in=mine).update(
            agent_claimed_at=None, agent_claimed_by=""
        )
    )


def stale(claimed_at: datetime | None) -> bool:
    """A claim older than the TTL: its run's worker died and the next run will take over."""
    return claimed_at is not None and claimed_at < timezone.now() - CLAIM_TTL


def _touch(held: Claim) -> bool:
    """Move the lease's stamp to now if the claim is still this run's."""
    with held.lock:
        now = timezone.now()
        if not Ticket.objects.filter(pk=held.ticket_id, agent_claimed_at=held.stamp).update(agent_claimed_at=now):
            return False
        held.stamp = now
        return True


def _db(moment: datetime):
    """A claim's stamp as the database stores it (for a raw statement)."""
    return Ticket._meta.get_field("agent_claimed_at").get_db_prep_value(moment, connection)


def renew(held: Claim) -> tuple[str, str, int, int] | None:
    """Renew the lease; the ticket's (handler, status, last_turn_number, version) then,
    or None if the claim was lost (lapsed and taken, or the ticket is gone)."""
    with held.lock:  # `_touch` and the ticket's fields in one UPDATE … RETURNING
        now = timezone.now()
        table = connection.ops.quote_name(Ticket._meta.db_table)
        with connection.cursor() as cursor:
            cursor.execute(
                f'UPDATE {table} SET "agent_claimed_at" = %s WHERE "id" = %s AND "agent_claimed_at" = %s '
                'RETURNING "handler", "status", "last_turn_number", "version"',
                [_db(now), held.ticket_id, _db(held.stamp)],
            )
            row = cursor.fetchone()
        if row is None:
            return None
        held.stamp = now
        return tuple(row)


def release(held: Claim, *, settle_through: int | None = None) -> bool:
    """Let go of the claim if it is still this run's. Returns whether it was.

    `settle_through`: the run read through that turn, so the outbox's mark for it is cleared in
    the same UPDATE (`outbox.settle`'s rule: only a mark asking for nothing newer).

    A run often lets go because the database failed under it, on the connection that failed:
    then it tries once more on a fresh connection. If that fails too, the claim stays and the
    run's retry takes it back (same owner) rather than waiting for it to lapse."""

    def once() -> bool:
        # The ticket row is where a writer's turn and this release meet: a turn committed before
        # this UPDATE took the row shows in the counter it returns; one committed after finds
        # the claim gone and wakes a run of its own (`services._wake_agent`).
        settle, params = "", []
        if settle_through is not None:  # `outbox.settle`: a mark asking for nothing after the turn read
            settle = (
                ', "agent_wake_turn" = CASE WHEN "agent_wake_turn" <= %s THEN NULL ELSE "agent_wake_turn" END'
                ', "agent_wake_at" = CASE WHEN "agent_wake_turn" <= %s THEN NULL ELSE "agent_wake_at" END'
            )
            params = [settle_through, settle_through]
        with held.lock, connection.cursor() as cursor:
            cursor.execute(
                f'UPDATE {connection.ops.quote_name(Ticket._meta.db_table)} SET "agent_claimed_at" = NULL, '
                f'"agent_claimed_by" = \'\'{settle} WHERE "id" = %s AND "agent_claimed_at" = %s '
                'RETURNING "last_turn_number"',
                [*params, held.ticket_id, _db(held.stamp)],
            )
            row = cursor.fetchone()
        held.released_at_turn = row[0] if row else None
        return row is not None

    try:
        return once()
    except (OperationalError, InterfaceError):
        if connection.in_atomic_block:
            raise  # inside a caller's transaction the connection is not ours to replace
        connection.close()
        try:
            return once()
        except (OperationalError, InterfaceError):
            log.warning("could not let go of the claim on ticket %s; the run's retry takes it back", held.ticket_id)
            note_cause(held.owner, DATABASE_CAUSE)
            return False


@contextmanager
def heartbeat(held: Claim | None, every: float | None = None):
    """Renew `held` every `every` seconds (default `HEARTBEAT_SECONDS`) while the block runs — a
    step waiting on a slow model keeps its claim. The renewals run on their own thread and
    database connection; one that finds the claim gone stops quietly (the step's own check
    before it writes says so)."""
    if held is None:
        yield
        return
    stop = threading.Event()

    def beat() -> None:
        try:
            while not stop.wait(every or HEARTBEAT_SECONDS):
                try:
                    if not _touch(held):
                        return
                except (OperationalError, InterfaceError):
                    connection.close()  # the next beat tries on a fresh connection
        finally:
            close_old_connections()
            connection.close()

    thread = threading.Thread(target=beat, name=f"claim-heartbeat-{held.ticket_id}", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


def claimed_elsewhere(ticket_id: int, mine: tuple[str, ...] = ()) -> bool:
    """Another run than `mine` (a run's attempts) holds a live claim on the ticket (or held it
    when its worker died)."""
    live = Ticket.objects.filter(pk=ticket_id, agent_claimed_at__gte=timezone.now() - CLAIM_TTL)
    return live.exclude(agent_claimed_by__in=[m for m in mine if m]).exists()


# The ticket row's fields `claimed_in` reads (from the row lock's own statement: `versions.ticket_lock`).
CLAIM_FIELDS = ("agent_claimed_at",)


def claimed_in(row: dict) -> bool:
    """`claimed_elsewhere(ticket_id)` (any run's live claim), judged on the row's `CLAIM_FIELDS` as
    the caller's lock read them."""
    at = row["agent_claimed_at"]
    return at is not None and at >= timezone.now() - CLAIM_TTL
