from django import forms
from django.contrib import admin, messages
from django.db import models, transaction
from django.urls import reverse
from django.utils.html import format_html

from sundry.agent.guards import approvals
from sundry.agent.provider.gateway import validate_model_name
from sundry.core.jsonform import BoundedJSONField
from sundry.desk import canned
from sundry.desk.approvaltable import ANY_CURRENCY, ApprovalTableField, rows_from_rules, rules_from_rows
from sundry.desk.budgetfit import fixed_part
from sundry.desk.classchanges import class_change_record
from sundry.tickets.models import CannedReply, Tag, Ticket, TicketClass, TicketClassChange, Turn
from sundry.tickets.services import ticket_class_save, ticket_fields_save
from sundry.tooling.domain import domain_for, tools_for
from sundry.tooling.tools import name_list
from sundry.toolservers import offered
from sundry.toolservers.admin import servers_of

# What a change to these can do to the room a request has left; the system prompt holds the description.
BUDGET_FIELDS = ("token_budget", "trigger_fraction", "recent_turns_kept", "ledger_share", "description")

# The class's own settings an audit record names (not its relations).
AUDITED = {f.name for f in TicketClass._meta.concrete_fields} - {"id", "created_at"}


class TicketClassForm(forms.ModelForm):
    approval_table = ApprovalTableField(
        label="Approval rules",
        help_text="One row per rule. Tool alone: every call waits for staff. Tool, currency and amount: calls "
        "above that amount (in the currency's major units, e.g. 200.00 USD) wait, and a currency not "
        f"listed is always held unless a row with currency {ANY_CURRENCY} gives a threshold for the "
        "rest, in minor units (cents). Clear a row's cells to remove it.",
    )
    accept_tight_budget = forms.BooleanField(
        required=False,
        label="Save this budget anyway",
        help_text="Only asked when the budget leaves compaction too little room: tick it to keep the budget "
        "after reading the warning.",
    )

    class Meta:
        model = TicketClass
        fields = "__all__"
        help_texts = {
            "token_budget": "Most tokens one model request of a ticket in this class should take: the system prompt "
            "and tool schemas (the same in every request), then pinned rules, the ID ledger, state, "
            "the summary and the recent turns. Compaction keeps requests under it by summarising "
            "older turns; it cannot shrink the fixed part (shown below, once saved).",
            "trigger_fraction": "Compact when the request a step would send exceeds this share of the budget "
            "(0.8 of 8,000 = 6,400 tokens). Lower compacts earlier and more often; higher lets "
            "requests come closer to the budget before a summary replaces older turns.",
        }

    budget_warning = ""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["approval_table"].initial = rows_from_rules(self.instance.approval_rules)
        if "approval_rules" in self.fields:  # what the guard reads, written from the table
            rules = self.fields["approval_rules"]
            rules.widget.attrs["readonly"] = True
            rules.help_text = "What the approval guard reads (minor units), written from the table above when you save."

    def _remote_tools(self) -> set[str]:
        # The tools the class's servers last listed are the class's tools too.
        return {
            t.get("name")
            for s in (self.instance.tool_servers.all() if self.instance.pk else [])
            for t in s.listed_tools or []
        }

    def _model(self, field):
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
        problems = approvals.problems(rules if rules is not None else {}, known=self._remote_tools())
        if problems:
            raise forms.ValidationError(problems)
        return rules or {}

    def clean_denied_tools(self):
        """Only names this class could offer: a typo would otherwise deny nothing, silently."""
        text = (self.cleaned_data.get("denied_tools") or "").strip()
        names = name_list(text)
        known = {t.name for t in tools_for(domain_for(self.instance))} | {
            n for s in (self.instance.tool_servers.all() if self.instance.pk else []) for n in offered.known(s)
        }
        unknown = [n for n in names if n not in known]
        if unknown:
            raise forms.ValidationError(
                f"Not a tool of this class: {', '.join(unknown)}. Its tools: {', '.join(sorted(known))}."
            )
        return ", ".join(names)

    def _clean_table(self, data) -> None:
        """The table, when sent, writes the rules the guard reads (the JSON field's own value is replaced)."""
        rows = data.get("approval_table")
        if rows is None:
            return
        rules, problems = rules_from_rows(rows)
        problems = problems or approvals.problems(rules, known=self._remote_tools())
        if problems:
            self.add_error("approval_table", problems)
            return
        self.errors.pop("approval_rules", None)
        data["approval_rules"] = rules

    def clean(self):
        data = super().clean()
        self._clean_table(data)
        budget, kept = data.get("token_budget"), data.get("recent_turns_kept")
        fraction = data.get("trigger_fraction")
        if budget and fraction and kept and int(budget * fraction) < kept * 50:
            self.add_error(
                "recent_turns_kept",
                "The recent turns kept cannot fit under the trigger: "
                "lower it or raise the budget (about 50 tokens a turn at the least).",
            )
        elif budget and fraction and kept and not self.errors:
            self._check_room(data)
        return data

    def _check_room(self, data) -> None:
        """Refuse a budget whose fixed part leaves no room; ask before keeping one compaction cannot reach."""
        if self.instance.pk and not set(self.changed_data) & set(BUDGET_FIELDS):
            return  # the budget is as it was: an edit elsewhere is not asked about it again
        fit = fixed_part(
            self.instance,
            budget=data["token_budget"],
            trigger_fraction=data["trigger_fraction"],
            recent_turns_kept=data["recent_turns_kept"],
            ledger_share=data.get("ledger_share"),
            description=data.get("description", ""),
        )
        if fit.impossible:
            self.add_error(
                "token_budget",
                f"{fit.explain()} Even with {fit.kept_turns} recent turns at "
                f"50 tokens each and a summary, a request needs {fit.hard_floor:,}: raise the budget "
                f"or the trigger, or keep fewer recent turns.",
            )
        elif fit.tight and not data.get("accept_tight_budget"):
            self.add_error("token_budget", fit.problem() + " To keep it anyway, tick “Save this budget anyway”.")
        elif fit.tight:
            self.budget_warning = fit.problem()


@admin.register(TicketClass)
class TicketClassAdmin(admin.ModelAdmin):
    form = TicketClassForm
    formfield_overrides = {models.JSONField: {"form_class": BoundedJSONField}}
    list_display = (
        "name",
        "token_budget",
        "trigger_fraction",
        "recent_turns_kept",
        "working_model",
        "summariser_model",
        "ledger_share",
        "pinned_rules_cap",
    )
    prepopulated_fields = {"slug": ("name",)}
    fieldsets = (
        (None, {"fields": ("name", "slug", "description")}),
        (
            "Budget",
            {
                "fields": (
                    "token_budget",
                    "trigger_fraction",
                    "recent_turns_kept",
                    "ledger_share",
                    "pinned_rules_cap",
                    "request_room",
                    "accept_tight_budget",
                )
            },
        ),
        ("Models", {"fields": ("working_model", "summariser_model", "text_tool_calls", "denied_tools")}),
        ("Approvals", {"fields": ("approval_table", "approval_rules", "approval_window_hours")}),
        ("Response targets", {"fields": ("first_response_minutes", "next_response_minutes")}),
        ("Tool servers", {"fields": ("tool_servers",)}),
    )
    readonly_fields = ("tool_servers", "request_room")

    @admin.display(description="Room in each request")
    def request_room(self, obj):
        if obj is None or obj.pk is None:
            return "Shown once the class is saved: the fixed part of each request and what it leaves."
        fit = fixed_part(obj)
        return format_html(
            '{}{} <a href="{}">What would another budget do?</a>',
            fit.explain(),
            format_html(' <strong class="errornote">{}</strong>', fit.problem()) if fit.tight else "",
            reverse("desk-budget-lab", args=[obj.pk]),
        )

    @admin.display(description="MCP tool servers")
    def tool_servers(self, obj):
        return servers_of(obj)  # each server's own page has its settings and "test connection"

    def save_model(self, request, obj, form, change):
        # Through the service: every ticket of the class re-renders its Budget panel; the audit
        # record keeps what the form changed, from what (the row as stored) to what.
        with transaction.atomic():
            stored = TicketClass.objects.select_for_update().filter(pk=obj.pk).first() if change else None
            before = {name: getattr(stored, name) for name in AUDITED} if stored is not None else {}
            ticket_class_save(ticket_class=obj)
            if stored is not None:
                class_change_record(ticket_class=obj, before=before, by=request.user)
        if form.budget_warning:  # kept on purpose, and said again where the admin reads the result
            messages.warning(request, f"Saved against the warning. {form.budget_warning}")


class TurnInline(admin.TabularInline):
    model = Turn
    extra = 0
    fields = ("number", "author", "kind", "text", "tokens")
    readonly_fields = fields
    can_delete = False
    show_change_link = True

    def has_add_permission(self, request, obj=None):
        return False  # turns are the record; a correction is a new turn


@admin.register(Ticket)
class TicketAdmin(admin.ModelAdmin):
    list_display = ("id", "subject", "customer", "ticket_class", "status", "handler", "version", "updated_at")
    list_filter = ("status", "priority", "handler", "ticket_class")
    search_fields = ("subject", "customer__external_key", "customer__name")
    raw_id_fields = ("customer", "assigned_to")
    filter_horizontal = ("tags",)
    readonly_fields = ("version", "last_turn_number", "agent_claimed_at", "agent_claimed_by")
    inlines = [TurnInline]

    def save_model(self, request, obj, form, change):
        if not change:
            super().save_model(request, obj, form, change)
            return
        # Only what the form changed, bumped and pushed: the counters it loaded may be stale by now.
        ticket_fields_save(ticket=obj, fields=list(form.changed_data))


@admin.register(Turn)
class TurnAdmin(admin.ModelAdmin):
    list_display = ("ticket", "number", "author", "kind", "tokens", "encoding", "created_at")
    list_filter = ("author", "kind")
    raw_id_fields = ("ticket",)
    search_fields = ("text",)

    # Turns are the record: every request, summary and audit is rendered from them.
    # A correction is a new turn (a staff note), never an edit.
    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


class CannedReplyForm(forms.ModelForm):
    class Meta:
        model = CannedReply
        fields = "__all__"
        help_texts = {
            "body": "Placeholders: "
            + ", ".join("{%s}" % name for name in canned.PLACEHOLDERS)
            + ". Staff edit the text before it is sent."
        }

    def clean_body(self):
        body = self.cleaned_data["body"]
        try:
            names = canned.names_in(body)
        except ValueError as exc:
            raise forms.ValidationError(f"Unbalanced braces: {exc}.") from exc
        unknown = names - set(canned.PLACEHOLDERS)
        if unknown:
            raise forms.ValidationError(f"Unknown placeholder(s): {', '.join(sorted(unknown))}.")
        return body


@admin.register(CannedReply)
class CannedReplyAdmin(admin.ModelAdmin):
    form = CannedReplyForm
    list_display = ("title", "ticket_class")
    search_fields = ("title", "body")


@admin.register(Tag)
class TagAdmin(admin.ModelAdmin):
    search_fields = ("name",)


@admin.register(TicketClassChange)
class TicketClassChangeAdmin(admin.ModelAdmin):
    """The audit trail of class settings: read only, as a record should be."""

    list_display = ("changed_at", "ticket_class", "changed_by", "proposal", "changes")
    list_filter = ("ticket_class",)
    readonly_fields = ("ticket_class", "changed_by", "changed_at", "changes", "proposal")

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False
