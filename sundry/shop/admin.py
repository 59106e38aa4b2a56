"""Admin for the demo shop. Foreign keys use raw ID widgets so pages stay fast with thousands of orders."""

from django.contrib import admin

from .models import (
    Address,
    Cancellation,
    Contact,
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


class AddressInline(admin.TabularInline):
    model = Address
    extra = 0
    fields = ("address_id", "line1", "city", "postcode", "country")


class PaymentMethodInline(admin.TabularInline):
    model = PaymentMethod
    extra = 0
    fields = ("payment_method_id", "kind", "label")


@admin.register(Customer)
class CustomerAdmin(admin.ModelAdmin):
    list_display = ("customer_id", "name", "email", "phone", "user", "created_at")
    search_fields = ("customer_id", "name", "email", "phone")
    raw_id_fields = ("user",)
    date_hierarchy = "created_at"
    inlines = [AddressInline, PaymentMethodInline]
    list_select_related = ("user",)


@admin.register(Address)
class AddressAdmin(admin.ModelAdmin):
    list_display = ("address_id", "customer", "line1", "city", "postcode", "country")
    search_fields = ("address_id", "line1", "city", "postcode", "customer__customer_id", "customer__name")
    list_filter = ("country",)
    raw_id_fields = ("customer",)
    list_select_related = ("customer",)


@admin.register(PaymentMethod)
class PaymentMethodAdmin(admin.ModelAdmin):
    list_display = ("payment_method_id", "customer", "kind", "label")
    search_fields = ("payment_method_id", "label", "customer__customer_id", "customer__name")
    list_filter = ("kind",)
    raw_id_fields = ("customer",)
    list_select_related = ("customer",)


@admin.register(Product)
class ProductAdmin(admin.ModelAdmin):
    list_display = ("sku", "name", "price_cents")
    search_fields = ("sku", "name")
    ordering = ("name",)


class OrderItemInline(admin.TabularInline):
    model = OrderItem
    extra = 0
    fields = ("item_id", "product", "quantity", "unit_price_cents")
    raw_id_fields = ("product",)


class PaymentInline(admin.TabularInline):
    model = Payment
    extra = 0
    fields = ("payment_id", "method", "amount_cents", "currency", "status", "created_at")
    raw_id_fields = ("method",)


class ParcelInline(admin.TabularInline):
    model = Parcel
    extra = 0
    fields = ("tracking_number", "carrier", "status")
    show_change_link = True


class RefundInline(admin.TabularInline):
    model = Refund
    extra = 0
    fields = ("refund_id", "payment", "amount_cents", "currency", "status", "reason", "idempotency_key", "created_at")
    raw_id_fields = ("payment",)


class ReturnInline(admin.TabularInline):
    model = Return
    extra = 0
    fields = ("return_id", "status", "reason", "idempotency_key", "created_at")
    show_change_link = True


class CancellationInline(admin.StackedInline):
    model = Cancellation
    fk_name = "order"
    extra = 0
    fields = ("reason", "refund", "idempotency_key", "created_at")
    raw_id_fields = ("refund",)


@admin.register(Order)
class OrderAdmin(admin.ModelAdmin):
    list_display = ("number", "customer", "status", "currency", "total_cents", "placed_at")
    search_fields = ("number", "customer__customer_id", "customer__name", "customer__email")
    list_filter = ("status", "currency")
    raw_id_fields = ("customer", "address", "payment_method")
    date_hierarchy = "placed_at"
    list_select_related = ("customer",)
    inlines = [OrderItemInline, PaymentInline, ParcelInline, RefundInline, ReturnInline, CancellationInline]


@admin.register(OrderItem)
class OrderItemAdmin(admin.ModelAdmin):
    list_display = ("item_id", "order", "product", "quantity", "unit_price_cents")
    search_fields = ("item_id", "order__number", "product__sku", "product__name")
    raw_id_fields = ("order", "product")
    list_select_related = ("order", "product")


@admin.register(Payment)
class PaymentAdmin(admin.ModelAdmin):
    list_display = ("payment_id", "order", "method", "amount_cents", "currency", "status", "created_at")
    search_fields = ("payment_id", "order__number", "method__payment_method_id")
    list_filter = ("status", "currency")
    raw_id_fields = ("order", "method")
    list_select_related = ("order", "method")


class TrackingEventInline(admin.TabularInline):
    model = TrackingEvent
    extra = 0
    fields = ("at", "location", "description")


@admin.register(Parcel)
class ParcelAdmin(admin.ModelAdmin):
    list_display = ("tracking_number", "order", "carrier", "status")
    search_fields = ("tracking_number", "order__number")
    list_filter = ("status", "carrier")
    raw_id_fields = ("order",)
    list_select_related = ("order",)
    inlines = [TrackingEventInline]


@admin.register(TrackingEvent)
class TrackingEventAdmin(admin.ModelAdmin):
    list_display = ("parcel", "at", "location", "description")
    search_fields = ("parcel__tracking_number", "parcel__order__number", "location", "description")
    raw_id_fields = ("parcel",)
    list_select_related = ("parcel",)


@admin.register(Refund)
class RefundAdmin(admin.ModelAdmin):
    list_display = ("refund_id", "order", "payment", "amount_cents", "currency", "status", "created_at")
    search_fields = ("refund_id", "idempotency_key", "order__number", "payment__payment_id")
    list_filter = ("status", "currency")
    raw_id_fields = ("order", "payment")
    list_select_related = ("order", "payment")


@admin.register(Return)
class ReturnAdmin(admin.ModelAdmin):
    list_display = ("return_id", "order", "status", "reason", "created_at")
    search_fields = ("return_id", "idempotency_key", "order__number")
    list_filter = ("status",)
    raw_id_fields = ("order", "items")
    list_select_related = ("order",)


@admin.register(Cancellation)
class CancellationAdmin(admin.ModelAdmin):
    list_display = ("order", "refund", "reason", "created_at")
    search_fields = ("order__number", "refund__refund_id", "idempotency_key", "reason")
    raw_id_fields = ("order", "refund")
    list_select_related = ("order", "refund")


@admin.register(Contact)
class ContactAdmin(admin.ModelAdmin):
    list_display = ("contact_id", "customer", "kind", "order", "subject", "created_at")
    search_fields = (
        "contact_id",
        "idempotency_key",
        "customer__customer_id",
        "customer__name",
        "order__number",
        "subject",
    )
    list_filter = ("kind",)
    raw_id_fields = ("customer", "order", "item")
    list_select_related = ("customer", "order")
