"""The customer's page. A customer sees only their own tickets and only confirmed values."""

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import Http404
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.http import urlencode
from django.views.decorators.http import require_POST

from sundry.agent.services import customer_message_post
from sundry.core.people import customer_of
from sundry.portal.selectors import confirmed_details, customer_turns
from sundry.tickets.models import Ticket, TicketClass
from sundry.tickets.services import MessageRefused, ticket_create, validate_message_text


def _customer(request):
    customer = customer_of(request.user)
    if customer is None:
        raise PermissionDenied("This page is for customers.")
    return customer


def _own_ticket(request, ticket_id):
    customer = _customer(request)
    ticket = Ticket.objects.filter(pk=ticket_id, customer=customer).first()
    if ticket is None:  # someone else's ticket looks exactly like a missing one
        raise Http404("No such ticket.")
    return ticket


@login_required
def home(request):
    customer = _customer(request)
    tickets = Ticket.objects.filter(customer=customer).order_by("-updated_at")
    return render(request, "portal/home.html", {"customer": customer, "tickets": tickets,
                                                "error": request.GET.get("error", "")})


@login_required
@require_POST
def ticket_new(request):
    customer = _customer(request)
    try:
        text = validate_message_text(request.POST.get("text", ""))
    except MessageRefused as exc:
        return redirect(reverse("portal-home") + "?" + urlencode({"error": str(exc)}))
    tclass = TicketClass.objects.filter(slug="standard").first() or TicketClass.objects.first()
    ticket = ticket_create(customer=customer, ticket_class=tclass, subject=text[:80])
    customer_message_post(ticket=ticket, text=text)
    return redirect("portal-ticket", ticket_id=ticket.pk)


def _context(request, ticket):
    return {"ticket": ticket, "turns": customer_turns(ticket), "details": confirmed_details(ticket),
            "error": request.GET.get("error", "")}


@login_required
def ticket_detail(request, ticket_id):
    ticket = _own_ticket(request, ticket_id)
    return render(request, "portal/ticket.html", _context(request, ticket))


@login_required
def ticket_live(request, ticket_id):
    ticket = _own_ticket(request, ticket_id)
    return render(request, "portal/_live.html", _context(request, ticket))


@login_required
@require_POST
def ticket_message(request, ticket_id):
    ticket = _own_ticket(request, ticket_id)
    try:
        customer_message_post(ticket=ticket, text=request.POST.get("text", ""))
    except MessageRefused as exc:
        return redirect(reverse("portal-ticket", args=[ticket.pk]) + "?" + urlencode({"error": str(exc)}))
    return redirect("portal-ticket", ticket_id=ticket.pk)
