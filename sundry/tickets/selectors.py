"""Reads for the desk."""

from __future__ import annotations

from django.db.models import Count, Q

from sundry.tickets.models import Ticket


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
    elif needs == "attention":
        qs = qs.exclude(attention="")
    return qs.order_by("-updated_at")


def ticket_for_staff(user, ticket_id: int) -> Ticket | None:
    from sundry.core.people import is_desk_staff

    if not is_desk_staff(user):
        return None
    return Ticket.objects.select_related("customer", "ticket_class").filter(pk=ticket_id).first()
