"""Read helpers over the shop for the agent's tools. No writes.

Each returns a model instance (or list of them) or None when nothing matches.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from django.db.models import Prefetch, Sum

from .models import Customer, Order, OrderItem, Parcel, Payment, Refund, Return


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


def order_view(number: str) -> OrderView | None:
    """The order with this exact number as plain data, or None.

    For reading only: the tools that change an order load it with `order_by_number`.
    """
    if not number:
        return None
    order = (
        Order.objects.filter(number=number)
        .values_list("id", "number", "customer__customer_id", "status", "currency", "total_cents", "placed_at")
        .first()
    )
    if order is None:
        return None
    pk, *head = order
    items = (
        OrderItem.objects.filter(order_id=pk)
        .order_by("pk")
        .values_list("item_id", "product__sku", "product__name", "quantity", "unit_price_cents")
    )
    payments = (
        Payment.objects.filter(order_id=pk)
        .order_by("created_at", "pk")
        .values_list("payment_id", "method__payment_method_id", "method__label", "status", "amount_cents")
    )
    parcels = Parcel.objects.filter(order_id=pk).order_by("pk").values_list("tracking_number", "carrier", "status")
    refunds = (
        Refund.objects.filter(order_id=pk)
        .order_by("created_at", "pk")
        .values_list("refund_id", "payment__payment_id", "amount_cents", "status", "reason", "created_at")
    )
    returns: dict[int, list] = {}
    # One row per returned item (or one with no item): grouped here.
    for rid, return_id, status, reason, item_id in (
        Return.objects.filter(order_id=pk)
        .order_by("created_at", "pk", "items__pk")
        .values_list("pk", "return_id", "status", "reason", "items__item_id")
    ):
        entry = returns.setdefault(rid, [return_id, [], status, reason])
        if item_id is not None:
            entry[1].append(item_id)
    return OrderView(
        *head,
        items=list(items),
        payments=list(payments),
        parcels=list(parcels),
        refunds=list(refunds),
        returns=[(rid, sorted(ids), status, reason) for rid, ids, status, reason in returns.values()],
    )


# The money helpers always ask the database, never a prefetched cache: an order
# loaded before a refund was issued must not report the old refundable amount.


def refunded_cents(order: Order) -> int:
    """Sum of the order's ISSUED refunds (failed refunds moved no money)."""
    total = Refund.objects.filter(order_id=order.pk, status=Refund.Status.ISSUED).aggregate(t=Sum("amount_cents"))["t"]
    return int(total or 0)


def captured_cents(order: Order) -> int:
    """Sum of the order's CAPTURED payments."""
    total = Payment.objects.filter(order_id=order.pk, status=Payment.Status.CAPTURED).aggregate(t=Sum("amount_cents"))[
        "t"
    ]
    return int(total or 0)


def refundable_cents(order: Order) -> int:
    """Captured payments minus issued refunds, never below 0."""
    return max(0, captured_cents(order) - refunded_cents(order))
