"""E-mail a customer, if they asked for it, that a reply or a confirmation card waits on their ticket.

Once per waiting period: an e-mail goes when something waits that the customer has not seen
(their page is not open, and they have not opened it, replied or decided a card since it
came), and no other e-mail goes until they have. Never when a rule on the case forbids
e-mail: the same structured check that keeps the agent's e-mail tools from running.

The e-mail says only that something waits and where: it may be forwarded or read by someone
else, so it carries no subject line of the ticket, no order, no amount, no text of the reply.
Sent by a task after the reply or card commits (`sundry.portal.tasks`), never in the step.
"""

from __future__ import annotations

import logging

from django.conf import settings
from django.core.mail import EmailMessage
from django.db import transaction
from django.db.models import Exists, OuterRef, Q
from django.urls import reverse
from django.utils import timezone

from sundry.agent.models import Confirmation
from sundry.context.models import PinnedRule
from sundry.context.rules import EMAIL, forbidden_capabilities
from sundry.live.presence import customer_viewing
from sundry.portal.models import NoticePreference, TicketNotice
from sundry.tickets.models import Ticket, Turn
from sundry.tooling.domain import domain_for

log = logging.getLogger("sundry.portal")

REPLY, CARD = "reply", "card"
# What the task did, for its log line and the tests.
SENT, NOT_OPTED_IN, FORBIDDEN, NOTHING_WAITING = "sent", "not opted in", "a rule forbids e-mail", "nothing waiting"
PAGE_OPEN, SEEN, ALREADY_TOLD, GONE = "page open", "already seen", "already told this waiting period", "no ticket"

SUBJECTS = {REPLY: "A reply is waiting for you", CARD: "Your confirmation is needed"}
LEADS = {
    REPLY: "There is a new reply in your conversation with our support team.",
    CARD: "Our support team is waiting for your confirmation in your conversation before going ahead.",
}


# --- the customer's choice -----------------------------------------------------------------------


def _choosing_email(customer_id):
    return NoticePreference.objects.filter(customer_id=customer_id, email=True)


def opted_in(customer_id: int) -> bool:
    return _choosing_email(customer_id).exists()


def opted_in_expression() -> Exists:
    """`opted_in` as an expression on a ticket's row: its customer's choice, read with the ticket."""
    return Exists(_choosing_email(OuterRef("customer_id")))


def preference_set(*, customer, email: bool) -> NoticePreference:
    pref, _ = NoticePreference.objects.update_or_create(customer=customer, defaults={"email": email})
    return pref


def seen(ticket_id: int) -> None:
    """The customer had the ticket's page in front of them (opened it, replied, decided a card):
    what waited is seen, and the next thing to wait may be e-mailed again."""
    now = timezone.now()
    if not TicketNotice.objects.filter(ticket_id=ticket_id).update(seen_at=now):
        TicketNotice.objects.get_or_create(ticket_id=ticket_id, defaults={"seen_at": now})


# --- what the rules say ------------------------------------------------------------------------


def email_forbidden(ticket: Ticket) -> bool:
    """Whether a rule in force on this case forbids e-mailing the customer.

    Judged as the guard judges the agent's e-mail tools: the rule's stored check blocks a tool
    the class's domain declares as contacting the customer by e-mail, or the rules classifier
    reads the e-mail capability as forbidden (a class whose domain has no e-mail tool stores an
    empty check for "never e-mail me", and that rule still holds here). Candidates count
    (a flagged rule is enforced until staff dismiss it), and so do the customer's
    customer-wide rules on their other tickets."""
    rules = PinnedRule.objects.filter(status__in=(PinnedRule.Status.ACTIVE, PinnedRule.Status.CANDIDATE)).filter(
        Q(ticket_id=ticket.pk) | Q(ticket__customer_id=ticket.customer_id, scope=PinnedRule.Scope.CUSTOMER)
    )
    try:
        email_tools = set(domain_for(ticket.ticket_class).tools_with(EMAIL))
    except LookupError:  # a class naming a domain not loaded here: the rule's text still speaks
        email_tools = set()
    for text, enforcement in rules.values_list("text", "enforcement"):
        if email_tools & set((enforcement or {}).get("block_tools") or ()) or EMAIL in forbidden_capabilities(text):
            return True
    return False


# --- what waits -----------------------------------------------------------------------------------


def waiting(ticket: Ticket) -> tuple[str, object] | None:
    """(what waits, since when) for the customer, or None: an open card, else a reply that is the
    last message of the conversation (a customer's message after it answered it)."""
    card = (
        Confirmation.objects.filter(ticket=ticket, status=Confirmation.Status.PENDING, expires_at__gt=timezone.now())
        .order_by("-created_at")
        .values_list("created_at", flat=True)
        .first()
    )
    if card is not None:
        return CARD, card
    last = (
        Turn.objects.filter(
            ticket=ticket,
            kind=Turn.Kind.MESSAGE,
            author__in=(Turn.Author.CUSTOMER, Turn.Author.AGENT, Turn.Author.STAFF),
        )
        .order_by("-number")
        .values_list("author", "created_at")
        .first()
    )
    if last is not None and last[0] != Turn.Author.CUSTOMER:
        return REPLY, last[1]
    return None


def page_url(ticket_id: int) -> str:
    return settings.PUBLIC_URL + reverse("portal-ticket", args=[ticket_id])


def message(kind: str, ticket: Ticket) -> EmailMessage:
    """The e-mail: what waits in general words, and the link. Nothing of the case itself."""
    body = (
        f"Hello,\n\n{LEADS[kind]}\n\nRead it on your support page (you may be asked to sign in):\n"
        f"{page_url(ticket.pk)}\n\n"
        "We send one notice until you have looked, however many replies follow.\n"
        f"You asked for these e-mails; you can turn them off at {settings.PUBLIC_URL}{reverse('portal-home')}\n"
    )
    return EmailMessage(subject=SUBJECTS[kind], body=body, to=[ticket.customer.email])


# --- the notice --------------------------------------------------------------------------------


def notify(ticket_id: int) -> str:
    """Send the customer the e-mail if everything above allows it; returns what was decided."""
    ticket = Ticket.objects.select_related("customer", "ticket_class").filter(pk=ticket_id).first()
    if ticket is None:
        return GONE
    if not opted_in(ticket.customer_id) or not ticket.customer.email:
        return NOT_OPTED_IN
    if email_forbidden(ticket):
        return FORBIDDEN
    TicketNotice.objects.get_or_create(ticket=ticket)
    with transaction.atomic():
        # One decision at a time per ticket: two replies' tasks must not both send.
        notice = TicketNotice.objects.select_for_update().get(ticket=ticket)
        what = waiting(ticket)
        if what is None:
            return NOTHING_WAITING
        kind, since = what
        now = timezone.now()
        if customer_viewing(ticket_id):
            notice.seen_at = now  # on their screen as it came: seen
            notice.save(update_fields=["seen_at"])
            return PAGE_OPEN
        if notice.seen_at is not None and notice.seen_at >= since:
            return SEEN
        if notice.notified_at is not None and (notice.seen_at is None or notice.notified_at >= notice.seen_at):
            return ALREADY_TOLD
        notice.notified_at = now
        notice.save(update_fields=["notified_at"])
        # Inside the lock: a failure to send rolls the mark back and the task tries again.
        message(kind, ticket).send()
    log.info("ticket %s: e-mailed its customer that a %s waits", ticket_id, kind)
    return SENT
