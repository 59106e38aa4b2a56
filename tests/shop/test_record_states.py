"""An order's state for a reply that states it (`ShopRecords.state`), read in one statement on
PostgreSQL: the same statuses, dates and figures, for every order of a seeded shop, as the reads it
replaced (ten or eleven statements an order, kept below as `reference_state`) and as the read-at-a-time path
SQLite takes."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from sundry.shop import records as shop_records
from sundry.shop import selectors
from sundry.shop.models import Cancellation, Order, Refund, Return, TrackingEvent
from sundry.shop.records import _PARCEL, _STATUSES, RECORDS, _days, _state_rows_each
from sundry.shop.seed import generate_shop
from sundry.tooling import records as r
from sundry.tooling.records import RecordState

pytestmark = pytest.mark.django_db
POSTGRES = connection.vendor == "postgresql"


def reference_state(reference: str) -> RecordState | None:
    """`ShopRecords.state` as it read before (at 0060d6c): the order with its relations, then its
    tracking events, cancellation and money sums apart."""
    order = selectors.order_by_number(RECORDS.normalize(reference)) if reference else None
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


@pytest.fixture
def shop():
    generate_shop(seed=28, customers=15, orders=120)
    numbers = list(Order.objects.order_by("number").values_list("number", flat=True))
    # The seed gives every kind of row the state reads, so the comparison covers each.
    assert Refund.objects.filter(status=Refund.Status.ISSUED).exists()
    assert Return.objects.exists() and Cancellation.objects.exists() and TrackingEvent.objects.exists()
    assert Order.objects.filter(status=Order.Status.DELIVERED).exists()
    return numbers


def test_every_orders_state_is_what_the_old_reads_gave(shop, monkeypatch):
    differ = [n for n in shop if RECORDS.state(n) != reference_state(n)]
    assert differ == []
    assert RECORDS.state(f"  {shop[0].lower()} ") == reference_state(shop[0])
    assert RECORDS.state("SU-00000000") is None and RECORDS.state("") is None
    # The read-at-a-time path (SQLite's) gives the same too.
    monkeypatch.setattr(shop_records, "_state_rows", _state_rows_each)
    assert [n for n in shop if RECORDS.state(n) != reference_state(n)] == []


@pytest.mark.skipif(not POSTGRES, reason="one statement needs PostgreSQL's arrays")
def test_an_orders_state_is_one_statement(shop, django_assert_max_num_queries):
    """Negative control: the reads it replaced take ten or eleven statements for the same order
    (eleven when it has returns, whose items are read too), counted here beside it."""
    refunded = Refund.objects.filter(status=Refund.Status.ISSUED).values_list("order__number", flat=True).first()
    with django_assert_max_num_queries(1):
        state = RECORDS.state(refunded)
    assert r.REFUNDED in state.statuses
    with CaptureQueriesContext(connection) as before:
        reference_state(refunded)
    assert len(before) >= 10
