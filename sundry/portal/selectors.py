"""What a customer may see: their conversation, confirmed details and their own records (a shop's orders,
read through their domain's hook, `tooling.records`). Nothing internal."""

from __future__ import annotations

from django.db.models import Q
from pydantic import ValidationError

from sundry.agent.guards import cards
from sundry.agent.models import HeldAction
from sundry.agent.toolbox import Toolbox, toolbox_for
from sundry.context.idformats import find_ids
from sundry.context.models import ActionTaken, StateValue
from sundry.context.selectors import lane_snapshot
from sundry.context.statefields import fields_for
from sundry.live.panels import latest_turns
from sundry.people.selectors import domain_of
from sundry.tickets.models import Turn
from sundry.tooling.domain import domain_for
from sundry.tooling.records import records_for

SHOWN_AUTHORS = (Turn.Author.CUSTOMER, Turn.Author.AGENT, Turn.Author.STAFF)


def customer_turns(ticket):
    """Only messages between the customer and the desk: no tool calls, notes, events or rejections."""
    return list(customer_messages(ticket).order_by("number"))


def customer_messages(ticket):
    """The same messages as a queryset (for a window of them: sundry.live.panels.latest_turns)."""
    return Turn.objects.filter(ticket=ticket, kind=Turn.Kind.MESSAGE, author__in=SHOWN_AUTHORS)


def reported_value_ids(ticket) -> set[int]:
    """The details the customer flagged as wrong that staff have not handled yet.

    Staff handle each report on its own (sundry.tickets.attention.flags_resolve names the
    report's turn; a resolution from before reports were kept apart ends every report
    before it); a corrected value is a new value, which nobody has flagged.
    """
    reported: dict[int, int] = {}  # the report's turn → the value it flagged
    events = (
        Turn.objects.filter(ticket=ticket, kind=Turn.Kind.EVENT)
        .filter(Q(payload__has_key="flag") | Q(payload__has_key="flag_resolved"))
        .order_by("number")
    )
    for number, payload in events.values_list("number", "payload"):
        resolved = payload.get("flag_resolved")
        if isinstance(resolved, dict):
            reported.pop(resolved.get("turn"), None)
        elif resolved:
            reported.clear()
        elif isinstance(payload.get("flag"), dict) and isinstance(payload["flag"].get("value_id"), int):
            reported[number] = payload["flag"]["value_id"]
    return set(reported.values())


def confirmed_values(ticket) -> list:
    """The ticket's current, confirmed state values by name (the details show them, the order
    picker takes the one it asks for from them)."""
    return list(StateValue.objects.filter(ticket=ticket, is_current=True, confirmed=True).order_by("name"))


def confirmed_details(ticket, values: list | None = None) -> list[dict]:
    """Current, confirmed, customer-visible values only: inferred or superseded ones never leave the desk.
    Each says whether the customer reported it as wrong and staff have yet to handle that.
    `values`: `confirmed_values(ticket)`, if the caller has them."""
    out = []
    reported = reported_value_ids(ticket)
    known = fields_for(ticket)
    for v in confirmed_values(ticket) if values is None else values:
        spec = known.get(v.name)
        if spec and spec.customer_visible:
            out.append(
                {"id": v.pk, "name": v.name, "label": spec.label, "value": v.value, "reported": v.pk in reported}
            )
    order = list(known)
    return sorted(out, key=lambda d: order.index(d["name"]))


def completed_actions(ticket) -> list[dict]:
    """What the customer's domain has done on this ticket (a shop's refunds, returns, cancellations),
    in the words its records hook gives each action (`Records.done`); what it does not word (an
    e-mail, a phone-call log) is left out.

    These are results the domain's own tools reported, not anything a model
    inferred, so they are shown beside the confirmed details; no internal IDs.
    """
    records = records_for(domain_of(ticket.customer))
    out = []
    rows = (
        ActionTaken.objects.filter(ticket=ticket)
        .order_by("turn", "id")
        .values_list("tool", "result", "amount_cents", "currency", "created_at")
    )
    for tool, result, amount_cents, currency, created_at in rows:
        done = records.done(tool, result or {}, amount_cents, currency)
        if done is not None and done.text:
            # The reference (an order number) is kept whole on narrow screens (a line may not break at its hyphen).
            text = done.text
            before, found, after = text.partition(done.whole) if done.whole else (text, "", "")
            out.append({"text": text, "before": before, "order": found, "after": after, "at": created_at})
    return out


# Why an approved call did not run, in the customer's words, by the guard or error that stopped it.
_NOT_RUN = {
    "refund_limit": "the amount is more than can be refunded on that order",
    "rule": "it goes against what you asked us",
    "repeat": "it had already been done",
    "id": "the details it named could not be checked",
    "unverified_id": "the details it named could not be checked",
}


def _why_not_run(ticket, held: HeldAction) -> str:
    """Why an approved call was not carried out, from the turn that recorded it — never its raw text,
    which is written for the agent."""
    turn = Turn.objects.filter(ticket=ticket, number=held.result_turn).values_list("kind", "payload").first()
    if turn is None:
        return "it could not be carried out"
    kind, payload = turn
    if payload.get("same_as") or payload.get("decision") == "refused":
        return _NOT_RUN["repeat"]
    if kind == Turn.Kind.REJECTION:
        return _NOT_RUN.get(payload.get("guard", ""), "it no longer passed our checks")
    return "the shop's system did not accept it"


def _decision_title(held: HeldAction, snapshot, toolbox: Toolbox) -> str:
    """The held call in the words of its confirmation card: what, on which order, for how much."""
    tool = toolbox.tool(held.tool)
    if tool is not None:
        try:
            args = tool.args_model.model_validate(held.arguments)
        except ValidationError:
            args = None
        if args is not None:
            return cards.build(
                tool, toolbox.domain.tool(held.tool), args, ledger=snapshot.ledger, money=snapshot.money
            ).title
    return held.tool.replace("_", " ").capitalize()


def staff_decisions(ticket) -> list[dict]:
    """Each action held for our team on this ticket and what became of it, in code-rendered words:
    waiting, done, declined, or approved but not carried out (and why)."""
    held_actions = list(HeldAction.objects.filter(ticket=ticket).order_by("created_at", "id"))
    if not held_actions:
        return []
    snapshot = lane_snapshot(ticket, with_turns=False)
    toolbox = toolbox_for(ticket.ticket_class)
    out = []
    for held in held_actions:
        status = held.status
        if status == HeldAction.Status.PENDING:
            outcome, state = "Waiting for our team to check it; nothing has been done yet.", "waiting"
        elif status == HeldAction.Status.EXECUTED:
            outcome, state = "Approved by our team and done.", "done"
        elif status == HeldAction.Status.APPROVED:
            outcome, state = "Approved by our team; being carried out now.", "waiting"
        elif status == HeldAction.Status.REJECTED:
            outcome, state = "Our team decided not to do this; nothing was done.", "declined"
        else:
            outcome, state = (
                f"Approved, but not carried out: {_why_not_run(ticket, held)}. Nothing was done.",
                "declined",
            )
        out.append(
            {
                "title": _decision_title(held, snapshot, toolbox),
                "outcome": outcome,
                "state": state,
                "at": held.decided_at or held.created_at,
            }
        )
    return out


def confirmed_value(ticket, value_id) -> StateValue | None:
    """A value the customer can see (and so may flag), or None."""
    v = StateValue.objects.filter(ticket=ticket, pk=value_id, is_current=True, confirmed=True).first()
    spec = fields_for(ticket).get(v.name) if v is not None else None
    if spec is None or not spec.customer_visible:
        return None
    return v


def order_choices(ticket, values: list | None = None) -> dict:
    """The customer's own records in their domain (a shop's orders) to pick the one this ticket is
    about, and which one they confirmed (only if confirmed). A domain with no picker offers none.
    `values`: `confirmed_values(ticket)`, if the caller has them (a field has one current value)."""
    records = records_for(domain_of(ticket.customer))
    if not records.pick_field:
        return {"orders": [], "chosen": None, "named": None, "records": records}
    if values is None:
        chosen = StateValue.objects.filter(ticket=ticket, name=records.pick_field, is_current=True, confirmed=True)
        chosen = chosen.values_list("value", flat=True).first()
    else:
        chosen = next((v.value for v in values if v.name == records.pick_field), None)
    return {
        "orders": records.recent(ticket.customer.external_key, 20),
        "chosen": chosen,
        "named": None if chosen else _named_in_first_message(ticket, records),
        "records": records,
    }


def _named_in_first_message(ticket, records) -> str | None:
    """A record of theirs the customer's first message names: then there is nothing to ask."""
    # One row, not the conversation: this panel renders on every push.
    first = customer_messages(ticket).filter(author=Turn.Author.CUSTOMER).order_by("number").first()
    domain = domain_for(ticket.ticket_class)
    field = domain.state_field(records.pick_field)  # an `id` field: the kind of ID it holds
    kind = field.id_kind if field is not None else ""
    numbers = [v for k, v in find_ids(first.text if first else "", domain) if kind and k == kind]
    if not numbers:
        return None
    return next(iter(records.owned(ticket.customer.external_key, numbers)), None)


def customer_conversation(ticket, *, last: int | None = None, before: int | None = None) -> dict:
    """The customer's conversation (every message, or the `last` n before turn `before`), whether
    earlier messages exist, and who on the desk wrote each human reply (first names only)."""
    if last is None:
        items, earlier = customer_turns(ticket), False
    else:
        items, earlier = latest_turns(customer_messages(ticket), last, before)
    return {"items": items, "names": staff_names(items), "earlier": earlier}


def staff_names(items, known: dict | None = None) -> dict:
    """username → first name for the staff replies among `items` (those in `known` are not read again)."""
    from django.contrib.auth import get_user_model

    known = dict(known or {})
    by = {t.payload.get("by") for t in items if t.author == Turn.Author.STAFF and t.payload.get("by")} - set(known)
    users = get_user_model().objects.filter(username__in=by).values_list("username", "first_name") if by else []
    known.update({u: (first or "Support team") for u, first in users})
    return known
