"""The shop's answers to the desk's questions about its records (`tooling.records`): orders.

The desk's customer card lists a customer's recent orders, its search finds the
customer who owns an order number, the approval card shows an order's lines and
money beside a held call, and the customer's page lists their orders to pick
from and says what was done on their case. All of it is read here, from the
shop's tables, and handed over as plain data; the desk never imports the shop.
Registered by the shop's app (`ShopConfig.ready`).
"""

from __future__ import annotations

from datetime import UTC

from django.utils import timezone

from sundry.core.money import format_money
from sundry.shop import selectors
from sundry.shop.ids import DOMAIN_NAME
from sundry.shop.models import Cancellation, Order, Parcel, Refund, TrackingEvent
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
        order = selectors.order_by_number(self.normalize(reference)) if reference else None
        if order is None:
            return None
        statuses = set(_STATUSES.get(order.status, ()))
        for parcel in order.parcels.all():
            statuses |= _PARCEL.get(parcel.status, set())
        refunds = [f for f in order.refunds.all() if f.status == Refund.Status.ISSUED]
        statuses |= {r.REFUNDED} if refunds else set()
        dates = {(r.PLACED, d) for d in _days(order.placed_at)}
        events = list(TrackingEvent.objects.filter(parcel__order=order).values_list("at", "description"))
        if events:
            dates |= {(r.SHIPPED, d) for d in _days(min(at for at, _ in events))}
        dates |= {(r.DELIVERED, d) for at, what in events if "deliver" in what.lower() for d in _days(at)}
        if order.status == Order.Status.DELIVERED and events and r.DELIVERED not in {e for e, _ in dates}:
            dates |= {(r.DELIVERED, d) for d in _days(max(at for at, _ in events))}
        dates |= {(r.REFUNDED, d) for f in refunds for d in _days(f.created_at)}
        dates |= {(r.RETURNED, d) for x in order.returns.all() for d in _days(x.created_at)}
        for at in Cancellation.objects.filter(order=order).values_list("created_at", flat=True):
            dates |= {(r.CANCELLED, d) for d in _days(at)}
        cur = order.currency
        paid = selectors.captured_cents(order)
        refunded = selectors.refunded_cents(order)
        figures = {order.total_cents, paid, refunded, max(0, paid - refunded)}
        for item in order.items.all():
            figures |= {item.unit_price_cents, item.unit_price_cents * item.quantity}
        figures |= {f.amount_cents for f in refunds} | {p.amount_cents for p in order.payments.all()}
        return RecordState(
            reference=order.number,
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
