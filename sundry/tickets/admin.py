from django import forms
from django.contrib import admin

from sundry.tickets.models import Ticket, TicketClass, Turn


def approval_rules_problems(rules) -> list[str]:
    """Shape check for a class's approval rules. Pure.

    {tool: {}} holds every call; {"above_cents": N} holds amounts above N minor
    units in any currency; {"above": {"USD": N, "INR": M}} sets it per currency
    (ISO codes), with above_cents, when given, for the currencies not listed.
    """
    from sundry.agent.tools.base import REGISTRY

    example = '{"issue_refund": {"above": {"USD": 20000, "INR": 1500000}}}'
    if not isinstance(rules, dict):
        return [f"Approval rules must be an object of tool name → options, e.g. {example}."]
    problems = []

    def amount_ok(value) -> bool:
        return isinstance(value, int) and not isinstance(value, bool) and value >= 0

    for tool, options in rules.items():
        if tool not in REGISTRY:
            problems.append(f"'{tool}' is not a tool. Known tools: {', '.join(sorted(REGISTRY))}.")
            continue
        if not isinstance(options, dict):
            problems.append(f"'{tool}': options must be an object ({{}} for always, or {{\"above_cents\": 10000}}).")
            continue
        unknown = set(options) - {"above_cents", "above"}
        if unknown:
            problems.append(f"'{tool}': unknown option(s) {', '.join(sorted(unknown))}; "
                            "only above_cents and above are allowed.")
        if "above_cents" in options and not amount_ok(options["above_cents"]):
            problems.append(f"'{tool}': above_cents must be a whole number of minor units, 0 or more.")
        if "above" in options:
            per = options["above"]
            if not isinstance(per, dict) or not per:
                problems.append(f"'{tool}': above must be an object of currency → minor units, e.g. "
                                '{"USD": 20000, "INR": 1500000}.')
                continue
            for code, value in per.items():
                if not (isinstance(code, str) and len(code) == 3 and code.isalpha() and code.isupper()):
                    problems.append(f"'{tool}': '{code}' is not a currency code (three capital letters, e.g. USD).")
                elif not amount_ok(value):
                    problems.append(f"'{tool}': the {code} threshold must be a whole number of minor units, 0 or more.")
    return problems


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
        problems = approval_rules_problems(rules if rules is not None else {})
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
