"""The staff desk: queue, ticket view and the edits its panels make.

Every view checks the viewer and the object. Edits are htmx posts that call a
service and answer with the re-rendered panel plus a status line; the
websocket only pushes. A stale edit answers 409 with the current value, an
invalid one 422 with the reason; without htmx the views redirect as before.
"""

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils.http import urlencode
from django.views.decorators.http import require_GET, require_POST

from sundry.agent import claims, loop
from sundry.agent import services as agent_services
from sundry.agent.models import Confirmation, HeldAction
from sundry.context import services as lanes
from sundry.context.models import LedgerEntry, PinnedRule, StateValue
from sundry.context.statefields import StateValueInvalid, fields_for
from sundry.core.people import is_desk_staff
from sundry.desk import lifecycle, selectors
from sundry.desk.panels import STAFF_PANELS
from sundry.desk.queue import queue_context
from sundry.desk.search import MAX_QUERY
from sundry.desk.search import search as run_search
from sundry.desk.sidebar import canned_replies
from sundry.live.earlier import earlier_response
from sundry.live.pagesocket import socket_is_live
from sundry.live.panels import STAFF, Viewer, render_all, render_panel
from sundry.tickets import services as ticket_services
from sundry.tickets.attention import FOLLOW_UP_PREFIX, attention_dismiss, flags_resolve, follow_up_resolve, reasons
from sundry.tickets.models import Ticket
from sundry.tickets.services import MessageRefused


def _staff_only(user):
    if not is_desk_staff(user):
        raise PermissionDenied("The desk is for staff.")


@login_required
@require_GET
def queue(request):
    _staff_only(request.user)
    template = "desk/_queue_table.html" if request.htmx else "desk/queue.html"
    return render(request, template, queue_context(request.user, request.GET))


@login_required
@require_GET
def search(request):
    _staff_only(request.user)
    q = request.GET.get("q", "")
    too_long = len(q) > MAX_QUERY
    return render(
        request,
        "desk/search.html",
        {
            "q": q,
            "hits": [] if too_long else run_search(q),
            "error": f"Search for at most {MAX_QUERY} characters." if too_long else "",
        },
    )


def _ticket_or_404(request, ticket_id, tickets=None):
    _staff_only(request.user)
    ticket = selectors.ticket_for_staff(request.user, ticket_id, tickets)
    if ticket is None:
        raise Http404("No such ticket.")
    return ticket


@login_required
@require_GET
def ticket_detail(request, ticket_id):
    ticket = _ticket_or_404(request, ticket_id)

    return render(
        request,
        "desk/ticket.html",
        {
            "ticket": ticket,
            "panels": render_all(ticket, Viewer(request.user, STAFF)),
            "error": request.GET.get("error", ""),
            "macros": canned_replies(ticket, request.user),
            # Read at each request, not from the panels' cache: a claim lapses without a new version.
            "recovering": claims.stale(ticket.agent_claimed_at),
        },
    )


@login_required
@require_GET
def ticket_turns(request, ticket_id):
    """Earlier turns of a ticket whose page opened at its latest ones (sundry.live.earlier)."""
    ticket = _ticket_or_404(request, ticket_id)
    return earlier_response(request, ticket, Viewer(request.user, STAFF), reverse("desk-ticket", args=[ticket.pk]))


# --- answering an edit -----------------------------------------------------------------------


def _answer(request, ticket, *, panels=(), message="", level="ok", status=200, current=None, reread=True):
    """htmx: the named panels re-rendered for this viewer and a status line. Otherwise: back to the page.
    `reread=False`: `ticket` as the view holds it is current for the panels (the view's own write
    changed none of its fields, or kept them on it), so it is not read again."""
    if not request.htmx:
        if level == "ok":
            return redirect("desk-ticket", ticket_id=ticket.pk)
        return redirect(reverse("desk-ticket", args=[ticket.pk]) + "?" + urlencode({"error": message}))
    fresh = selectors.ticket_for_staff(request.user, ticket.pk) if reread else ticket
    viewer = Viewer(request.user, STAFF)
    html = "".join(render_panel(STAFF_PANELS[name], fresh, viewer) for name in panels)
    html += render_to_string("desk/_flash.html", {"message": message, "level": level, "current": current})
    return HttpResponse(html, status=status)


def _refused(request, ticket, exc, panels):
    return _answer(request, ticket, panels=panels, message=str(exc), level="bad", status=422)


def _conflict(request, ticket, message, panels, current=None):
    return _answer(request, ticket, panels=panels, message=message, level="conflict", status=409, current=current)


# --- conversation: reply, note, take over, hand back ---------------------------------------


@login_required
@require_POST
def ticket_post(request, ticket_id):
    # Read with what the run's load carries for the layers above (the customer's notice choice): a
    # reply's notice then reads nothing of its own.
    ticket = _ticket_or_404(request, ticket_id, Ticket.objects.annotate(**loop.load_also()))
    action = request.POST.get("action", "")
    text = request.POST.get("text", "")
    done = {
        "reply": "Reply sent.",
        "note": "Note for the agent added.",
        "internal": "Internal note added.",
        "take_over": "You have the ticket.",
        "hand_back": "Handed back to the agent.",
    }
    try:
        key = request.POST.get("client_key", "")
        uploads = request.FILES.getlist("file")
        if uploads and action != "reply":
            raise MessageRefused(
                "Files go with a reply to the customer; notes carry text only. Nothing was "
                "added; your text is still in the box."
            )
        if action == "reply":
            ticket_services.ticket_require_holder(ticket=ticket, user=request.user)
            agent_services.staff_reply_post(
                ticket=ticket, text=text, user=request.user, client_key=key, uploads=uploads
            )
        elif action == "note":
            agent_services.staff_note_post(ticket=ticket, text=text, user=request.user, client_key=key)
        elif action == "internal":
            agent_services.staff_internal_note_post(ticket=ticket, text=text, user=request.user, client_key=key)
        elif action in ("take_over", "hand_back"):
            handler = "staff" if action == "take_over" else "agent"
            agent_services.ticket_set_handler(ticket=ticket, handler=handler, user=request.user)
        else:
            raise MessageRefused("Unknown action.")
    except MessageRefused as exc:
        return _refused(request, ticket, exc, ())
    # A reply or note changes no field of the row but the version and turn counter, which the append
    # kept on `ticket`: the head renders from it — or not at all for a page whose socket is open, as
    # every push brings the head. Taking over or handing back writes the row: read again.
    if action in ("reply", "note", "internal") and socket_is_live(request):
        return _answer(request, ticket, message=done[action], reread=False)
    return _answer(request, ticket, panels=("head",), message=done[action], reread=action in ("take_over", "hand_back"))


@login_required
@require_POST
def ticket_update(request, ticket_id):
    """Status, priority, tags and assignment, from the ticket's head."""
    from django.contrib.auth import get_user_model

    ticket = _ticket_or_404(request, ticket_id)
    field, value = request.POST.get("field", ""), request.POST.get("value", "")
    user = request.user
    try:
        if field == "status":
            if value not in Ticket.Status.values:
                raise MessageRefused(f"Status must be one of {', '.join(Ticket.Status.values)}.")
            lifecycle.ticket_set_status(ticket=ticket, status=value, user=user)
            message = f"Status set to {Ticket.Status(value).label}."
        elif field == "priority":
            ticket_services.ticket_set_priority(ticket=ticket, priority=value, user=user)
            message = f"Priority set to {value}."
        elif field == "tags":
            names = ticket_services.ticket_set_tags(ticket=ticket, text=value, user=user)
            message = f"Tags: {', '.join(names) or 'none'}."
        elif field == "assignee":
            if value == "me":
                assignee = user
            elif value == "":
                assignee = None
            else:
                assignee = (
                    get_user_model().objects.filter(pk=int(value)).first()
                    if value.isascii() and value.isdigit()
                    else None
                )
                if assignee is None:
                    raise MessageRefused("No such colleague.")
            ticket_services.ticket_assign(ticket=ticket, assignee=assignee, user=user)
            message = f"Assigned to {assignee.get_username()}." if assignee else "Unassigned."
        else:
            raise MessageRefused("Unknown field.")
    except MessageRefused as exc:
        return _refused(request, ticket, exc, ("head",))
    return _answer(request, ticket, panels=("head",), message=message)


@login_required
@require_POST
def attention_clear(request, ticket_id):
    """Staff dealt with the reason they read (the one its button names; every reason shown, when
    none is named): a customer's report or a promised follow-up is marked handled, any other
    reason (a model out of reach, a held reply, a stopped run) cleared. Other reasons stay."""
    ticket = _ticket_or_404(request, ticket_id)
    named = reasons(request.POST.get("shown", ticket.attention))
    current = reasons(ticket.attention)
    if not named or any(r not in current for r in named):
        return _conflict(
            request,
            ticket,
            "The flag changed since you looked; read it again.",
            ("head",),
            current=ticket.attention or "(no flag)",
        )
    flagged = followed = cleared = False
    for reason in named:
        if reason.startswith(selectors.FLAG_PREFIX):
            flagged |= flags_resolve(ticket=ticket, user=request.user, reason=reason)
        elif reason.startswith(FOLLOW_UP_PREFIX):
            followed |= follow_up_resolve(ticket=ticket, user=request.user)
        else:
            cleared |= attention_dismiss(ticket=ticket, user=request.user, shown=reason)
    if not (followed or flagged or cleared):
        rest = Ticket.objects.filter(pk=ticket.pk).values_list("attention", flat=True).first() or ""
        return _conflict(
            request, ticket, "The flag changed since you looked; read it again.", ("head",), current=rest or "(no flag)"
        )
    message = (
        "Flag marked as handled."
        if flagged
        else "Follow-up marked as handled."
        if followed and not cleared
        else "Flag cleared."
    )
    return _answer(request, ticket, panels=("head",), message=message)


# --- held actions ----------------------------------------------------------------------------


@login_required
@require_POST
def held_decide(request, ticket_id, held_id):
    ticket = _ticket_or_404(request, ticket_id)
    decision = request.POST.get("decision")
    if decision not in ("approve", "reject"):
        return _refused(request, ticket, "Decision must be approve or reject.", ("held",))
    try:
        held = agent_services.held_action_decide(
            held_id=held_id, ticket=ticket, approve=decision == "approve", user=request.user
        )
    except HeldAction.DoesNotExist:
        raise Http404("No such held action on this ticket.")
    except agent_services.HeldActionError as exc:
        return _conflict(request, ticket, str(exc), ("held",))
    if held.status == HeldAction.Status.REFUSED:
        why = getattr(held, "outcome", "") or "the tool reported no result"
        return _answer(
            request,
            ticket,
            panels=("held", "head"),
            level="bad",
            message=f"{held.tool} was approved but did not run: {why}",
        )
    verb = "approved and executed" if held.status == HeldAction.Status.EXECUTED else held.status
    return _answer(request, ticket, panels=("held", "head"), message=f"{held.tool} {verb}.")


@login_required
@require_POST
def card_decide(request, ticket_id, card_id):
    """Staff confirm a card for the customer (they said yes on the phone: how, kept with their name), or
    withdraw it."""
    ticket = _ticket_or_404(request, ticket_id)
    if not Confirmation.objects.filter(pk=card_id, ticket=ticket).exists():
        raise Http404("No such card on this ticket.")
    decision = request.POST.get("decision")
    if decision not in ("confirm", "decline"):
        return _refused(request, ticket, "Decision must be confirm or decline.", ("held",))
    try:
        card = agent_services.confirmation_decide(
            card_id=card_id,
            ticket=ticket,
            confirm=decision == "confirm",
            digest=request.POST.get("digest"),
            via=Confirmation.Via.STAFF,
            user=request.user,
            reason=request.POST.get("reason", ""),
        )
    except agent_services.ConfirmationError as exc:
        return _conflict(request, ticket, str(exc), ("held",))
    title = card.card.get("title") or card.tool
    if decision == "decline":
        return _answer(request, ticket, panels=("held", "head"), message=f"Withdrawn: {title}.")
    outcome = {
        "executed": "confirmed and done",
        "held": "confirmed; now held for approval",
        "refused": "confirmed, but a guard refused it — see the conversation",
    }.get(card.outcome, "confirmed")
    return _answer(
        request,
        ticket,
        panels=("held", "head"),
        level="bad" if card.outcome == "refused" else "ok",
        message=f"{title}: {outcome}.",
    )


# --- state -------------------------------------------------------------------------------------


def _seen_id(raw: str) -> int | None:
    # ASCII digits only: "²" passes str.isdigit() but not int().
    return int(raw) if raw and raw.isascii() and raw.isdigit() else None


def _state_conflict(request, ticket, name, current):
    known = fields_for(ticket)
    label = known[name].label if name in known else name
    return _conflict(
        request,
        ticket,
        f"{label} changed while you were editing; your change was not saved.",
        ("state",),
        current=current,
    )


@login_required
@require_POST
def state_edit(request, ticket_id):
    """Confirm the current value, or correct it (the old value is superseded and kept as history)."""
    ticket = _ticket_or_404(request, ticket_id)
    name, action = request.POST.get("name", ""), request.POST.get("action", "")
    seen = _seen_id(request.POST.get("value_id", ""))
    known = fields_for(ticket)
    if name not in known:
        return _refused(request, ticket, f"Unknown field '{name}'.", ("state",))
    current = StateValue.objects.filter(ticket=ticket, name=name, is_current=True).first()
    try:
        if action == "confirm":
            if seen is None or current is None or current.pk != seen:
                return _state_conflict(request, ticket, name, current)
            lanes.state_confirm(ticket=ticket, value_id=seen, user=request.user)
            message = f"{known[name].label} confirmed."
        elif action == "correct":
            lanes.state_set(
                ticket=ticket,
                name=name,
                value=request.POST.get("value", ""),
                turn=ticket.last_turn_number,
                source="staff",
                confirmed=True,
                user=request.user,
                expected_current_id=seen,
                check_conflict=True,
            )
            message = f"{known[name].label} set; any earlier value is kept as history."
        else:
            return _refused(request, ticket, "Action must be confirm or correct.", ("state",))
    except lanes.LaneConflict as exc:
        return _state_conflict(
            request,
            ticket,
            name,
            exc.current or StateValue.objects.filter(ticket=ticket, name=name, is_current=True).first(),
        )
    except StateValueInvalid as exc:
        return _refused(request, ticket, exc, ("state",))
    return _answer(request, ticket, panels=("state",), message=message)


# --- rules ---------------------------------------------------------------------------------------


@login_required
@require_POST
def rule_decide(request, ticket_id, rule_id):
    ticket = _ticket_or_404(request, ticket_id)
    if not PinnedRule.objects.filter(ticket=ticket, pk=rule_id).exists():
        raise Http404("No such rule on this ticket.")
    decision = request.POST.get("decision", "")
    try:
        rule = lanes.rule_decide(
            ticket=ticket,
            rule_id=rule_id,
            decision=decision,
            user=request.user,
            turn=ticket.last_turn_number,
            expected_version=_seen_id(request.POST.get("version", "")),
            scope=request.POST.get("scope") or None,
            scope_ref=request.POST.get("scope_ref", "").strip()[:40],
        )
    except lanes.LaneConflict as exc:
        return _conflict(
            request,
            ticket,
            "This rule changed while you were looking at it; nothing was saved.",
            ("rules",),
            current=exc.current,
        )
    except StateValueInvalid as exc:
        return _refused(request, ticket, exc, ("rules",))
    said = {"confirm": "Rule pinned.", "dismiss": "Candidate dismissed.", "scope": "Scope changed."}
    return _answer(request, ticket, panels=("rules",), message=f"{said.get(decision, 'Saved.')} “{rule.text[:60]}”")


# --- ledger ----------------------------------------------------------------------------------------


@login_required
@require_POST
def ledger_rename(request, ticket_id):
    ticket = _ticket_or_404(request, ticket_id)
    value = request.POST.get("value", "")
    try:
        entry = lanes.ledger_rename(
            ticket=ticket,
            value=value,
            role=request.POST.get("role", ""),
            turn=ticket.last_turn_number,
            expected_version=_seen_id(request.POST.get("version", "")),
        )
    except lanes.LaneConflict as exc:
        return _conflict(
            request,
            ticket,
            "Someone renamed this entry first; your name was not saved.",
            ("ledger",),
            current=exc.current,
        )
    except StateValueInvalid as exc:
        return _refused(request, ticket, exc, ("ledger",))
    return _answer(request, ticket, panels=("ledger",), message=f"Renamed to {entry.role}.")


@login_required
@require_POST
def ledger_correct(request, ticket_id):
    """Staff say an entry was the wrong number: a write on it now waits for the customer's confirmation."""
    ticket = _ticket_or_404(request, ticket_id)
    value, new = request.POST.get("value", ""), request.POST.get("correct_to", "")
    try:
        entry = agent_services.ledger_correct(ticket=ticket, old=value, new=new, user=request.user)
    except StateValueInvalid as exc:
        return _refused(request, ticket, exc, ("ledger",))
    return _answer(
        request,
        ticket,
        panels=("ledger", "held"),
        message=f"{entry.value} is marked as corrected to {entry.superseded_by}.",
    )


@login_required
@require_GET
def ledger_archived(request, ticket_id):
    """Archived (evicted) entries, on demand: they stay out of the live panel and the request."""
    ticket = _ticket_or_404(request, ticket_id)
    entries = LedgerEntry.objects.filter(ticket=ticket, status="archived").order_by("-last_used_turn")
    return render(request, "desk/_ledger_archived.html", {"ticket": ticket, "entries": entries})


# --- compactions ------------------------------------------------------------------------------------


@login_required
@require_GET
def compaction_detail(request, ticket_id, run_id):
    ticket = _ticket_or_404(request, ticket_id)
    detail = selectors.compaction_detail(ticket, run_id)
    if detail is None:
        raise Http404("No such compaction on this ticket.")
    template = "desk/_compaction.html" if request.htmx else "desk/compaction.html"
    return render(request, template, {"ticket": ticket, **detail})
