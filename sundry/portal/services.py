"""What a customer does besides chatting: pick the record (a shop's order) a ticket is about, flag a detail as wrong.

Both leave a turn staff can see (a system-visible event, never shown back to
the customer as chat), and a flag raises the ticket in the desk queue.
"""

from __future__ import annotations

from django.db import transaction

from sundry.context import services as lanes
from sundry.context.models import PinnedRule, Source
from sundry.context.statefields import StateValueInvalid, fields_for
from sundry.people.selectors import domain_of
from sundry.tickets.attention import FLAG_PREFIX, attention_flag, reason_text
from sundry.tickets.models import Ticket, Turn
from sundry.tickets.services import turn_append
from sundry.tickets.versions import ticket_lock
from sundry.tooling.records import records_for

NOTE_LIMIT = 300


def order_pick(*, ticket: Ticket, reference: str):
    """The customer chose one of their own records (a shop's order): the domain's pick field, as stated
    by the customer, confirmed."""
    records = records_for(domain_of(ticket.customer))
    number = records.normalize(reference)
    if not records.pick_field or not number or not records.owned(ticket.customer.external_key, [number]):
        raise StateValueInvalid(f"Pick one of your own {records.plural}.")
    with transaction.atomic():
        turn = turn_append(
            ticket=ticket,
            author=Turn.Author.CUSTOMER,
            kind=Turn.Kind.EVENT,
            text=f"The customer picked {records.noun} {number} from their {records.plural} on the page.",
            payload={"picked": {records.pick_field: number}},
        )
        value = lanes.state_set(
            ticket=ticket, name=records.pick_field, value=number, turn=turn.number, source="customer", confirmed=True
        )
    return value


def rule_withdraw(*, ticket: Ticket, rule_id: int) -> PinnedRule:
    """The customer takes back an instruction of their own: only their own words, on this ticket, still in
    force. The conversation records it for staff and the agent."""
    with transaction.atomic():
        ticket_lock(ticket.pk)
        rule = (
            PinnedRule.objects.select_for_update()
            .filter(
                pk=rule_id,
                ticket=ticket,
                source=Source.CUSTOMER,
                status__in=(PinnedRule.Status.CANDIDATE, PinnedRule.Status.ACTIVE),
            )
            .first()
        )
        if rule is None:
            raise StateValueInvalid("That instruction is not one of yours in force on this conversation.")
        rule.status, rule.version = PinnedRule.Status.DISMISSED, rule.version + 1
        rule.changed_at_turn = ticket.last_turn_number
        rule.save(update_fields=["status", "version", "changed_at_turn"])
        turn_append(
            ticket=ticket,
            author=Turn.Author.SYSTEM,
            kind=Turn.Kind.EVENT,
            text=f'The customer withdrew their instruction "{rule.text}"; it no longer holds.',
            payload={"rule": rule.pk, "withdrawn_by": "customer"},
        )
    return rule


def detail_flag(*, ticket: Ticket, value, note: str = "") -> Turn:
    """The customer says a confirmed detail is wrong: staff see a turn and a queue flag of its own."""
    note = " ".join((note or "").split())[:NOTE_LIMIT]
    spec = fields_for(ticket).get(value.name)
    label = spec.label if spec else value.name
    text = f"The customer says {label} “{value.value}” is wrong." + (f" They wrote: {note}" if note else "")
    with transaction.atomic():
        turn = turn_append(
            ticket=ticket,
            author=Turn.Author.CUSTOMER,
            kind=Turn.Kind.EVENT,
            text=text,
            payload={"flag": {"name": value.name, "value_id": value.pk, "value": value.value, "note": note}},
        )
        # Its own reason, beside any other (a breaker alert, another report): the turn in it keeps
        # each report apart, so staff mark handled exactly the one they read.
        reason = reason_text(f"{FLAG_PREFIX} {label} as wrong (turn {turn.number})")
        attention_flag(ticket.pk, reason, cause=reason)
        turn.payload["flag"]["reason"] = reason  # what `flags_resolve` finds the report by
        Turn.objects.filter(pk=turn.pk).update(payload=turn.payload)
    return turn
