"""What a customer may see: their conversation and confirmed details. Nothing internal."""

from __future__ import annotations

from sundry.context.models import StateValue
from sundry.context.statefields import FIELDS
from sundry.tickets.models import Turn


def customer_turns(ticket):
    """Only messages between the customer and the desk: no tool calls, notes or rejections."""
    return Turn.objects.filter(
        ticket=ticket, kind=Turn.Kind.MESSAGE, author__in=[Turn.Author.CUSTOMER, Turn.Author.AGENT, Turn.Author.STAFF]
    ).order_by("number")


def confirmed_details(ticket) -> list[dict]:
    out = []
    for v in StateValue.objects.filter(ticket=ticket, is_current=True, confirmed=True).order_by("name"):
        spec = FIELDS.get(v.name)
        if spec and spec.customer_visible:
            out.append({"id": v.pk, "name": v.name, "label": spec.label, "value": v.value})
    return out
