"""One row per compaction: what was replaced, what the summariser saw and said, what it cost.

The row is the task's idempotency key (unique per ticket and turn range) and
the record staff and the replay command read afterwards.
"""

from django.db import models


class CompactionRun(models.Model):
    class Status(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        SUCCEEDED = "succeeded"
        FALLBACK = "fallback", "fallback (deterministic trim)"
        FAILED = "failed"
        # The ticket's summary changed under the run (another compaction won): nothing written.
        STALE = "stale"

    DONE = (Status.SUCCEEDED, Status.FALLBACK, Status.STALE)

    ticket = models.ForeignKey("tickets.Ticket", on_delete=models.CASCADE, related_name="compactions")
    # The summary the run was built from (compare-and-set on accept); null for a ticket's first.
    base_summary = models.ForeignKey(
        "context.Summary", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    context_version = models.PositiveIntegerField(help_text="covers_through_turn of the base summary (0 if none)")
    from_turn = models.PositiveIntegerField()
    through_turn = models.PositiveIntegerField(help_text="Last turn replaced; the recent turns after it stay raw")
    trigger_step = models.ForeignKey(
        "agent.AgentStep", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.QUEUED)
    model = models.CharField(max_length=120, help_text="Summariser model the class named")
    model_used = models.CharField(max_length=120, blank=True, help_text="What answered (e.g. offline)")
    # The full pre-compaction request (ModelRequest JSON) and its size.
    request_before = models.JSONField(default=dict)
    # The request as rebuilt right after the summary was accepted, for the before/after view.
    request_after = models.JSONField(default=dict, blank=True)
    tokens_before = models.PositiveIntegerField(default=0)
    tokens_after = models.PositiveIntegerField(null=True, blank=True)
    replaced_tokens = models.PositiveIntegerField(default=0, help_text="Tokens of the turns (and old summary) replaced")
    # Exactly what the summariser was sent, and the facts its output is validated against.
    summariser_input = models.JSONField(default=dict)
    validation_context = models.JSONField(default=dict)
    # Every attempt: raw output, rejection reasons, latency, cost.
    attempt_log = models.JSONField(default=list)
    summariser_output = models.TextField(blank=True, help_text="Raw output of the accepted attempt")
    summary = models.ForeignKey("context.Summary", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    attempts = models.PositiveIntegerField(default=0)
    # How the accepted (or last) summary came back: native (JSON schema), tool (output tool), text (JSON in text).
    output_path = models.CharField(max_length=10, blank=True)
    latency_ms = models.PositiveIntegerField(default=0)
    cost_usd = models.DecimalField(max_digits=12, decimal_places=6, default=0)
    input_tokens = models.PositiveIntegerField(default=0)
    output_tokens = models.PositiveIntegerField(default=0)
    error = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-id"]
        constraints = [
            models.UniqueConstraint(fields=["ticket", "from_turn", "through_turn"], name="compaction_once_per_range")
        ]

    def __str__(self):
        return f"compaction #{self.pk} ticket {self.ticket_id} turns {self.from_turn}–{self.through_turn} {self.status}"
