"""The deterministic demo shop: determinism, realism invariants, dense order numbers."""

from __future__ import annotations

import io
import re
import time
from collections import defaultdict

import pytest
from django.core.management import call_command
from django.db.models import F, Sum

from sundry.shop import selectors
from sundry.shop.models import (
    Address,
    Cancellation,
    Customer,
    Order,
    OrderItem,
    Parcel,
    Payment,
    PaymentMethod,
    Product,
    Refund,
    Return,
    TrackingEvent,
)
from sundry.shop.seed import (
    AS_OF,
    EPOCH,
    SeedError,
    fingerprint,
    generate_shop,
    mutation_hit_share,
    one_char_mutations,
)

SMALL = {"customers": 40, "orders": 400}

ID_FORMATS = [
    (Customer, "customer_id", r"cus_[0-9a-z]{8}"),
    (Address, "address_id", r"adr_[0-9a-z]{8}"),
    (PaymentMethod, "payment_method_id", r"pm_[0-9a-z]{8}"),
    (Payment, "payment_id", r"pay_[0-9a-z]{8}"),
    (Refund, "refund_id", r"rfd_[0-9a-z]{8}"),
    (Return, "return_id", r"ret_[0-9a-z]{8}"),
    (OrderItem, "item_id", r"itm_[0-9a-z]{8}"),
    (Parcel, "tracking_number", r"1Z[0-9A-Z]{14}"),
    (Product, "sku", r"SKU-[0-9A-Z]{5}"),
    (Order, "number", r"SU-\d{5}"),
]


# --------------------------------------------------------------------------- #
# Invariants, checked on the small seeds and on the full default seed
# --------------------------------------------------------------------------- #


def assert_identifier_formats():
    for model, field, pattern in ID_FORMATS:
        values = list(model.objects.values_list(field, flat=True))
        assert values, f"no {model.__name__} rows"
        bad = [v for v in values if not re.fullmatch(pattern, v)]
        assert not bad, f"{model.__name__}.{field} not matching {pattern}: {bad[:5]}"
    # Idempotency keys of seeded refunds and returns derive from their identifiers.
    for refund_id, key in Refund.objects.values_list("refund_id", "idempotency_key"):
        assert key == f"seed-{refund_id}"
    for return_id, key in Return.objects.values_list("return_id", "idempotency_key"):
        assert key == f"seed-{return_id}"


def assert_money_consistent():
    line_totals = defaultdict(int)
    for order_id, qty, unit in OrderItem.objects.values_list("order_id", "quantity", "unit_price_cents"):
        line_totals[order_id] += qty * unit
    payments = defaultdict(list)
    for order_id, amount, currency, status in Payment.objects.values_list(
        "order_id", "amount_cents", "currency", "status"
    ):
        payments[order_id].append((amount, currency, status))
    issued = defaultdict(int)
    for order_id, amount, currency, status in Refund.objects.values_list(
        "order_id", "amount_cents", "currency", "status"
    ):
        assert amount > 0
        if status == Refund.Status.ISSUED:
            issued[order_id] += amount
    assert not Refund.objects.exclude(currency=F("order__currency")).exists(), "a refund in another currency"

    for order_id, total, currency in Order.objects.values_list("id", "total_cents", "currency"):
        assert line_totals[order_id] == total, "order total is not the sum of its lines"
        assert len(payments[order_id]) == 1, "every order has exactly one payment"
        amount, pay_currency, status = payments[order_id][0]
        assert status == Payment.Status.CAPTURED
        assert (amount, pay_currency) == (total, currency), "payment does not match the order total"
        assert issued[order_id] <= amount, "issued refunds exceed the captured payment"


def assert_items_per_order():
    counts = defaultdict(int)
    for order_id in OrderItem.objects.values_list("order_id", flat=True):
        counts[order_id] += 1
    assert set(Order.objects.values_list("id", flat=True)) == set(counts)
    assert all(1 <= n <= 4 for n in counts.values())


def assert_status_consistent():
    parcels = defaultdict(list)
    for order_id, status, pk in Parcel.objects.values_list("order_id", "status", "id"):
        parcels[order_id].append((status, pk))
    last_event = {}
    for parcel_id, description in TrackingEvent.objects.order_by("parcel_id", "at", "id").values_list(
        "parcel_id", "description"
    ):
        last_event[parcel_id] = description
    cancellations = dict(Cancellation.objects.values_list("order_id", "refund_id"))

    for order_id, status, total in Order.objects.values_list("id", "status", "total_cents"):
        ps = parcels[order_id]
        if status in ("placed", "cancelled"):
            assert not ps, f"a {status} order has a parcel"
        else:
            assert ps, f"a {status} order has no parcel"
            for parcel_status, pk in ps:
                assert pk in last_event, "a parcel without tracking events"
                if status in ("delivered", "returned"):
                    assert parcel_status == "delivered"
                    assert last_event[pk].startswith("Delivered")
                else:
                    assert parcel_status in ("label_created", "in_transit", "out_for_delivery", "lost")
        if status == "cancelled":
            refund = Refund.objects.get(pk=cancellations[order_id])
            assert refund.order_id == order_id and refund.amount_cents == total and refund.status == "issued"
        else:
            assert order_id not in cancellations
        if status == "returned":
            assert Return.objects.filter(order_id=order_id, status__in=["received", "closed"]).exists()

    # Every returned item belongs to the return's order.
    through = Return.items.through
    for ret_order, item_order in through.objects.values_list("return__order_id", "orderitem__order_id"):
        assert ret_order == item_order


def assert_customers_realistic():
    for customer in Customer.objects.prefetch_related("addresses", "payment_methods"):
        assert 1 <= customer.payment_methods.count() <= 3
        assert customer.addresses.count() >= 1
        assert "@" in customer.email and customer.phone.startswith("+")
        assert " " in customer.name
    emails = list(Customer.objects.values_list("email", flat=True))
    assert len(emails) == len(set(e.lower() for e in emails)), "customer emails are unique"
    labels = set(PaymentMethod.objects.values_list("label", flat=True))
    assert any(re.fullmatch(r"(Visa|Mastercard|Amex|RuPay) ending \d{4}", label) for label in labels)
    # The customer's orders use the customer's own address and payment method.
    assert not Order.objects.exclude(address__customer_id=F("customer_id")).exists()
    assert not Order.objects.exclude(payment_method__customer_id=F("customer_id")).exists()


def assert_timestamps_in_window():
    for model, field in [
        (Customer, "created_at"),
        (Order, "placed_at"),
        (Payment, "created_at"),
        (TrackingEvent, "at"),
        (Refund, "created_at"),
        (Return, "created_at"),
    ]:
        assert not model.objects.filter(**{f"{field}__lt": EPOCH}).exists()
        assert not model.objects.filter(**{f"{field}__gt": AS_OF}).exists()
    assert not Order.objects.filter(placed_at__lt=F("customer__created_at")).exists()
    assert not TrackingEvent.objects.filter(at__lt=F("parcel__order__placed_at")).exists()
    assert not Refund.objects.filter(created_at__lt=F("order__placed_at")).exists()


def assert_all_invariants():
    assert_identifier_formats()
    assert_money_consistent()
    assert_items_per_order()
    assert_status_consistent()
    assert_customers_realistic()
    assert_timestamps_in_window()


# --------------------------------------------------------------------------- #
# Mutations
# --------------------------------------------------------------------------- #


def test_one_char_mutations_of_an_order_number():
    mutations = one_char_mutations("SU-20481")
    assert len(mutations) == 45
    assert "SU-20481" not in mutations
    assert len(set(mutations)) == 45
    for m in mutations:
        assert m.startswith("SU-") and len(m) == 8
        assert sum(a != b for a, b in zip(m, "SU-20481")) == 1


def test_mutation_hit_share_counts_hits_over_all_mutations():
    assert mutation_hit_share(set()) == 0.0
    assert mutation_hit_share({"SU-20000"}) == 0.0
    # Each of the two numbers has 45 mutations, one of which is the other number.
    assert mutation_hit_share({"SU-20000", "SU-20001"}) == pytest.approx(2 / 90)


# --------------------------------------------------------------------------- #
# Small seeds
# --------------------------------------------------------------------------- #


@pytest.mark.django_db
def test_same_seed_gives_identical_data_and_another_seed_does_not():
    first_counts = generate_shop(seed=1234, **SMALL)
    first = fingerprint()
    second_counts = generate_shop(seed=1234, replace=True, **SMALL)
    second = fingerprint()
    assert first_counts == second_counts
    assert first == second

    generate_shop(seed=1235, replace=True, **SMALL)
    assert fingerprint() != first


@pytest.mark.django_db
def test_same_seed_same_identifiers_field_by_field():
    """Beyond the hash: the same customers, orders and refunds, by identifier."""
    generate_shop(seed=99, **SMALL)
    snapshot = {
        "customers": list(
            Customer.objects.order_by("customer_id").values_list("customer_id", "name", "email", "created_at")
        ),
        "orders": list(
            Order.objects.order_by("number").values_list("number", "status", "currency", "total_cents", "placed_at")
        ),
        "refunds": list(
            Refund.objects.order_by("refund_id").values_list("refund_id", "order__number", "amount_cents", "status")
        ),
    }
    generate_shop(seed=99, replace=True, **SMALL)
    assert snapshot == {
        "customers": list(
            Customer.objects.order_by("customer_id").values_list("customer_id", "name", "email", "created_at")
        ),
        "orders": list(
            Order.objects.order_by("number").values_list("number", "status", "currency", "total_cents", "placed_at")
        ),
        "refunds": list(
            Refund.objects.order_by("refund_id").values_list("refund_id", "order__number", "amount_cents", "status")
        ),
    }


@pytest.mark.django_db
def test_refuses_a_non_empty_shop_without_replace():
    generate_shop(seed=5, customers=10, orders=50)
    before = fingerprint()
    with pytest.raises(SeedError, match="replace=True"):
        generate_shop(seed=6, customers=10, orders=50)
    assert fingerprint() == before, "a refused seed changes nothing"
    counts = generate_shop(seed=6, customers=10, orders=50, replace=True)
    assert counts["orders"] == Order.objects.count() == 50
    assert counts["customers"] == Customer.objects.count() == 10


@pytest.mark.django_db
def test_replace_refuses_while_tickets_point_at_customers():
    from sundry.tickets.models import Ticket, TicketClass

    generate_shop(seed=5, customers=10, orders=50)
    before = fingerprint()
    ticket_class = TicketClass.objects.create(name="Test", slug="test")
    Ticket.objects.create(
        customer=Customer.objects.first().person, ticket_class=ticket_class, subject="Where is my order?"
    )
    with pytest.raises(SeedError, match="tickets.Ticket"):
        generate_shop(seed=6, customers=10, orders=50, replace=True)
    assert fingerprint() == before, "a refused replace deletes nothing"


@pytest.mark.django_db
def test_small_seed_invariants():
    counts = generate_shop(seed=42, **SMALL)
    assert counts["customers"] == SMALL["customers"]
    assert counts["orders"] == SMALL["orders"]
    assert counts["products"] >= 50
    assert_all_invariants()


@pytest.mark.django_db
def test_new_rows_after_seeding_get_fresh_primary_keys():
    """Seeded rows carry explicit primary keys; the sequences must move past them."""
    generate_shop(seed=8, customers=5, orders=20)
    product = Product.objects.create(sku="SKU-ZZZZZ", name="Test thing", price_cents=100)
    assert product.pk > Product.objects.exclude(pk=product.pk).order_by("-pk").values_list("pk", flat=True).first()


@pytest.mark.django_db
def test_selectors_read_the_seeded_shop():
    generate_shop(seed=11, **SMALL)
    customer = Customer.objects.order_by("pk").first()
    assert selectors.customer_by_email(customer.email.upper()) == customer
    assert selectors.customer_by_email("nobody@nowhere.example") is None
    assert selectors.customer_by_id(customer.customer_id) == customer
    assert selectors.customer_by_id("cus_00000000") is None

    orders = selectors.orders_for_customer(customer.customer_id, limit=3)
    assert len(orders) <= 3
    assert [o.placed_at for o in orders] == sorted((o.placed_at for o in orders), reverse=True)

    assert selectors.order_by_number("SU-99999") is None
    refunded = Refund.objects.filter(status="issued").select_related("order").first().order
    order = selectors.order_by_number(refunded.number)
    assert order == refunded
    issued = order.refunds.filter(status="issued").aggregate(t=Sum("amount_cents"))["t"]
    assert selectors.refunded_cents(order) == issued
    assert selectors.refundable_cents(order) == max(0, order.total_cents - issued)
    untouched = Order.objects.filter(refunds__isnull=True).first()
    assert selectors.refunded_cents(untouched) == 0
    assert selectors.refundable_cents(untouched) == untouched.total_cents


@pytest.mark.django_db
def test_seed_shop_command_prints_counts_and_share():
    out = io.StringIO()
    call_command("seed_shop", "--seed", "3", "--customers", "20", "--orders", "150", stdout=out)
    text = out.getvalue()
    assert re.search(r"orders\s+150\b", text)
    assert re.search(r"customers\s+20\b", text)
    assert "mutation-hit share" in text
    with pytest.raises(Exception, match="replace"):
        call_command("seed_shop", "--seed", "3", "--customers", "20", "--orders", "150", stdout=io.StringIO())
    call_command("seed_shop", "--seed", "3", "--customers", "20", "--orders", "150", "--replace", stdout=io.StringIO())


# --------------------------------------------------------------------------- #
# The full default seed
# --------------------------------------------------------------------------- #


@pytest.mark.django_db
def test_full_default_seed():
    started = time.perf_counter()
    counts = generate_shop(seed=20261129)
    elapsed = time.perf_counter() - started

    assert counts["customers"] >= 500 and Customer.objects.count() == counts["customers"]
    assert counts["orders"] >= 5000 and Order.objects.count() == counts["orders"]
    assert Product.objects.count() >= 50

    numbers = set(Order.objects.values_list("number", flat=True))
    ints = sorted(int(n[3:]) for n in numbers)
    share = mutation_hit_share(numbers)
    print(
        f"\nfull default seed: {counts['orders']} orders, {counts['customers']} customers in {elapsed:.2f}s; "
        f"order numbers SU-{ints[0]}..SU-{ints[-1]}; mutation-hit share {share:.4f}"
    )
    print("counts:", counts)
    # Dense: drawn from a block about 4/3 the order count.
    assert ints[-1] - ints[0] + 1 <= round(len(ints) * 4 / 3)
    assert share > 0.3

    # Varied currencies and statuses; INR amounts run larger.
    currencies = set(Order.objects.values_list("currency", flat=True))
    assert currencies == {"USD", "EUR", "GBP", "INR"}
    statuses = set(Order.objects.values_list("status", flat=True))
    assert statuses == {"placed", "shipped", "delivered", "cancelled", "returned"}
    avg = {
        c: Order.objects.filter(currency=c).aggregate(t=Sum("total_cents"))["t"]
        / Order.objects.filter(currency=c).count()
        for c in currencies
    }
    assert avg["INR"] > 20 * avg["USD"]
    assert Refund.objects.exists() and Return.objects.exists()
    assert set(PaymentMethod.objects.values_list("kind", flat=True)) >= {"card", "upi", "paypal"}

    assert_all_invariants()


@pytest.mark.django_db
def test_the_plain_order_view_matches_the_models_for_every_seeded_order():
    generate_shop(seed=11, **SMALL)
    assert Return.objects.exists() and Refund.objects.exists()  # the seed has what the view groups
    for order in Order.objects.prefetch_related(
        "items__product", "payments__method", "parcels", "refunds__payment", "returns__items"
    ):
        view = selectors.order_view(order.number)
        assert (view.number, view.customer_id, view.status, view.currency, view.total_cents, view.placed_at) == (
            order.number,
            order.customer.customer_id,
            order.status,
            order.currency,
            order.total_cents,
            order.placed_at,
        )
        assert view.items == [
            (i.item_id, i.product.sku, i.product.name, i.quantity, i.unit_price_cents)
            for i in sorted(order.items.all(), key=lambda i: i.pk)
        ]
        assert view.payments == [
            (p.payment_id, p.method.payment_method_id, p.method.label, p.status, p.amount_cents)
            for p in sorted(order.payments.all(), key=lambda p: (p.created_at, p.pk))
        ]
        assert view.parcels == [
            (p.tracking_number, p.carrier, p.status) for p in sorted(order.parcels.all(), key=lambda p: p.pk)
        ]
        assert view.refunds == [
            (r.refund_id, r.payment.payment_id, r.amount_cents, r.status, r.reason, r.created_at)
            for r in sorted(order.refunds.all(), key=lambda r: (r.created_at, r.pk))
        ]
        assert view.returns == [
            (r.return_id, sorted(i.item_id for i in r.items.all()), r.status, r.reason)
            for r in sorted(order.returns.all(), key=lambda r: (r.created_at, r.pk))
        ]
    assert selectors.order_view("SU-99999") is None and selectors.order_view("") is None
