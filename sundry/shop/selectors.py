"""Read helpers over the shop for the agent's tools. No writes.

Each returns a model instance (or list of them) or None when nothing matches.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from datetime import datetime

from django.db.models import Prefetch, Sum

from sundry.core import sql

from .models import Customer, Order, OrderItem, Parcel, Payment, PaymentMethod, Product, Refund, Return


def customer_by_email(email: str) -> Customer | None:
    """The customer with this email (case-insensitive), or None."""
    email = (email or "").strip()
    if not email:
        return None
    return Customer.objects.filter(email__iexact=email).order_by("pk").first()


def customer_by_id(customer_id: str) -> Customer | None:
    """The customer with this exact `cus_…` identifier, or None."""
    if not customer_id:
        return None
    return Customer.objects.filter(customer_id=customer_id).first()


def orders_for_customer(customer_id: str, limit: int = 20) -> list[Order]:
    """The customer's most recent orders, newest first (at most `limit`)."""
    if not customer_id:
        return []
    return list(
        Order.objects.filter(customer__customer_id=customer_id)
        .select_related("customer", "address", "payment_method")
        .order_by("-placed_at", "-pk")[: max(0, int(limit))]
    )


def order_by_number(number: str) -> Order | None:
    """The order with this exact number (e.g. `SU-20481`), with its items, payments, parcels,
    refunds (and their payments) and returns (and their items) loaded; or None.

    Parcels' tracking events are not loaded: only `track_parcel` shows them, and it reads its own."""
    if not number:
        return None
    return (
        Order.objects.filter(number=number)
        .select_related("customer", "address", "payment_method")
        .prefetch_related(
            Prefetch("items", queryset=OrderItem.objects.select_related("product").order_by("pk")),
            Prefetch("payments", queryset=Payment.objects.select_related("method").order_by("created_at", "pk")),
            Prefetch("parcels", queryset=Parcel.objects.order_by("pk")),
            Prefetch("refunds", queryset=Refund.objects.select_related("payment").order_by("created_at", "pk")),
            Prefetch("returns", queryset=Return.objects.prefetch_related("items").order_by("created_at", "pk")),
        )
        .first()
    )


# --- an order as plain data, for reading only ---------------------------------------------


@dataclass(frozen=True)
class OrderView:
    """What `get_order` shows of an order; rows are tuples in the field order named below."""

    number: str
    customer_id: str
    status: str
    currency: str
    total_cents: int
    placed_at: datetime
    items: list[tuple] = field(default_factory=list)  # item_id, sku, product name, quantity, unit price
    payments: list[tuple] = field(default_factory=list)  # payment_id, method id, method label, status, amount
    parcels: list[tuple] = field(default_factory=list)  # tracking_number, carrier, status
    refunds: list[tuple] = field(default_factory=list)  # refund_id, payment_id, amount, status, reason, created_at
    returns: list[tuple] = field(default_factory=list)  # return_id, sorted item_ids, status, reason


@functools.lru_cache(maxsize=4)
def _order_view_statements(vendor: str) -> list[tuple[str, str]]:
    """Each read as (plain SELECT, JSON expression for `sql.read_together`); all take the order number."""
    t, c, a = sql.table, sql.column, sql.aliased
    order_id = f"(SELECT {c(Order, 'id')} FROM {t(Order)} WHERE {c(Order, 'number')} = %s)"
    through = Return.items.through
    reads = [  # (columns, FROM … WHERE …, ORDER BY)
        (f"{a('o', Order, ('number',))}, {a('c', Customer, ('customer_id',))},"
         f" {a('o', Order, ('status', 'currency', 'total_cents', 'placed_at'))}",
         f"{t(Order)} o JOIN {t(Customer)} c ON c.{c(Customer, 'id')} = o.{c(Order, 'customer')}"
         f" WHERE o.{c(Order, 'number')} = %s", ""),
        (f"{a('i', OrderItem, ('item_id',))}, {a('p', Product, ('sku', 'name'))},"
         f" {a('i', OrderItem, ('quantity', 'unit_price_cents'))}",
         f"{t(OrderItem)} i JOIN {t(Product)} p ON p.{c(Product, 'id')} = i.{c(OrderItem, 'product')}"
         f" WHERE i.{c(OrderItem, 'order')} = {order_id}", f"i.{c(OrderItem, 'id')}"),
        (f"{a('y', Payment, ('payment_id',))}, {a('m', PaymentMethod, ('payment_method_id', 'label'))},"
         f" {a('y', Payment, ('status', 'amount_cents'))}",
         f"{t(Payment)} y JOIN {t(PaymentMethod)} m ON m.{c(PaymentMethod, 'id')} = y.{c(Payment, 'method')}"
         f" WHERE y.{c(Payment, 'order')} = {order_id}", f"y.{c(Payment, 'created_at')}, y.{c(Payment, 'id')}"),
        (sql.columns(Parcel, ("tracking_number", "carrier", "status")),
         f"{t(Parcel)} WHERE {c(Parcel, 'order')} = {order_id}", c(Parcel, "id")),
        (f"{a('r', Refund, ('refund_id',))}, {a('y', Payment, ('payment_id',))},"
         f" {a('r', Refund, ('amount_cents', 'status', 'reason', 'created_at'))}",
         f"{t(Refund)} r JOIN {t(Payment)} y ON y.{c(Payment, 'id')} = r.{c(Refund, 'payment')}"
         f" WHERE r.{c(Refund, 'order')} = {order_id}", f"r.{c(Refund, 'created_at')}, r.{c(Refund, 'id')}"),
        # One row per returned item (or one with no item): grouped below.
        (f"{a('r', Return, ('id', 'return_id', 'status', 'reason'))}, {a('i', OrderItem, ('item_id',))}",
         f"{t(Return)} r LEFT JOIN {t(through)} ri ON ri.{c(through, 'return')} = r.{c(Return, 'id')}"
         f" LEFT JOIN {t(OrderItem)} i ON i.{c(OrderItem, 'id')} = ri.{c(through, 'orderitem')}"
         f" WHERE r.{c(Return, 'order')} = {order_id}", f"r.{c(Return, 'created_at')}, r.{c(Return, 'id')}, i.{c(OrderItem, 'id')}"),
    ]
    return [(sql.plain_select(*read), sql.json_select(*read)) for read in reads]


def order_view(number: str) -> OrderView | None:
    """The order with this exact number as plain data (one statement on PostgreSQL), or None.

    For reading only: the tools that change an order load it with `order_by_number`.
    """
    if not number:
        return None
    statements = _order_view_statements(sql.vendor())
    order, items, payments, parcels, refunds, return_rows = sql.read_together(
        [(plain, as_json, [number]) for plain, as_json in statements])
    if not order:
        return None
    returns: dict[int, list] = {}
    for pk, return_id, status, reason, item_id in return_rows:
        entry = returns.setdefault(pk, [return_id, [], status, reason])
        if item_id is not None:
            entry[1].append(item_id)
    number_, customer_id, status, currency, total, placed_at = order[0]
    return OrderView(number_, customer_id, status, currency, total, sql.json_time(placed_at),
                     items=[tuple(i) for i in items], payments=[tuple(p) for p in payments],
                     parcels=[tuple(p) for p in parcels],
                     refunds=[(*r[:5], sql.json_time(r[5])) for r in refunds],
                     returns=[(rid, sorted(ids), status, reason) for rid, ids, status, reason in returns.values()])


# The money helpers always ask the database, never a prefetched cache: an order
# loaded before a refund was issued must not report the old refundable amount.


def refunded_cents(order: Order) -> int:
    """Sum of the order's ISSUED refunds (failed refunds moved no money)."""
    total = Refund.objects.filter(order_id=order.pk, status=Refund.Status.ISSUED).aggregate(t=Sum("amount_cents"))["t"]
    return int(total or 0)


def captured_cents(order: Order) -> int:
    """Sum of the order's CAPTURED payments."""
    total = Payment.objects.filter(order_id=order.pk, status=Payment.Status.CAPTURED).aggregate(t=Sum("amount_cents"))["t"]
    return int(total or 0)


def refundable_cents(order: Order) -> int:
    """Captured payments minus issued refunds, never below 0."""
    return max(0, captured_cents(order) - refunded_cents(order))
