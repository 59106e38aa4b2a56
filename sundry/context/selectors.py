"""Reads that turn a ticket's stored lanes into a plain `LaneSnapshot`.

`lane_snapshot` runs at least once per agent step, so it reads with plain SQL
built once per process from the models' own table and column names: the ORM
spent most of a step's read time compiling eight querysets and building model
instances that were thrown away for the dataclasses below.
"""

from __future__ import annotations

import functools
import json

from django.db import connection

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
from sundry.tickets.models import Turn


def current_summary(ticket) -> Summary | None:
    return Summary.objects.filter(ticket=ticket, is_current=True).first()


def _select(model, fields: tuple[str, ...], where: str, order: tuple[str, ...], limit: str = "") -> str:
    q = connection.ops.quote_name
    columns = ", ".join(q(model._meta.get_field(f).column) for f in fields)
    ordering = ", ".join(f"{q(model._meta.get_field(f.lstrip('-')).column)}{' DESC' if f.startswith('-') else ''}"
                         for f in order)
    return f"SELECT {columns} FROM {q(model._meta.db_table)} WHERE {where} ORDER BY {ordering} {limit}".strip()


RULE = ("id", "text", "turn", "scope", "scope_ref", "source", "enforcement")
LEDGER = ("role", "value", "kind", "verified", "first_seen_turn", "last_used_turn", "note", "used_in_call")
STATE = ("name", "value", "turn", "source", "confirmed")
ACTION = ("tool", "target", "turn", "idempotency_key", "reversible", "amount_cents", "currency")
MONEY = ("order", "currency", "paid_cents", "refunded_cents")
QUESTION = ("text", "turn")
SUMMARY = ("covers_through_turn", "text", "fallback")
TURN = ("number", "author", "kind", "text", "payload", "tokens")


@functools.lru_cache(maxsize=4)
def _statements(vendor: str) -> dict[str, str]:
    """The lane reads, in the models' own names and orderings (one set per database vendor)."""
    return {
        "summary": _select(Summary, SUMMARY, "ticket_id = %s AND is_current", ("-covers_through_turn",), "LIMIT 1"),
        "rules": _select(PinnedRule, RULE, "ticket_id = %s AND status = %s", ("turn", "id")),
        "ledger": _select(LedgerEntry, LEDGER, "ticket_id = %s AND status = %s", ("first_seen_turn", "id")),
        "state": _select(StateValue, STATE, "ticket_id = %s AND is_current", ("name", "id")),
        "actions": _select(ActionTaken, ACTION, "ticket_id = %s", ("turn", "id")),
        "money": _select(MoneyTotal, MONEY, "ticket_id = %s", ("order",)),
        "questions": _select(OpenQuestion, QUESTION, "ticket_id = %s AND resolved_at_turn IS NULL", ("turn", "id")),
        "turns": _select(Turn, TURN, "ticket_id = %s AND number > %s", ("number",)),
    }


def _json(value):
    # PostgreSQL's driver decodes JSON columns; SQLite hands back the text.
    return json.loads(value) if isinstance(value, str) else (value if value is not None else {})


def lane_snapshot(ticket, *, with_turns: bool = True) -> LaneSnapshot:
    tclass = ticket.ticket_class
    sql = _statements(connection.vendor)
    with connection.cursor() as cursor:
        def rows(name: str, *params):
            cursor.execute(sql[name], [ticket.pk, *params])
            return cursor.fetchall()

        summary = rows("summary")
        covered = summary[0][0] if summary else 0
        snap = LaneSnapshot(
            ticket_id=ticket.pk,
            customer_id=ticket.customer.customer_id,
            class_policy=tclass.description,
            recent_turns_kept=tclass.recent_turns_kept,
        )
        snap.rules = [
            RuleData(id=i, text=text, turn=turn, scope=scope, scope_ref=ref, source=source, enforcement=_json(enf))
            for i, text, turn, scope, ref, source, enf in rows("rules", PinnedRule.Status.ACTIVE)
        ]
        snap.ledger = [
            LedgerData(role=role, value=value, kind=kind, verified=bool(verified), first_seen_turn=first,
                       last_used_turn=last, note=note, used=bool(used))
            for role, value, kind, verified, first, last, note, used in rows("ledger", LedgerEntry.Status.ACTIVE)
        ]
        snap.state = [
            StateFieldData(name=name, value=value, turn=turn, source=source, confirmed=bool(confirmed))
            for name, value, turn, source, confirmed in rows("state")
        ]
        snap.actions = [
            ActionData(tool=tool, target=target, turn=turn, idempotency_key=key, reversible=bool(reversible),
                       amount_cents=amount, currency=currency,
                       summary=(format_amount(amount, currency) if amount else ""))
            for tool, target, turn, key, reversible, amount, currency in rows("actions")
        ]
        snap.money = [
            MoneyData(order=order, currency=currency, paid_cents=paid, refunded_cents=refunded)
            for order, currency, paid, refunded in rows("money")
        ]
        snap.questions = [QuestionData(text=text, turn=turn) for text, turn in rows("questions")]
        if summary:
            snap.summary = SummaryData(covers_through_turn=covered, text=summary[0][1], fallback=bool(summary[0][2]))
        if with_turns:
            snap.turns = [
                TurnData(number=n, author=author, kind=kind, text=text, payload=_json(payload), tokens=tokens)
                for n, author, kind, text, payload, tokens in rows("turns", covered)
            ]
    return snap
