from django import forms
from django.contrib import admin

from sundry.agent import approvals
from sundry.tickets.models import Ticket, TicketClass, Turn


class TicketClassForm(forms.ModelForm):
    class Meta:
        model = TicketClass
        fields = "__all__"

    def _model(self, field):
        from sundry.agent.gateway import validate_model_name

        name = (self.cleaned_data.get(field) or "").strip()
        try:
            validate_model_name(name)
        except ValueError as exc:
            raise forms.ValidationError(str(exc)) from exc
        return name

    def clean_working_model(self):
        return self._model("working_model")

    def clean_summariser_model(self):
        return self._model("summariser_model")

    def clean_approval_rules(self):
        rules = self.cleaned_data.get("approval_rules")
        problems = approvals.problems(rules if rules is not None else {})
        if problems:
            raise forms.ValidationError(problems)
        return rules or {}

    def clean(self):
        data = super().clean()
        budget, kept = data.get("token_budget"), data.get("recent_turns_kept")
        fraction = data.get("trigger_fraction")
        if budget and fraction and kept and int(budget * fraction) < kept * 50:
            self.add_error("recent_turns_kept", "The recent turns kept cannot fit under the trigger: "
                           "lower it or raise the budget (about 50 tokens a turn at the least).")
        return data


@admin.register(TicketClass)
class TicketClassAdmin(admin.ModelAdmin):
    form = TicketClassForm
    list_display = ("name", "token_budget", "trigger_fraction", "recent_turns_kept", "working_model",
                    "summariser_model", "ledger_share", "pinned_rules_cap")
    prepopulated_fields = {"slug": ("name",)}
    fieldsets = (
        (None, {"fields": ("name", "slug", "description")}),
        ("Budget", {"fields": ("token_budget", "trigger_fraction", "recent_turns_kept", "ledger_share", "pinned_rules_cap")}),
        ("Models", {"fields": ("working_model", "summariser_model", "text_tool_calls")}),
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
