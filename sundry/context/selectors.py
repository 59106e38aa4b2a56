"""Reads that turn a ticket's stored lanes into a plain `LaneSnapshot`.

`lane_snapshot` runs at least once per agent step; it reads plain rows
(`values_list`, or JSON objects on PostgreSQL, all lanes in one statement), since
the dataclasses below are all anyone keeps of them.
"""

from __future__ import annotations

import json
from collections.abc import Callable

from django.contrib.postgres.expressions import ArraySubquery
from django.db import connection
from django.db.models import IntegerField, Subquery
from django.db.models.functions import Coalesce, JSONObject

from sundry.context.lanes import (
    ActionData,
    LaneSnapshot,
    LedgerData,
    MoneyData,
    RuleData,
    StateFieldData,
    SummaryData,
    TurnData,
)
from sundry.context.models import ActionTaken, LedgerEntry, MoneyTotal, PinnedRule, StateValue, Summary
from sundry.core.money import format_money
from sundry.tickets.models import Ticket, Turn
from sundry.tooling.domain import arguments_digest, domain_for


def current_summary(ticket) -> Summary | None:
    return Summary.objects.filter(ticket=ticket, is_current=True).first()


RULE = ("id", "text", "turn", "scope", "scope_ref", "source", "enforcement", "status")
LEDGER = (
    "role",
    "value",
    "kind",
    "verified",
    "first_seen_turn",
    "last_used_turn",
    "note",
    "used_in_call",
    "description",
    "superseded_by",
    "superseded_at_turn",
    "superseded_source",
    "customer",
    "identifies_customer",
)
STATE = ("name", "value", "turn", "source", "confirmed")
ACTION = ("tool", "target", "turn", "idempotency_key", "reversible", "amount_cents", "currency", "arguments")
MONEY = ("order", "currency", "paid_cents", "refunded_cents")
SUMMARY = ("covers_through_turn", "text", "fallback")
TURN = ("number", "author", "kind", "text", "payload", "tokens")

# Rows a layer above reads beside the lanes, in the same statement: name → (its query for a
# ticket's id, its fields). Their owners register them when imported (the agent's open cards and
# holds); a snapshot reads the ones its caller names (`also`) into `LaneSnapshot.also`.
ALSO: dict[str, tuple[Callable[[int], object], tuple[str, ...]]] = {}


def _argument_values(arguments) -> tuple[str, ...]:
    """The plain values an action's arguments named (its order as well as its item), so what was done
    can be found by any record it touched."""
    values = arguments.values() if isinstance(arguments, dict) else ()
    return tuple(str(v) for v in values if isinstance(v, (str, int)) and not isinstance(v, bool) and str(v))


def lane_snapshot(ticket, *, with_turns: bool = True, also: tuple[str, ...] = ()) -> LaneSnapshot:
    """The ticket's lanes as plain data (`ticket` with its class and customer loaded), and the
    rows of the `ALSO` queries named in `also`, as tuples of their fields.

    On PostgreSQL one statement reads them all (`_rows_at_once`), so every lane and the version
    come from one snapshot of the database; elsewhere (SQLite) one read per lane (`_rows_each`)."""
    tclass, pk = ticket.ticket_class, ticket.pk
    unknown = [name for name in also if name not in ALSO]
    if unknown:
        raise ValueError(f"no rows named {', '.join(unknown)} are registered to read with the lanes")
    rows = (_rows_at_once if connection.vendor == "postgresql" else _rows_each)(pk, with_turns, tuple(also))
    snap = LaneSnapshot(
        ticket_id=pk,
        customer_id=ticket.customer.external_key,
        class_policy=tclass.description,
        recent_turns_kept=tclass.recent_turns_kept,
        version=rows["version"],
        domain=domain_for(tclass).name,
    )
    snap.rules = [
        RuleData(
            id=i,
            text=text,
            turn=turn,
            scope=scope,
            scope_ref=ref,
            source=source,
            enforcement=enf or {},
            confirmed=status == PinnedRule.Status.ACTIVE,
        )
        for i, text, turn, scope, ref, source, enf, status in rows["rules"]
    ]
    snap.ledger = [
        LedgerData(
            role=role,
            value=value,
            kind=kind,
            verified=verified,
            first_seen_turn=first,
            last_used_turn=last,
            note=note,
            used=used,
            description=description,
            superseded_by=by,
            superseded_turn=by_turn or 0,
            superseded_source=by_source,
            customer=customer,
            identifies=identifies,
        )
        for role, value, kind, verified, first, last, note, used, description, by, by_turn, by_source, customer, identifies in rows[
            "ledger"
        ]
    ]
    snap.state = [
        StateFieldData(name=name, value=value, turn=turn, source=source, confirmed=confirmed)
        for name, value, turn, source, confirmed in rows["state"]
    ]
    snap.actions = [
        ActionData(
            tool=tool,
            target=target,
            turn=turn,
            idempotency_key=idem,
            reversible=reversible,
            amount_cents=amount,
            currency=currency,
            summary=(format_money(amount, currency) if amount else ""),
            on=_argument_values(arguments),
            arguments_digest=arguments_digest(arguments or {}),
        )
        for tool, target, turn, idem, reversible, amount, currency, arguments in rows["actions"]
    ]
    snap.money = [
        MoneyData(order=order, currency=currency, paid_cents=paid, refunded_cents=refunded)
        for order, currency, paid, refunded in rows["money"]
    ]
    covered = 0
    if rows["summary"]:
        covered, text, fallback = rows["summary"][0]
        snap.summary = SummaryData(covers_through_turn=covered, text=text, fallback=fallback)
    snap.turns = [
        TurnData(number=n, author=author, kind=kind, text=text, payload=payload or {}, tokens=tokens)
        for n, author, kind, text, payload, tokens in rows["turns"]
        if n > covered
    ]
    snap.also = {name: rows[name] for name in also}
    return snap


def _lanes(pk, also: tuple[str, ...] = ()):
    """Each lane's rows as the snapshot reads them, in its order (a query per lane, not yet run),
    and the `ALSO` queries named."""
    return {name: (ALSO[name][0](pk), ALSO[name][1]) for name in also} | {
        # Candidates too: a flagged rule is enforced until staff dismiss it (fail-safe).
        "rules": (
            PinnedRule.objects.filter(
                ticket_id=pk, status__in=(PinnedRule.Status.ACTIVE, PinnedRule.Status.CANDIDATE)
            ).order_by("turn", "id"),
            RULE,
        ),
        "ledger": (
            LedgerEntry.objects.filter(ticket_id=pk, status=LedgerEntry.Status.ACTIVE).order_by(
                "first_seen_turn", "id"
            ),
            LEDGER,
        ),
        "state": (StateValue.objects.filter(ticket_id=pk, is_current=True).order_by("name", "id"), STATE),
        "actions": (ActionTaken.objects.filter(ticket_id=pk).order_by("turn", "id"), ACTION),
        "money": (MoneyTotal.objects.filter(ticket_id=pk).order_by("order"), MONEY),
        "summary": (
            Summary.objects.filter(ticket_id=pk, is_current=True).order_by("-covers_through_turn")[:1],
            SUMMARY,
        ),
    }


def _turns(pk):
    """The turns after the current summary, in order. Internal notes are staff-only: they never
    enter a request (or anything built from one)."""
    covered = Coalesce(
        Subquery(
            Summary.objects.filter(ticket_id=pk, is_current=True)
            .order_by("-covers_through_turn")
            .values("covers_through_turn")[:1]
        ),
        0,
        output_field=IntegerField(),
    )
    return Turn.objects.filter(ticket_id=pk, number__gt=covered).exclude(kind=Turn.Kind.INTERNAL).order_by("number")


# The one statement, compiled once per process (building it through the ORM costs more than
# running it): its SQL, its parameters with the ticket's id held by `_ANY_TICKET`, and each
# lane's fields in its order — the querysets are built only to compile it.
_ANY_TICKET = -7_000_000_001
_COMPILED: dict[tuple[bool, tuple[str, ...]], tuple[str, list, dict[str, tuple[str, ...]]]] = {}


def _compiled(with_turns: bool, also: tuple[str, ...]) -> tuple[str, list, dict[str, tuple[str, ...]]]:
    compiled = _COMPILED.get((with_turns, also))
    if compiled is None:
        lanes = _lanes(_ANY_TICKET, also) | ({"turns": (_turns(_ANY_TICKET), TURN)} if with_turns else {})
        arrays = {
            f"lane_{name}": ArraySubquery(qs.values(row=JSONObject(**{f: f for f in fields})))
            for name, (qs, fields) in lanes.items()
        }
        query = Ticket.objects.filter(pk=_ANY_TICKET).order_by().annotate(**arrays).values("version", *arrays)
        sql, params = query.query.sql_with_params()
        fields = {name: lane_fields for name, (_, lane_fields) in lanes.items()}
        compiled = _COMPILED[(with_turns, also)] = (sql, list(params), fields)
    return compiled


def _rows_at_once(pk: int, with_turns: bool, also: tuple[str, ...] = ()) -> dict:
    """One statement: the ticket's version, and each lane as an array of JSON objects in its order."""
    sql, params, lanes = _compiled(with_turns, also)
    with connection.cursor() as cursor:
        cursor.execute(sql, [pk if p == _ANY_TICKET else p for p in params])
        row = cursor.fetchone()
        names = [c[0] for c in cursor.description]
    if row is None:  # no such ticket (deleted meanwhile): no version, empty lanes
        return {"version": None} | {name: [] for name in (*lanes, "turns")}
    got = dict(zip(names, row))
    rows = {
        name: [tuple(o[f] for f in fields) for o in map(_json, got[f"lane_{name}"] or ())]
        for name, fields in lanes.items()
    }
    return rows | {"version": got["version"], "turns": rows.get("turns", [])}


def _json(value):
    """A JSON value as the driver gave it: Django has psycopg hand jsonb over as text."""
    return json.loads(value) if isinstance(value, str) else value


def _rows_each(pk: int, with_turns: bool, also: tuple[str, ...] = ()) -> dict:
    # The version first: a write that lands while the lanes are read leaves it older than them,
    # so a caller comparing versions later sees a change and reads afresh. The turns before the
    # summary: a summary only moves forward, so should a compaction land between the two reads,
    # the turns are a superset of those after the summary read (the rest are dropped).
    version = Ticket.objects.filter(pk=pk).values_list("version", flat=True).first()
    turns = list(_turns(pk).values_list(*TURN)) if with_turns else []
    return {"version": version, "turns": turns} | {
        name: list(qs.values_list(*fields)) for name, (qs, fields) in _lanes(pk, also).items()
    }
