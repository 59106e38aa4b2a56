from django.contrib import admin

from sundry.people.models import Customer


@admin.register(Customer)
class CustomerAdmin(admin.ModelAdmin):
    list_display = ("name", "email", "domain", "external_key", "user")
    search_fields = ("name", "email", "phone", "external_key")
    list_filter = ("domain",)
    raw_id_fields = ("user",)
