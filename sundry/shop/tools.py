"""The demo shop's tools: what the agent can look up and do for a customer.

Every argument and result is a pydantic model; identifier fields are marked
with `IdField(kind)` so the ID guard checks them and the ledger harvests them.
Result models declare (`tools.declarations`) how the ledger describes each ID,
where money moved and which order figures they report; the effects code reads
those declarations, never a tool's name.
Each tool acts only for the ticket's own customer: an order, parcel or customer
of anyone else is refused even when it exists.

Pure code (guards, the offline model) needs only the tool interface in
`sundry.tooling.tools`; importing this module registers the shop's tools and
needs Django's apps ready, as any module with models does.
"""

from __future__ import annotations

import re
from datetime import date, datetime
from decimal import Decimal
from typing import Annotated, Any, ClassVar

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, PlainSerializer, WithJsonSchema, model_validator

from sundry.core import money
from sundry.shop import selectors, services
from sundry.shop.models import Customer, Order, OrderItem, Parcel, Payment, Refund
from sundry.shop.services import ShopError
from sundry.tooling.declarations import Describe, MoneyMoved, OrderTotals
from sundry.tooling.tools import IdField, Tool, ToolContext, ToolError, register

VERBATIM = "Copy every ID verbatim from a tool result; never retype one from memory or from the customer's words."

# --- money: decimal strings in, minor units out ---------------------------------

# The currencies the shop trades in.
SHOP_CURRENCIES = ("USD", "EUR", "GBP", "INR")
MAX_AMOUNT = Decimal("10000000")


def parse_amount(value: Any) -> Decimal:
    """A positive amount in major units, from a decimal string ("40.00") or a number; strict."""
    try:
        amount = money.parse_decimal(value)
    except money.MoneyError as exc:
        raise ValueError(str(exc)) from None
    if amount <= 0:
        raise ValueError("amount must be greater than zero")
    if amount > MAX_AMOUNT:
        raise ValueError("amount is implausibly large")
    return amount


def parse_currency(value: Any) -> str:
    code = value.strip().upper() if isinstance(value, str) else ""
    if code not in SHOP_CURRENCIES:
        raise ValueError(f"currency must be one of {', '.join(SHOP_CURRENCIES)}")
    return code


# Shared pydantic types: an amount argument and a currency argument.
MoneyAmount = Annotated[
    Decimal,
    BeforeValidator(parse_amount),
    PlainSerializer(lambda d: format(d, "f"), return_type=str),
    WithJsonSchema(
        {
            "anyOf": [{"type": "string", "pattern": r"^\d+(\.\d{1,2})?$"}, {"type": "number", "exclusiveMinimum": 0}],
            # Placeholders, not sample values: a small model copies an example into a real call.
            "description": "Amount in major units in the form N.NN (not cents, no currency symbol), taken from the "
            "order's figures in a tool result.",
        }
    ),
]
CurrencyCode = Annotated[
    str,
    BeforeValidator(parse_currency),
    WithJsonSchema({"type": "string", "enum": list(SHOP_CURRENCIES), "description": "ISO currency code of the order."}),
]


class Args(BaseModel):
    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True)


class Result(BaseModel):
    model_config = ConfigDict(extra="forbid")


def _id(kind: str, description: str = "", **kw) -> Any:
    return IdField(kind, description or f"{kind} ID, copied verbatim from a tool result", **kw)


# --- ownership ---------------------------------------------------------------------


def _refuse_unless_owned(ctx: ToolContext, order_number: str, owner_id: str | None) -> None:
    """`owner_id`: the order's customer ID, None when there is no such order."""
    if owner_id is None:
        raise ToolError(
            f"no order {order_number} exists; copy the order number verbatim from search_orders or get_order"
        )
    if owner_id != ctx.customer_id:
        raise ToolError(f"order {order_number} does not belong to this ticket's customer")


def _own_order(ctx: ToolContext, order_number: str):
    """The order as model instances, for the tools that change it."""
    order = selectors.order_by_number(order_number)
    _refuse_unless_owned(ctx, order_number, order.customer.customer_id if order else None)
    return order


def _own_customer(ctx: ToolContext, customer_id: str):
    if customer_id != ctx.customer_id:
        raise ToolError(
            f"customer {customer_id} is not this ticket's customer; use lookup_customer to get this ticket's customer_id"
        )
    customer = selectors.customer_by_id(customer_id)
    if customer is None:
        raise ToolError(f"no customer {customer_id} exists")
    return customer


def _shop_call(fn, **kwargs):
    try:
        return fn(**kwargs)
    except ShopError as exc:
        raise ToolError(str(exc)) from exc


# --- lookup_customer -------------------------------------------------------------


class LookupCustomerArgs(Args):
    email: str | None = Field(None, min_length=3, max_length=254, description="The customer's email address.")
    customer_id: str | None = _id("customer", min_length=1, default=None)

    @model_validator(mode="after")
    def _one_key(self):
        if not self.email and not self.customer_id:
            raise ValueError("give email or customer_id")
        return self


class AddressOut(Result):
    describe: ClassVar = Describe("address_id", "{line1}, {city}")
    address_id: str = _id("address")
    line1: str
    city: str
    postcode: str
    country: str


class PaymentMethodOut(Result):
    describe: ClassVar = Describe("payment_method_id", "{label}")
    payment_method_id: str = _id("payment_method")
    kind: str
    label: str


class CustomerResult(Result):
    describe: ClassVar = Describe("customer_id", "{name}")
    customer_id: str = _id("customer")
    name: str
    email: str
    phone: str
    addresses: list[AddressOut]
    payment_methods: list[PaymentMethodOut]
    order_count: int


def lookup_customer(ctx: ToolContext, args: LookupCustomerArgs) -> CustomerResult:
    if args.customer_id:
        customer = _own_customer(ctx, args.customer_id)
        if args.email and customer.email.lower() != args.email.lower():
            raise ToolError(f"email {args.email} is not on file for customer {args.customer_id}")
    else:
        customer = Customer.objects.filter(email__iexact=args.email, customer_id=ctx.customer_id).first()
        if customer is None:
            raise ToolError(
                f"no customer of this ticket has email {args.email}; ask the customer to confirm their email"
            )
    return CustomerResult(
        customer_id=customer.customer_id,
        name=customer.name,
        email=customer.email,
        phone=customer.phone,
        addresses=[
            AddressOut(address_id=a.address_id, line1=a.line1, city=a.city, postcode=a.postcode, country=a.country)
            for a in customer.addresses.order_by("pk")
        ],
        payment_methods=[
            PaymentMethodOut(payment_method_id=m.payment_method_id, kind=m.kind, label=m.label)
            for m in customer.payment_methods.order_by("pk")
        ],
        order_count=customer.orders.count(),
    )


# --- search_orders -------------------------------------------------------------------

_STOPWORDS = frozenset("a an and the my of for with from to in on order orders item items".split())


class SearchOrdersArgs(Args):
    customer_id: str = _id("customer", min_length=1)
    query: str | None = Field(
        None,
        max_length=200,
        description="Optional words matched against product names or SKUs, e.g. 'kettle'. Omit to list recent orders.",
    )
    limit: int = Field(20, ge=1, le=50, description="Most orders to return, newest first.")


class OrderSummary(Result):
    describe: ClassVar = Describe("order_number", "{items} · {status}")
    order_number: str = _id("order")
    status: str
    placed_on: date
    total_cents: int = Field(description="Order total in minor units (cents).")
    currency: str
    items: list[str] = Field(description="Product names in the order.")


class SearchOrdersResult(Result):
    customer_id: str = _id("customer")
    query: str | None
    orders: list[OrderSummary]
    total_matches: int


def search_orders(ctx: ToolContext, args: SearchOrdersArgs) -> SearchOrdersResult:
    from django.db.models import Prefetch, Q

    customer = _own_customer(ctx, args.customer_id)
    orders = Order.objects.filter(customer=customer)
    words = [w for w in re.findall(r"[\w-]+", (args.query or "").lower()) if len(w) > 1 and w not in _STOPWORDS]
    # Every word must name some product (or SKU) in the order.
    for word in words:
        orders = orders.filter(
            pk__in=OrderItem.objects.filter(Q(product__name__icontains=word) | Q(product__sku__iexact=word)).values(
                "order_id"
            )
        )
    total = orders.count()
    rows = orders.order_by("-placed_at", "-pk").prefetch_related(
        Prefetch("items", queryset=OrderItem.objects.select_related("product").order_by("pk"))
    )[: args.limit]
    return SearchOrdersResult(
        customer_id=customer.customer_id,
        query=args.query,
        total_matches=total,
        orders=[
            OrderSummary(
                order_number=o.number,
                status=o.status,
                placed_on=o.placed_at.date(),
                total_cents=o.total_cents,
                currency=o.currency,
                items=[i.product.name for i in o.items.all()],
            )
            for o in rows
        ],
    )


# --- get_order -------------------------------------------------------------------------


class OrderArgs(Args):
    order_number: str = _id(
        "order", "Order number (form SU-NNNNN), copied verbatim from the ledger or a tool result", min_length=1
    )


class ItemOut(Result):
    describe: ClassVar = (Describe("item_id", "{product}"), Describe("sku", "{product}"))
    item_id: str = _id("item")
    sku: str = _id("sku")
    product: str
    quantity: int
    unit_price_cents: int


class PaymentOut(Result):
    describe: ClassVar = Describe("payment_id", "payment of {owner} by {method} · {status}")
    payment_id: str = _id("payment")
    payment_method_id: str = _id("payment_method")
    method: str
    status: str
    amount_cents: int


class ParcelOut(Result):
    describe: ClassVar = Describe("tracking_number", "{carrier} parcel of {owner} · {status}")
    tracking_number: str = _id("tracking")
    carrier: str
    status: str


class RefundOut(Result):
    describe: ClassVar = Describe("refund_id", "refund {amount} {root.currency} on {owner} · {status}")
    refund_id: str = _id("refund")
    payment_id: str = _id("payment")
    amount_cents: int
    amount: str = Field(description="The same amount in major units.")
    status: str
    reason: str
    created_on: date


class ReturnOut(Result):
    describe: ClassVar = Describe("return_id", "return on {owner} · {status}")
    return_id: str = _id("return")
    item_ids: list[str] = _id("item")
    status: str
    reason: str


class OrderResult(Result):
    describe: ClassVar = Describe("order_number", "{items.product} · {status}")
    reports_totals: ClassVar = OrderTotals(
        "order_number", "currency", refunded_field="refunded_cents", paid_field="paid_cents"
    )
    order_number: str = _id("order")
    customer_id: str = _id("customer")
    status: str
    placed_on: date
    currency: str
    total_cents: int
    items: list[ItemOut]
    payments: list[PaymentOut]
    parcels: list[ParcelOut]
    refunds: list[RefundOut]
    returns: list[ReturnOut]
    paid_cents: int = Field(description="Captured payments, minor units.")
    refunded_cents: int = Field(description="Issued refunds, minor units.")
    refundable_cents: int = Field(description="Still refundable (paid - refunded), minor units.")
    refundable: str = Field(description="Still refundable in major units (form N.NN), the form issue_refund takes.")


def _order_result(order) -> OrderResult:
    """From the plain `OrderView`; the totals come from the same read, as fresh as asking again."""
    paid = sum(amount for *_, status, amount in order.payments if status == Payment.Status.CAPTURED)
    refunded = sum(r[2] for r in order.refunds if r[3] == Refund.Status.ISSUED)
    refundable = max(0, paid - refunded)
    return OrderResult(
        order_number=order.number,
        customer_id=order.customer_id,
        status=order.status,
        placed_on=order.placed_at.date(),
        currency=order.currency,
        total_cents=order.total_cents,
        items=[
            ItemOut(item_id=item_id, sku=sku, product=name, quantity=quantity, unit_price_cents=price)
            for item_id, sku, name, quantity, price in order.items
        ],
        payments=[
            PaymentOut(payment_id=pid, payment_method_id=mid, method=label, status=status, amount_cents=amount)
            for pid, mid, label, status, amount in order.payments
        ],
        parcels=[
            ParcelOut(tracking_number=number, carrier=carrier, status=status)
            for number, carrier, status in order.parcels
        ],
        refunds=[
            RefundOut(
                refund_id=rid,
                payment_id=pid,
                amount_cents=amount,
                amount=money.major_str(amount, order.currency),
                status=status,
                reason=reason,
                created_on=created.date(),
            )
            for rid, pid, amount, status, reason, created in order.refunds
        ],
        returns=[
            ReturnOut(return_id=rid, item_ids=ids, status=status, reason=reason)
            for rid, ids, status, reason in order.returns
        ],
        paid_cents=paid,
        refunded_cents=refunded,
        refundable_cents=refundable,
        refundable=money.major_str(refundable, order.currency),
    )


def get_order(ctx: ToolContext, args: OrderArgs) -> OrderResult:
    order = selectors.order_view(args.order_number)  # plain data: this tool only reads
    _refuse_unless_owned(ctx, args.order_number, order.customer_id if order else None)
    return _order_result(order)


# --- track_parcel ------------------------------------------------------------------------


class TrackParcelArgs(Args):
    tracking_number: str = _id("tracking", "Tracking number such as 1Z..., copied verbatim", min_length=1)


class TrackingEventOut(Result):
    at: datetime
    location: str
    description: str


class TrackParcelResult(Result):
    describe: ClassVar = Describe("tracking_number", "{carrier} parcel of {order_number} · {status}")
    tracking_number: str = _id("tracking")
    order_number: str = _id("order")
    carrier: str
    status: str
    events: list[TrackingEventOut]


def track_parcel(ctx: ToolContext, args: TrackParcelArgs) -> TrackParcelResult:
    parcel = Parcel.objects.select_related("order__customer").filter(tracking_number=args.tracking_number).first()
    if parcel is None:
        raise ToolError(f"no parcel with tracking number {args.tracking_number}; copy it verbatim from get_order")
    if parcel.order.customer.customer_id != ctx.customer_id:
        raise ToolError(f"parcel {args.tracking_number} does not belong to this ticket's customer")
    return TrackParcelResult(
        tracking_number=parcel.tracking_number,
        order_number=parcel.order.number,
        carrier=parcel.carrier,
        status=parcel.status,
        events=[TrackingEventOut(at=e.at, location=e.location, description=e.description) for e in parcel.events.all()],
    )


# --- issue_refund ----------------------------------------------------------------------------


class IssueRefundArgs(Args):
    order_number: str = _id("order", "Order number to refund, copied verbatim", min_length=1)
    amount: MoneyAmount
    currency: CurrencyCode
    reason: str = Field(min_length=1, max_length=200, description="Why the refund is given, in a few words.")

    @model_validator(mode="after")
    def _fits_currency(self):
        # Raises for precision finer than the currency's; "3" becomes 3.00 in USD.
        places = money.exponent(self.currency)
        money.to_minor(self.amount, self.currency)
        self.amount = self.amount.quantize(Decimal(1).scaleb(-places))
        return self

    @property
    def amount_cents(self) -> int:
        return money.to_minor(self.amount, self.currency)


class RefundResult(Result):
    describe: ClassVar = Describe("refund_id", "refund {amount} {currency} on {order_number} · {status}")
    moves_money: ClassVar = MoneyMoved("refund", "amount_cents", "currency", "order_number", "refund_id")
    reports_totals: ClassVar = OrderTotals(
        "order_number", "currency", refunded_field="refunded_cents", refundable_field="refundable_cents"
    )
    refund_id: str = _id("refund")
    order_number: str = _id("order")
    payment_id: str = _id("payment")
    amount: str = Field(description="Refunded amount in major units.")
    amount_cents: int
    currency: str
    status: str
    refunded_cents: int = Field(description="All issued refunds on the order now, minor units.")
    refundable_cents: int = Field(description="Still refundable on the order now, minor units.")


def issue_refund(ctx: ToolContext, args: IssueRefundArgs) -> RefundResult:
    order = _own_order(ctx, args.order_number)
    refund = _shop_call(
        services.refund_issue,
        order_number=order.number,
        amount_cents=args.amount_cents,
        currency=args.currency,
        reason=args.reason,
        idempotency_key=ctx.idempotency_key,
    )
    return RefundResult(
        refund_id=refund.refund_id,
        order_number=order.number,
        payment_id=refund.payment.payment_id,
        amount=money.major_str(refund.amount_cents, refund.currency),
        amount_cents=refund.amount_cents,
        currency=refund.currency,
        status=refund.status,
        refunded_cents=selectors.refunded_cents(order),
        refundable_cents=selectors.refundable_cents(order),
    )


# --- book_return -------------------------------------------------------------------------------


class BookReturnArgs(Args):
    order_number: str = _id("order", "Order the items belong to, copied verbatim", min_length=1)
    item_ids: list[str] = _id("item", "item_id of each item to return (from get_order), copied verbatim", min_length=1)
    reason: str = Field(min_length=1, max_length=200, description="Why the customer returns the items.")


class ReturnResult(Result):
    describe: ClassVar = Describe("return_id", "return of {items} on {order_number} · {status}")
    return_id: str = _id("return")
    order_number: str = _id("order")
    item_ids: list[str] = _id("item")
    items: list[str] = Field(default_factory=list, description="Product names of the returned items.")
    status: str


def book_return(ctx: ToolContext, args: BookReturnArgs) -> ReturnResult:
    order = _own_order(ctx, args.order_number)
    ret = _shop_call(
        services.return_book,
        order_number=order.number,
        item_ids=args.item_ids,
        reason=args.reason,
        idempotency_key=ctx.idempotency_key,
    )
    items = sorted(ret.items.values_list("item_id", "product__name"))
    return ReturnResult(
        return_id=ret.return_id,
        order_number=order.number,
        item_ids=[item_id for item_id, _ in items],
        items=[name for _, name in items],
        status=ret.status,
    )


# --- cancel_order ----------------------------------------------------------------------------------


class CancelOrderArgs(Args):
    order_number: str = _id("order", "Order to cancel, copied verbatim", min_length=1)
    reason: str = Field(min_length=1, max_length=200, description="Why the order is cancelled.")


class CancelRefundOut(Result):
    describe: ClassVar = Describe("refund_id", "refund {amount} {currency} on {owner}, with its cancellation")
    moves_money: ClassVar = MoneyMoved("refund", "amount_cents", "currency", id_field="refund_id")
    refund_id: str = _id("refund")
    payment_id: str = _id("payment")
    amount_cents: int
    amount: str = Field(description="The same amount in major units.")
    currency: str


class CancelResult(Result):
    describe: ClassVar = Describe("order_number", "{items} · {status}")
    reports_totals: ClassVar = OrderTotals(
        "order_number", "currency", refunded_field="refunded_cents", refundable_field="refundable_cents"
    )
    order_number: str = _id("order")
    status: str
    items: list[str] = Field(default_factory=list, description="Product names in the order.")
    refund: CancelRefundOut | None = Field(
        description="The full refund of the captured payment, if anything was captured."
    )
    currency: str
    refunded_cents: int = Field(description="All issued refunds on the order now, minor units.")
    refundable_cents: int = Field(description="Still refundable on the order now, minor units.")


def cancel_order(ctx: ToolContext, args: CancelOrderArgs) -> CancelResult:
    order = _own_order(ctx, args.order_number)
    cancellation = _shop_call(
        services.order_cancel,
        order_number=order.number,
        reason=args.reason,
        idempotency_key=ctx.idempotency_key,
    )
    refund = cancellation.refund
    return CancelResult(
        order_number=order.number,
        status="cancelled",
        currency=order.currency,
        items=list(order.items.order_by("pk").values_list("product__name", flat=True)),
        refund=refund
        and CancelRefundOut(
            refund_id=refund.refund_id,
            payment_id=refund.payment.payment_id,
            amount_cents=refund.amount_cents,
            amount=money.major_str(refund.amount_cents, refund.currency),
            currency=refund.currency,
        ),
        refunded_cents=selectors.refunded_cents(order),
        refundable_cents=selectors.refundable_cents(order),
    )


# --- offer_replacement ---------------------------------------------------------------------------------


class OfferReplacementArgs(Args):
    order_number: str = _id("order", "Order the item belongs to, copied verbatim", min_length=1)
    item_id: str = _id("item", "item_id to replace (from get_order), copied verbatim", min_length=1)
    note: str = Field("", max_length=1000, description="What is offered and on what terms.")


class ReplacementResult(Result):
    describe: ClassVar = Describe("item_id", "{product}, replacement offered")
    offered: bool
    order_number: str = _id("order")
    item_id: str = _id("item")
    product: str


def offer_replacement(ctx: ToolContext, args: OfferReplacementArgs) -> ReplacementResult:
    order = _own_order(ctx, args.order_number)
    contact = _shop_call(
        services.replacement_offer,
        order_number=order.number,
        item_id=args.item_id,
        note=args.note,
        idempotency_key=ctx.idempotency_key,
    )
    return ReplacementResult(
        offered=True, order_number=order.number, item_id=args.item_id, product=contact.item.product.name
    )


# --- send_email / log_phone_call ---------------------------------------------------------------------


class SendEmailArgs(Args):
    customer_id: str = _id("customer", min_length=1)
    subject: str = Field(min_length=1, max_length=200)
    body: str = Field(min_length=1, max_length=5000)


class EmailResult(Result):
    sent: bool
    customer_id: str = _id("customer")
    to: str


def send_email(ctx: ToolContext, args: SendEmailArgs) -> EmailResult:
    customer = _own_customer(ctx, args.customer_id)
    _shop_call(
        services.email_send,
        customer_id=customer.customer_id,
        subject=args.subject,
        body=args.body,
        idempotency_key=ctx.idempotency_key,
    )
    return EmailResult(sent=True, customer_id=customer.customer_id, to=customer.email)


class LogPhoneCallArgs(Args):
    customer_id: str = _id("customer", min_length=1)
    summary: str = Field(min_length=1, max_length=2000, description="What was said on the call.")


class PhoneCallResult(Result):
    logged: bool
    customer_id: str = _id("customer")


def log_phone_call(ctx: ToolContext, args: LogPhoneCallArgs) -> PhoneCallResult:
    customer = _own_customer(ctx, args.customer_id)
    _shop_call(
        services.phone_call_log,
        customer_id=customer.customer_id,
        summary=args.summary,
        idempotency_key=ctx.idempotency_key,
    )
    return PhoneCallResult(logged=True, customer_id=customer.customer_id)


# --- reply_to_customer ------------------------------------------------------------------------------------


class ReplyArgs(Args):
    message: str = Field(min_length=1, max_length=4000, description="The message the customer will read.")


class ReplyResult(Result):
    delivered: bool


def reply_to_customer(ctx: ToolContext, args: ReplyArgs) -> ReplyResult:
    # The loop turns the call into the agent's message; nothing changes in the shop.
    return ReplyResult(delivered=True)


# --- registration ----------------------------------------------------------------------------------------

register(
    Tool(
        name="lookup_customer",
        description="Look up this ticket's customer by email or customer_id: name, contact details, addresses, "
        "payment methods. Use it to get the customer_id other tools need. " + VERBATIM,
        args_model=LookupCustomerArgs,
        result_model=CustomerResult,
        run=lookup_customer,
    )
)
register(
    Tool(
        name="search_orders",
        description="List the customer's orders, newest first, optionally only those whose products match the query "
        "words. Returns order numbers, status, date, total and product names; call get_order for details. " + VERBATIM,
        args_model=SearchOrdersArgs,
        result_model=SearchOrdersResult,
        run=search_orders,
    )
)
register(
    Tool(
        name="get_order",
        description="Full detail of one of the customer's orders: status, items with item_id, payments, parcels with "
        "tracking numbers, refunds, returns, and how much is still refundable. Call it before any refund, "
        "return, cancellation or replacement. " + VERBATIM,
        args_model=OrderArgs,
        result_model=OrderResult,
        run=get_order,
    )
)
register(
    Tool(
        name="track_parcel",
        description="Where a parcel is: carrier status and tracking events, for a tracking number from get_order. "
        + VERBATIM,
        args_model=TrackParcelArgs,
        result_model=TrackParcelResult,
        run=track_parcel,
    )
)
register(
    Tool(
        name="issue_refund",
        description="Refund money on an order to its original payment method. Irreversible. The amount is a decimal in "
        'major units ("40.00"), in the order\'s currency, at most the refundable amount get_order reports. '
        "A retried call with the same idempotency key never refunds twice. " + VERBATIM,
        args_model=IssueRefundArgs,
        result_model=RefundResult,
        run=issue_refund,
        side_effect=True,
        resolves=True,
        target_arg="order_number",
        reversible=False,
        consent_action="refund",
    )
)
register(
    Tool(
        name="book_return",
        description="Book a return for items of a delivered order (item_ids from get_order). " + VERBATIM,
        args_model=BookReturnArgs,
        result_model=ReturnResult,
        run=book_return,
        side_effect=True,
        resolves=True,
        target_arg="order_number",
        consent_action="return",
    )
)
register(
    Tool(
        name="cancel_order",
        description="Cancel an order that is placed but not yet shipped; whatever was captured is refunded in full. "
        "Irreversible. " + VERBATIM,
        args_model=CancelOrderArgs,
        result_model=CancelResult,
        run=cancel_order,
        side_effect=True,
        resolves=True,
        target_arg="order_number",
        reversible=False,
        consent_action="cancel",
    )
)
register(
    Tool(
        name="offer_replacement",
        description="Record an offer to replace one item of an order (e.g. arrived damaged). " + VERBATIM,
        args_model=OfferReplacementArgs,
        result_model=ReplacementResult,
        run=offer_replacement,
        side_effect=True,
        resolves=True,
        target_arg="item_id",
        consent_action="replace",
        customer_text=("note",),
    )
)
register(
    Tool(
        name="send_email",
        description="Email the customer at the address on file. Do not use it if the customer asked not to be emailed. "
        + VERBATIM,
        args_model=SendEmailArgs,
        result_model=EmailResult,
        run=send_email,
        side_effect=True,
        resolves=True,
        target_arg="customer_id",
        customer_text=("subject", "body"),
    )
)
register(
    Tool(
        name="log_phone_call",
        description="Record a phone call with the customer and what was said. " + VERBATIM,
        args_model=LogPhoneCallArgs,
        result_model=PhoneCallResult,
        run=log_phone_call,
        side_effect=True,
        resolves=True,
        target_arg="customer_id",
    )
)
register(
    Tool(
        name="reply_to_customer",
        description="Send your reply to the customer in the ticket's chat. Refer to orders by their exact order number.",
        args_model=ReplyArgs,
        result_model=ReplyResult,
        run=reply_to_customer,
        resolves=True,
        customer_text=("message",),
    )
)
