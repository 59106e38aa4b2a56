"""The ticket row's version and turn counter, and the one rule that keeps live panels true.

Every write that changes anything a panel shows goes through one of these in
its transaction: `bump` (a turn appended), `ticket_touch` (a lane, a held
action, a compaction run, a step record), `ticket_update` (the ticket row's
own fields: status, handler, attention) or `ticket_class_touch` (every ticket
of a class whose budget changed). Each bumps the version — the key the panel
renderings are cached under — and has `tickets.events` push it after commit, so
a watcher re-renders and a reconnecting socket is never sent the rendering
from before the change.

Each bump also says which tables its transaction writes (`stamps`: model labels, as
"context.ledgerentry"), and records the new version under each in the ticket row's `stamps`, in
the same statement. A rendering then re-reads only the panels that show a table stamped since the
one before it (`sundry.live.panels`). A bump that names none stamps `ALL`: every panel re-reads.
A write that rides on another write's bump in its transaction (the step's record, money a result
reports, IDs a message typed) is named by that bump.

Its own module, below both tickets.services and context.services, so each can
use it without importing the other.

Lock order: a transaction that writes a ticket's lanes locks the ticket row
first (`ticket_lock`, or a bump), then lane rows. Agent steps, staff edits and
compactions all follow it, so they queue on the ticket row instead of deadlocking.
"""

from __future__ import annotations

from django.db import connection, transaction
from django.db.models import F, Func, JSONField
from django.utils import timezone

from sundry.tickets.events import ticket_changed
from sundry.tickets.models import Ticket

ALL = "*"  # a write that did not say what it changed: every panel re-reads

TURNS = "tickets.turn"
STEPS = "agent.agentstep"
LEDGER = "context.ledgerentry"
MONEY = "context.moneytotal"
STATE = "context.statevalue"
ACTIONS = "context.actiontaken"
RULES = "context.pinnedrule"
HELD = "agent.heldaction"
CARDS = "agent.confirmation"
SUMMARY = "context.summary"
RUNS = "compaction.compactionrun"
RATING = "tickets.rating"
ATTACHMENTS = "attachments.attachment"


def _stamps_sql(stamps) -> tuple[str, list]:
    """The SET expression writing the bump's version under each of `stamps` (the column's own
    "version" + 1: the version this same UPDATE sets)."""
    labels = sorted(set(stamps or (ALL,)))
    if connection.vendor == "postgresql":
        pairs = ", ".join('%s::text, "version" + 1' for _ in labels)
        return f"COALESCE(\"stamps\", '{{}}'::jsonb) || jsonb_build_object({pairs})", labels
    pairs = ", ".join('%s, "version" + 1' for _ in labels)
    return f"json_set(COALESCE(\"stamps\", '{{}}'), {pairs})", [f'$."{label}"' for label in labels]


class Stamped(Func):
    """`_stamps_sql` for an ORM `update()` beside its `version=F("version") + 1`."""

    output_field = JSONField()

    def __init__(self, *stamps):
        super().__init__()
        self.stamps = stamps

    def as_sql(self, compiler, connection, **extra):
        return _stamps_sql(self.stamps)


def ticket_lock(ticket_id: int, *fields: str) -> dict | None:
    """Take the ticket's row lock until the caller's transaction ends (call inside `atomic()`).

    `fields`: the row's fields the caller decides on, read by the locking statement itself and
    returned by name — as they stay until the caller's transaction ends, since every writer of
    the row waits for its lock — so a post needs no read of them of its own."""
    rows = list(Ticket.objects.select_for_update().filter(pk=ticket_id).order_by().values_list("pk", *fields))
    if not rows:
        raise Ticket.DoesNotExist(f"ticket {ticket_id} does not exist")
    return dict(zip(fields, rows[0][1:], strict=True)) if fields else None


class ClaimLost(Exception):
    """A write made only while the ticket is claimed with a given stamp found another claim (or none,
    or no ticket): nothing was written."""


def _bump_sql(*, turn: bool, claimed: bool, stamps=(), wake: bool = False, through: bool = False) -> tuple[str, list]:
    """The UPDATE … RETURNING of a bump: the version (and the turn counter when `turn`) and its
    stamps, on the ticket's row only while its claim is the writer's when `claimed`, and only while
    its last turn is still a given one when `through`; with `wake`, the agent's wake-up marked at
    the new turn (`agent.outbox.mark`). And the parameters that come before the rest ([marked at,]
    the stamps'; the rest: id[, claim][, last turn])."""
    table = connection.ops.quote_name(Ticket._meta.db_table)
    counter = ', "last_turn_number" = "last_turn_number" + 1' if turn else ""
    if wake:
        counter += ', "agent_wake_turn" = "last_turn_number" + 1, "agent_wake_at" = %s'
    condition = ' AND "agent_claimed_at" = %s' if claimed else ""
    if through:
        condition += ' AND "last_turn_number" = %s'
    stamped, params = _stamps_sql(stamps)
    params = [*_wake_param(wake), *params]
    return (
        f'UPDATE {table} SET "version" = "version" + 1{counter}, "stamps" = {stamped} WHERE "id" = %s{condition} '
        'RETURNING "last_turn_number", "version"'
    ), params


def _wake_param(wake: bool) -> list:
    if not wake:
        return []
    return [Ticket._meta.get_field("agent_wake_at").get_db_prep_value(timezone.now(), connection)]


def _claim_param(claimed_at) -> list:
    if claimed_at is None:
        return []
    return [Ticket._meta.get_field("agent_claimed_at").get_db_prep_value(claimed_at, connection)]


def _missed(ticket_id: int, claimed_at) -> Exception:
    if claimed_at is not None:
        return ClaimLost(f"ticket {ticket_id} is not claimed with {claimed_at.isoformat()}")
    return Ticket.DoesNotExist(f"ticket {ticket_id} does not exist")


def bump(ticket_id: int, *, turn: bool = False, claimed_at=None, stamps=(ALL,), wake: bool = False) -> tuple[int, int]:
    """Bump the version (and the turn counter when `turn`); returns (last_turn_number, version).

    One UPDATE … RETURNING: it takes the ticket's row lock until the caller's transaction
    ends, which is what keeps concurrent writers' turn numbers apart. Watchers are told
    after commit (once per transaction, however many bumps it makes), with the version
    the transaction's last write left. `claimed_at`: only while the ticket's claim is that
    stamp (else `ClaimLost`, nothing written) — a run's first write and its claim check in one.
    `stamps`: the tables the caller's transaction writes (see the module's docstring).
    `wake` (with `turn`): the agent's wake-up marked at the new turn in the same statement.
    """
    sql, params = _bump_sql(turn=turn, claimed=claimed_at is not None, stamps=stamps, wake=wake)
    with connection.cursor() as cursor:
        cursor.execute(sql, [*params, ticket_id, *_claim_param(claimed_at)])
        row = cursor.fetchone()
    if row is None:
        raise _missed(ticket_id, claimed_at)
    ticket_changed(ticket_id, row[1])
    return row[0], row[1]


def _insert_sql(row, counted: str, name: str) -> tuple[str, list]:
    """An INSERT of the unsaved `row` for a bump's `WITH`: its `counted` field (if any) the turn
    counter the bump `b` returned, the rest its own values."""
    meta = type(row)._meta
    columns, values, params = [], [], []
    for f in meta.concrete_fields:
        if f.primary_key:
            continue
        columns.append(connection.ops.quote_name(f.column))
        if f.attname == counted:
            values.append('b."last_turn_number"')
        else:
            values.append("%s")
            params.append(f.get_db_prep_save(f.pre_save(row, True), connection))
    table, pk = connection.ops.quote_name(meta.db_table), connection.ops.quote_name(meta.pk.column)
    return (
        f"{name} AS (INSERT INTO {table} ({', '.join(columns)}) SELECT {', '.join(values)} FROM b RETURNING {pk})",
        params,
    )


def bump_inserting(
    row, *, number: str = "number", claimed_at=None, stamps=(ALL,), wake: bool = False, also=(), through=None
) -> tuple[int, int] | None:
    """Bump the turn counter and insert `row` (an unsaved model instance of a table numbered by
    it, in `number`) in one statement, PostgreSQL only: the bump as `bump(turn=True)`, the row
    numbered by the counter it returned (`wake`: as `bump`'s). Sets the row's primary key and
    number; returns (number, version). The caller sends the row's save signals (no `save()` ran).

    `also`: more unsaved rows written by the same statement, as (row, field) — `field` (or None)
    given the new turn number —, each given its primary key: a write that rides on the bump costs
    no round trip of its own. `through`: only while the ticket's last turn is still that number
    (nothing came since the writer read it); else nothing is written and None is returned — the
    caller takes its slower path, which tells a lost claim from a turn that came meanwhile."""
    bump_sql, stamp_params = _bump_sql(
        turn=True, claimed=claimed_at is not None, stamps=stamps, wake=wake, through=through is not None
    )
    inserts, insert_params = [], []
    for i, (each, counted) in enumerate(((row, number), *also)):
        sql, params = _insert_sql(each, counted, f"r{i}")
        inserts.append(sql)
        insert_params += params
    keys = ", ".join(f"r{i}.*" for i in range(len(inserts)))
    sql = (
        f"WITH b AS ({bump_sql}), {', '.join(inserts)} "
        f'SELECT {keys}, b."last_turn_number", b."version" FROM {", ".join(f"r{i}" for i in range(len(inserts)))} '
        "CROSS JOIN b"
    )
    condition = [*_claim_param(claimed_at), *([] if through is None else [through])]
    with connection.cursor() as cursor:
        cursor.execute(sql, [*stamp_params, row.ticket_id, *condition, *insert_params])
        got = cursor.fetchone()
    if got is None:
        if through is not None:
            return None
        raise _missed(row.ticket_id, claimed_at)
    *pks, found, version = got
    for (each, counted), pk in zip(((row, number), *also), pks, strict=True):
        each.pk = pk
        if counted:
            setattr(each, counted, found)
        each._state.adding, each._state.db = False, connection.alias
    ticket_changed(row.ticket_id, version)
    return found, version


def ticket_touch(ticket_id: int, *stamps: str) -> int:
    """Something the ticket's panels show changed (inside the caller's transaction): bump, push; the
    new version. `stamps`: the tables the transaction writes (none named: `ALL`)."""
    return bump(ticket_id, stamps=stamps or (ALL,))[1]


def ticket_update(ticket_id: int, *, where: dict | None = None, **fields) -> bool:
    """Write the ticket row's own fields with its version bump, in one UPDATE; push after commit.

    `where` adds conditions (`attention=""`: raise a flag only if none is up);
    returns whether the row matched them and was written.
    """
    updated = Ticket.objects.filter(pk=ticket_id, **(where or {})).update(
        version=F("version") + 1, stamps=Stamped(ALL), **fields
    )
    if not updated:
        return False
    ticket_changed(ticket_id)
    return True


def ticket_class_touch(class_id: int) -> int:
    """A class's budget or models changed: every ticket of it shows them (the Budget panel).

    All its tickets are bumped in one UPDATE, so no cached rendering of any of
    them is served again; the ones not closed are pushed after commit (a closed
    ticket's page catches up on its periodic version check). Returns how many
    were pushed.
    """
    tickets = Ticket.objects.filter(ticket_class_id=class_id)
    tickets.update(version=F("version") + 1, stamps=Stamped(ALL))
    open_ids = list(tickets.exclude(status=Ticket.Status.CLOSED).values_list("pk", flat=True))
    # One after-commit callback for all of them; each push then runs at once.
    transaction.on_commit(lambda: [ticket_changed(ticket_id) for ticket_id in open_ids])
    return len(open_ids)


def ticket_version(ticket_id: int) -> int | None:
    return Ticket.objects.filter(pk=ticket_id).values_list("version", flat=True).first()
