"""The customer's e-mail notice, sent by a worker after the reply or card commits."""

from smtplib import SMTPException

from celery import shared_task

from sundry.portal.notices import notify


# A mail server that is away is tried again a few times; the notice is a courtesy, so it is
# dropped after that rather than queued for ever (the page shows the reply either way).
@shared_task(
    name="sundry.portal.notify",
    acks_late=True,
    reject_on_worker_lost=True,
    autoretry_for=(SMTPException, OSError),
    max_retries=3,
    retry_backoff=15,
    retry_jitter=False,
)
def customer_notify_task(ticket_id: int) -> str:
    return notify(ticket_id)
