"""Reads that turn a ticket's stored lanes into a plain `LaneSnapshot`.

`lane_snapshot` runs at least once per agent step; it reads plain rows
(`values_list`), since the dataclasses below are all anyone keeps of them.
"""

from __future__ import annotations

from django.db.models import IntegerField, Subquery
from django.db.models.functions import Coalesce

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
LEDGER = ("role", "value", "kind", "verified", "first_seen_turn", "last_used_turn", "note", "used_in_call", "description",
          "superseded_by", "superseded_at_turn", "superseded_source", "customer", "identifies_customer")
STATE = ("name", "value", "turn", "source", "confirmed")
ACTION = ("tool", "target", "turn", "idempotency_key", "reversible", "amount_cents", "currency", "arguments")
MONEY = ("order", "currency", "paid_cents", "refunded_cents")
SUMMARY = ("covers_through_turn", "text", "fallback")
TURN = ("number", "author", "kind", "text", "payload", "tokens")


def _argument_values(arguments) -> tuple[str, ...]:
    """The plain values an action's arguments named (its order as well as its item), so what was done
    can be found by any record it touched."""
    values = arguments.values() if isinstance(arguments, dict) else ()
    return tuple(str(v) for v in values if isinstance(v, (str, int)) and not isinstance(v, bool) and str(v))


def lane_snapshot(ticket, *, with_turns: bool = True) -> LaneSnapshot:
    """The ticket's lanes as plain data (`ticket` with its class and customer loaded)."""
    tclass, pk = ticket.ticket_class, ticket.pk
    # Read first: a write that lands while the lanes are read leaves this older than
    # them, so a caller comparing versions later sees a change and reads afresh.
    version = Ticket.objects.filter(pk=pk).values_list("version", flat=True).first()
    snap = LaneSnapshot(
        ticket_id=pk,
        customer_id=ticket.customer.customer_id,
        class_policy=tclass.description,
        recent_turns_kept=tclass.recent_turns_kept,
        version=version,
        domain=domain_for(tclass).name,
    )
    turns = []
    if with_turns:
        # The turns after the current summary. Read before the summary itself: a summary only
        # ever moves forward, so should a compaction land between the two reads, these are a
        # superset of the turns after the summary read, never missing one (the rest are dropped).
        covered = Coalesce(Subquery(Summary.objects.filter(ticket_id=pk, is_current=True)
                                    .order_by("-covers_through_turn").values("covers_through_turn")[:1]), 0,
                           output_field=IntegerField())
        # Internal notes are staff-only: they never enter a request (or anything built from one).
        turns = list(Turn.objects.filter(ticket_id=pk, number__gt=covered).exclude(kind=Turn.Kind.INTERNAL)
                     .order_by("number").values_list(*TURN))
    summary = Summary.objects.filter(ticket_id=pk, is_current=True).order_by("-covers_through_turn").values_list(
        *SUMMARY).first()
    snap.rules = [
        RuleData(id=i, text=text, turn=turn, scope=scope, scope_ref=ref, source=source, enforcement=enf or {},
                 confirmed=status == PinnedRule.Status.ACTIVE)
        # Candidates too: a flagged rule is enforced until staff dismiss it (fail-safe).
        for i, text, turn, scope, ref, source, enf, status in PinnedRule.objects.filter(
            ticket_id=pk, status__in=(PinnedRule.Status.ACTIVE, PinnedRule.Status.CANDIDATE)).order_by(
                "turn", "id").values_list(*RULE)
    ]
    snap.ledger = [
        LedgerData(role=role, value=value, kind=kind, verified=verified, first_seen_turn=first,
                   last_used_turn=last, note=note, used=used, description=description,
                   superseded_by=by, superseded_turn=by_turn or 0, superseded_source=by_source,
                   customer=customer, identifies=identifies)
        for role, value, kind, verified, first, last, note, used, description, by, by_turn, by_source, customer, identifies
        in LedgerEntry.objects.filter(
            ticket_id=pk, status=LedgerEntry.Status.ACTIVE).order_by("first_seen_turn", "id").values_list(*LEDGER)
    ]
    snap.state = [
        StateFieldData(name=name, value=value, turn=turn, source=source, confirmed=confirmed)
        for name, value, turn, source, confirmed in StateValue.objects.filter(
            ticket_id=pk, is_current=True).order_by("name", "id").values_list(*STATE)
    ]
    snap.actions = [
        ActionData(tool=tool, target=target, turn=turn, idempotency_key=idem, reversible=reversible,
                   amount_cents=amount, currency=currency,
                   summary=(format_money(amount, currency) if amount else ""), on=_argument_values(arguments),
                   arguments_digest=arguments_digest(arguments or {}))
        for tool, target, turn, idem, reversible, amount, currency, arguments in ActionTaken.objects.filter(
            ticket_id=pk).order_by("turn", "id").values_list(*ACTION)
    ]
    snap.money = [
        MoneyData(order=order, currency=currency, paid_cents=paid, refunded_cents=refunded)
        for order, currency, paid, refunded in MoneyTotal.objects.filter(
            ticket_id=pk).order_by("order").values_list(*MONEY)
    ]
    covered = 0
    if summary:
        covered = summary[0]
        snap.summary = SummaryData(covers_through_turn=covered, text=summary[1], fallback=summary[2])
    snap.turns = [TurnData(number=n, author=author, kind=kind, text=text, payload=payload or {}, tokens=tokens)
                  for n, author, kind, text, payload, tokens in turns if n > covered]
    return snap
