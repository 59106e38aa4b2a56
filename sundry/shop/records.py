"""The shop's answers to the desk's questions about its records (`tooling.records`): orders.

The desk's customer card lists a customer's recent orders, its search finds the
customer who owns an order number, the approval card shows an order's lines and
money beside a held call, and the customer's page lists their orders to pick
from and says what was done on their case. All of it is read here, from the
shop's tables, and handed over as plain data; the desk never imports the shop.
Registered by the shop's app (`ShopConfig.ready`).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime

from django.contrib.postgres.expressions import ArraySubquery
from django.db import connection
from django.db.models import OuterRef
from django.db.models.functions import JSONObject
from django.utils import timezone

from sundry.core.money import format_money
from sundry.shop import selectors
from sundry.shop.ids import DOMAIN_NAME
from sundry.shop.models import Cancellation, Order, OrderItem, Parcel, Payment, Refund, Return, TrackingEvent
from sundry.tooling import records as r
from sundry.tooling.records import Done, RecordFacts, RecordRow, Records, RecordState

# What each order status says is true of it (a delivered order was shipped, and so on).
_STATUSES = {
    Order.Status.PLACED: {r.PLACED},
    Order.Status.SHIPPED: {r.SHIPPED},
    Order.Status.DELIVERED: {r.SHIPPED, r.DELIVERED},
    Order.Status.CANCELLED: {r.CANCELLED},
    Order.Status.RETURNED: {r.SHIPPED, r.DELIVERED, r.RETURNED},
}
_PARCEL = {
    Parcel.Status.IN_TRANSIT: {r.SHIPPED},
    Parcel.Status.OUT_FOR_DELIVERY: {r.SHIPPED},
    Parcel.Status.DELIVERED: {r.SHIPPED, r.DELIVERED},
    Parcel.Status.LOST: {r.SHIPPED, r.LOST},
}


def _days(at) -> set:
    """The day of a moment, in the shop's time zone and in UTC (a tool result shows the UTC one)."""
    return {timezone.localtime(at).date(), at.astimezone(UTC).date()}


def _state_query(number: str):
    order = OuterRef("pk")

    def rows(queryset, **fields):
        return ArraySubquery(queryset.filter(order_id=order).order_by("pk").values(row=JSONObject(**fields)))

    def column(queryset, name):
        return ArraySubquery(queryset.filter(order_id=order).order_by("pk").values(name))

    events = TrackingEvent.objects.filter(parcel__order_id=order).order_by("pk")
    return (
        Order.objects.filter(number=number)
        .annotate(
            state_parcels=column(Parcel.objects, "status"),
            state_refunds=rows(Refund.objects, status="status", amount="amount_cents", at="created_at"),
            state_events=ArraySubquery(events.values(row=JSONObject(at="at", what="description"))),
            state_returns=column(Return.objects, "created_at"),
            state_cancelled=column(Cancellation.objects, "created_at"),
            state_payments=rows(Payment.objects, status="status", amount="amount_cents"),
            state_items=rows(OrderItem.objects, price="unit_price_cents", quantity="quantity"),
        )
        .order_by("pk")
        .values_list(
            "status",
            "placed_at",
            "total_cents",
            "currency",
            "state_parcels",
            "state_refunds",
            "state_events",
            "state_returns",
            "state_cancelled",
            "state_payments",
            "state_items",
        )[:1]
    )


# The statement, compiled once per process (building it through the ORM costs more than running
# it), its parameters with the order's number held by `_ANY_ORDER`.
_ANY_ORDER = "\x00any order\x00"
_COMPILED: list[tuple[str, list]] = []


def _state_rows(number: str) -> tuple | None:
    """An order's status, placing, total and currency, and the rows its state is read from (parcels'
    statuses; refunds' status, amount and time; tracking events' time and text; returns' and
    cancellations' times; payments' status and amount; items' price and quantity), in one statement:
    a reply's statements are judged on them while the model writes (`agent.recordstates`)."""
    if not _COMPILED:
        sql, params = _state_query(_ANY_ORDER).query.sql_with_params()
        _COMPILED.append((sql, list(params)))
    sql, params = _COMPILED[0]
    with connection.cursor() as cursor:
        cursor.execute(sql, [number if p == _ANY_ORDER else p for p in params])
        got = cursor.fetchone()
    if got is None:
        return None
    status, placed_at, total, cur, parcels, refunds, events, returns, cancelled, payments, items = got
    refunds = [(o["status"], o["amount"], _moment(o["at"])) for o in map(_json, refunds)]
    events = [(_moment(o["at"]), o["what"]) for o in map(_json, events)]
    payments = [(o["status"], o["amount"]) for o in map(_json, payments)]
    items = [(o["price"], o["quantity"]) for o in map(_json, items)]
    return status, placed_at, total, cur, parcels, refunds, events, returns, cancelled, payments, items


def _state_rows_each(number: str) -> tuple | None:
    """`_state_rows` a read at a time (SQLite, which has no arrays)."""
    order = selectors.order_by_number(number)
    if order is None:
        return None
    return (
        order.status,
        order.placed_at,
        order.total_cents,
        order.currency,
        [p.status for p in order.parcels.all()],
        [(f.status, f.amount_cents, f.created_at) for f in order.refunds.all()],
        list(TrackingEvent.objects.filter(parcel__order=order).values_list("at", "description")),
        [x.created_at for x in order.returns.all()],
        list(Cancellation.objects.filter(order=order).values_list("created_at", flat=True)),
        [(p.status, p.amount_cents) for p in order.payments.all()],
        [(i.unit_price_cents, i.quantity) for i in order.items.all()],
    )


def _json(value):
    """A JSON value as the driver gave it: Django has psycopg hand jsonb over as text."""
    return json.loads(value) if isinstance(value, str) else value


def _moment(text: str) -> datetime:
    """A timestamp as PostgreSQL writes it in JSON (ISO 8601, with its offset)."""
    return datetime.fromisoformat(text)


def _row(order: Order) -> RecordRow:
    return RecordRow(
        reference=order.number,
        placed_at=order.placed_at,
        status=order.get_status_display(),
        total=format_money(order.total_cents, order.currency),
    )


class ShopRecords(Records):
    """The demo shop's orders, as the desk and the customer's page show them."""

    def _theirs(self, external_key: str):
        return Order.objects.filter(customer__customer_id=external_key)

    def recent(self, external_key: str, limit: int) -> list[RecordRow]:
        return [_row(o) for o in self._theirs(external_key).order_by("-placed_at")[:limit]]

    def count(self, external_key: str) -> int:
        return self._theirs(external_key).count()

    def owners(self, reference: str) -> set[str]:
        return set(Order.objects.filter(number__iexact=reference).values_list("customer__customer_id", flat=True))

    def normalize(self, reference: str) -> str:
        return (reference or "").strip().upper()

    def owned(self, external_key: str, references: list[str]) -> list[str]:
        return list(self._theirs(external_key).filter(number__in=references).values_list("number", flat=True))

    def facts(self, reference: str) -> RecordFacts | None:
        order = selectors.order_by_number(reference) if reference else None
        if order is None:
            return None
        cur = order.currency
        return RecordFacts(
            reference=order.number,
            status=order.get_status_display(),
            items=tuple(
                {
                    "product": i.product.name,
                    "quantity": i.quantity,
                    "price": format_money(i.unit_price_cents * i.quantity, cur),
                }
                for i in order.items.all()
            ),
            figures=(
                ("Paid", format_money(selectors.captured_cents(order), cur)),
                ("Already refunded", format_money(selectors.refunded_cents(order), cur)),
                ("Still refundable", format_money(selectors.refundable_cents(order), cur)),
            ),
        )

    def state(self, reference: str) -> RecordState | None:
        number = self.normalize(reference) if reference else ""
        if not number:
            return None
        got = _state_rows(number) if connection.vendor == "postgresql" else _state_rows_each(number)
        if got is None:
            return None
        status, placed_at, total, cur, parcels, refunds, events, returns, cancelled, payments, items = got
        statuses = set(_STATUSES.get(status, ()))
        for parcel in parcels:
            statuses |= _PARCEL.get(parcel, set())
        issued = [(amount, at) for s, amount, at in refunds if s == Refund.Status.ISSUED]
        statuses |= {r.REFUNDED} if issued else set()
        dates = {(r.PLACED, d) for d in _days(placed_at)}
        if events:
            dates |= {(r.SHIPPED, d) for d in _days(min(at for at, _ in events))}
        dates |= {(r.DELIVERED, d) for at, what in events if "deliver" in what.lower() for d in _days(at)}
        if status == Order.Status.DELIVERED and events and r.DELIVERED not in {e for e, _ in dates}:
            dates |= {(r.DELIVERED, d) for d in _days(max(at for at, _ in events))}
        dates |= {(r.REFUNDED, d) for _, at in issued for d in _days(at)}
        dates |= {(r.RETURNED, d) for at in returns for d in _days(at)}
        for at in cancelled:
            dates |= {(r.CANCELLED, d) for d in _days(at)}
        paid = sum(amount for s, amount in payments if s == Payment.Status.CAPTURED)
        refunded = sum(amount for amount, _ in issued)
        figures = {total, paid, refunded, max(0, paid - refunded)}
        for price, quantity in items:
            figures |= {price, price * quantity}
        figures |= {amount for amount, _ in issued} | {amount for _, amount in payments}
        return RecordState(
            reference=number,
            statuses=frozenset(statuses),
            dates=tuple(sorted(dates)),
            figures=tuple(sorted((c, cur) for c in figures if c)),
        )

    def done(self, tool: str, result: dict, amount_cents: int | None, currency: str) -> Done | None:
        order = str(result.get("order_number") or "")
        if tool == "issue_refund" and amount_cents is not None:
            return Done(f"Refund of {format_money(amount_cents, currency)} on order {order}", order)
        if tool == "book_return":
            items = len(result.get("item_ids") or [])
            counted = f" ({items} item{'s' if items != 1 else ''})" if items else ""
            return Done(f"Return booked for order {order}{counted}", order)
        if tool == "cancel_order":
            refund = result.get("refund") or {}
            refunded = (
                f"; {format_money(refund['amount_cents'], refund['currency'])} refunded"
                if refund.get("amount_cents")
                else ""
            )
            return Done(f"Order {order} cancelled{refunded}", order)
        if tool == "offer_replacement" and result.get("product"):
            return Done(f"Replacement offered for the {result['product']} on order {order}", order)
        return None  # emails and phone-call logs: how the desk reached them, not something done on the case

    def held_title(self, tool: str, amount: str | None, reference: str) -> str:
        if tool == "issue_refund":
            return f"refund {amount or 'an amount'} on {reference or 'an order'}"
        if tool == "cancel_order":
            return f"cancel order {reference}"
        return super().held_title(tool, amount, reference)


RECORDS = ShopRecords(
    domain=DOMAIN_NAME, noun="order", plural="orders", reference_arg="order_number", pick_field="order_number"
)
