"""What a customer may see: their conversation, confirmed details and their own orders. Nothing internal."""

from __future__ import annotations

from sundry.context.models import StateValue
from sundry.context.statefields import FIELDS, format_amount
from sundry.tickets.models import Turn
from sundry.tickets.selectors import turns


def customer_turns(ticket):
    """Only messages between the customer and the desk: no tool calls, notes, events or rejections."""
    shown = (Turn.Author.CUSTOMER, Turn.Author.AGENT, Turn.Author.STAFF)
    return [t for t in turns(ticket) if t.kind == Turn.Kind.MESSAGE and t.author in shown]


def confirmed_details(ticket) -> list[dict]:
    """Current, confirmed, customer-visible values only: inferred or superseded ones never leave the desk."""
    out = []
    for v in StateValue.objects.filter(ticket=ticket, is_current=True, confirmed=True).order_by("name"):
        spec = FIELDS.get(v.name)
        if spec and spec.customer_visible:
            out.append({"id": v.pk, "name": v.name, "label": spec.label, "value": v.value})
    order = list(FIELDS)
    return sorted(out, key=lambda d: order.index(d["name"]))


def confirmed_value(ticket, value_id) -> StateValue | None:
    """A value the customer can see (and so may flag), or None."""
    v = StateValue.objects.filter(ticket=ticket, pk=value_id, is_current=True, confirmed=True).first()
    if v is None or not (FIELDS.get(v.name) and FIELDS[v.name].customer_visible):
        return None
    return v


def order_choices(ticket) -> dict:
    """The customer's own orders, and which one they confirmed this ticket is about (only if confirmed)."""
    from sundry.shop.models import Order

    chosen = StateValue.objects.filter(ticket=ticket, name="order_number", is_current=True, confirmed=True)
    chosen = chosen.values_list("value", flat=True).first()
    orders = Order.objects.filter(customer_id=ticket.customer_id).order_by("-placed_at")[:20]
    return {"orders": [{"number": o.number, "placed_at": o.placed_at, "status": o.get_status_display(),
                        "total": format_amount(o.total_cents, o.currency)} for o in orders],
            "chosen": chosen}
