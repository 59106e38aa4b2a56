"""Reads for the desk: the queue, and what each staff panel shows."""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cached_property

from django.db.models import Count, Exists, OuterRef, Q, Sum

from sundry.agent import calibration
from sundry.agent.models import AgentStep, HeldAction
from sundry.compaction.models import CompactionRun
from sundry.compaction.services import compaction_blocked_reason
from sundry.context import harvest
from sundry.context.models import LedgerEntry, StateValue
from sundry.context.selectors import current_summary
from sundry.context.statefields import fields_for
from sundry.core.people import is_desk_staff
from sundry.desk.resultcards import ResultCard, ToolCards, readable, stored_result
from sundry.desk.timers import response_timer
from sundry.live.panels import latest_turns
from sundry.tickets.attention import FLAG_PREFIX, has_reason
from sundry.tickets.models import Ticket, Turn

# Ticket.attention reason prefixes: who raised one decides which queue filter finds it (a
# reason may stand anywhere on the line, sundry.tickets.attention).
BREAKER_PREFIX = "Compaction breaker"  # sundry.compaction.trigger writes it
FOLLOW_UP_PREFIX = "Follow-up promised"  # sundry.tickets.attention writes it (after any other reason)


def queue_for(user, *, status: str = "", ticket_class: str = "", needs: str = ""):
    qs = Ticket.objects.select_related("customer", "ticket_class", "assigned_to").annotate(
        held=Count("held_actions", filter=Q(held_actions__status="pending"), distinct=True),
    )
    if status:
        qs = qs.filter(status=status)
    if ticket_class:
        qs = qs.filter(ticket_class__slug=ticket_class)
    if needs == "approval":
        qs = qs.filter(held__gt=0)
    elif needs == "breaker":
        qs = qs.filter(attention__contains=BREAKER_PREFIX)
    elif needs == "flagged":
        qs = qs.filter(attention__contains=FLAG_PREFIX)
    elif needs == "followup":
        qs = qs.filter(attention__contains=FOLLOW_UP_PREFIX)
    elif needs == "attention":
        qs = qs.exclude(attention="")
    elif needs == "new":
        qs = new_tickets(qs)
    return qs.order_by("-updated_at")


def new_tickets(qs):
    """Open tickets nobody has answered yet: no reply from the agent or a person."""
    replied = Turn.objects.filter(
        ticket=OuterRef("pk"), kind=Turn.Kind.MESSAGE, author__in=[Turn.Author.AGENT, Turn.Author.STAFF]
    )
    return qs.filter(status=Ticket.Status.OPEN).exclude(Exists(replied))


def attention_kind(attention: str) -> str:
    """The queue's badge for a ticket's attention line: the weightiest cause on it."""
    if not attention:
        return ""
    if has_reason(attention, BREAKER_PREFIX):
        return "breaker"
    if has_reason(attention, FLAG_PREFIX):
        return "flagged"
    if has_reason(attention, FOLLOW_UP_PREFIX):
        return "follow-up"
    return "attention"


def ticket_for_staff(user, ticket_id: int, tickets=None) -> Ticket | None:
    """The ticket if `user` is desk staff (`tickets`: a queryset to read it from, else every ticket)."""
    if not is_desk_staff(user):
        return None
    tickets = Ticket.objects.all() if tickets is None else tickets
    return tickets.select_related("customer", "ticket_class", "assigned_to").filter(pk=ticket_id).first()


# --- conversation ----------------------------------------------------------------------


def turns(ticket) -> list[Turn]:
    """Every turn of the ticket, in number order."""
    return list(Turn.objects.filter(ticket=ticket).order_by("number"))


class ConversationItem:
    """A turn and the compaction marks after it; its calls are pretty-printed, and its result's card
    built, only if it is rendered (or its card's ledger descriptions are asked for its cache key)."""

    def __init__(self, turn: Turn, runs: list, tool_cards: ToolCards | None = None):
        self.turn, self.runs, self.tool_cards = turn, runs, tool_cards

    @cached_property
    def calls(self) -> list[dict]:
        return _calls(self.turn)

    @cached_property
    def card(self) -> ResultCard | None:
        if self.turn.kind != Turn.Kind.TOOL_RESULT or self.tool_cards is None:
            return None
        return self.tool_cards.card(str(self.turn.payload.get("name") or ""), stored_result(self.turn))

    @cached_property
    def tool_card(self) -> str:
        """The template of the card the result's tool declares (`ToolDecl.card`); "" for the generic card."""
        if self.turn.kind != Turn.Kind.TOOL_RESULT or self.tool_cards is None:
            return ""
        return self.tool_cards.template(str(self.turn.payload.get("name") or ""))

    @cached_property
    def readable(self) -> str:
        """The result as indented JSON, for a result with no card."""
        return readable(self.turn.text)


_UNREAD = object()


def conversation_marks(ticket, *, summary=_UNREAD, runs: list | None = None, entries: list | None = None) -> dict:
    """What a conversation item shows beside its turn: the summary's cut, the compaction runs by
    the turn each ends at, and the ledger's descriptions (a result's card borrows them). The
    current summary, the runs (oldest first) and the ledger's entries (every status, by id) are
    read here unless the caller has them."""
    summary = current_summary(ticket) if summary is _UNREAD else summary
    by_turn = {}
    for run in compaction_runs(ticket) if runs is None else runs:
        by_turn.setdefault(run.through_turn, []).append(run)
    # The ledger's descriptions name the IDs a result holds but does not describe itself.
    rows = (
        LedgerEntry.objects.filter(ticket=ticket).order_by("id").values_list("value", "kind", "description")
        if entries is None
        else [(e.value, e.kind, e.description) for e in entries]
    )
    ledger = {v: (k, d) for v, k, d in rows}
    return {
        "covered": summary.covers_through_turn if summary else 0,
        "runs": by_turn,
        "ledger": ledger,
        "tool_cards": ToolCards(ticket, ledger),
    }


def conversation_items(turn_list, marks: dict) -> list:
    return [ConversationItem(turn, marks["runs"].get(turn.number, []), marks["tool_cards"]) for turn in turn_list]


def conversation(ticket, *, last: int | None = None, before: int | None = None) -> dict:
    """The turns (every one, or the `last` n before turn `before`), with compaction markers
    placed after the last turn each run replaced; `earlier`: whether turns before them exist."""
    marks = conversation_marks(ticket)
    if last is None:
        turn_list, earlier = turns(ticket), False
    else:
        turn_list, earlier = latest_turns(Turn.objects.filter(ticket=ticket), last, before)
    return {
        "items": conversation_items(turn_list, marks),
        "covered": marks["covered"],
        "earlier": earlier,
        "marks": marks,
    }


def _calls(turn) -> list[dict]:
    if turn.kind != Turn.Kind.TOOL_CALL:
        return []
    return [{"name": c.get("name", "?"), "args": pretty(c.get("arguments"))} for c in turn.payload.get("calls", [])]


def pretty(value) -> str:
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return value
    return json.dumps(value, indent=1, ensure_ascii=False, sort_keys=True)


# --- state -------------------------------------------------------------------------------


def state_fields(ticket) -> list[dict]:
    """One entry per field: the current value (if any) and its superseded history, newest first."""
    rows = {}
    for v in StateValue.objects.filter(ticket=ticket).select_related("changed_by").order_by("name", "-id"):
        entry = rows.setdefault(v.name, {"name": v.name, "current": None, "history": []})
        if v.is_current:
            entry["current"] = v
        else:
            entry["history"].append(v)
    out = []
    known = fields_for(ticket)
    for name, entry in rows.items():
        spec = known.get(name)
        entry["label"] = spec.label if spec else name
        entry["customer_visible"] = bool(spec and spec.customer_visible)
        out.append(entry)
    order = list(known)
    out.sort(key=lambda e: order.index(e["name"]) if e["name"] in order else len(order))
    return out


# --- budget ------------------------------------------------------------------------------


@dataclass(frozen=True)
class ChartPoint:
    step: int
    tokens: int


def budget_chart(
    points: list[ChartPoint],
    *,
    budget: int,
    trigger: int,
    compacted_after: list[int],
    width: int = 380,
    height: int = 150,
    pad: int = 28,
) -> dict:
    """Plot coordinates for request tokens per step. Pure: numbers in, numbers out.

    `compacted_after` holds the step numbers after which a compaction ran; they
    are drawn as vertical marks half a step to the right.
    """
    top = max([budget, *(p.tokens for p in points)] or [1])
    n = max(len(points), 2)
    steps = [p.step for p in points] or [1]
    first, last = min(steps), max(max(steps), min(steps) + 1)

    def x(step: float) -> float:
        return round(pad + (step - first) / (last - first) * (width - pad - 8), 1)

    def y(tokens: float) -> float:
        return round(height - pad + 8 - tokens / top * (height - pad), 1)

    return {
        "width": width,
        "height": height,
        "n": n,
        "line": " ".join(f"{x(p.step)},{y(p.tokens)}" for p in points),
        "dots": [{"x": x(p.step), "y": y(p.tokens), "step": p.step, "tokens": p.tokens} for p in points],
        "trigger_y": y(trigger),
        "budget_y": y(budget),
        "trigger": trigger,
        "budget": budget,
        "marks": [x(s + 0.5) for s in compacted_after if first <= s <= last],
        "x0": pad,
        "x1": width - 8,
        "y0": y(0),
        "first": first,
        "last": last,
    }


# What a request is made of, in the order the request holds it, with the panel's words.
REQUEST_PARTS = (
    ("system", "System prompt"),
    ("tools", "Tool schemas"),
    ("rules", "Pinned rules"),
    ("ledger", "ID ledger"),
    ("state", "State"),
    ("summary", "Summary"),
    ("recent", "Recent turns"),
)
FIXED_PARTS = ("system", "tools")  # the same every step: compaction cannot shrink them


def _share(part: int, whole: int) -> int:
    return round(100 * part / whole) if whole else 0


def request_breakdown(accounting: dict, total: int) -> list[tuple[str, str, int]]:
    """(key, label, tokens) for every part of a request, summing to `total`: the lanes and tool
    schemas as the step counted them, and the chat format's per-message framing as the rest."""
    lanes = accounting.get("lanes") or {}
    lines = [
        (key, label, int(accounting.get("tools") or 0) if key == "tools" else int(lanes.get(key) or 0))
        for key, label in REQUEST_PARTS
    ]
    lines.append(("framing", "Message framing", total - sum(n for _, _, n in lines)))
    return lines


# The chart draws a ticket's latest steps: the panel is rendered on every push, so what it reads and
# sends stays the same size however many steps a long ticket has had (the totals are summed by the
# database). None draws every step.
CHART_STEPS: int | None = 120


def budget(ticket, *, runs: list | None = None) -> dict:
    """The budget panel's figures; `runs`: the compaction runs, oldest first, if the caller has them."""
    tclass = ticket.ticket_class
    steps_of = AgentStep.objects.filter(ticket=ticket)
    totals = steps_of.aggregate(
        count=Count("id"),
        cost=Sum("cost_usd", default=0),
        latency=Sum("latency_ms", default=0),
        tokens_in=Sum("input_tokens", default=0),
        tokens_out=Sum("output_tokens", default=0),
    )
    latest = steps_of.order_by("-number").only("number", "request_tokens", "lane_tokens")
    drawn = list(latest[:CHART_STEPS] if CHART_STEPS is not None else latest)[::-1] if totals["count"] else []
    last_step = drawn[-1] if drawn else None
    runs = compaction_runs(ticket) if runs is None else runs
    done = [r for r in runs if r.status in ("succeeded", "fallback")]
    step_cost, step_latency = totals["cost"], totals["latency"]
    comp_cost = sum((r.cost_usd for r in runs), start=0)
    comp_latency = sum(r.latency_ms for r in runs)
    chart = budget_chart(
        [ChartPoint(s.number, s.request_tokens) for s in drawn],
        budget=tclass.token_budget,
        trigger=tclass.trigger_tokens,
        compacted_after=[r.trigger_step.number for r in done if r.trigger_step],
    )
    lines = request_breakdown(last_step.lane_tokens or {}, last_step.request_tokens) if last_step else []
    over = last_step is not None and last_step.request_tokens > tclass.trigger_tokens
    ledger_tokens = next((n for key, _, n in lines if key == "ledger"), 0)
    allowance = harvest.class_allowance(tclass)
    return {
        "ledger_tokens": ledger_tokens,
        "ledger_allowance": allowance,
        "ledger_near_full": harvest.near_full(ledger_tokens, allowance),
        "breakdown": lines,
        "over_trigger": over,
        "over_budget": bool(last_step and last_step.request_tokens > tclass.token_budget),
        "blocked_reason": compaction_blocked_reason(
            ticket, last_step.request_tokens, accounting=last_step.lane_tokens or {}
        )
        if over
        else "",
        "fixed_share": _share(sum(n for key, _, n in lines if key in FIXED_PARTS), tclass.token_budget),
        "step_count": totals["count"],
        "last_step": last_step,
        "chart": chart,
        "compactions": len(done),
        "tokens_in": totals["tokens_in"],
        "tokens_out": totals["tokens_out"],
        "cost": step_cost + comp_cost,
        "compaction_cost": comp_cost,
        "latency_ms": step_latency + comp_latency,
        "avg_latency_ms": int(step_latency / totals["count"]) if totals["count"] else 0,
        # Provider tokens per counted token where the count is approximate: the trigger applies it.
        "token_factor": calibration.applied_factor(tclass.working_model),
    }


# --- compactions -------------------------------------------------------------------------


def compaction_runs(ticket) -> list:
    """The ticket's compaction runs, oldest first (with the step that triggered each)."""
    return list(CompactionRun.objects.filter(ticket=ticket).select_related("trigger_step").order_by("id"))


def compactions(ticket):
    """Newest first."""
    return compaction_runs(ticket)[::-1]


def compaction_detail(ticket, run_id: int) -> dict | None:
    """Before, the summary, after and what changed, for one run of this ticket."""
    run = CompactionRun.objects.filter(ticket=ticket, pk=run_id).select_related("summary", "base_summary").first()
    if run is None:
        return None
    before = (run.request_before or {}).get("messages", [])
    after = (getattr(run, "request_after", None) or {}).get("messages", [])
    replaced = [m for m in before if any(run.from_turn <= t <= run.through_turn for t in m.get("turns", []))]
    return {
        "run": run,
        "before": [_message(m) for m in before],
        "after": [_message(m) for m in after],
        "replaced": [_message(m) for m in replaced],
        "summary": run.summary.text if run.summary else "",
        "old_summary": run.base_summary.text if run.base_summary else "",
        "saved": (run.tokens_before - run.tokens_after) if run.tokens_after is not None else None,
    }


def _message(m: dict) -> dict:
    calls = [{"name": c.get("name"), "args": pretty(c.get("arguments"))} for c in m.get("tool_calls", [])]
    return {
        "role": m.get("role", ""),
        "lane": m.get("lane") or "",
        "content": m.get("content", ""),
        "turns": m.get("turns", []),
        "calls": calls,
    }


# --- the queue with views, timers, sorting and pages ------------------------------------------

QUEUE_VIEWS = ("all", "mine", "unassigned")
QUEUE_SORTS = ("updated", "waiting")
PAGE_SIZE = 50


def with_timers(qs):
    """Annotate each ticket with whom it waits for and since when:

    - `waiting_on_staff`: a person must act (an attention reason is up — a follow-up promised, a
      flag — or an action is held for approval), so only a staff reply answers the customer;
    - `last_reply_number`: the last reply by the agent or a person (0: none yet);
    - `timer_reply_number`: the last reply that counts for the timer (a person's, when waiting on staff);
    - `waiting_since`: the customer's oldest message after that reply (None: nobody waits).
    """
    from django.db.models import BooleanField, Case, ExpressionWrapper, F, Subquery, Value, When
    from django.db.models.functions import Coalesce

    messages = Turn.objects.filter(ticket=OuterRef("pk"), kind=Turn.Kind.MESSAGE)

    def last(replies):
        return Coalesce(Subquery(replies.order_by("-number").values("number")[:1]), Value(0))

    held = HeldAction.objects.filter(ticket=OuterRef("pk"), status=HeldAction.Status.PENDING)
    qs = qs.annotate(
        last_reply_number=last(messages.filter(author__in=[Turn.Author.AGENT, Turn.Author.STAFF])),
        last_staff_reply_number=last(messages.filter(author=Turn.Author.STAFF)),
        waiting_on_staff=ExpressionWrapper(~Q(attention="") | Q(Exists(held)), output_field=BooleanField()),
    ).annotate(
        timer_reply_number=Case(
            When(waiting_on_staff=True, then=F("last_staff_reply_number")), default=F("last_reply_number")
        )
    )
    unanswered = messages.filter(author=Turn.Author.CUSTOMER, number__gt=OuterRef("timer_reply_number"))
    return qs.annotate(waiting_since=Subquery(unanswered.order_by("number").values("created_at")[:1]))


def _timer(ticket, *, now, waiting_since, timer_reply_number, waiting_on_staff):
    if ticket.status != Ticket.Status.OPEN:
        return None
    return response_timer(
        now=now,
        waiting_since=waiting_since,
        answered_before=timer_reply_number > 0,
        first_minutes=ticket.ticket_class.first_response_minutes,
        next_minutes=ticket.ticket_class.next_response_minutes,
        staff=waiting_on_staff,
    )


def queue_page(
    user,
    *,
    view: str = "all",
    status: str = "",
    ticket_class: str = "",
    needs: str = "",
    sort: str = "updated",
    page: int = 1,
):
    """One page of the queue: (tickets, Paginator page), timers attached to each ticket."""
    from django.core.paginator import Paginator
    from django.db.models import F
    from django.utils import timezone

    qs = with_timers(queue_for(user, status=status, ticket_class=ticket_class, needs=needs))
    if view == "mine":
        qs = qs.filter(assigned_to=user)
    elif view == "unassigned":
        qs = qs.filter(assigned_to__isnull=True)
    if sort == "waiting":  # longest-waiting first; nobody waiting goes last
        qs = qs.order_by(F("waiting_since").asc(nulls_last=True), "-updated_at")
    paginator = Paginator(qs.prefetch_related("tags"), PAGE_SIZE)
    current = paginator.get_page(page)
    now = timezone.now()
    for t in current.object_list:
        t.attention_kind = attention_kind(t.attention)
        t.timer = _timer(
            t,
            now=now,
            waiting_since=t.waiting_since,
            timer_reply_number=t.timer_reply_number,
            waiting_on_staff=t.waiting_on_staff,
        )
    return current


def queue_counts(user) -> dict:
    """Badges for the queue's views and needs."""
    base = Ticket.objects.exclude(status=Ticket.Status.CLOSED)

    return {
        "mine": base.filter(assigned_to=user).count(),
        "unassigned": base.filter(assigned_to__isnull=True).count(),
        "all": base.count(),
        "held": HeldAction.objects.filter(status="pending").values("ticket").distinct().count(),
        "attention": base.exclude(attention="").count(),
        "flagged": base.filter(attention__contains=FLAG_PREFIX).count(),
        "new": new_tickets(base).count(),
    }


def ticket_timer(ticket):
    """The response timer of one ticket, for its head on the desk."""
    from django.utils import timezone

    if ticket.status != Ticket.Status.OPEN:
        return None
    if all(hasattr(ticket, name) for name in TIMER_FIELDS):  # read with the ticket (`with_timers`)
        row = {name: getattr(ticket, name) for name in TIMER_FIELDS}
    else:
        row = with_timers(Ticket.objects.filter(pk=ticket.pk)).values(*TIMER_FIELDS).first()
    return _timer(ticket, now=timezone.now(), **row) if row else None


TIMER_FIELDS = ("waiting_since", "timer_reply_number", "waiting_on_staff")
# Every annotation `with_timers` puts on a ticket.
TIMER_ANNOTATIONS = (*TIMER_FIELDS, "last_reply_number", "last_staff_reply_number")
