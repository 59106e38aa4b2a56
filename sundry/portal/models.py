"""What the customer chose to be told, and where each ticket's notices stand.

Kept with the customer's page, not on the ticket: it is about how the page reaches its
reader when the page is closed, and the ticket's own records stay the desk's.
"""

from __future__ import annotations

from django.db import models


class NoticePreference(models.Model):
    """A customer's choice: an e-mail when a reply or a card waits for them. Off unless they turn it on."""

    customer = models.OneToOneField("people.Customer", on_delete=models.CASCADE, related_name="notice_preference")
    email = models.BooleanField(default=False)
    changed_at = models.DateTimeField(auto_now=True)


class TicketNotice(models.Model):
    """One ticket's waiting period, as the notifier sees it.

    `seen_at`: when the customer last had the page open, replied or decided a card.
    `notified_at`: when the last e-mail went. A new e-mail waits until `seen_at` passes it
    (they looked, or answered): one e-mail per waiting period, however many replies come.
    """

    ticket = models.OneToOneField("tickets.Ticket", on_delete=models.CASCADE, related_name="customer_notice")
    seen_at = models.DateTimeField(null=True, blank=True)
    notified_at = models.DateTimeField(null=True, blank=True)
