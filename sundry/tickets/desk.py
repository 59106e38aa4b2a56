"""What the ticket head and the customer sidebar on the desk show (reads only)."""

from __future__ import annotations

from django.contrib.auth import get_user_model

from sundry.tickets.models import Ticket


def head_context(ticket) -> dict:
    from sundry.tickets.selectors import ticket_timer

    return {
        "colleagues": list(get_user_model().objects.filter(is_staff=True, is_active=True).order_by("username")
                           .only("pk", "username", "first_name")),
        "tag_names": list(ticket.tags.values_list("name", flat=True)),
        "timer": ticket_timer(ticket),
        "statuses": Ticket.Status.choices,
        "priorities": Ticket.Priority.choices,
    }


def customer_context(ticket) -> dict:
    """The customer behind the ticket: contact details, recent orders, other tickets, rules that carry over."""
    from sundry.context.models import PinnedRule
    from sundry.core.money import format_money
    from sundry.shop.models import Order

    customer = ticket.customer
    orders = Order.objects.filter(customer=customer).order_by("-placed_at")[:5]
    return {
        "customer": customer,
        "orders": [{"number": o.number, "placed_at": o.placed_at, "status": o.get_status_display(),
                    "total": format_money(o.total_cents, o.currency)} for o in orders],
        "order_count": Order.objects.filter(customer=customer).count(),
        "past_tickets": list(Ticket.objects.filter(customer=customer).exclude(pk=ticket.pk)
                             .order_by("-updated_at").only("pk", "subject", "status", "updated_at")[:5]),
        "carried_rules": list(PinnedRule.objects.filter(ticket__customer=customer, scope=PinnedRule.Scope.CUSTOMER,
                                                        status=PinnedRule.Status.ACTIVE)
                              .exclude(ticket=ticket).values_list("text", flat=True).distinct()[:10]),
    }
