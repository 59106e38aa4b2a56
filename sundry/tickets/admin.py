from django.contrib import admin

from sundry.tickets.models import Ticket, TicketClass, Turn


@admin.register(TicketClass)
class TicketClassAdmin(admin.ModelAdmin):
    list_display = ("name", "token_budget", "trigger_fraction", "recent_turns_kept", "working_model",
                    "summariser_model", "ledger_cap", "pinned_rules_cap")
    prepopulated_fields = {"slug": ("name",)}
    fieldsets = (
        (None, {"fields": ("name", "slug", "description")}),
        ("Budget", {"fields": ("token_budget", "trigger_fraction", "recent_turns_kept", "ledger_cap", "pinned_rules_cap")}),
        ("Models", {"fields": ("working_model", "summariser_model")}),
        ("Approvals", {"fields": ("approval_rules",)}),
    )


class TurnInline(admin.TabularInline):
    model = Turn
    extra = 0
    fields = ("number", "author", "kind", "text", "tokens")
    readonly_fields = fields
    can_delete = False
    show_change_link = True


@admin.register(Ticket)
class TicketAdmin(admin.ModelAdmin):
    list_display = ("id", "subject", "customer", "ticket_class", "status", "handler", "version", "updated_at")
    list_filter = ("status", "handler", "ticket_class")
    search_fields = ("subject", "customer__customer_id", "customer__name")
    raw_id_fields = ("customer", "assigned_to")
    readonly_fields = ("version", "last_turn_number", "agent_claimed_at")
    inlines = [TurnInline]


@admin.register(Turn)
class TurnAdmin(admin.ModelAdmin):
    list_display = ("ticket", "number", "author", "kind", "tokens", "encoding", "created_at")
    list_filter = ("author", "kind")
    raw_id_fields = ("ticket",)
    search_fields = ("text",)
