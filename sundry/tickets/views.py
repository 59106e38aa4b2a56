"""The staff desk: queue and ticket view. Permissions are checked in each view."""

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import Http404
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.http import urlencode
from django.views.decorators.http import require_POST

from sundry.agent import services as agent_services
from sundry.agent.models import AgentStep, HeldAction
from sundry.context.selectors import current_summary, lane_snapshot
from sundry.context.models import LedgerEntry, PinnedRule, StateValue
from sundry.core.people import is_desk_staff
from sundry.tickets import selectors
from sundry.tickets.models import TicketClass
from sundry.tickets.services import MessageRefused


def _staff_only(user):
    if not is_desk_staff(user):
        raise PermissionDenied("The desk is for staff.")


@login_required
def queue(request):
    _staff_only(request.user)
    filters = {k: request.GET.get(k, "") for k in ("status", "ticket_class", "needs")}
    tickets = selectors.queue_for(request.user, **filters)[:200]
    return render(request, "tickets/queue.html", {
        "tickets": tickets, "filters": filters, "classes": TicketClass.objects.all(),
    })


def _ticket_or_404(request, ticket_id):
    _staff_only(request.user)
    ticket = selectors.ticket_for_staff(request.user, ticket_id)
    if ticket is None:
        raise Http404("No such ticket.")
    return ticket


def _ticket_context(request, ticket):
    snapshot = lane_snapshot(ticket, with_turns=False)
    steps = list(AgentStep.objects.filter(ticket=ticket).order_by("number"))
    context = {
        "ticket": ticket,
        "turns": ticket.turns.order_by("number"),
        "snapshot": snapshot,
        "rules": PinnedRule.objects.filter(ticket=ticket).exclude(status="dismissed"),
        "ledger": LedgerEntry.objects.filter(ticket=ticket).order_by("status", "first_seen_turn"),
        "state_values": StateValue.objects.filter(ticket=ticket).order_by("name", "-id"),
        "held": HeldAction.objects.filter(ticket=ticket, status="pending"),
        "summary": current_summary(ticket),
        "steps": steps,
        "last_step": steps[-1] if steps else None,
        "error": request.GET.get("error", ""),
    }
    return context


@login_required
def ticket_detail(request, ticket_id):
    ticket = _ticket_or_404(request, ticket_id)
    return render(request, "tickets/ticket.html", _ticket_context(request, ticket))


@login_required
def ticket_live(request, ticket_id):
    """The live region alone: what a push (or a reconnect) re-fetches."""
    ticket = _ticket_or_404(request, ticket_id)
    return render(request, "tickets/_live.html", _ticket_context(request, ticket))


def _back_with_error(ticket, exc):
    return redirect(reverse("desk-ticket", args=[ticket.pk]) + "?" + urlencode({"error": str(exc)}))


@login_required
@require_POST
def ticket_post(request, ticket_id):
    """Staff reply, note, take over / hand back."""
    ticket = _ticket_or_404(request, ticket_id)
    action = request.POST.get("action", "")
    text = request.POST.get("text", "")
    try:
        if action == "reply":
            agent_services.staff_reply_post(ticket=ticket, text=text, user=request.user)
        elif action == "note":
            agent_services.staff_note_post(ticket=ticket, text=text, user=request.user)
        elif action in ("take_over", "hand_back"):
            handler = "staff" if action == "take_over" else "agent"
            agent_services.ticket_set_handler(ticket=ticket, handler=handler, user=request.user)
        else:
            raise MessageRefused("Unknown action.")
    except MessageRefused as exc:
        return _back_with_error(ticket, exc)
    return redirect("desk-ticket", ticket_id=ticket.pk)


@login_required
@require_POST
def held_decide(request, ticket_id, held_id):
    ticket = _ticket_or_404(request, ticket_id)
    approve = request.POST.get("decision") == "approve"
    try:
        agent_services.held_action_decide(held_id=held_id, ticket=ticket, approve=approve, user=request.user)
    except (agent_services.HeldActionError, HeldAction.DoesNotExist) as exc:
        return _back_with_error(ticket, exc)
    return redirect("desk-ticket", ticket_id=ticket.pk)
