"""The desk's live panels: what staff see of a ticket, registered with the panel kit
(`sundry.live.panels`) as the staff audience when the desk app loads."""

from __future__ import annotations

from django.core.exceptions import PermissionDenied

from sundry.agent import cardstore
from sundry.agent.models import HeldAction
from sundry.context.models import LedgerEntry, PinnedRule
from sundry.context.selectors import current_summary, lane_snapshot
from sundry.context.statefields import fields_for
from sundry.core.people import is_desk_staff
from sundry.core.tokens import count_tokens
from sundry.desk import selectors
from sundry.desk.selectors import pretty
from sundry.desk.sidebar import HEAD_ANNOTATIONS, approval_cards, customer_context, head_context, with_head
from sundry.live import fingerprint
from sundry.live.panels import (
    STAFF,
    Audience,
    Panel,
    Viewer,
    latest_turns,
    register,
    shared_read,
    turns_after,
    window,
)
from sundry.tickets import satisfaction
from sundry.tickets.models import Ticket, Turn
from sundry.tickets.versions import (
    ACTIONS,
    ATTACHMENTS,
    CARDS,
    HELD,
    LEDGER,
    MONEY,
    RULES,
    RUNS,
    STATE,
    STEPS,
    SUMMARY,
    TURNS,
)


def _staff(viewer: Viewer) -> None:
    if viewer.audience != STAFF or not is_desk_staff(viewer.user):
        raise PermissionDenied("staff panel")


def _pending_held(ticket) -> list:
    return shared_read(
        ("pending_held", ticket.pk),
        lambda: list(HeldAction.objects.filter(ticket=ticket, status="pending").order_by("id")),
    )


def _summary(ticket):
    return shared_read(("summary", ticket.pk), lambda: current_summary(ticket))


def _runs(ticket) -> list:
    """The compaction runs, oldest first (the conversation's marks, the summary and the budget show them)."""
    return shared_read(("compaction_runs", ticket.pk), lambda: selectors.compaction_runs(ticket))


def _ledger_entries(ticket) -> list:
    """Every ledger entry, by id: the conversation's cards borrow their descriptions, the ledger
    panel shows the active ones and counts the archived ones (one statement for the three)."""
    return shared_read(
        ("ledger_entries", ticket.pk),
        lambda: list(LedgerEntry.objects.filter(ticket=ticket).select_related("superseded_by_user").order_by("id")),
    )


def _staff_head(ticket, viewer):
    _staff(viewer)

    return {"held_count": len(_pending_held(ticket)), **head_context(ticket)}


def _marks_basis(marks: dict) -> tuple:
    """What the staff conversation's items show beside their turns, as plain data to compare."""
    runs = tuple(
        (through, r.pk, r.status, r.tokens_before, r.tokens_after, r.from_turn)
        for through, rs in sorted(marks["runs"].items())
        for r in rs
    )
    return marks["covered"], runs, tuple(marks["ledger"].items())


def _staff_conversation(ticket, viewer, previous=None):
    _staff(viewer)

    n = window()
    if not n:
        return selectors.conversation(ticket)
    marks = selectors.conversation_marks(
        ticket, summary=_summary(ticket), runs=_runs(ticket), entries=_ledger_entries(ticket)
    )
    basis = _marks_basis(marks)
    if previous is not None and previous.get("basis") == basis and previous["items"]:
        # Nothing the shown turns depend on changed: read only the turns after the last one shown.
        new = turns_after(Turn.objects.filter(ticket=ticket), previous["items"][-1].turn.number, n)
        if not new:
            return previous  # nothing new: the panel as it was
        if len(new) <= n:
            items = previous["items"] + selectors.conversation_items(new, previous["marks"])
            return {
                "items": items[-n:],
                "covered": marks["covered"],
                "earlier": previous["earlier"] or len(items) > n,
                "marks": previous["marks"],
                "basis": basis,
            }
    items, earlier = latest_turns(Turn.objects.filter(ticket=ticket), n)
    return {
        "items": selectors.conversation_items(items, marks),
        "covered": marks["covered"],
        "earlier": earlier,
        "marks": marks,
        "basis": basis,
    }


def _staff_turn_key(item, context):
    # A turn never changes; how it shows does: compacted or not, the compaction marks after it, and
    # the ledger's descriptions its result's card borrows.
    turn = item.turn
    marks = tuple((r.pk, r.status, r.tokens_before, r.tokens_after) for r in item.runs)
    borrowed = item.card.depends_on if item.card is not None else ()
    return f"turn-{turn.number}", (turn.pk, turn.number <= context["covered"], marks, borrowed)


def _cards(ticket) -> list:
    cards = cardstore.open_cards(ticket)
    for card in cards:
        card.pretty = pretty({"tool": card.tool, "arguments": card.arguments})
    return cards


def _staff_held(ticket, viewer):
    _staff(viewer)

    return {"held": approval_cards(ticket, _pending_held(ticket)), "cards": _cards(ticket)}


def _staff_rules(ticket, viewer):
    _staff(viewer)

    rules = list(PinnedRule.objects.filter(ticket=ticket, status__in=["active", "candidate"]).order_by("turn", "id"))
    active = [r for r in rules if r.status == "active"]
    # The cap is a warning, never a reason to drop a rule.
    tokens = count_tokens("\n".join(r.text for r in active), ticket.ticket_class.working_model) if active else 0
    return {
        "active": active,
        "candidates": [r for r in rules if r.status == "candidate"],
        "scopes": PinnedRule.Scope.choices,
        "rules_tokens": tokens,
        "over_cap": tokens > ticket.ticket_class.pinned_rules_cap,
    }


def _staff_ledger(ticket, viewer):
    _staff(viewer)

    entries = _ledger_entries(ticket)
    active = sorted((e for e in entries if e.status == "active"), key=lambda e: (e.first_seen_turn, e.id))
    # Whose each record is, where a tool server's declaration says: another customer's is marked.
    ours = {e.value for e in active if e.identifies_customer}
    for e in active:
        e.someone_else = bool(e.customer) and e.customer not in ours and e.customer != e.value
    return {"ledger": active, "archived_count": sum(e.status == "archived" for e in entries)}


def _staff_state(ticket, viewer):
    _staff(viewer)

    snap = lane_snapshot(ticket, with_turns=False)
    return {
        "fields": selectors.state_fields(ticket),
        "all_fields": [(f.name, f.label) for f in fields_for(ticket).values()],
        "actions": snap.actions,
        "money": snap.money,
    }


def _staff_summary(ticket, viewer):
    _staff(viewer)

    return {"summary": _summary(ticket), "runs": _runs(ticket)[::-1]}


def _staff_budget(ticket, viewer):
    _staff(viewer)

    return selectors.budget(ticket, runs=_runs(ticket))


def _staff_customer(ticket, viewer):
    _staff(viewer)

    return customer_context(ticket)


STAFF_PANELS: dict[str, Panel] = {
    p.name: p
    for p in [
        # The head is read on every push: its timer, rating, tags and colleagues come with the row.
        Panel("head", "desk/panels/head.html", _staff_head),
        Panel(
            "conversation",
            "desk/panels/conversation.html",
            _staff_conversation,
            item_template="desk/panels/turn.html",
            item_key=_staff_turn_key,
            reads=frozenset({TURNS, ATTACHMENTS, SUMMARY, RUNS, LEDGER}),
        ),
        # A held call's record is the domain's (`outside`); the customer's words before it never change.
        Panel("held", "desk/panels/held.html", _staff_held, reads=frozenset({HELD, CARDS, ACTIONS}), outside=True),
        # The customer's records, other tickets and the rules on them: outside this ticket (an action done
        # here changes the records: re-read then too).
        Panel("customer", "desk/panels/customer.html", _staff_customer, reads=frozenset({ACTIONS}), outside=True),
        Panel("rules", "desk/panels/rules.html", _staff_rules, reads=frozenset({RULES})),
        Panel(
            "state",
            "desk/panels/state.html",
            _staff_state,
            reads=frozenset({STATE, ACTIONS, MONEY, LEDGER, RULES, SUMMARY}),
        ),
        Panel("ledger", "desk/panels/ledger.html", _staff_ledger, reads=frozenset({LEDGER})),
        Panel("summary", "desk/panels/summary.html", _staff_summary, reads=frozenset({SUMMARY, RUNS})),
        # Over the trigger it says what keeps compaction back, which the turns and lanes decide.
        Panel(
            "budget", "desk/panels/budget.html", _staff_budget, reads=frozenset({STEPS, RUNS, SUMMARY, LEDGER, TURNS})
        ),
    ]
}


def _watch(user, ticket_id: int):
    if not is_desk_staff(user):
        return None, None
    ticket = Ticket.objects.select_related("customer", "ticket_class", "assigned_to").filter(pk=ticket_id).first()
    return (ticket, Viewer(user, STAFF)) if ticket else (None, None)


def _earlier(ticket, viewer: Viewer, n: int):
    _staff(viewer)
    return (
        lambda before: selectors.conversation(ticket, last=n, before=before),
        lambda item: item.turn.number,
        Turn.objects.filter(ticket=ticket),
    )


# The head's context carries these (timer, rating, tags, colleagues): the ticket's digest leaves them out.
fingerprint.read_with(
    "tickets.ticket",
    {*selectors.TIMER_ANNOTATIONS, "rating", *HEAD_ANNOTATIONS},
)


def _reach(tickets, viewer: Viewer):
    """Staff may see every ticket. The ticket a rendering reads carries what the head shows of it
    besides its row: its response timer's figures, its rating, and on PostgreSQL its tags and the
    colleagues it may be assigned to (one statement, not five)."""
    return with_head(selectors.with_timers(tickets).select_related(satisfaction.RATING_WITH_TICKET))


register(Audience(STAFF, STAFF_PANELS, _watch, _reach, _earlier))
