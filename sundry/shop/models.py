"""The demo shop: customers, orders, payments, parcels, refunds, returns.

Identifiers are opaque and dense on purpose. Order numbers (`SU-` and five
digits) are packed so that a one-character mutation often names another real
order; everything else carries a typed prefix (`cus_`, `pay_`, `rfd_` ...).
Money is stored in minor units with its currency.
"""

from django.conf import settings
from django.db import models
from django.db.models import Q

from sundry.people.services import customer_by_reference, customer_link
from sundry.shop.ids import DOMAIN_NAME


class Currency(models.TextChoices):
    USD = "USD"
    EUR = "EUR"
    GBP = "GBP"
    INR = "INR"


class Customer(models.Model):
    customer_id = models.CharField(max_length=20, unique=True)
    name = models.CharField(max_length=120)
    email = models.EmailField()
    phone = models.CharField(max_length=32)
    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="shop_customer"
    )
    created_at = models.DateTimeField()

    def __str__(self):
        return f"{self.name} ({self.customer_id})"

    def link(self):
        """The desk's record of this customer (`sundry.people`), created or brought up to date."""
        return customer_link(
            domain=DOMAIN_NAME,
            external_key=self.customer_id,
            name=self.name,
            email=self.email,
            phone=self.phone,
            user_id=self.user_id,
        )

    @property
    def person(self):
        """The desk's record of this customer, found by the shop's domain name and its ID (made on first
        use for a customer written around `save()`)."""
        return customer_by_reference(DOMAIN_NAME, self.customer_id) or self.link()


class Address(models.Model):
    address_id = models.CharField(max_length=20, unique=True)
    customer = models.ForeignKey(Customer, on_delete=models.CASCADE, related_name="addresses")
    line1 = models.CharField(max_length=200)
    city = models.CharField(max_length=80)
    postcode = models.CharField(max_length=16)
    country = models.CharField(max_length=2)

    class Meta:
        verbose_name_plural = "addresses"

    def __str__(self):
        return f"{self.line1}, {self.city} ({self.address_id})"


class PaymentMethod(models.Model):
    class Kind(models.TextChoices):
        CARD = "card"
        UPI = "upi"
        PAYPAL = "paypal"
        GIFT_CARD = "gift_card"

    payment_method_id = models.CharField(max_length=20, unique=True)
    customer = models.ForeignKey(Customer, on_delete=models.CASCADE, related_name="payment_methods")
    kind = models.CharField(max_length=16, choices=Kind.choices)
    label = models.CharField(max_length=60, help_text="e.g. 'Visa ending 4242'")

    def __str__(self):
        return f"{self.label} ({self.payment_method_id})"


class Product(models.Model):
    sku = models.CharField(max_length=20, unique=True)
    name = models.CharField(max_length=120)
    price_cents = models.PositiveIntegerField()

    def __str__(self):
        return f"{self.name} ({self.sku})"


class Order(models.Model):
    class Status(models.TextChoices):
        PLACED = "placed"
        SHIPPED = "shipped"
        DELIVERED = "delivered"
        CANCELLED = "cancelled"
        RETURNED = "returned"

    number = models.CharField(max_length=12, unique=True)
    customer = models.ForeignKey(Customer, on_delete=models.CASCADE, related_name="orders")
    address = models.ForeignKey(Address, on_delete=models.PROTECT, related_name="orders")
    payment_method = models.ForeignKey(PaymentMethod, on_delete=models.PROTECT, related_name="orders")
    status = models.CharField(max_length=16, choices=Status.choices)
    currency = models.CharField(max_length=3, choices=Currency.choices)
    total_cents = models.PositiveIntegerField()
    placed_at = models.DateTimeField()

    class Meta:
        ordering = ["-placed_at"]
        indexes = [models.Index(fields=["customer", "placed_at"])]

    def __str__(self):
        return self.number


class OrderItem(models.Model):
    item_id = models.CharField(max_length=20, unique=True)
    order = models.ForeignKey(Order, on_delete=models.CASCADE, related_name="items")
    product = models.ForeignKey(Product, on_delete=models.PROTECT, related_name="order_items")
    quantity = models.PositiveIntegerField(default=1)
    unit_price_cents = models.PositiveIntegerField()

    def __str__(self):
        return f"{self.quantity} × {self.product.name} ({self.item_id})"


class Payment(models.Model):
    class Status(models.TextChoices):
        AUTHORISED = "authorised"
        CAPTURED = "captured"

    payment_id = models.CharField(max_length=20, unique=True)
    order = models.ForeignKey(Order, on_delete=models.CASCADE, related_name="payments")
    method = models.ForeignKey(PaymentMethod, on_delete=models.PROTECT, related_name="payments")
    amount_cents = models.PositiveIntegerField()
    currency = models.CharField(max_length=3, choices=Currency.choices)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.CAPTURED)
    created_at = models.DateTimeField()

    def __str__(self):
        return self.payment_id


class Parcel(models.Model):
    class Status(models.TextChoices):
        LABEL_CREATED = "label_created"
        IN_TRANSIT = "in_transit"
        OUT_FOR_DELIVERY = "out_for_delivery"
        DELIVERED = "delivered"
        LOST = "lost"

    tracking_number = models.CharField(max_length=24, unique=True)
    order = models.ForeignKey(Order, on_delete=models.CASCADE, related_name="parcels")
    carrier = models.CharField(max_length=40)
    status = models.CharField(max_length=20, choices=Status.choices)

    def __str__(self):
        return self.tracking_number


class TrackingEvent(models.Model):
    parcel = models.ForeignKey(Parcel, on_delete=models.CASCADE, related_name="events")
    at = models.DateTimeField()
    location = models.CharField(max_length=80)
    description = models.CharField(max_length=160)

    class Meta:
        ordering = ["at"]


class Refund(models.Model):
    class Status(models.TextChoices):
        ISSUED = "issued"
        FAILED = "failed"

    refund_id = models.CharField(max_length=20, unique=True)
    order = models.ForeignKey(Order, on_delete=models.CASCADE, related_name="refunds")
    payment = models.ForeignKey(Payment, on_delete=models.PROTECT, related_name="refunds")
    amount_cents = models.PositiveIntegerField()
    currency = models.CharField(max_length=3, choices=Currency.choices)
    reason = models.CharField(max_length=200)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.ISSUED)
    # The same key never moves money twice, even under concurrent retries.
    idempotency_key = models.CharField(max_length=80, unique=True)
    created_at = models.DateTimeField()

    class Meta:
        constraints = [models.CheckConstraint(condition=Q(amount_cents__gt=0), name="refund_amount_positive")]

    def __str__(self):
        return self.refund_id


class Return(models.Model):
    class Status(models.TextChoices):
        BOOKED = "booked"
        RECEIVED = "received"
        CLOSED = "closed"

    return_id = models.CharField(max_length=20, unique=True)
    order = models.ForeignKey(Order, on_delete=models.CASCADE, related_name="returns")
    items = models.ManyToManyField(OrderItem, related_name="returns")
    reason = models.CharField(max_length=200)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.BOOKED)
    idempotency_key = models.CharField(max_length=80, unique=True)
    created_at = models.DateTimeField()

    def __str__(self):
        return self.return_id


class Contact(models.Model):
    """An outbound contact with a customer: an email, a logged phone call, a replacement offer.

    Written only by `shop.services`; the idempotency key makes a retried tool
    call record (and send) the contact once.
    """

    class Kind(models.TextChoices):
        EMAIL = "email"
        PHONE_CALL = "phone_call", "phone call"
        REPLACEMENT_OFFER = "replacement_offer", "replacement offer"

    contact_id = models.CharField(max_length=20, unique=True)
    customer = models.ForeignKey(Customer, on_delete=models.CASCADE, related_name="contacts")
    kind = models.CharField(max_length=20, choices=Kind.choices)
    order = models.ForeignKey(Order, null=True, blank=True, on_delete=models.CASCADE, related_name="contacts")
    item = models.ForeignKey(OrderItem, null=True, blank=True, on_delete=models.CASCADE, related_name="contacts")
    subject = models.CharField(max_length=200, blank=True)
    body = models.TextField()
    idempotency_key = models.CharField(max_length=80, unique=True)
    created_at = models.DateTimeField()

    class Meta:
        ordering = ["created_at", "pk"]

    def __str__(self):
        return f"{self.get_kind_display()} to {self.customer_id} ({self.contact_id})"


class Cancellation(models.Model):
    """An order's cancellation: one per order, keyed so a retried cancel is a replay."""

    order = models.OneToOneField(Order, on_delete=models.CASCADE, related_name="cancellation")
    reason = models.CharField(max_length=200)
    # The refund of the captured payment, when there was one to refund.
    refund = models.OneToOneField(Refund, null=True, blank=True, on_delete=models.SET_NULL, related_name="cancellation")
    idempotency_key = models.CharField(max_length=80, unique=True)
    created_at = models.DateTimeField()

    def __str__(self):
        return f"cancellation of {self.order_id}"
