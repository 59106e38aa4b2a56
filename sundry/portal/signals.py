"""A reply or a confirmation card for the customer queues their e-mail notice once it commits.

Read from the saves themselves (the agent's replies, staff replies and cards are all made
through the ORM), so the notice needs nothing from the step or the desk. Only customers who
asked for e-mail get a task; whether it sends is the task's to decide (`sundry.portal.notices`).

An agent run reads the customer's choice with its one load of the ticket (`loop.LOAD_ALSO`),
so its replies and cards cost no read of it: the choice as it stood when the run opened the
ticket, seconds before. The task reads it afresh before it sends.
"""

from __future__ import annotations

from django.db.models.signals import post_save

from sundry.agent import loop
from sundry.agent.models import Confirmation
from sundry.core.background import enqueue_on_commit
from sundry.portal.notices import opted_in, opted_in_expression
from sundry.portal.tasks import customer_notify_task
from sundry.tickets.models import Ticket, Turn

REPLY_AUTHORS = (Turn.Author.AGENT, Turn.Author.STAFF)
# The loaded ticket's attribute an agent run fills with its customer's choice.
OPTED_IN = "notice_opted_in"


def _queue(instance) -> None:
    """Queue the notice task for the saved row's ticket if its customer asked for e-mail."""
    if _opted_in(instance):
        enqueue_on_commit(customer_notify_task, instance.ticket_id)


def _opted_in(instance) -> bool:
    """The customer's choice with no read for what the writer already had: the row made with
    its ticket in hand (a ticket's customer never changes), loaded by a run with the choice."""
    if not type(instance).ticket.is_cached(instance):
        customer_id = Ticket.objects.filter(pk=instance.ticket_id).values_list("customer_id", flat=True).first()
        return customer_id is not None and opted_in(customer_id)
    ticket = instance.ticket
    known = getattr(ticket, OPTED_IN, None)
    return known if known is not None else opted_in(ticket.customer_id)


def _turn_saved(sender, instance, created, **kwargs):
    if created and instance.kind == Turn.Kind.MESSAGE and instance.author in REPLY_AUTHORS:
        _queue(instance)


def _card_saved(sender, instance, created, **kwargs):
    if created and instance.status == Confirmation.Status.PENDING:
        _queue(instance)


def connect() -> None:
    loop.LOAD_ALSO[OPTED_IN] = opted_in_expression
    post_save.connect(_turn_saved, sender=Turn, dispatch_uid="sundry.portal.notice.turn")
    post_save.connect(_card_saved, sender=Confirmation, dispatch_uid="sundry.portal.notice.card")
