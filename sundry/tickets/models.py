"""Ticket classes (budgets), tickets and turns."""

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models

from sundry.tooling.tools import name_list


class TicketClass(models.Model):
    """A class of tickets and the budget every ticket in it runs under."""

    name = models.CharField(max_length=60, unique=True)
    slug = models.SlugField(max_length=60, unique=True)
    description = models.CharField(max_length=200, blank=True)
    token_budget = models.PositiveIntegerField(
        default=8000, validators=[MinValueValidator(1000), MaxValueValidator(2_000_000)]
    )
    trigger_fraction = models.FloatField(
        default=0.8,
        validators=[MinValueValidator(0.3), MaxValueValidator(0.95)],
        help_text="Compact when the assembled request would exceed this share of the budget.",
    )
    recent_turns_kept = models.PositiveIntegerField(
        default=8,
        validators=[MinValueValidator(2), MaxValueValidator(200)],
        help_text="The last K turns are kept word for word when older ones are compacted; fewer (at least one) "
        "only when keeping them all would leave the request over the budget.",
    )
    working_model = models.CharField(
        max_length=120,
        default="offline",
        help_text="'offline', or provider:model such as 'openai:gpt-4.1-mini' or 'anthropic:claude-3-5-haiku-latest'.",
    )
    summariser_model = models.CharField(max_length=120, default="offline")
    ledger_share = models.FloatField(
        default=0.3,
        validators=[MinValueValidator(0.01), MaxValueValidator(0.5)],
        help_text="Share of the budget the live ledger may fill; past it, entries no write takes go first, then "
        "superseded ones, then the least recently used (archived, never lost).",
    )
    denied_tools = models.CharField(
        max_length=1000,
        blank=True,
        default="",
        help_text="Tools this class never offers the model, comma- or space-separated: the shop's, Sundry's own "
        "and its tool servers' alike. A call naming one is refused as a tool the class does not have.",
    )
    pinned_rules_cap = models.PositiveIntegerField(
        default=600,
        validators=[MinValueValidator(50)],
        help_text="Token cap for the pinned-rules block; going over is shown as a warning, never by dropping a rule.",
    )
    approval_rules = models.JSONField(
        default=dict,
        blank=True,
        help_text='Tools needing staff approval, by tool name: {"<tool>": {}} always; {"<tool>": {"above_cents": 10000}} '
        'above an amount in minor units; {"<tool>": {"above": {"USD": 20000, "INR": 1500000}}} '
        "per currency (above_cents, if given, covers the currencies not listed; others are always held)",
    )
    approval_window_hours = models.PositiveIntegerField(
        default=24,
        validators=[MinValueValidator(1), MaxValueValidator(24 * 90)],
        help_text="Approval thresholds on money apply to what was refunded (or awaits approval) over this many "
        "hours, per order and per customer, across tickets, in each currency.",
    )
    confirmation_minutes = models.PositiveIntegerField(
        default=60,
        validators=[MinValueValidator(1), MaxValueValidator(60 * 24 * 7)],
        help_text="How long a confirmation card the customer has not answered stays open. A refund, cancellation, "
        "return, replacement or message outside the conversation runs only when the customer confirms "
        "its card (or staff do, on their behalf).",
    )
    text_tool_calls = models.BooleanField(
        default=False,
        help_text="Read tool calls the model writes as text (hermes <tool_call> tags, bare or fenced JSON naming a "
        "tool) as calls. For servers without a tool-call parser for their model; off by default.",
    )
    first_response_minutes = models.PositiveIntegerField(
        default=60,
        validators=[MinValueValidator(1)],
        help_text="Target for the first reply to a new ticket; the desk colours a ticket near and past it.",
    )
    next_response_minutes = models.PositiveIntegerField(
        default=240, validators=[MinValueValidator(1)], help_text="Target for answering a customer who wrote again."
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        verbose_name_plural = "ticket classes"
        ordering = ["token_budget", "name"]

    def __str__(self):
        return f"{self.name} ({self.token_budget:,} tokens)"

    @property
    def trigger_tokens(self) -> int:
        return int(self.token_budget * self.trigger_fraction)

    @property
    def denied(self) -> frozenset[str]:
        """The names in `denied_tools`."""
        return frozenset(name_list(self.denied_tools))

    def clean(self):
        super().clean()
        errors = {}
        if self.pinned_rules_cap and self.token_budget and self.pinned_rules_cap > self.token_budget // 4:
            errors["pinned_rules_cap"] = "The pinned-rules cap must fit in a quarter of the token budget."
        if not isinstance(self.approval_rules, dict):
            errors["approval_rules"] = "Approval rules must be an object of tool name → options."
        if errors:
            raise ValidationError(errors)


class Tag(models.Model):
    """A label staff put on tickets (billing, vip, damaged …)."""

    name = models.SlugField(max_length=40, unique=True)

    class Meta:
        ordering = ["name"]

    def __str__(self):
        return self.name


class Ticket(models.Model):
    class Priority(models.TextChoices):
        LOW = "low"
        NORMAL = "normal"
        HIGH = "high"
        URGENT = "urgent"

    class Status(models.TextChoices):
        OPEN = "open"
        WAITING = "waiting", "waiting on customer"
        RESOLVED = "resolved"
        CLOSED = "closed"

    class Handler(models.TextChoices):
        AGENT = "agent"
        STAFF = "staff"

    customer = models.ForeignKey("people.Customer", on_delete=models.PROTECT, related_name="tickets")
    ticket_class = models.ForeignKey(TicketClass, on_delete=models.PROTECT, related_name="tickets")
    subject = models.CharField(max_length=200)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.OPEN)
    handler = models.CharField(max_length=8, choices=Handler.choices, default=Handler.AGENT)
    assigned_to = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="assigned_tickets"
    )
    # Bumped by every committed change; pushes carry it so clients can spot gaps.
    version = models.PositiveBigIntegerField(default=0)
    last_turn_number = models.PositiveIntegerField(default=0)
    # Which tables each write changed, and at which version: {"context.ledgerentry": 41, ...}; "*" for a
    # write that named none (every panel re-reads). Written by the bump itself (sundry.tickets.versions),
    # so a push re-reads only the panels that show what changed.
    stamps = models.JSONField(default=dict, blank=True)
    # One agent run per ticket at a time: claimed by a conditional update,
    # expires so a killed worker cannot wedge the ticket.
    agent_claimed_at = models.DateTimeField(null=True, blank=True)
    # Which run holds the claim (its task's id, kept across the task's retries): a retry takes
    # its own claim back at once instead of waiting for it to lapse.
    agent_claimed_by = models.CharField(max_length=64, blank=True, default="")
    # The outbox: written with the turn that wants the agent (in its transaction), so a
    # wake-up the broker never took is still on record. `agent_wake_turn` is that turn;
    # a run that read through it clears both; `agent_wake_at` is when the ticket was last
    # queued (by the post or by the sweep that re-queues forgotten tickets).
    agent_wake_turn = models.PositiveIntegerField(null=True, blank=True)
    agent_wake_at = models.DateTimeField(null=True, blank=True, db_index=True)
    # Why staff must look (model unavailable, compaction breaker tripped …), one reason per
    # cause joined by " · " (sundry.tickets.attention); blank when fine.
    attention = models.TextField(blank=True)
    priority = models.CharField(max_length=8, choices=Priority.choices, default=Priority.NORMAL)
    tags = models.ManyToManyField(Tag, blank=True, related_name="tickets")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-updated_at"]

    def __str__(self):
        return f"#{self.pk} {self.subject}"


class Turn(models.Model):
    class Author(models.TextChoices):
        CUSTOMER = "customer"
        AGENT = "agent"
        TOOL = "tool"
        STAFF = "staff"
        SYSTEM = "system"

    class Kind(models.TextChoices):
        MESSAGE = "message"
        TOOL_CALL = "tool_call", "tool call"
        TOOL_RESULT = "tool_result", "tool result"
        NOTE = "note", "staff note"
        # Staff only: never in a model request, a summary or a ledger description.
        INTERNAL = "internal", "internal note (staff only)"
        EVENT = "event", "system event"
        REJECTION = "rejection", "guard rejection"
        ERROR = "error"

    ticket = models.ForeignKey(Ticket, on_delete=models.CASCADE, related_name="turns")
    number = models.PositiveIntegerField()
    author = models.CharField(max_length=10, choices=Author.choices)
    kind = models.CharField(max_length=12, choices=Kind.choices, default=Kind.MESSAGE)
    text = models.TextField(blank=True)
    payload = models.JSONField(default=dict, blank=True)
    tokens = models.PositiveIntegerField(default=0)
    encoding = models.CharField(max_length=40, blank=True, help_text="Tokenizer encoding the count used.")
    # The key the sender's page generated for this message: a resend with the same key
    # (after an answer that never arrived) finds this turn instead of storing a second one.
    client_key = models.CharField(max_length=64, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["ticket", "number"]
        constraints = [
            models.UniqueConstraint(fields=["ticket", "number"], name="turn_number_unique_per_ticket"),
            models.UniqueConstraint(
                fields=["ticket", "client_key"],
                condition=~models.Q(client_key=""),
                name="turn_client_key_unique_per_ticket",
            ),
        ]

    def __str__(self):
        return f"#{self.ticket_id}.{self.number} {self.author}/{self.kind}"


class CannedReply(models.Model):
    """A reply staff insert and edit before sending. Placeholders: {customer_first_name},
    {customer_name}, {order_number}, {my_first_name}, {ticket_number}."""

    title = models.CharField(max_length=80, unique=True)
    body = models.TextField()
    ticket_class = models.ForeignKey(
        TicketClass,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        help_text="Offered only on this class's tickets; empty for every class.",
    )

    class Meta:
        ordering = ["title"]
        verbose_name_plural = "canned replies"

    def __str__(self):
        return self.title


class Rating(models.Model):
    """The customer's satisfaction with a resolved ticket: 1 (very poor) to 5 (very good) and an
    optional comment; one per ticket, which the customer may change (sundry.tickets.satisfaction)."""

    class Credit(models.TextChoices):
        AGENT = "agent", "AI agent"
        STAFF = "staff"
        NOBODY = "nobody", "no reply"

    ticket = models.OneToOneField(Ticket, on_delete=models.CASCADE, related_name="rating")
    score = models.PositiveSmallIntegerField(validators=[MinValueValidator(1), MaxValueValidator(5)])
    comment = models.TextField(blank=True)
    # Whom the rating counts for: the author of the last reply the customer read before rating,
    # fixed when they rate (a later reassignment does not move it).
    credited = models.CharField(max_length=8, choices=Credit.choices)
    credited_staff = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="ratings"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.CheckConstraint(condition=models.Q(score__gte=1, score__lte=5), name="rating_score_1_to_5")
        ]

    def __str__(self):
        return f"#{self.ticket_id} rated {self.score}"


class BudgetProposal(models.Model):
    """A budget an admin tried in the budget lab, and what it would have done (sundry.evals.labrun).

    Kept so proposals can be listed side by side and one applied; `figures` is the run's whole
    result as plain JSON (the comparison, the fidelity checks, the charts' series)."""

    class Status(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        DONE = "done"
        FAILED = "failed"

    ticket_class = models.ForeignKey(TicketClass, on_delete=models.CASCADE, related_name="budget_proposals")
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="budget_proposals"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    token_budget = models.PositiveIntegerField(validators=[MinValueValidator(1000), MaxValueValidator(2_000_000)])
    trigger_fraction = models.FloatField(validators=[MinValueValidator(0.3), MaxValueValidator(0.95)])
    recent_turns_kept = models.PositiveIntegerField(validators=[MinValueValidator(2), MaxValueValidator(200)])
    ledger_share = models.FloatField(validators=[MinValueValidator(0.01), MaxValueValidator(0.5)])

    class Source(models.TextChoices):
        WINDOW = "window", "the class's recent tickets"
        TRACES = "traces", "imported traces"
        SCENARIOS = "scenarios", "the outcome scenarios"

    # What the run replays (sundry.desk.labsources): the class's latest tickets (the window), a file
    # of recorded conversations, or the outcome scenarios run on the demo shop.
    source = models.CharField(max_length=10, choices=Source.choices, default=Source.WINDOW)
    tickets = models.PositiveIntegerField(
        help_text="The window: the class's latest tickets with recorded steps; for traces, the file's first tickets."
    )
    # Traces: the file's name as uploaded, or its path on the server; an upload's text is kept here so any
    # worker can read it (empty for a path on the server).
    traces_name = models.CharField(max_length=500, blank=True)
    traces_text = models.TextField(blank=True)
    # Scenarios: "fast" (the CI slice), "all", or scenario ids separated by commas.
    scenarios = models.CharField(max_length=500, blank=True)
    price_as = models.CharField(max_length=120, blank=True)
    # Other models for the class, or "" to keep its own; applying the proposal writes them too.
    working_model = models.CharField(max_length=120, blank=True)
    summariser_model = models.CharField(max_length=120, blank=True)
    # The harness's run calls the summariser model (the proposal's, else the class's) instead of the
    # offline summariser; set only once the admin accepted its estimated cost.
    call_summariser = models.BooleanField(default=False)
    status = models.CharField(max_length=8, choices=Status.choices, default=Status.QUEUED)
    done = models.PositiveIntegerField(default=0)  # tickets replayed so far (the page's progress)
    total = models.PositiveIntegerField(default=0)
    figures = models.JSONField(default=dict, blank=True)
    error = models.TextField(blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-pk"]

    def __str__(self):
        return f"{self.ticket_class.name}: {self.token_budget:,} tokens ({self.get_status_display()})"


class TicketClassChange(models.Model):
    """Who changed a class's settings, from what to what, and when: the admin's form or an applied
    proposal alike (sundry.desk.classchanges). `changes`: {field: [before, after]}."""

    ticket_class = models.ForeignKey(TicketClass, on_delete=models.CASCADE, related_name="changes")
    changed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="ticket_class_changes"
    )
    changed_at = models.DateTimeField(auto_now_add=True)
    changes = models.JSONField()
    proposal = models.ForeignKey(
        BudgetProposal, null=True, blank=True, on_delete=models.SET_NULL, related_name="applied_as"
    )

    class Meta:
        ordering = ["-changed_at", "-pk"]

    def __str__(self):
        return f"{self.ticket_class.name} changed {self.changed_at:%Y-%m-%d %H:%M}"
