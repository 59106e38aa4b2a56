"""Admin for tool servers: add one to a ticket class, and "test connection" to see its tools and warnings."""

from __future__ import annotations

from django import forms
from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.db import models
from django.http import HttpResponseNotAllowed
from django.shortcuts import get_object_or_404
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.html import format_html, format_html_join

from sundry.core.jsonform import BoundedJSONField
from sundry.toolservers import catalog, checks, declfile
from sundry.toolservers.models import ToolServer


class ToolServerForm(forms.ModelForm):
    url = forms.URLField(
        required=False, max_length=500, assume_scheme="https", help_text=ToolServer._meta.get_field("url").help_text
    )

    class Meta:
        model = ToolServer
        fields = "__all__"
        widgets = {
            "command": forms.TextInput(attrs={"size": 100}),
            "declaration_path": forms.TextInput(attrs={"size": 80}),
        }

    def clean_declaration_path(self):
        value = (self.cleaned_data.get("declaration_path") or "").strip()
        if value:
            try:
                catalog.declarations(ToolServer(declaration_path=value))
            except declfile.DeclarationError as exc:
                raise forms.ValidationError(str(exc)) from exc
        return value

    def clean_sample_calls(self):
        # Kept as a list: PostgreSQL's jsonb would sort an object's keys, and the samples run in order.
        value = self.cleaned_data.get("sample_calls")
        if isinstance(value, dict) and all(isinstance(v, dict) for v in value.values()):
            return [{"tool": k, "arguments": v} for k, v in value.items()]
        return value


@admin.register(ToolServer)
class ToolServerAdmin(admin.ModelAdmin):
    form = ToolServerForm
    formfield_overrides = {models.JSONField: {"form_class": BoundedJSONField}}
    change_form_template = "admin/toolservers/toolserver/change_form.html"
    list_display = ("name", "ticket_class", "transport", "enabled", "tool_count", "listed_at")
    list_filter = ("ticket_class", "transport", "enabled")
    readonly_fields = ("listed_at", "listed")
    fieldsets = (
        (None, {"fields": ("ticket_class", "name", "enabled")}),
        (
            "Reaching it",
            {
                "fields": (
                    "transport",
                    "command",
                    "working_dir",
                    "env_names",
                    "url",
                    "header_env",
                    "timeout_seconds",
                    "connect_timeout_seconds",
                )
            },
        ),
        (
            "What its tools mean",
            {"fields": ("declaration_path", "allowed_tools", "denied_tools", "hold_undeclared_writes", "sample_calls")},
        ),
        ("Last listing", {"fields": ("listed_at", "listed")}),
    )

    @admin.display(description="tools")
    def tool_count(self, obj):
        return len(obj.listed_tools or [])

    @admin.display(description="tools listed")
    def listed(self, obj):
        names = [t.get("name", "") for t in obj.listed_tools or []]
        return ", ".join(names) or "—"

    def save_model(self, request, obj, form, change):
        super().save_model(request, obj, form, change)
        catalog.forget(obj.ticket_class_id)  # this process lists the class's tools afresh

    def get_urls(self):
        return [
            path(
                "<int:pk>/test-connection/",
                self.admin_site.admin_view(self.test_connection_view),
                name="toolservers_toolserver_test",
            )
        ] + super().get_urls()

    def test_connection_view(self, request, pk: int):
        """POST only: it starts the server (or calls it), which a link followed by a crawler must not."""
        if request.method != "POST":
            return HttpResponseNotAllowed(["POST"])
        server = get_object_or_404(ToolServer.objects.select_related("ticket_class"), pk=pk)
        if not self.has_change_permission(request, server):
            raise PermissionDenied
        report = checks.test_connection(server)
        context = {
            **self.admin_site.each_context(request),
            "title": f"Test connection: {server.name}",
            "server": server,
            "report": report,
            "opts": ToolServer._meta,
            "change_url": reverse("admin:toolservers_toolserver_change", args=[server.pk]),
        }
        return TemplateResponse(request, "admin/toolservers/toolserver/test_connection.html", context)


def servers_of(ticket_class) -> str:
    """A class's tool servers for its admin page: each linked to its settings and "test connection"."""
    if ticket_class is None or not ticket_class.pk:
        return "Save the class first, then add its tool servers."
    links = format_html_join(
        ", ",
        '<a href="{}">{}</a> ({} tool{}{})',
        (
            (
                reverse("admin:toolservers_toolserver_change", args=[s.pk]),
                s.name,
                len(s.listed_tools or []),
                "" if len(s.listed_tools or []) == 1 else "s",
                "" if s.enabled else ", disabled",
            )
            for s in ticket_class.tool_servers.all()
        ),
    )
    add = format_html(
        '<a href="{}?ticket_class={}">Add a tool server</a>',
        reverse("admin:toolservers_toolserver_add"),
        ticket_class.pk,
    )
    return format_html("{}{}{}", links, " · " if links else "", add)
