"""Writes to the demo shop: refunds, returns, cancellations, customer contacts.

Every service owns its transaction and takes keyword-only arguments. Every one
that has a consequence takes an idempotency key: the same key replays the first
result instead of acting twice, also when retries race each other (SPEC §10).

Money paths lock the order row (`select_for_update`), so concurrent refunds on
one order are serialised and the refundable amount is re-read under the lock.
On SQLite the lock is a no-op, but its IMMEDIATE transactions serialise writers.
"""

from __future__ import annotations

import hashlib
import secrets
import string

from django.db import IntegrityError, transaction
from django.db.models import Sum
from django.utils import timezone

from sundry.core.money import format_money

from .models import Cancellation, Contact, Customer, Order, OrderItem, Payment, Refund, Return

_ALPHABET = string.digits + string.ascii_lowercase
_KEY_MAX = Refund._meta.get_field("idempotency_key").max_length


class ShopError(Exception):
    """A shop write was refused; the message says why and what would work."""


class NotFound(ShopError):
    pass


class InvalidRequest(ShopError):
    pass


class OrderStateError(ShopError):
    """The order's status does not allow this action."""


class RefundLimitExceeded(ShopError):
    pass


class CurrencyMismatch(ShopError):
    pass


class IdempotencyConflict(ShopError):
    """The key was already used for a different request."""


def _new_id(prefix: str, length: int = 10) -> str:
    return prefix + "".join(secrets.choice(_ALPHABET) for _ in range(length))


def _check_key(key: str) -> str:
    key = (key or "").strip()
    if not key:
        raise InvalidRequest("an idempotency key is required")
    if len(key) > _KEY_MAX:
        raise InvalidRequest(f"idempotency key longer than {_KEY_MAX} characters")
    return key


def derive_key(key: str, purpose: str) -> str:
    """A key for a sub-action of a keyed action; stable, and short enough to store."""
    derived = f"{key}:{purpose}"
    if len(derived) <= _KEY_MAX:
        return derived
    return f"{purpose}:{hashlib.sha256(key.encode()).hexdigest()}"[:_KEY_MAX]


def _lock_order(order_number: str) -> Order:
    order = Order.objects.select_for_update().filter(number=order_number).first()
    if order is None:
        raise NotFound(f"no order {order_number}")
    return order


def _payment_remaining(order: Order) -> list[tuple[Payment, int]]:
    """Captured payments of the order with what is still refundable on each, oldest first."""
    refunded = dict(
        Refund.objects.filter(order=order, status=Refund.Status.ISSUED)
        .values("payment_id")
        .annotate(total=Sum("amount_cents"))
        .values_list("payment_id", "total")
    )
    payments = Payment.objects.filter(order=order, status=Payment.Status.CAPTURED).order_by("created_at", "pk")
    return [(p, p.amount_cents - int(refunded.get(p.pk) or 0)) for p in payments]


# --- refunds -----------------------------------------------------------------


def _refund_replay(refund: Refund, *, order_number: str, amount_cents: int, currency: str) -> Refund:
    if refund.order.number != order_number or refund.amount_cents != amount_cents or refund.currency != currency:
        raise IdempotencyConflict(
            f"idempotency key already used for refund {refund.refund_id} of "
            f"{format_money(refund.amount_cents, refund.currency)} on order {refund.order.number}"
        )
    return refund


def _refund_by_key(key: str) -> Refund | None:
    return Refund.objects.select_related("order", "payment").filter(idempotency_key=key).first()


def refund_issue(*, order_number: str, amount_cents: int, currency: str, reason: str, idempotency_key: str) -> Refund:
    """Refund `amount_cents` of an order's captured payment; the same key returns the same refund."""
    key = _check_key(idempotency_key)
    request = {"order_number": order_number, "amount_cents": amount_cents, "currency": currency}
    if (existing := _refund_by_key(key)) is not None:
        return _refund_replay(existing, **request)
    if not isinstance(amount_cents, int) or isinstance(amount_cents, bool) or amount_cents <= 0:
        raise InvalidRequest("the refund amount must be a positive whole number of minor units")
    try:
        with transaction.atomic():
            order = _lock_order(order_number)
            # A retry that waited on the lock sees the first call's refund here.
            if (existing := _refund_by_key(key)) is not None:
                return _refund_replay(existing, **request)
            _check_refundable(order, amount_cents, currency)
            remaining = _payment_remaining(order)
            payment, room = max(remaining, key=lambda pr: pr[1])
            if amount_cents > room:
                raise RefundLimitExceeded(
                    f"a single refund can return at most {format_money(room, order.currency)} "
                    f"(what is left on payment {payment.payment_id}); split the refund"
                )
            return Refund.objects.create(
                refund_id=_new_id("rfd_"),
                order=order,
                payment=payment,
                amount_cents=amount_cents,
                currency=order.currency,
                reason=(reason or "")[:200],
                idempotency_key=key,
                created_at=timezone.now(),
            )
    except IntegrityError:
        # Two calls with one key raced past the lookups (the lock does not cover
        # a key reused on another order, nor SQLite): the loser re-reads the winner.
        existing = _refund_by_key(key)
        if existing is None:
            raise
        return _refund_replay(existing, **request)


def _check_refundable(order: Order, amount_cents: int, currency: str) -> None:
    if order.status == Order.Status.CANCELLED:
        raise OrderStateError(f"order {order.number} is cancelled; its captured payment was refunded on cancellation")
    if currency != order.currency:
        raise CurrencyMismatch(
            f"order {order.number} was paid in {order.currency}, not {currency}; refund in {order.currency}"
        )
    remaining = _payment_remaining(order)
    if not remaining:
        raise OrderStateError(f"order {order.number} has no captured payment to refund")
    paid = sum(p.amount_cents for p, _ in remaining)
    refundable = sum(room for _, room in remaining)
    if amount_cents > refundable:
        raise RefundLimitExceeded(
            f"refund of {format_money(amount_cents, currency)} exceeds what is still refundable on order {order.number}: "
            f"{format_money(refundable, currency)} (paid {format_money(paid, currency)}, "
            f"refunded {format_money(paid - refundable, currency)})"
        )


# --- returns -----------------------------------------------------------------


def _return_by_key(key: str) -> Return | None:
    return Return.objects.select_related("order").filter(idempotency_key=key).first()


def _return_replay(ret: Return, *, order_number: str, item_ids: set[str]) -> Return:
    booked = set(ret.items.values_list("item_id", flat=True))
    if ret.order.number != order_number or booked != item_ids:
        raise IdempotencyConflict(
            f"idempotency key already used for return {ret.return_id} on order {ret.order.number}"
        )
    return ret


def return_book(*, order_number: str, item_ids: list[str], reason: str, idempotency_key: str) -> Return:
    """Book a return of some of a delivered order's items; the same key returns the same return."""
    key = _check_key(idempotency_key)
    wanted = {i for i in (item_ids or []) if i}
    if not wanted:
        raise InvalidRequest("name at least one item_id to return")
    if (existing := _return_by_key(key)) is not None:
        return _return_replay(existing, order_number=order_number, item_ids=wanted)
    try:
        with transaction.atomic():
            order = _lock_order(order_number)
            if (existing := _return_by_key(key)) is not None:
                return _return_replay(existing, order_number=order_number, item_ids=wanted)
            if order.status != Order.Status.DELIVERED:
                raise OrderStateError(f"order {order.number} is {order.status}; only delivered orders can be returned")
            items = list(OrderItem.objects.filter(order=order, item_id__in=wanted))
            foreign = sorted(wanted - {i.item_id for i in items})
            if foreign:
                raise InvalidRequest(f"item(s) {', '.join(foreign)} are not part of order {order.number}")
            taken = Return.items.through.objects.filter(orderitem__in=items).values_list(
                "orderitem__item_id", "return__return_id"
            )
            if taken:
                listed = ", ".join(f"{item} (return {ret})" for item, ret in sorted(taken))
                raise InvalidRequest(f"already booked for return: {listed}")
            ret = Return.objects.create(
                return_id=_new_id("ret_"),
                order=order,
                reason=(reason or "")[:200],
                idempotency_key=key,
                created_at=timezone.now(),
            )
            ret.items.set(items)
            return ret
    except IntegrityError:
        existing = _return_by_key(key)
        if existing is None:
            raise
        return _return_replay(existing, order_number=order_number, item_ids=wanted)


# --- cancellation --------------------------------------------------------------


def _cancellation_by_key(key: str) -> Cancellation | None:
    return Cancellation.objects.select_related("order", "refund").filter(idempotency_key=key).first()


def _cancel_replay(cancellation: Cancellation, order_number: str) -> Cancellation:
    if cancellation.order.number != order_number:
        raise IdempotencyConflict(f"idempotency key already used to cancel order {cancellation.order.number}")
    return cancellation


def order_cancel(*, order_number: str, reason: str, idempotency_key: str) -> Cancellation:
    """Cancel a placed order and refund what was captured, in full; the same key replays."""
    key = _check_key(idempotency_key)
    if (existing := _cancellation_by_key(key)) is not None:
        return _cancel_replay(existing, order_number)
    try:
        with transaction.atomic():
            order = _lock_order(order_number)
            if (existing := _cancellation_by_key(key)) is not None:
                return _cancel_replay(existing, order_number)
            if order.status != Order.Status.PLACED:
                raise OrderStateError(
                    f"order {order.number} is {order.status}; only placed orders (not yet shipped) can be cancelled"
                )
            refundable = sum(room for _, room in _payment_remaining(order))
            refund = None
            if refundable > 0:
                # Nested in this transaction: the refund and the cancellation commit together.
                refund = refund_issue(
                    order_number=order.number,
                    amount_cents=refundable,
                    currency=order.currency,
                    reason=f"Order cancelled: {reason}"[:200],
                    idempotency_key=derive_key(key, "cancel-refund"),
                )
            order.status = Order.Status.CANCELLED
            order.save(update_fields=["status"])
            return Cancellation.objects.create(
                order=order, reason=(reason or "")[:200], refund=refund, idempotency_key=key, created_at=timezone.now()
            )
    except IntegrityError:
        existing = _cancellation_by_key(key)
        if existing is None:
            raise
        return _cancel_replay(existing, order_number)


# --- contacts ------------------------------------------------------------------


def _contact_record(
    *,
    kind: str,
    customer: Customer,
    key: str,
    body: str,
    subject: str = "",
    order: Order | None = None,
    item: OrderItem | None = None,
) -> Contact:
    def replay(contact: Contact) -> Contact:
        if contact.kind != kind or contact.customer_id != customer.pk:
            raise IdempotencyConflict(
                f"idempotency key already used for a {contact.get_kind_display()} to another request"
            )
        return contact

    if (existing := Contact.objects.filter(idempotency_key=key).first()) is not None:
        return replay(existing)
    try:
        with transaction.atomic():
            return Contact.objects.create(
                contact_id=_new_id("ctc_"),
                customer=customer,
                kind=kind,
                order=order,
                item=item,
                subject=subject[:200],
                body=body,
                idempotency_key=key,
                created_at=timezone.now(),
            )
    except IntegrityError:
        existing = Contact.objects.filter(idempotency_key=key).first()
        if existing is None:
            raise
        return replay(existing)


def _customer(customer_id: str) -> Customer:
    customer = Customer.objects.filter(customer_id=customer_id).first()
    if customer is None:
        raise NotFound(f"no customer {customer_id}")
    return customer


def email_send(*, customer_id: str, subject: str, body: str, idempotency_key: str) -> Contact:
    """Send (record) an email to the customer's address on file."""
    key = _check_key(idempotency_key)
    if not (subject or "").strip() or not (body or "").strip():
        raise InvalidRequest("an email needs a subject and a body")
    return _contact_record(
        kind=Contact.Kind.EMAIL, customer=_customer(customer_id), key=key, subject=subject, body=body
    )


def phone_call_log(*, customer_id: str, summary: str, idempotency_key: str) -> Contact:
    """Log a phone call with the customer."""
    key = _check_key(idempotency_key)
    if not (summary or "").strip():
        raise InvalidRequest("a phone call log needs a summary")
    return _contact_record(kind=Contact.Kind.PHONE_CALL, customer=_customer(customer_id), key=key, body=summary)


def replacement_offer(*, order_number: str, item_id: str, note: str, idempotency_key: str) -> Contact:
    """Record an offer to replace one item of an order."""
    key = _check_key(idempotency_key)
    order = Order.objects.select_related("customer").filter(number=order_number).first()
    if order is None:
        raise NotFound(f"no order {order_number}")
    item = OrderItem.objects.select_related("product").filter(order=order, item_id=item_id).first()
    if item is None:
        raise InvalidRequest(f"item {item_id} is not part of order {order.number}")
    if order.status == Order.Status.CANCELLED:
        raise OrderStateError(f"order {order.number} is cancelled; nothing to replace")
    return _contact_record(
        kind=Contact.Kind.REPLACEMENT_OFFER,
        customer=order.customer,
        key=key,
        order=order,
        item=item,
        subject=f"Replacement offer: {item.product.name}",
        body=note or "",
    )
