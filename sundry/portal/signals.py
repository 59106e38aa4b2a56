"""A reply or a confirmation card for the customer queues their e-mail notice once it commits.

Read from the saves themselves (the agent's replies, staff replies and cards are all made
through the ORM), so the notice needs nothing from the step or the desk. Only customers who
asked for e-mail get a task; whether it sends is the task's to decide (`sundry.portal.notices`).
"""

from __future__ import annotations

from django.db.models.signals import post_save

from sundry.agent.models import Confirmation
from sundry.core.background import enqueue_on_commit
from sundry.portal.notices import opted_in
from sundry.portal.tasks import customer_notify_task
from sundry.tickets.models import Ticket, Turn

REPLY_AUTHORS = (Turn.Author.AGENT, Turn.Author.STAFF)


def _queue(ticket_id: int, customer_id: int | None = None) -> None:
    if customer_id is None:
        customer_id = Ticket.objects.filter(pk=ticket_id).values_list("customer_id", flat=True).first()
    if customer_id is not None and opted_in(customer_id):
        enqueue_on_commit(customer_notify_task, ticket_id)


def _customer_of(instance) -> int | None:
    """The customer of the saved row's ticket, if the row was made with its ticket in hand
    (a ticket's customer never changes): no read for what the writer already had."""
    return instance.ticket.customer_id if type(instance).ticket.is_cached(instance) else None


def _turn_saved(sender, instance, created, **kwargs):
    if created and instance.kind == Turn.Kind.MESSAGE and instance.author in REPLY_AUTHORS:
        _queue(instance.ticket_id, _customer_of(instance))


def _card_saved(sender, instance, created, **kwargs):
    if created and instance.status == Confirmation.Status.PENDING:
        _queue(instance.ticket_id, _customer_of(instance))


def connect() -> None:
    post_save.connect(_turn_saved, sender=Turn, dispatch_uid="sundry.portal.notice.turn")
    post_save.connect(_card_saved, sender=Confirmation, dispatch_uid="sundry.portal.notice.card")
