"""A ticket class's tool servers: where each is reached, its declaration file, its per-call timeout.

Secrets never live here: a server names the environment variables whose values
are passed to it (a stdio server's environment, an HTTP server's headers), and
they are read from the environment each time it connects.

What a server may name, run, reach and read is limited by the deployment's
settings (`sundry.toolservers.limits`), checked here when it is saved and again
when Sundry connects.
"""

from __future__ import annotations

import shlex

from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models

from sundry.tickets.models import TicketClass
from sundry.toolservers import limits, offered
from sundry.toolservers.limits import ENV_NAME


class ToolServer(models.Model):
    class Transport(models.TextChoices):
        STDIO = "stdio", "stdio (a command Sundry starts)"
        HTTP = "http", "streamable HTTP (a URL)"

    ticket_class = models.ForeignKey(TicketClass, on_delete=models.CASCADE, related_name="tool_servers")
    name = models.SlugField(max_length=60, help_text="Short name, shown to staff beside the server's tools.")
    transport = models.CharField(max_length=10, choices=Transport.choices, default=Transport.STDIO)
    command = models.CharField(
        max_length=500,
        blank=True,
        help_text="stdio: the command line that starts the server, one the deployment allows (SUNDRY_TOOL_COMMANDS; "
        "a leading 'python' runs with Sundry's own interpreter), e.g. "
        "python examples/tau2_retail_mcp/server.py --data ../shared/corpora/tau2/domains/retail",
    )
    url = models.URLField(
        max_length=500,
        blank=True,
        help_text="Streamable HTTP: the server's MCP endpoint, on a host the deployment allows (SUNDRY_TOOL_HOSTS).",
    )
    working_dir = models.CharField(
        max_length=500, blank=True, help_text="stdio: where the command runs (default: Sundry's directory)."
    )
    env_names = models.CharField(
        max_length=500,
        blank=True,
        help_text="stdio: names of environment variables passed to the server, comma-separated, each starting "
        "with the deployment's prefix (SUNDRY_TOOL_ unless SUNDRY_TOOL_ENV_PREFIX says otherwise); their "
        "values are read from Sundry's environment when it starts, never stored.",
    )
    header_env = models.JSONField(
        default=dict,
        blank=True,
        help_text='HTTP: header → environment variable holding its value, e.g. {"Authorization": '
        '"SUNDRY_TOOL_RETAIL_API_TOKEN"} (names start with the deployment\'s prefix; the value is read '
        "when connecting, never stored).",
    )
    declaration_path = models.CharField(
        max_length=500,
        blank=True,
        help_text="The declaration file (JSON): ID paths and kinds, lookups, writes, repeat keys. It must be in "
        "the deployment's declarations folder (SUNDRY_TOOL_DECLARATIONS_DIR); relative paths are from "
        "Sundry's directory. Tools it does not declare are usable but undeclared.",
    )
    timeout_seconds = models.FloatField(
        default=15.0,
        validators=[MinValueValidator(0.5), MaxValueValidator(120)],
        help_text="Longest one call may take (and connecting, unless the connect "
        "timeout says otherwise); past it the model gets an error result "
        "and the ticket a flag.",
    )
    connect_timeout_seconds = models.FloatField(
        null=True,
        blank=True,
        validators=[MinValueValidator(0.5), MaxValueValidator(120)],
        help_text="Longest Sundry waits to start or reach the server and finish the handshake (empty: the "
        "per-call timeout). A stdio server's interpreter may need longer to start than a call takes.",
    )
    hold_undeclared_writes = models.BooleanField(
        default=True, help_text="Hold calls of undeclared tools that may write (no readOnlyHint) for staff approval."
    )
    allowed_tools = models.CharField(
        max_length=2000,
        blank=True,
        help_text="Tools of this server the class offers, comma-separated (empty: every tool it lists). "
        "A tool left out is never offered to the model, and a call to it is refused.",
    )
    denied_tools = models.CharField(
        max_length=2000,
        blank=True,
        help_text="Tools of this server the class never offers, comma-separated; a call to one is refused. "
        "Also how two servers of a class that list the same tool name are told apart.",
    )
    sample_calls = models.JSONField(
        default=dict,
        blank=True,
        help_text='For "test connection": read-only calls to make, in order, tool → arguments, e.g. '
        '{"get_order_details": {"order_id": "#W2611340"}} (kept as a list of {"tool", "arguments"}, '
        "which may name a tool twice). Writes are never sample-called.",
    )
    enabled = models.BooleanField(default=True)
    listed_tools = models.JSONField(
        default=list, blank=True, editable=False, help_text="The tools as the server last listed them."
    )
    listed_at = models.DateTimeField(null=True, blank=True, editable=False)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["ticket_class", "name"]
        constraints = [models.UniqueConstraint(fields=["ticket_class", "name"], name="toolserver_unique_name")]

    def __str__(self):
        return f"{self.name} ({self.ticket_class.name})"

    def env_name_list(self) -> list[str]:
        return [n.strip() for n in self.env_names.split(",") if n.strip()]

    @property
    def connect_timeout(self) -> float:
        return self.connect_timeout_seconds or self.timeout_seconds

    def sample_list(self) -> list[tuple[str, dict]]:
        """The sample calls in order: stored as a list of {"tool", "arguments"} (a JSON object's keys
        lose their order in PostgreSQL's jsonb), or an older row's object of tool → arguments."""
        value = self.sample_calls or {}
        if isinstance(value, dict):
            return [(k, v) for k, v in value.items() if isinstance(v, dict)]
        return [(s["tool"], s["arguments"]) for s in value if _is_sample(s)]

    def clean(self):
        super().clean()
        errors = {}
        if self.transport == self.Transport.STDIO:
            try:
                if not shlex.split(self.command or ""):
                    errors["command"] = "A stdio server needs the command that starts it."
            except ValueError as exc:
                errors["command"] = f"Cannot read the command line: {exc}."
        elif not self.url:
            errors["url"] = "An HTTP server needs its URL."
        bad = [n for n in self.env_name_list() if not ENV_NAME.fullmatch(n)]
        if bad:
            errors["env_names"] = (
                f"Not environment variable names: {', '.join(bad)}. Give the names "
                "(e.g. SUNDRY_TOOL_RETAIL_API_TOKEN), never the values."
            )
        if not isinstance(self.header_env, dict) or not all(
            isinstance(k, str) and isinstance(v, str) and ENV_NAME.fullmatch(v) for k, v in self.header_env.items()
        ):
            errors["header_env"] = (
                "Must be an object of header → environment variable name, e.g. "
                '{"Authorization": "SUNDRY_TOOL_RETAIL_API_TOKEN"}; never the secret itself.'
            )
        for name, why in limits.field_refusals(self, well_formed_only=True).items():
            # The deployment's limits: what the admin may not widen, said with the setting that would.
            if name == "command" and name in errors:
                continue  # a command line that cannot be read: that is the message
            errors[name] = [errors[name], why] if name in errors else why
        samples = self.sample_calls
        if not (
            isinstance(samples, dict)
            and all(isinstance(v, dict) for v in samples.values())
            or isinstance(samples, list)
            and all(_is_sample(s) for s in samples)
        ):
            errors["sample_calls"] = (
                'Must be an object of tool → arguments, e.g. {"get_order_details": '
                '{"order_id": "#W2611340"}}, or a list of {"tool": …, "arguments": {…}}.'
            )
        if errors:
            raise ValidationError(errors)
        if self.ticket_class_id:
            found = offered.clashes(self, ToolServer.objects.filter(ticket_class_id=self.ticket_class_id))
            if found:
                raise ValidationError(offered.clash_message(self, found))


def _is_sample(item) -> bool:
    return (
        isinstance(item, dict)
        and set(item) == {"tool", "arguments"}
        and isinstance(item["tool"], str)
        and isinstance(item["arguments"], dict)
    )
