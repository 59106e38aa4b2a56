"""Reads that turn a ticket's stored lanes into a plain `LaneSnapshot`.

`lane_snapshot` runs at least once per agent step, so it reads with plain SQL
(`sundry.core.sql`): the ORM spent most of a step's read time compiling eight
querysets and building model instances that were thrown away for the
dataclasses below. On PostgreSQL the reads go in one round trip.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from sundry.context.lanes import (
    ActionData,
    LaneSnapshot,
    LedgerData,
    MoneyData,
    QuestionData,
    RuleData,
    StateFieldData,
    SummaryData,
    TurnData,
)
from sundry.context.models import ActionTaken, LedgerEntry, MoneyTotal, OpenQuestion, PinnedRule, StateValue, Summary
from sundry.context.statefields import format_amount
from sundry.core import sql
from sundry.core.readonce import once
from sundry.core.rowcache import AppendOnlyRows
from sundry.tickets.models import Ticket, Turn


def current_summary(ticket) -> Summary | None:
    return once(("current_summary", ticket.pk), lambda: Summary.objects.filter(ticket=ticket, is_current=True).first())


RULE = ("id", "text", "turn", "scope", "scope_ref", "source", "enforcement", "status")
LEDGER = ("role", "value", "kind", "verified", "first_seen_turn", "last_used_turn", "note", "used_in_call", "description")
STATE = ("name", "value", "turn", "source", "confirmed")
ACTION = ("tool", "target", "turn", "idempotency_key", "reversible", "amount_cents", "currency")
MONEY = ("order", "currency", "paid_cents", "refunded_cents")
QUESTION = ("text", "turn")
SUMMARY = ("covers_through_turn", "text", "fallback")
TURN = ("number", "author", "kind", "text", "payload", "tokens")


# The lane reads: (model, columns, where, ordering, limit). `_statements` makes each both a
# plain SELECT and a JSON expression (`sql.read_together`: one statement on PostgreSQL).
def _reads() -> dict[str, tuple]:
    covered = sql.select(Summary, ("covers_through_turn",), "ticket_id = %s AND is_current",
                         ("-covers_through_turn",), "LIMIT 1")
    return {
        # Read first: a write that lands while the lanes are read leaves this older than
        # them, so a caller comparing versions later sees a change and reads afresh.
        "version": (Ticket, ("version",), "id = %s", (), ""),
        "summary": (Summary, SUMMARY, "ticket_id = %s AND is_current", ("-covers_through_turn",), "LIMIT 1"),
        # Candidates too: a flagged rule is enforced until staff dismiss it (fail-safe).
        "rules": (PinnedRule, RULE, "ticket_id = %s AND status IN (%s, %s)", ("turn", "id"), ""),
        "ledger": (LedgerEntry, LEDGER, "ticket_id = %s AND status = %s", ("first_seen_turn", "id"), ""),
        "state": (StateValue, STATE, "ticket_id = %s AND is_current", ("name", "id"), ""),
        "actions": (ActionTaken, ACTION, "ticket_id = %s", ("turn", "id"), ""),
        "money": (MoneyTotal, MONEY, "ticket_id = %s", ("order",), ""),
        "questions": (OpenQuestion, QUESTION, "ticket_id = %s AND resolved_at_turn IS NULL", ("turn", "id"), ""),
        # The turns after the current summary. Read before the summary itself: a summary only
        # ever moves forward, so should a compaction land between the two reads, these are a
        # superset of the turns after the summary read, never missing one (the rest are dropped).
        # `number > %s` skips the turns already cached (see turn_cache).
        "turns": (Turn, TURN, f"ticket_id = %s AND number > %s AND number > COALESCE(({covered}), 0)", ("number",), ""),
    }


@functools.lru_cache(maxsize=4)
def _statements(vendor: str) -> dict[str, tuple[str, str]]:
    """Each lane read as (plain SELECT, JSON expression), in the models' own names and orderings."""
    return {name: (sql.select(*spec), sql.json_rows(*spec) if vendor == "postgresql" else "")
            for name, spec in _reads().items()}


# The turns a worker has already read, so a step reads only the new ones (see core.rowcache).
# A worker holds a few tickets at a time; a large-budget class leaves hundreds of turns
# uncovered (400 read whole: ~9 ms a step; from here: ~1.5 ms).
turn_cache = AppendOnlyRows(what="turns", tickets=64, rows_per_ticket=1000, rows=64 * 1000)


@dataclass
class SnapshotRead:
    """A lane snapshot's reads, to send alone (`lane_snapshot`) or with other statements (a run's opening)."""

    reads: list  # for sql.read_together
    names: list[str]
    key: tuple | None  # the turn cache's key the reads assumed
    cached: list  # the turns that key held


def snapshot_read(ticket_id: int, key: tuple | None, *, with_turns: bool = True) -> SnapshotRead:
    statements = _statements(sql.vendor())
    pk = ticket_id
    cached = turn_cache.get(key) if key else []
    known = cached[-1].number if cached else 0
    reads = [("version", [pk])] + ([("turns", [pk, known, pk])] if with_turns else []) + [
        ("summary", [pk]), ("rules", [pk, PinnedRule.Status.ACTIVE, PinnedRule.Status.CANDIDATE]), ("ledger", [pk, LedgerEntry.Status.ACTIVE]),
        ("state", [pk]), ("actions", [pk]), ("money", [pk]), ("questions", [pk])]
    return SnapshotRead(reads=[(*statements[n], p) for n, p in reads], names=[n for n, _ in reads], key=key,
                        cached=cached)


def snapshot_read_by_id(ticket_id: int) -> SnapshotRead:
    """The reads for a caller that has only the ticket's id so far (a run, claiming and loading it
    in the same round trip); `snapshot_from` checks the cache key against the loaded ticket."""
    return snapshot_read(ticket_id, None if sql.db().in_atomic_block else turn_cache.key_by_id(ticket_id))


def lane_snapshot(ticket, *, with_turns: bool = True) -> LaneSnapshot:
    read = snapshot_read(ticket.pk, turn_cache.key_for(ticket) if with_turns else None, with_turns=with_turns)
    snap = snapshot_from(ticket, read, sql.read_together(read.reads))
    return snap if snap is not None else lane_snapshot(ticket, with_turns=with_turns)


def snapshot_from(ticket, read: SnapshotRead, sets: list) -> LaneSnapshot | None:
    """The snapshot from what `read`'s reads returned; None if the turns they assumed were cached
    are not this ticket's, or did not run on (then read again)."""
    with_turns = "turns" in read.names
    key = turn_cache.key_for(ticket) if with_turns else None
    if read.key is not None and read.key != key:
        return None  # the cache held another ticket under this id (another database)
    cached = read.cached
    tclass, pk = ticket.ticket_class, ticket.pk
    got = dict(zip(read.names, sets))
    summary = got["summary"]
    snap = LaneSnapshot(
        ticket_id=pk,
        customer_id=ticket.customer.customer_id,
        class_policy=tclass.description,
        recent_turns_kept=tclass.recent_turns_kept,
        version=got["version"][0][0] if got["version"] else None,
    )
    snap.rules = [
        RuleData(id=i, text=text, turn=turn, scope=scope, scope_ref=ref, source=source, enforcement=sql.json_value(enf, {}),
                 confirmed=status == PinnedRule.Status.ACTIVE)
        for i, text, turn, scope, ref, source, enf, status in got["rules"]
    ]
    snap.ledger = [
        LedgerData(role=role, value=value, kind=kind, verified=bool(verified), first_seen_turn=first,
                   last_used_turn=last, note=note, used=bool(used), description=description)
        for role, value, kind, verified, first, last, note, used, description in got["ledger"]
    ]
    snap.state = [
        StateFieldData(name=name, value=value, turn=turn, source=source, confirmed=bool(confirmed))
        for name, value, turn, source, confirmed in got["state"]
    ]
    snap.actions = [
        ActionData(tool=tool, target=target, turn=turn, idempotency_key=idem, reversible=bool(reversible),
                   amount_cents=amount, currency=currency,
                   summary=(format_amount(amount, currency) if amount else ""))
        for tool, target, turn, idem, reversible, amount, currency in got["actions"]
    ]
    snap.money = [
        MoneyData(order=order, currency=currency, paid_cents=paid, refunded_cents=refunded)
        for order, currency, paid, refunded in got["money"]
    ]
    snap.questions = [QuestionData(text=text, turn=turn) for text, turn in got["questions"]]
    covered = 0
    if summary:
        covered = summary[0][0]
        snap.summary = SummaryData(covers_through_turn=covered, text=summary[0][1], fallback=bool(summary[0][2]))
    if with_turns:
        new = [TurnData(number=n, author=author, kind=kind, text=text, payload=sql.json_value(payload, {}), tokens=tokens)
               for n, author, kind, text, payload, tokens in got["turns"]]
        snap.turns = [t for t in cached if t.number > covered] + [t for t in new if t.number > covered]
        # Turns are numbered one after another, so those after the summary run on from it.
        if cached and any(t.number != covered + 1 + i for i, t in enumerate(snap.turns)):
            turn_cache.refuse()  # not what the cache promised: never trust it, read them all
            return None
        if key:
            turn_cache.put(key, snap.turns)
    return snap
