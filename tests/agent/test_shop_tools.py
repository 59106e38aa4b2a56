"""The demo shop's agent tools: schemas, ownership, ID marking, money parsing, idempotency."""

from __future__ import annotations

import typing
from decimal import Decimal

import pytest
from pydantic import BaseModel, ValidationError

import sundry.shop.tools  # noqa: F401  (registers the shop tools)
from sundry.agent.guards.callguards import amount_minor
from sundry.context.idformats import kind_of
from sundry.shop.domain import ID_PATTERNS
from sundry.shop.models import Cancellation, Contact, Order, Refund, Return
from sundry.shop.tools import IssueRefundArgs, parse_amount
from sundry.tooling.tools import REGISTRY, ToolContext, ToolError, id_fields, iter_ids
from tests.factories import (
    CustomerFactory,
    ParcelFactory,
    RefundFactory,
    ReturnFactory,
    TrackingEventFactory,
    paid_order,
)

pytestmark = pytest.mark.django_db

SHOP_TOOLS = {
    "lookup_customer",
    "search_orders",
    "get_order",
    "track_parcel",
    "issue_refund",
    "book_return",
    "cancel_order",
    "offer_replacement",
    "send_email",
    "log_phone_call",
    "reply_to_customer",
}


def ctx_for(customer, key="key-1", turn=3) -> ToolContext:
    return ToolContext(ticket_id=1, customer_id=customer.customer_id, turn=turn, idempotency_key=key)


def call(name, ctx, **arguments) -> BaseModel:
    """Validate arguments as the loop does, run, and check the result round-trips through JSON."""
    tool = REGISTRY[name]
    result = tool.run(ctx, tool.args_model.model_validate(arguments))
    assert isinstance(result, tool.result_model)
    assert tool.result_model.model_validate_json(result.model_dump_json()) == result
    return result


def ids_of(result, kind=None) -> set[str]:
    return {value for _, k, value in iter_ids(result) if kind is None or k == kind}


@pytest.fixture
def order():
    o = paid_order(prices=(6000, 4000))  # 100.00 USD captured
    ParcelFactory(order=o)
    return o


@pytest.fixture
def ctx(order):
    return ctx_for(order.customer)


# --- schema and registry -----------------------------------------------------------------


def test_all_shop_tools_registered_with_their_consequences():
    assert SHOP_TOOLS <= set(REGISTRY)
    flags = {n: (t.side_effect, t.resolves, t.reversible, t.target_arg) for n, t in REGISTRY.items() if n in SHOP_TOOLS}
    assert flags["issue_refund"] == (True, True, False, "order_number")
    assert flags["cancel_order"] == (True, True, False, "order_number")
    assert flags["book_return"][:2] == (True, True) and flags["book_return"][3] == "order_number"
    for name in ("offer_replacement", "send_email", "log_phone_call"):
        assert flags[name][:2] == (True, True)
    assert flags["reply_to_customer"][:2] == (False, True)
    for name in ("lookup_customer", "search_orders", "get_order", "track_parcel"):
        assert flags[name][:2] == (False, False)
    assert not any(REGISTRY[n].local for n in SHOP_TOOLS)


def _models_in(model: type[BaseModel]):
    yield model
    for info in model.model_fields.values():
        for arg in typing.get_args(info.annotation) or (info.annotation,):
            for inner in typing.get_args(arg) or (arg,):
                if isinstance(inner, type) and issubclass(inner, BaseModel):
                    yield from _models_in(inner)


def _looks_like_id(name: str) -> bool:
    return name.endswith(("_id", "_ids")) or name in {"order_number", "tracking_number", "sku"}


@pytest.mark.parametrize("name", sorted(SHOP_TOOLS))
def test_every_identifier_field_is_marked_with_a_known_kind(name):
    tool = REGISTRY[name]
    assert tool.args_model.model_config.get("extra") == "forbid"
    for model in {*_models_in(tool.args_model), *_models_in(tool.result_model)}:
        marked = id_fields(model)
        for field in model.model_fields:
            if _looks_like_id(field):
                assert field in marked, f"{model.__name__}.{field} is an identifier but not an IdField"
        assert set(marked.values()) <= set(ID_PATTERNS), marked
    spec = tool.spec()
    assert spec["description"] and "parameters" in spec


def test_unknown_arguments_are_refused_by_the_schema(order):
    with pytest.raises(ValidationError, match="Extra inputs"):
        REGISTRY["get_order"].args_model.model_validate({"order_number": order.number, "force": True})


# --- money parsing ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "raw, cents",
    [("40.00", 4000), ("40", 4000), ("0.01", 1), (" 12.5 ", 1250), (40, 4000), (40.5, 4050), (Decimal("7.25"), 725)],
)
def test_amounts_parse_into_minor_units(raw, cents):
    args = IssueRefundArgs(order_number="SU-10001", amount=raw, currency="usd", reason="x")
    assert (args.amount_cents, args.currency) == (cents, "USD")
    assert amount_minor(args) == cents  # the refund guard reads the same figure


@pytest.mark.parametrize(
    "raw",
    [
        "-1",
        "-0.50",
        -3,
        "0",
        0,
        "0.00",
        "40.001",
        "40.500",
        0.1 + 0.2,
        "abc",
        "$40",
        "40,00",
        "1e3",
        "NaN",
        "",
        ".5",
        "40.",
        True,
        None,
        [40],
        float("inf"),
        "99999999",
    ],
)
def test_bad_amounts_are_refused(raw):
    with pytest.raises(ValidationError):
        IssueRefundArgs(order_number="SU-10001", amount=raw, currency="USD", reason="x")


@pytest.mark.parametrize("currency", ["XYZ", "", "dollars", 840])
def test_bad_currencies_are_refused(currency):
    with pytest.raises(ValidationError, match="currency"):
        IssueRefundArgs(order_number="SU-10001", amount="1.00", currency=currency, reason="x")


def test_an_amount_keeps_its_currency_places():
    assert str(parse_amount("3")) == "3"  # no currency yet: the arguments model fixes the places
    args = IssueRefundArgs(order_number="SU-10001", amount="3", currency="USD", reason="x")
    assert args.model_dump()["amount"] == "3.00" and args.amount_cents == 300


# --- lookups ---------------------------------------------------------------------------------------


def test_lookup_customer_by_email_and_by_id(order, ctx):
    customer = order.customer
    by_email = call("lookup_customer", ctx, email=customer.email.upper())
    by_id = call("lookup_customer", ctx, customer_id=customer.customer_id)
    assert by_email == by_id and by_id.customer_id == customer.customer_id and by_id.order_count == 1
    assert ids_of(by_id, "address") == {order.address.address_id}
    assert ids_of(by_id, "payment_method") == {order.payment_method.payment_method_id}


def test_lookup_customer_refuses_other_customers(order, ctx):
    stranger = CustomerFactory()
    with pytest.raises(ToolError, match="not this ticket's customer"):
        call("lookup_customer", ctx, customer_id=stranger.customer_id)
    with pytest.raises(ToolError, match="no customer of this ticket"):
        call("lookup_customer", ctx, email=stranger.email)
    with pytest.raises(ValidationError):
        REGISTRY["lookup_customer"].args_model.model_validate({})


def test_search_orders_lists_and_filters_by_product(order, ctx):
    other = paid_order(customer=order.customer, prices=(1500,))
    kettle = other.items.get().product
    kettle.name = "Steel Kettle 1.7L"
    kettle.save()
    paid_order()  # someone else's
    everything = call("search_orders", ctx, customer_id=order.customer.customer_id)
    assert {o.order_number for o in everything.orders} == {order.number, other.number}
    assert ids_of(everything, "order") == {order.number, other.number}
    found = call("search_orders", ctx, customer_id=order.customer.customer_id, query="my KETTLE")
    assert [o.order_number for o in found.orders] == [other.number] and found.total_matches == 1
    assert found.orders[0].items == ["Steel Kettle 1.7L"] and found.orders[0].total_cents == 1500
    assert call("search_orders", ctx, customer_id=order.customer.customer_id, query="toaster").orders == []


def test_search_orders_refuses_another_customer(order, ctx):
    with pytest.raises(ToolError, match="not this ticket's customer"):
        call("search_orders", ctx, customer_id=paid_order().customer.customer_id)


def test_get_order_details_and_every_id_is_harvestable(order, ctx):
    item = order.items.order_by("pk").first()
    RefundFactory(order=order, payment=order.payments.get(), amount_cents=1000)
    ReturnFactory(order=order, items=[item])
    result = call("get_order", ctx, order_number=order.number)
    assert (result.status, result.currency, result.paid_cents, result.refunded_cents, result.refundable_cents) == (
        "delivered",
        "USD",
        10000,
        1000,
        9000,
    )
    assert result.refundable == "90.00"
    assert ids_of(result, "order") == {order.number}
    assert ids_of(result, "item") == set(order.items.values_list("item_id", flat=True))
    assert ids_of(result, "payment") == set(order.payments.values_list("payment_id", flat=True))
    assert ids_of(result, "tracking") == set(order.parcels.values_list("tracking_number", flat=True))
    assert ids_of(result, "refund") == set(order.refunds.values_list("refund_id", flat=True))
    assert ids_of(result, "return") == set(order.returns.values_list("return_id", flat=True))
    # Every harvested value has the shape its kind says.
    for _, kind, value in iter_ids(result):
        assert kind_of(value) == kind, (kind, value)


def test_get_order_refuses_another_customers_order_even_though_it_exists(ctx):
    theirs = paid_order()
    with pytest.raises(ToolError) as err:
        call("get_order", ctx, order_number=theirs.number)
    assert str(err.value) == f"order {theirs.number} does not belong to this ticket's customer"
    with pytest.raises(ToolError, match="no order SU-99999"):
        call("get_order", ctx, order_number="SU-99999")


def test_track_parcel(order, ctx):
    parcel = order.parcels.get()
    TrackingEventFactory(parcel=parcel, location="Leeds", description="Out for delivery")
    result = call("track_parcel", ctx, tracking_number=parcel.tracking_number)
    assert (result.order_number, result.status, [e.location for e in result.events]) == (
        order.number,
        "in_transit",
        ["Leeds"],
    )
    assert ids_of(result) == {parcel.tracking_number, order.number}
    theirs = ParcelFactory(order=paid_order())
    with pytest.raises(ToolError, match="does not belong to this ticket's customer"):
        call("track_parcel", ctx, tracking_number=theirs.tracking_number)
    with pytest.raises(ToolError, match="no parcel"):
        call("track_parcel", ctx, tracking_number="1Z0000000000ZZZZ")


# --- side effects ----------------------------------------------------------------------------------


def test_issue_refund_happy_path(order, ctx):
    result = call("issue_refund", ctx, order_number=order.number, amount="40.00", currency="USD", reason="damaged")
    refund = Refund.objects.get()
    assert (result.refund_id, result.amount_cents, result.amount) == (refund.refund_id, 4000, "40.00")
    assert (result.refunded_cents, result.refundable_cents) == (4000, 6000)
    assert ids_of(result, "refund") == {refund.refund_id} and ids_of(result, "payment") == {refund.payment.payment_id}


def test_issue_refund_same_key_twice_is_one_refund(order, ctx):
    first = call("issue_refund", ctx, order_number=order.number, amount="40.00", currency="USD", reason="damaged")
    second = call("issue_refund", ctx, order_number=order.number, amount=40, currency="USD", reason="damaged")
    assert second.refund_id == first.refund_id
    assert Refund.objects.count() == 1 and second.refunded_cents == 4000


def test_issue_refund_over_refundable_is_refused(order, ctx):
    call("issue_refund", ctx, order_number=order.number, amount="70.00", currency="USD", reason="x")
    with pytest.raises(ToolError, match="exceeds what is still refundable.*30.00 USD"):
        call(
            "issue_refund",
            ctx_for(order.customer, key="key-2"),
            order_number=order.number,
            amount="30.01",
            currency="USD",
            reason="x",
        )
    with pytest.raises(ToolError, match="paid in USD, not EUR"):
        call(
            "issue_refund",
            ctx_for(order.customer, key="key-3"),
            order_number=order.number,
            amount="1.00",
            currency="EUR",
            reason="x",
        )
    assert Refund.objects.count() == 1


def test_issue_refund_on_another_customers_order_is_refused(ctx):
    theirs = paid_order()
    with pytest.raises(ToolError, match=f"order {theirs.number} does not belong to this ticket's customer"):
        call("issue_refund", ctx, order_number=theirs.number, amount="1.00", currency="USD", reason="x")
    assert not Refund.objects.exists()


def test_book_return(order, ctx):
    item_ids = sorted(order.items.values_list("item_id", flat=True))
    result = call("book_return", ctx, order_number=order.number, item_ids=item_ids, reason="too small")
    assert result.item_ids == item_ids and ids_of(result, "return") == {Return.objects.get().return_id}
    assert call("book_return", ctx, order_number=order.number, item_ids=item_ids, reason="too small") == result
    foreign = paid_order(customer=order.customer).items.first().item_id
    with pytest.raises(ToolError, match=f"{foreign} are not part of order {order.number}"):
        call(
            "book_return", ctx_for(order.customer, key="k2"), order_number=order.number, item_ids=[foreign], reason="x"
        )
    with pytest.raises(ValidationError):
        REGISTRY["book_return"].args_model.model_validate({"order_number": order.number, "item_ids": [], "reason": "x"})
    assert Return.objects.count() == 1


def test_cancel_order(ctx, order):
    placed = paid_order(customer=order.customer, status=Order.Status.PLACED, prices=(2500,))
    result = call("cancel_order", ctx, order_number=placed.number, reason="changed mind")
    assert result.status == "cancelled" and result.refund.amount_cents == 2500
    assert ids_of(result, "refund") == {Refund.objects.get(order=placed).refund_id}
    assert call("cancel_order", ctx, order_number=placed.number, reason="changed mind") == result  # replay
    with pytest.raises(ToolError, match="only placed orders"):
        call("cancel_order", ctx_for(order.customer, key="k2"), order_number=order.number, reason="x")
    assert Cancellation.objects.count() == 1


def test_offer_replacement(order, ctx):
    item = order.items.first()
    result = call("offer_replacement", ctx, order_number=order.number, item_id=item.item_id, note="send a new one")
    assert result.offered and result.product == item.product.name
    contact = Contact.objects.get()
    assert (contact.kind, contact.order_id, contact.item_id) == ("replacement_offer", order.pk, item.pk)
    other_item = paid_order(customer=order.customer).items.first()
    with pytest.raises(ToolError, match="not part of order"):
        call(
            "offer_replacement",
            ctx_for(order.customer, key="k2"),
            order_number=order.number,
            item_id=other_item.item_id,
        )
    assert Contact.objects.count() == 1


def test_send_email_and_log_phone_call(order, ctx):
    cid = order.customer.customer_id
    sent = call("send_email", ctx, customer_id=cid, subject="Your refund", body="It is on its way.")
    assert sent.sent and sent.to == order.customer.email
    call("send_email", ctx, customer_id=cid, subject="Your refund", body="It is on its way.")  # retried
    assert Contact.objects.filter(kind="email").count() == 1
    logged = call("log_phone_call", ctx_for(order.customer, key="k2"), customer_id=cid, summary="Confirmed address")
    assert logged.logged and Contact.objects.filter(kind="phone_call").count() == 1
    stranger = CustomerFactory().customer_id
    with pytest.raises(ToolError, match="not this ticket's customer"):
        call("send_email", ctx_for(order.customer, key="k3"), customer_id=stranger, subject="Hi", body="x")
    with pytest.raises(ToolError, match="not this ticket's customer"):
        call("log_phone_call", ctx_for(order.customer, key="k4"), customer_id=stranger, summary="x")
    assert Contact.objects.count() == 2


def test_reply_to_customer(ctx):
    assert call("reply_to_customer", ctx, message="Your refund is on its way.").delivered is True
    with pytest.raises(ValidationError):
        REGISTRY["reply_to_customer"].args_model.model_validate({"message": ""})
