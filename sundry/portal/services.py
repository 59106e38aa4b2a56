"""What a customer does besides chatting: pick the order a ticket is about, flag a detail as wrong.

Both leave a turn staff can see (a system-visible event, never shown back to
the customer as chat), and a flag raises the ticket in the desk queue.
"""

from __future__ import annotations

from django.db import transaction

from sundry.context import services as lanes
from sundry.context.statefields import FIELDS, StateValueInvalid
from sundry.shop.models import Order
from sundry.tickets.models import Ticket, Turn
from sundry.tickets.selectors import FLAG_PREFIX
from sundry.tickets.services import turn_append
from sundry.tickets.versions import ticket_update

NOTE_LIMIT = 300


def order_pick(*, ticket: Ticket, order_number: str):
    """The customer chose one of their own orders: state as stated by the customer, confirmed."""
    number = (order_number or "").strip().upper()
    if not Order.objects.filter(number=number, customer_id=ticket.customer_id).exists():
        raise StateValueInvalid("Pick one of your own orders.")
    with transaction.atomic():
        turn = turn_append(ticket=ticket, author=Turn.Author.CUSTOMER, kind=Turn.Kind.EVENT,
                           text=f"The customer picked order {number} from their orders on the page.",
                           payload={"picked": {"order_number": number}})
        value = lanes.state_set(ticket=ticket, name="order_number", value=number, turn=turn.number,
                                source="customer", confirmed=True)
    return value


def detail_flag(*, ticket: Ticket, value, note: str = "") -> Turn:
    """The customer says a confirmed detail is wrong: staff see a turn and a queue flag."""
    note = " ".join((note or "").split())[:NOTE_LIMIT]
    label = FIELDS[value.name].label
    text = f"The customer says {label} “{value.value}” is wrong." + (f" They wrote: {note}" if note else "")
    with transaction.atomic():
        turn = turn_append(ticket=ticket, author=Turn.Author.CUSTOMER, kind=Turn.Kind.EVENT, text=text,
                           payload={"flag": {"name": value.name, "value_id": value.pk, "value": value.value,
                                             "note": note}})
        # A breaker alert outranks a flag: never overwrite another reason to look.
        ticket_update(ticket.pk, where={"attention": ""},
                      attention=f"{FLAG_PREFIX} {label} as wrong (turn {turn.number})"[:200])
    return turn


def flags_resolve(*, ticket: Ticket, user) -> bool:
    """Staff handled the customer's flag: the queue flag clears and the turn log says who."""
    with transaction.atomic():
        cleared = ticket_update(ticket.pk, where={"attention__startswith": FLAG_PREFIX}, attention="")
        if cleared:
            turn_append(ticket=ticket, author=Turn.Author.SYSTEM, kind=Turn.Kind.EVENT,
                        text=f"{user.get_username()} handled the customer's flag.", payload={"flag_resolved": True})
    return bool(cleared)
