"""Agent steps and actions held for staff."""

from django.conf import settings
from django.db import models


class AgentStep(models.Model):
    """One model request and what followed from it."""

    class Outcome(models.TextChoices):
        REPLY = "reply"
        TOOL_CALLS = "tool_calls", "tool calls"
        MODEL_ERROR = "model_error", "model error"
        INVALID_OUTPUT = "invalid_output", "invalid model output"
        HELD_REPLY = "held_reply", "reply held for staff"

    ticket = models.ForeignKey("tickets.Ticket", on_delete=models.CASCADE, related_name="steps")
    number = models.PositiveIntegerField()
    model = models.CharField(max_length=120)
    offline = models.BooleanField(default=False)
    request_tokens = models.PositiveIntegerField(help_text="Assembled request, counted with the real tokenizer")
    lane_tokens = models.JSONField(default=dict)
    input_tokens = models.PositiveIntegerField(default=0)
    output_tokens = models.PositiveIntegerField(default=0)
    # Input tokens the provider read from its prompt cache (part of input_tokens).
    cached_input_tokens = models.PositiveIntegerField(default=0)
    # Input tokens the provider wrote to its prompt cache (part of input_tokens).
    cache_write_tokens = models.PositiveIntegerField(default=0)
    # Input tokens the provider reported for the request counted in request_tokens (the step's first
    # call; 0 when none was reported): how far the estimate was off (sundry.agent.calibration).
    reported_request_tokens = models.PositiveIntegerField(default=0)
    cost_usd = models.DecimalField(max_digits=12, decimal_places=6, default=0)
    latency_ms = models.PositiveIntegerField(default=0)
    # What the reply check and the text-call reader did in this step ({"reply": [...], "text_calls": "hermes"}).
    checks = models.JSONField(default=dict, blank=True)
    outcome = models.CharField(max_length=16, choices=Outcome.choices)
    # A resolution step completed something with consequences; compaction may
    # only start after one.
    is_resolution = models.BooleanField(default=False)
    first_turn = models.PositiveIntegerField(default=0)
    last_turn = models.PositiveIntegerField(default=0)
    error = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["ticket", "number"]
        constraints = [models.UniqueConstraint(fields=["ticket", "number"], name="step_number_unique_per_ticket")]


class HeldAction(models.Model):
    """A tool call the guards held for a staff decision."""

    class Status(models.TextChoices):
        PENDING = "pending"
        APPROVED = "approved"
        REJECTED = "rejected"
        EXECUTED = "executed"
        # Approved, but the guards' re-check (or the tool) refused it: nothing ran.
        REFUSED = "refused", "approved, not run"

    ticket = models.ForeignKey("tickets.Ticket", on_delete=models.CASCADE, related_name="held_actions")
    tool = models.CharField(max_length=60)
    arguments = models.JSONField(default=dict)
    call_id = models.CharField(max_length=80)
    reason = models.CharField(max_length=300)
    idempotency_key = models.CharField(max_length=80, unique=True)
    turn = models.PositiveIntegerField()
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.PENDING)
    decided_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    decided_at = models.DateTimeField(null=True, blank=True)
    result_turn = models.PositiveIntegerField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at"]


class Confirmation(models.Model):
    """A call the customer must confirm before it runs: the exact call, and the card they read.

    Rendered by code (`agent.cards`) from the call's arguments and the lanes. Single-use:
    confirming runs the call once, through every other guard; a different call for the same
    entity, or the class's confirmation window, retires it."""

    class Status(models.TextChoices):
        PENDING = "pending"
        CONFIRMED = "confirmed"
        DECLINED = "declined"
        EXPIRED = "expired"
        SUPERSEDED = "superseded"

    class Via(models.TextChoices):
        BUTTON = "button", "the customer pressed Confirm"
        TYPED = "typed", "the customer answered yes"
        STAFF = "staff", "staff, on the customer's behalf"

    ticket = models.ForeignKey("tickets.Ticket", on_delete=models.CASCADE, related_name="confirmations")
    tool = models.CharField(max_length=60)
    arguments = models.JSONField(default=dict)
    digest = models.CharField(max_length=64)
    call_id = models.CharField(max_length=80)
    card = models.JSONField(default=dict)
    turn = models.PositiveIntegerField()
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.PENDING)
    expires_at = models.DateTimeField()
    decided_at = models.DateTimeField(null=True, blank=True)
    decided_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    via = models.CharField(max_length=8, choices=Via.choices, blank=True)
    staff_reason = models.CharField(max_length=300, blank=True)
    # Why it is no longer pending, when not decided by a person ("superseded by card #4").
    note = models.CharField(max_length=300, blank=True)
    # After a confirmation: executed, held (for staff, by a threshold) or refused (a guard), and the turn.
    outcome = models.CharField(max_length=10, blank=True)
    result_turn = models.PositiveIntegerField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["id"]
        constraints = [
            models.UniqueConstraint(
                fields=["ticket", "digest"], condition=models.Q(status="pending"), name="one_pending_card_per_call"
            )
        ]
