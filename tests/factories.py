"""factory_boy factories for the shop and tickets. Identifiers follow context.idformats."""

from __future__ import annotations

import factory
from django.utils import timezone

from sundry.shop import models as shop
from sundry.tickets import models as tickets


class ProductFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = shop.Product

    sku = factory.Sequence(lambda n: f"SKU-{n:05d}")
    name = factory.Sequence(lambda n: f"Product {n}")
    price_cents = 2500


class CustomerFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = shop.Customer

    customer_id = factory.Sequence(lambda n: f"cus_{n:08d}")
    name = factory.Sequence(lambda n: f"Customer {n}")
    email = factory.Sequence(lambda n: f"customer{n}@example.com")
    phone = "+44 20 7946 0000"
    created_at = factory.LazyFunction(timezone.now)


class AddressFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = shop.Address

    address_id = factory.Sequence(lambda n: f"adr_{n:08d}")
    customer = factory.SubFactory(CustomerFactory)
    line1 = "1 High Street"
    city = "London"
    postcode = "N1 1AA"
    country = "GB"


class PaymentMethodFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = shop.PaymentMethod

    payment_method_id = factory.Sequence(lambda n: f"pm_{n:08d}")
    customer = factory.SubFactory(CustomerFactory)
    kind = shop.PaymentMethod.Kind.CARD
    label = "Visa ending 4242"


class OrderFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = shop.Order

    number = factory.Sequence(lambda n: f"SU-{10000 + n:05d}")
    customer = factory.SubFactory(CustomerFactory)
    address = factory.SubFactory(AddressFactory, customer=factory.SelfAttribute("..customer"))
    payment_method = factory.SubFactory(PaymentMethodFactory, customer=factory.SelfAttribute("..customer"))
    status = shop.Order.Status.DELIVERED
    currency = shop.Currency.USD
    total_cents = 10000
    placed_at = factory.LazyFunction(timezone.now)


class OrderItemFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = shop.OrderItem

    item_id = factory.Sequence(lambda n: f"itm_{n:08d}")
    order = factory.SubFactory(OrderFactory)
    product = factory.SubFactory(ProductFactory)
    quantity = 1
    unit_price_cents = factory.SelfAttribute("product.price_cents")


class PaymentFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = shop.Payment

    payment_id = factory.Sequence(lambda n: f"pay_{n:08d}")
    order = factory.SubFactory(OrderFactory)
    method = factory.SelfAttribute("order.payment_method")
    amount_cents = factory.SelfAttribute("order.total_cents")
    currency = factory.SelfAttribute("order.currency")
    status = shop.Payment.Status.CAPTURED
    created_at = factory.LazyFunction(timezone.now)


class ParcelFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = shop.Parcel

    tracking_number = factory.Sequence(lambda n: f"1Z{n:014d}")
    order = factory.SubFactory(OrderFactory)
    carrier = "UPS"
    status = shop.Parcel.Status.IN_TRANSIT


class TrackingEventFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = shop.TrackingEvent

    parcel = factory.SubFactory(ParcelFactory)
    at = factory.LazyFunction(timezone.now)
    location = "London Gateway"
    description = "Departed facility"


class RefundFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = shop.Refund

    refund_id = factory.Sequence(lambda n: f"rfd_{n:08d}")
    order = factory.SubFactory(OrderFactory)
    payment = factory.SubFactory(PaymentFactory, order=factory.SelfAttribute("..order"))
    amount_cents = 1000
    currency = factory.SelfAttribute("order.currency")
    reason = "Goodwill"
    status = shop.Refund.Status.ISSUED
    idempotency_key = factory.Sequence(lambda n: f"factory-refund-{n}")
    created_at = factory.LazyFunction(timezone.now)


class ReturnFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = shop.Return
        skip_postgeneration_save = True

    return_id = factory.Sequence(lambda n: f"ret_{n:08d}")
    order = factory.SubFactory(OrderFactory)
    reason = "Too small"
    status = shop.Return.Status.BOOKED
    idempotency_key = factory.Sequence(lambda n: f"factory-return-{n}")
    created_at = factory.LazyFunction(timezone.now)

    @factory.post_generation
    def items(self, create, extracted, **kwargs):
        if create and extracted:
            self.items.set(extracted)


class ContactFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = shop.Contact

    contact_id = factory.Sequence(lambda n: f"ctc_{n:08d}")
    customer = factory.SubFactory(CustomerFactory)
    kind = shop.Contact.Kind.EMAIL
    subject = "About your order"
    body = "Hello"
    idempotency_key = factory.Sequence(lambda n: f"factory-contact-{n}")
    created_at = factory.LazyFunction(timezone.now)


def paid_order(
    *,
    customer=None,
    status=shop.Order.Status.DELIVERED,
    prices=(6000, 4000),
    currency="USD",
    payment_status=shop.Payment.Status.CAPTURED,
    **kwargs,
) -> shop.Order:
    """An order with one item per price and one payment of its total."""
    extra = {"customer": customer} if customer is not None else {}
    order = OrderFactory(status=status, currency=currency, total_cents=sum(prices), **extra, **kwargs)
    for price in prices:
        OrderItemFactory(order=order, unit_price_cents=price, product=ProductFactory(price_cents=price))
    PaymentFactory(order=order, status=payment_status)
    return order


class TicketClassFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = tickets.TicketClass

    name = factory.Sequence(lambda n: f"Class {n}")
    slug = factory.Sequence(lambda n: f"class-{n}")
    token_budget = 8000


class TicketFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = tickets.Ticket

    # The desk's record of a new shop customer (saving a shop customer links it).
    customer = factory.LazyFunction(lambda: CustomerFactory().person)
    ticket_class = factory.SubFactory(TicketClassFactory)
    subject = factory.Sequence(lambda n: f"Ticket {n}")


def customer_confirms(ticket, *, decline: bool = False) -> list:
    """The customer presses Confirm (or Not now) on every open card of the ticket, oldest first, through
    the same service the page's button posts to. Returns the decided cards."""
    from sundry.agent.cardstore import open_cards
    from sundry.agent.models import Confirmation
    from sundry.agent.services import confirmation_decide

    decided = []
    for card in open_cards(tickets.Ticket.objects.get(pk=ticket.pk)):
        fresh = tickets.Ticket.objects.select_related("ticket_class", "customer").get(pk=ticket.pk)
        decided.append(
            confirmation_decide(
                card_id=card.pk,
                ticket=fresh,
                confirm=not decline,
                digest=card.digest,
                via=Confirmation.Via.BUTTON,
                wake=False,
            )
        )
    return decided
