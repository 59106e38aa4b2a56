"""Saves that can change who may watch a ticket make the affected sockets re-read access,
and any logout (desk, customer page, admin) closes the sockets of the session it ends.

Sockets also re-read access on a timer (sundry.live.consumers), which covers
changes made around the ORM (queryset updates, raw SQL) and expired sessions;
these make the common ones — the admin editing a user, a customer's login, a
ticket, a logout — take effect at once.
"""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.contrib.auth.signals import user_logged_out
from django.db.models.signals import post_delete, post_save, pre_save

from sundry.people.models import Customer
from sundry.tickets.events import access_changed, user_sockets_close
from sundry.tickets.models import Ticket


def _user_saved(sender, instance, **kwargs):
    access_changed(user_ids=[instance.pk])


def _logged_out(sender, request, user, **kwargs):
    # Sent before the session is flushed, so its key still names the sockets it opened.
    if user is not None:
        user_sockets_close(user.pk, getattr(getattr(request, "session", None), "session_key", None))


def _customer_before_save(sender, instance, **kwargs):
    # Remember the login the customer had, so it loses access if the link moves.
    instance._sundry_old_user_id = (
        sender.objects.filter(pk=instance.pk).values_list("user_id", flat=True).first() if instance.pk else None
    )


def _customer_saved(sender, instance, **kwargs):
    access_changed(user_ids={instance.user_id, getattr(instance, "_sundry_old_user_id", None)})


def _ticket_saved(sender, instance, created, **kwargs):
    if not created:  # the owner may have changed; staff access does not depend on the row
        access_changed(customer_tickets=[instance.pk])


def _ticket_deleted(sender, instance, **kwargs):
    access_changed(tickets=[instance.pk])


def connect() -> None:
    user = get_user_model()
    user_logged_out.connect(_logged_out, dispatch_uid="sundry.live.logged_out")
    post_save.connect(_user_saved, sender=user, dispatch_uid="sundry.live.user_saved")
    post_delete.connect(_user_saved, sender=user, dispatch_uid="sundry.live.user_deleted")
    pre_save.connect(_customer_before_save, sender=Customer, dispatch_uid="sundry.live.customer_before_save")
    post_save.connect(_customer_saved, sender=Customer, dispatch_uid="sundry.live.customer_saved")
    post_delete.connect(_customer_saved, sender=Customer, dispatch_uid="sundry.live.customer_deleted")
    post_save.connect(_ticket_saved, sender=Ticket, dispatch_uid="sundry.live.ticket_saved")
    post_delete.connect(_ticket_deleted, sender=Ticket, dispatch_uid="sundry.live.ticket_deleted")
