"""The customer's page. A customer sees only their own tickets and only confirmed values.

Posts from the page are htmx requests answered with the customer's own
panels re-rendered and a status line; the websocket only pushes. A message
posted from a page whose socket is open is answered with the status line
alone: the push brings the message (`socket_is_live`).
"""

import logging

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils.http import urlencode
from django.views.decorators.http import require_GET, require_POST

from sundry.agent.models import Confirmation
from sundry.agent.services import ConfirmationError, confirmation_decide, customer_message_post
from sundry.agent.toolbox import with_servers_flag
from sundry.context.models import PinnedRule
from sundry.context.statefields import StateValueInvalid
from sundry.core.ratelimit import Rate, allow
from sundry.desk.lifecycle import ticket_create
from sundry.live.earlier import earlier_response
from sundry.live.pagesocket import socket_is_live
from sundry.live.panels import CUSTOMER, Viewer, render_all, render_panel
from sundry.people.selectors import customer_of, domain_of
from sundry.portal import notices, services
from sundry.portal.panels import CUSTOMER_PANELS
from sundry.portal.selectors import confirmed_value
from sundry.tickets.models import Ticket, TicketClass
from sundry.tickets.services import MessageRefused, ticket_accepts_customer_messages, validate_message_text
from sundry.tooling.records import records_for

log = logging.getLogger("sundry.portal")

TOO_MANY_MESSAGES = (
    "You're sending messages faster than we can read them. Wait a minute, then send again — your text is kept."
)
TOO_MANY_TICKETS = (
    "You've opened many conversations in a short time. Please continue in one of them, or try again later."
)


def _customer(request):
    customer = customer_of(request.user)
    if customer is None:
        raise PermissionDenied("This page is for customers.")
    return customer


def own_ticket(request, ticket_id, tickets=None):
    """The ticket, if it is the asking customer's own, with its customer and class, in one read
    (`tickets`: a queryset to read it from, else every ticket). A login that is no customer's is
    refused; someone else's ticket looks exactly like a missing one."""
    tickets = Ticket.objects.all() if tickets is None else tickets
    ticket = None
    if request.user.is_authenticated:
        ticket = (
            tickets.select_related("customer", "ticket_class")
            .filter(pk=ticket_id, customer__user_id=request.user.pk)
            .first()
        )
    if ticket is None:
        _customer(request)  # a login that is no customer's: refused, as on every customer page
        raise Http404("No such ticket.")
    return ticket


@login_required
@require_GET
def home(request):
    customer = _customer(request)
    tickets = Ticket.objects.filter(customer=customer).order_by("-updated_at")
    return render(
        request,
        "portal/home.html",
        {
            "customer": customer,
            "tickets": tickets,
            "error": request.GET.get("error", ""),
            "notice_saved": request.GET.get("notices", ""),
            "email_notices": notices.opted_in(customer.pk),
        },
    )


NOTICE_CHOICES = {"on": True, "off": False}


@login_required
@require_POST
def notice_setting(request):
    """The customer turns e-mail notices of replies and cards on or off (off until they do)."""
    customer = _customer(request)
    choice = request.POST.get("email", "")
    if choice not in NOTICE_CHOICES:
        message = "Choose on or off for e-mail notices."
        if request.htmx:
            return HttpResponse(render_to_string("desk/_flash.html", {"message": message, "level": "bad"}), status=422)
        return redirect(reverse("portal-home") + "?" + urlencode({"error": message}))
    notices.preference_set(customer=customer, email=NOTICE_CHOICES[choice])
    return redirect(reverse("portal-home") + "?" + urlencode({"notices": choice}))


@login_required
@require_POST
def ticket_new(request):
    customer = _customer(request)
    try:
        text = validate_message_text(request.POST.get("text", ""))
    except MessageRefused as exc:
        return redirect(reverse("portal-home") + "?" + urlencode({"error": str(exc)}))
    if not allow("tickets", request.user.pk, Rate.parse(settings.RATE_CUSTOMER_TICKETS)):
        return redirect(reverse("portal-home") + "?" + urlencode({"error": TOO_MANY_TICKETS}))
    # The deployment's entry class; the oldest class when none has its slug (a fresh install).
    tclass = (
        TicketClass.objects.filter(slug=settings.DEFAULT_TICKET_CLASS).first()
        or TicketClass.objects.order_by("pk").first()
    )
    ticket = ticket_create(customer=customer, ticket_class=tclass, subject=text[:80])
    customer_message_post(ticket=ticket, text=text)
    return redirect("portal-ticket", ticket_id=ticket.pk)


def _viewer(request, ticket):
    return Viewer(request.user, CUSTOMER, ticket.customer)


@login_required
@require_GET
def ticket_detail(request, ticket_id):
    ticket = own_ticket(request, ticket_id)
    notices.seen(ticket.pk)
    return render(
        request,
        "portal/ticket.html",
        {
            "ticket": ticket,
            "panels": render_all(ticket, _viewer(request, ticket)),
            "error": request.GET.get("error", ""),
        },
    )


@login_required
@require_GET
def ticket_messages(request, ticket_id):
    """Earlier messages of a conversation whose page opened at the latest ones (sundry.live.earlier)."""
    ticket = own_ticket(request, ticket_id)
    return earlier_response(request, ticket, _viewer(request, ticket), reverse("portal-ticket", args=[ticket.pk]))


def panels_answer(request, ticket, *, panels=(), message="", level="ok", status=200, fresh=True, reread=True):
    """`fresh=False`: the status line alone, without reading anything. `reread=False`: the panels are
    rendered from `ticket` as the view holds it (checked as the customer's own when the view read it),
    for panels that read all they show afresh — the conversation reads its messages."""
    if not request.htmx:
        if level == "ok":
            return redirect("portal-ticket", ticket_id=ticket.pk)
        return redirect(reverse("portal-ticket", args=[ticket.pk]) + "?" + urlencode({"error": message}))
    html = ""
    if fresh:
        if reread:
            ticket = own_ticket(request, ticket.pk)
        viewer = _viewer(request, ticket)
        html = "".join(render_panel(CUSTOMER_PANELS[name], ticket, viewer) for name in panels)
    html += render_to_string("desk/_flash.html", {"message": message, "level": level})
    return HttpResponse(html, status=status)


@login_required
@require_POST
def ticket_message(request, ticket_id):
    # Read with whether its class has tool servers: a class without costs the post no read of them.
    ticket = own_ticket(request, ticket_id, with_servers_flag(Ticket.objects))
    if not allow("messages", request.user.pk, Rate.parse(settings.RATE_CUSTOMER_MESSAGES)):
        return panels_answer(request, ticket, message=TOO_MANY_MESSAGES, level="bad", status=429)
    try:
        ticket_accepts_customer_messages(ticket)
        customer_message_post(
            ticket=ticket,
            text=request.POST.get("text", ""),
            client_key=request.POST.get("client_key", ""),
            uploads=request.FILES.getlist("file"),
        )
        notices.seen(ticket.pk)  # they answered: what waited was read
    except MessageRefused as exc:
        return panels_answer(request, ticket, message=str(exc), level="bad", status=422)
    try:
        # A page whose socket is up gets the new message in the push the commit sends: the answer is
        # the status line alone. Otherwise (the socket down, not yet open, no JavaScript) the
        # conversation is sent back, read afresh; the ticket the view checked and wrote is not read again.
        panels = () if socket_is_live(request) else ("conversation",)
        return panels_answer(request, ticket, panels=panels, message="Sent.", reread=False)
    except Exception:  # noqa: BLE001 — the message is stored whatever failed after it
        # Say so, or the sender would send it again. The page's live updates bring the
        # conversation up to date once the database (or Redis) answers again.
        log.warning("message on ticket %s stored; its panels could not be rendered", ticket.pk, exc_info=True)
        return panels_answer(request, ticket, message="Sent.", fresh=False)


@login_required
@require_POST
def card_decide(request, ticket_id, card_id):
    """The customer's Confirm or Not now on a card of their own conversation, bound to the exact call
    the card showed them (its digest); it runs once, whoever clicks twice."""
    ticket = own_ticket(request, ticket_id)
    if not Confirmation.objects.filter(pk=card_id, ticket=ticket).exists():
        raise Http404("No such card on this conversation.")
    decision = request.POST.get("decision")
    if decision not in ("confirm", "decline"):
        return panels_answer(
            request, ticket, message="Choose Confirm or Not now.", level="bad", status=422, fresh=False
        )
    if not allow("messages", request.user.pk, Rate.parse(settings.RATE_CUSTOMER_MESSAGES)):
        return panels_answer(request, ticket, message=TOO_MANY_MESSAGES, level="bad", status=429, fresh=False)
    try:
        card = confirmation_decide(
            card_id=card_id,
            ticket=ticket,
            confirm=decision == "confirm",
            digest=request.POST.get("digest"),
            via=Confirmation.Via.BUTTON,
            user=request.user,
        )
    except ConfirmationError as exc:
        return panels_answer(request, ticket, panels=("cards",), message=str(exc), level="bad", status=409)
    notices.seen(ticket.pk)
    if decision == "decline":
        message = "Done — nothing was changed."
    elif card.outcome == "executed":
        message = "Confirmed — it's done."
    elif card.outcome == "held":
        message = "Confirmed — a member of staff approves it before it goes through."
    else:
        message = "Confirmed, but it could not be done; support will explain in the conversation."
    return panels_answer(request, ticket, panels=("cards", "conversation", "details"), message=message)


@login_required
@require_POST
def rule_withdraw(request, ticket_id, rule_id):
    ticket = own_ticket(request, ticket_id)
    if not PinnedRule.objects.filter(pk=rule_id, ticket=ticket).exists():
        raise Http404("No such instruction on this conversation.")
    try:
        services.rule_withdraw(ticket=ticket, rule_id=rule_id)
    except StateValueInvalid as exc:
        return panels_answer(request, ticket, panels=("instructions",), message=str(exc), level="bad", status=409)
    return panels_answer(
        request, ticket, panels=("instructions",), message="Withdrawn — that instruction no longer holds."
    )


def picked_reference(data, records) -> str:
    """The reference the picker posts; a page rendered before the field was called `reference` posts it
    under the domain's pick field's name, still read."""
    return data.get("reference") or (data.get(records.pick_field, "") if records.pick_field else "")


@login_required
@require_POST
def order_pick(request, ticket_id):
    ticket = own_ticket(request, ticket_id)
    records = records_for(domain_of(ticket.customer))
    try:
        services.order_pick(ticket=ticket, reference=picked_reference(request.POST, records))
    except StateValueInvalid as exc:
        return panels_answer(request, ticket, message=str(exc), level="bad", status=422)
    return panels_answer(
        request, ticket, panels=("details", "orders"), message=f"Thanks — we noted which {records.noun} this is about."
    )


@login_required
@require_POST
def detail_flag(request, ticket_id):
    ticket = own_ticket(request, ticket_id)
    raw = request.POST.get("value_id", "")
    value = confirmed_value(ticket, int(raw)) if raw.isascii() and raw.isdigit() else None
    if value is None:
        return panels_answer(
            request,
            ticket,
            panels=("details",),
            level="bad",
            status=422,
            message="That detail has changed since you saw it; have another look.",
        )
    services.detail_flag(ticket=ticket, value=value, note=request.POST.get("note", ""))
    return panels_answer(
        request,
        ticket,
        panels=("details",),
        message="Thanks — we've told the team that this detail looks wrong. Someone will check it.",
    )
