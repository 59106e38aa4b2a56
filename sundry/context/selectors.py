"""Reads that turn a ticket's stored lanes into a plain `LaneSnapshot`."""

from __future__ import annotations

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


def lane_snapshot(ticket, *, with_turns: bool = True) -> LaneSnapshot:
    tclass = ticket.ticket_class
    summary = current_summary(ticket)
    covered = summary.covers_through_turn if summary else 0
    snap = LaneSnapshot(
        ticket_id=ticket.pk,
        customer_id=ticket.customer.customer_id,
        class_policy=tclass.description,
        recent_turns_kept=tclass.recent_turns_kept,
    )
    snap.rules = [
        RuleData(id=r.pk, text=r.text, turn=r.turn, scope=r.scope, scope_ref=r.scope_ref, source=r.source,
                 enforcement=r.enforcement or {})
        for r in PinnedRule.objects.filter(ticket=ticket, status=PinnedRule.Status.ACTIVE)
    ]
    snap.ledger = [
        LedgerData(role=e.role, value=e.value, kind=e.kind, verified=e.verified, first_seen_turn=e.first_seen_turn,
                   last_used_turn=e.last_used_turn, note=e.note, used=e.used_in_call)
        for e in LedgerEntry.objects.filter(ticket=ticket, status=LedgerEntry.Status.ACTIVE)
    ]
    snap.state = [
        StateFieldData(name=v.name, value=v.value, turn=v.turn, source=v.source, confirmed=v.confirmed)
        for v in StateValue.objects.filter(ticket=ticket, is_current=True)
    ]
    snap.actions = [
        ActionData(tool=a.tool, target=a.target, turn=a.turn, idempotency_key=a.idempotency_key,
                   reversible=a.reversible, amount_cents=a.amount_cents, currency=a.currency,
                   summary=(format_amount(a.amount_cents, a.currency) if a.amount_cents else ""))
        for a in ActionTaken.objects.filter(ticket=ticket)
    ]
    snap.money = [
        MoneyData(order=m.order, currency=m.currency, paid_cents=m.paid_cents, refunded_cents=m.refunded_cents)
        for m in MoneyTotal.objects.filter(ticket=ticket)
    ]
    snap.questions = [
        QuestionData(text=q.text, turn=q.turn)
        for q in OpenQuestion.objects.filter(ticket=ticket, resolved_at_turn__isnull=True)
    ]
    if summary:
        snap.summary = SummaryData(covers_through_turn=covered, text=summary.text, fallback=summary.fallback)
    if with_turns:
        snap.turns = [
            TurnData(number=t.number, author=t.author, kind=t.kind, text=t.text, payload=t.payload, tokens=t.tokens)
            for t in Turn.objects.filter(ticket=ticket, number__gt=covered).order_by("number")
        ]
    return snap
