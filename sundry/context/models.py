"""The lanes a ticket's context is built from, stored per ticket.

Pinned rules, the ID ledger, state (fields with provenance and history,
actions taken, money per order) and the summary. Each row records who changed
it and at which turn; only `context.services` writes them.
"""

from django.conf import settings
from django.db import models
from django.db.models import Q


class Source(models.TextChoices):
    CUSTOMER = "customer"
    TOOL = "tool"
    MODEL = "model"
    STAFF = "staff"
    SYSTEM = "system"
    SUMMARISER = "summariser"


class PinnedRule(models.Model):
    class Status(models.TextChoices):
        CANDIDATE = "candidate"
        ACTIVE = "active"
        DISMISSED = "dismissed"
        CLOSED = "closed", "closed with its scope"

    class Scope(models.TextChoices):
        TICKET = "ticket"
        CUSTOMER = "customer"
        ORDER = "order"

    ticket = models.ForeignKey("tickets.Ticket", on_delete=models.CASCADE, related_name="rules")
    text = models.TextField(help_text="Verbatim wording; never summarised or truncated.")
    scope = models.CharField(max_length=10, choices=Scope.choices, default=Scope.TICKET)
    scope_ref = models.CharField(max_length=40, blank=True, help_text="e.g. the order number for an order-scoped rule")
    turn = models.PositiveIntegerField(help_text="Turn the rule was stated at")
    source = models.CharField(max_length=10, choices=Source.choices)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.CANDIDATE)
    # Structured check a guard enforces, e.g. {"block_tools": ["<a tool that emails>"]}.
    enforcement = models.JSONField(default=dict, blank=True)
    changed_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    changed_at_turn = models.PositiveIntegerField(default=0)
    version = models.PositiveIntegerField(default=1)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["turn", "id"]

    def __str__(self):
        return self.text[:60]


class LedgerEntry(models.Model):
    class Status(models.TextChoices):
        ACTIVE = "active"
        ARCHIVED = "archived", "archived (evicted by last use)"

    ticket = models.ForeignKey("tickets.Ticket", on_delete=models.CASCADE, related_name="ledger")
    role = models.CharField(max_length=60)
    value = models.CharField(max_length=120)
    kind = models.CharField(max_length=30)
    verified = models.BooleanField(default=False)
    first_seen_turn = models.PositiveIntegerField()
    last_used_turn = models.PositiveIntegerField()
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.ACTIVE)
    note = models.CharField(
        max_length=120, blank=True, help_text="Status the producing tool reported, e.g. 'refund issued'"
    )
    description = models.CharField(
        max_length=100,
        blank=True,
        help_text="What it is, built by code from declared fields of the result that last described it "
        "(an order: item names and status; a refund: amount and order)",
    )
    used_in_call = models.BooleanField(default=False, help_text="Used as a tool-call argument, not merely seen")
    source = models.CharField(max_length=60, blank=True, help_text="Tool (or 'customer') it was first seen from")
    # A correction ("wrong number, it's …", or staff's) points the entry at the value meant instead;
    # the entry stays, so a call on it can name both (agent.guards asks the customer to confirm).
    superseded_by = models.CharField(max_length=120, blank=True, help_text="The value that corrected this one")
    # Whose it is, where the class's tools say (a declared customer path in the result that returned it).
    customer = models.CharField(max_length=120, blank=True, help_text="The customer a tool result said it belongs to")
    identifies_customer = models.BooleanField(
        default=False, help_text="Returned by a lookup that identifies the customer: this ticket's own customer"
    )
    superseded_at_turn = models.PositiveIntegerField(null=True, blank=True)
    superseded_source = models.CharField(max_length=10, choices=Source.choices, blank=True)
    superseded_by_user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    version = models.PositiveIntegerField(default=1)

    class Meta:
        ordering = ["first_seen_turn", "id"]
        constraints = [
            models.UniqueConstraint(fields=["ticket", "value"], name="ledger_value_unique_per_ticket"),
            models.UniqueConstraint(
                fields=["ticket", "role"], condition=Q(status="active"), name="ledger_active_role_unique"
            ),
        ]

    def __str__(self):
        return f"{self.role}={self.value}"


class StateValue(models.Model):
    """One value of one named state field. The current value is the newest
    row not superseded; older rows stay as viewable history."""

    ticket = models.ForeignKey("tickets.Ticket", on_delete=models.CASCADE, related_name="state_values")
    name = models.CharField(max_length=60)
    value = models.CharField(max_length=300)
    turn = models.PositiveIntegerField()
    source = models.CharField(max_length=10, choices=Source.choices)
    confirmed = models.BooleanField(default=False)
    is_current = models.BooleanField(default=True)
    superseded_by = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="supersedes"
    )
    superseded_at_turn = models.PositiveIntegerField(null=True, blank=True)
    changed_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name", "id"]
        indexes = [models.Index(fields=["ticket", "name"])]
        constraints = [
            models.UniqueConstraint(
                fields=["ticket", "name"], condition=Q(is_current=True), name="state_one_current_value"
            )
        ]


class ActionTaken(models.Model):
    """A side effect that happened, recorded by code at tool success."""

    ticket = models.ForeignKey("tickets.Ticket", on_delete=models.CASCADE, related_name="actions")
    tool = models.CharField(max_length=60)
    target = models.CharField(max_length=120, blank=True)
    arguments = models.JSONField(default=dict)
    result = models.JSONField(default=dict)
    amount_cents = models.BigIntegerField(null=True, blank=True)
    currency = models.CharField(max_length=3, blank=True)
    reversible = models.BooleanField(default=True)
    idempotency_key = models.CharField(max_length=80)
    turn = models.PositiveIntegerField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["turn", "id"]
        constraints = [models.UniqueConstraint(fields=["ticket", "idempotency_key"], name="action_key_unique")]


class MoneyTotal(models.Model):
    """Per order on this ticket: what was paid and what has been refunded.

    Set by code from tool results (a result that declares order totals reports
    the system of record's figures; a refund adds to them), never by a model.
    """

    ticket = models.ForeignKey("tickets.Ticket", on_delete=models.CASCADE, related_name="money")
    order = models.CharField(max_length=20)
    currency = models.CharField(max_length=3)
    paid_cents = models.BigIntegerField()
    refunded_cents = models.BigIntegerField(default=0)
    turn = models.PositiveIntegerField()

    class Meta:
        ordering = ["order"]
        constraints = [models.UniqueConstraint(fields=["ticket", "order"], name="money_one_row_per_order")]


class Summary(models.Model):
    """The compacted history of a ticket: turns 1..covers_through_turn.

    Narrative only; entities by ledger role. Written by the compaction worker.
    """

    ticket = models.ForeignKey("tickets.Ticket", on_delete=models.CASCADE, related_name="summaries")
    covers_through_turn = models.PositiveIntegerField()
    fields = models.JSONField(
        default=dict, help_text="decisions, actions_taken, constraints_not_pinned, open_questions, narrative"
    )
    text = models.TextField(help_text="Rendered summary block body")
    is_current = models.BooleanField(default=True)
    fallback = models.BooleanField(default=False, help_text="Deterministic trimming, not a model summary")
    seen_tokens = models.JSONField(
        default=dict,
        blank=True,
        help_text="IDs and ID-shaped tokens met in the ticket's turns so far (the next compaction's validation "
        "starts from these and scans only newer turns)",
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-covers_through_turn"]
        constraints = [
            models.UniqueConstraint(fields=["ticket"], condition=Q(is_current=True), name="one_current_summary")
        ]
