"""Shop write services: refunds, returns, cancellations, contacts — limits and idempotency."""

from __future__ import annotations

import threading

import pytest
from django.db import connection, connections
from django.db.models import Sum

from sundry.shop import services
from sundry.shop.models import Cancellation, Contact, Order, Payment, Refund, Return
from sundry.shop.services import (
    CurrencyMismatch,
    IdempotencyConflict,
    InvalidRequest,
    NotFound,
    OrderStateError,
    RefundLimitExceeded,
    ShopError,
)
from tests.factories import RefundFactory, ReturnFactory, paid_order

pytestmark = pytest.mark.django_db


def refund(order, cents, key, currency="USD", reason="damaged"):
    return services.refund_issue(
        order_number=order.number, amount_cents=cents, currency=currency, reason=reason, idempotency_key=key
    )


def total_refunded(order) -> int:
    return Refund.objects.filter(order=order, status="issued").aggregate(t=Sum("amount_cents"))["t"] or 0


# --- refunds -----------------------------------------------------------------------


def test_refund_issue_moves_money_on_the_captured_payment():
    order = paid_order()
    r = refund(order, 4000, "k1")
    assert r.refund_id.startswith("rfd_") and len(r.refund_id) >= 12
    assert (r.amount_cents, r.currency, r.payment.order_id, r.status) == (4000, "USD", order.pk, "issued")
    assert total_refunded(order) == 4000


def test_same_key_twice_is_one_refund():
    order = paid_order()
    first = refund(order, 4000, "same-key")
    second = refund(order, 4000, "same-key")
    assert second.refund_id == first.refund_id
    assert Refund.objects.filter(order=order).count() == 1
    assert total_refunded(order) == 4000


def test_same_key_for_a_different_request_is_a_conflict():
    order, other = paid_order(), paid_order()
    refund(order, 4000, "k")
    with pytest.raises(IdempotencyConflict):
        refund(order, 5000, "k")
    with pytest.raises(IdempotencyConflict):
        refund(other, 4000, "k")
    assert Refund.objects.count() == 1


def test_refund_over_refundable_is_refused_counting_earlier_refunds():
    order = paid_order()  # 100.00 captured
    refund(order, 7000, "a")
    with pytest.raises(RefundLimitExceeded, match="30.00 USD"):
        refund(order, 3001, "b")
    refund(order, 3000, "c")  # exactly the rest is fine
    with pytest.raises(RefundLimitExceeded):
        refund(order, 1, "d")
    assert total_refunded(order) == 10000


def test_failed_refunds_moved_no_money_and_do_not_count():
    order = paid_order()
    RefundFactory(order=order, payment=order.payments.get(), amount_cents=10000, status=Refund.Status.FAILED)
    assert refund(order, 10000, "k").amount_cents == 10000


def test_refund_refused_in_another_currency():
    order = paid_order(currency="EUR")
    with pytest.raises(CurrencyMismatch, match="EUR"):
        refund(order, 100, "k", currency="USD")
    assert not Refund.objects.exists()


def test_refund_refused_on_cancelled_or_unpaid_orders():
    cancelled = paid_order(status=Order.Status.CANCELLED)
    with pytest.raises(OrderStateError, match="cancelled"):
        refund(cancelled, 100, "k1")
    authorised = paid_order(status=Order.Status.PLACED, payment_status=Payment.Status.AUTHORISED)
    with pytest.raises(OrderStateError, match="no captured payment"):
        refund(authorised, 100, "k2")
    with pytest.raises(NotFound):
        services.refund_issue(order_number="SU-99999", amount_cents=1, currency="USD", reason="x", idempotency_key="k3")
    assert not Refund.objects.exists()


@pytest.mark.parametrize("cents", [0, -5, 12.5, "100", True])
def test_refund_amount_must_be_positive_minor_units(cents):
    order = paid_order()
    with pytest.raises(InvalidRequest):
        refund(order, cents, "k")


def test_refund_needs_a_key():
    with pytest.raises(InvalidRequest, match="idempotency key"):
        refund(paid_order(), 100, "  ")


def test_unique_key_race_is_resolved_by_re_reading(monkeypatch):
    """A racer that missed both lookups hits the unique key and returns the winner's refund."""
    order = paid_order()
    winner = refund(order, 4000, "race")
    real = services._refund_by_key
    misses = iter([None, None])  # the pre-check and the in-lock check both miss
    monkeypatch.setattr(services, "_refund_by_key", lambda key: next(misses, None) or real(key))
    again = refund(order, 4000, "race")
    assert again.refund_id == winner.refund_id
    assert Refund.objects.count() == 1


# --- returns -----------------------------------------------------------------------------


def test_return_book_happy_path_and_replay():
    order = paid_order()
    items = list(order.items.order_by("pk"))
    ret = services.return_book(
        order_number=order.number, item_ids=[items[0].item_id], reason="too small", idempotency_key="r1"
    )
    assert ret.return_id.startswith("ret_")
    assert list(ret.items.values_list("item_id", flat=True)) == [items[0].item_id]
    again = services.return_book(
        order_number=order.number, item_ids=[items[0].item_id], reason="too small", idempotency_key="r1"
    )
    assert again.pk == ret.pk and Return.objects.count() == 1
    with pytest.raises(IdempotencyConflict):
        services.return_book(order_number=order.number, item_ids=[items[1].item_id], reason="x", idempotency_key="r1")


def test_return_refused_for_undelivered_orders_foreign_items_and_items_already_returned():
    shipped = paid_order(status=Order.Status.SHIPPED)
    with pytest.raises(OrderStateError, match="only delivered"):
        services.return_book(
            order_number=shipped.number, item_ids=[shipped.items.first().item_id], reason="x", idempotency_key="a"
        )
    order, other = paid_order(), paid_order()
    foreign = other.items.first().item_id
    with pytest.raises(InvalidRequest, match=foreign):
        services.return_book(order_number=order.number, item_ids=[foreign], reason="x", idempotency_key="b")
    item = order.items.first()
    earlier = ReturnFactory(order=order, items=[item])
    with pytest.raises(InvalidRequest, match=earlier.return_id):
        services.return_book(order_number=order.number, item_ids=[item.item_id], reason="x", idempotency_key="c")
    with pytest.raises(InvalidRequest):
        services.return_book(order_number=order.number, item_ids=[], reason="x", idempotency_key="d")
    assert Return.objects.count() == 1


# --- cancellation --------------------------------------------------------------------------


def test_cancel_refunds_the_captured_payment_in_full_and_replays():
    order = paid_order(status=Order.Status.PLACED)
    c = services.order_cancel(order_number=order.number, reason="changed mind", idempotency_key="c1")
    order.refresh_from_db()
    assert order.status == Order.Status.CANCELLED
    assert c.refund is not None and c.refund.amount_cents == 10000
    assert c.refund.idempotency_key == services.derive_key("c1", "cancel-refund")
    again = services.order_cancel(order_number=order.number, reason="changed mind", idempotency_key="c1")
    assert again.pk == c.pk
    assert Cancellation.objects.count() == 1 and total_refunded(order) == 10000
    with pytest.raises(OrderStateError, match="cancelled"):
        services.order_cancel(order_number=order.number, reason="again", idempotency_key="c2")


def test_cancel_refunds_only_what_is_left_and_nothing_when_nothing_was_captured():
    order = paid_order(status=Order.Status.PLACED)
    refund(order, 2500, "partial")
    c = services.order_cancel(order_number=order.number, reason="x", idempotency_key="c1")
    assert c.refund.amount_cents == 7500 and total_refunded(order) == 10000
    unpaid = paid_order(status=Order.Status.PLACED, payment_status=Payment.Status.AUTHORISED)
    c2 = services.order_cancel(order_number=unpaid.number, reason="x", idempotency_key="c2")
    assert c2.refund is None


@pytest.mark.parametrize("status", [Order.Status.SHIPPED, Order.Status.DELIVERED, Order.Status.RETURNED])
def test_cancel_refused_unless_placed(status):
    order = paid_order(status=status)
    with pytest.raises(OrderStateError, match="only placed"):
        services.order_cancel(order_number=order.number, reason="x", idempotency_key="c")
    order.refresh_from_db()
    assert order.status == status and not Refund.objects.exists()


def test_long_keys_derive_a_storable_refund_key():
    key = "k" * 80
    derived = services.derive_key(key, "cancel-refund")
    assert len(derived) <= 80 and derived != services.derive_key("j" * 80, "cancel-refund")
    order = paid_order(status=Order.Status.PLACED)
    assert (
        services.order_cancel(order_number=order.number, reason="x", idempotency_key=key).refund.idempotency_key
        == derived
    )


# --- contacts ---------------------------------------------------------------------------------


def test_contacts_are_recorded_once_per_key():
    order = paid_order()
    customer = order.customer
    e1 = services.email_send(customer_id=customer.customer_id, subject="Hi", body="Body", idempotency_key="e")
    e2 = services.email_send(customer_id=customer.customer_id, subject="Hi", body="Body", idempotency_key="e")
    assert e1.pk == e2.pk and e1.kind == Contact.Kind.EMAIL
    call = services.phone_call_log(customer_id=customer.customer_id, summary="Called back", idempotency_key="p")
    assert call.kind == Contact.Kind.PHONE_CALL
    item = order.items.first()
    offer = services.replacement_offer(
        order_number=order.number, item_id=item.item_id, note="new one", idempotency_key="o"
    )
    assert (offer.kind, offer.item_id, offer.customer_id) == (Contact.Kind.REPLACEMENT_OFFER, item.pk, customer.pk)
    assert Contact.objects.count() == 3
    with pytest.raises(IdempotencyConflict):
        services.phone_call_log(customer_id=customer.customer_id, summary="x", idempotency_key="e")


def test_contact_refusals():
    order, other = paid_order(), paid_order()
    with pytest.raises(NotFound):
        services.email_send(customer_id="cus_nobody00", subject="Hi", body="B", idempotency_key="a")
    with pytest.raises(InvalidRequest):
        services.email_send(customer_id=order.customer.customer_id, subject="", body="B", idempotency_key="b")
    with pytest.raises(InvalidRequest, match="not part of order"):
        services.replacement_offer(
            order_number=order.number, item_id=other.items.first().item_id, note="", idempotency_key="c"
        )
    assert not Contact.objects.exists()


def test_every_refusal_is_a_shop_error():
    for cls in (NotFound, InvalidRequest, OrderStateError, RefundLimitExceeded, CurrencyMismatch, IdempotencyConflict):
        assert issubclass(cls, ShopError)


# --- concurrency (PostgreSQL: row locks are real there) ------------------------------------------

needs_postgres = pytest.mark.skipif(
    connection.vendor != "postgresql",
    reason="row locks (select_for_update) only bite on PostgreSQL; set DATABASE_URL=postgres://... to run",
)


def _race(n, work):
    """Run work(i) in n threads released together; return each result or exception."""
    barrier = threading.Barrier(n)
    out = [None] * n

    def run(i):
        try:
            barrier.wait(timeout=10)
            out[i] = work(i)
        except Exception as exc:  # noqa: BLE001 — collected for the assertions
            out[i] = exc
        finally:
            connections.close_all()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not any(t.is_alive() for t in threads)
    return out


@needs_postgres
@pytest.mark.django_db(transaction=True)
def test_concurrent_retries_with_one_key_move_money_once():
    order = paid_order()
    results = _race(8, lambda i: refund(order, 4000, "one-key").refund_id)
    assert all(isinstance(r, str) for r in results), results
    assert len(set(results)) == 1
    assert Refund.objects.filter(order=order).count() == 1
    assert total_refunded(order) == 4000


@needs_postgres
@pytest.mark.django_db(transaction=True)
def test_concurrent_refunds_with_different_keys_never_exceed_what_was_paid():
    order = paid_order()  # 100.00; each caller wants 40.00
    results = _race(8, lambda i: refund(order, 4000, f"key-{i}"))
    issued = [r for r in results if isinstance(r, Refund)]
    refused = [r for r in results if isinstance(r, RefundLimitExceeded)]
    assert len(issued) == 2 and len(refused) == 6, results
    assert total_refunded(order) == 8000 <= order.total_cents


@needs_postgres
@pytest.mark.django_db(transaction=True)
def test_concurrent_cancels_with_one_key_cancel_and_refund_once():
    order = paid_order(status=Order.Status.PLACED)
    results = _race(8, lambda i: services.order_cancel(order_number=order.number, reason="x", idempotency_key="c").pk)
    assert len(set(results)) == 1 and all(isinstance(r, int) for r in results), results
    assert Cancellation.objects.count() == 1 and total_refunded(order) == 10000
