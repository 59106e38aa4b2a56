"""The budget lab's page: an admin proposes a class's budget and sees what it would have done."""

from __future__ import annotations

from celery import current_app
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils.http import urlencode
from django.views.decorators.http import require_GET, require_POST

from sundry.core.background import enqueue_on_commit
from sundry.core.people import is_admin
from sundry.desk import labcharts
from sundry.desk.budgetlab import DEFAULT_TICKETS, class_budget, lab_json, run_lab
from sundry.desk.classchanges import ApplyRefused, proposal_apply
from sundry.desk.labform import ProposalForm, initial_values, proposed_budget
from sundry.desk.labsources import WINDOW, describe, server_trace_files
from sundry.people.selectors import customer_of
from sundry.tickets.models import BudgetProposal, TicketClass, TicketClassChange

# Proposals listed on a class's lab page, newest first.
LISTED = 20

# The run is the harness's (`sundry.evals.labrun`, which scores with its checks): the desk queues it by
# the task's registered name, so the pages never import the layer above them.
LAB_TASK = "sundry.tickets.budget_lab"


def _enqueue(proposal_id: int) -> None:
    enqueue_on_commit(current_app.tasks[LAB_TASK], proposal_id)


def _admins_only(request):
    """None for an admin; customers go to their own start page; other staff are refused."""
    if is_admin(request.user):
        return None
    if customer_of(request.user) is not None:
        return redirect("home")
    raise PermissionDenied("The budget lab is for admins.")


def _charts(lab: dict) -> dict:
    trig = (lab["current"]["trigger"], lab["proposed"]["trigger"])
    samples = [
        {**s, "rows": list(zip(s["steps"], s["recorded"], s["current"], s["proposed"]))} for s in lab.get("samples", [])
    ]
    return {
        "tokens": [(s, labcharts.tokens_chart(s, current_trigger=trig[0], proposed_trigger=trig[1])) for s in samples],
        "cost": labcharts.cost_chart(lab),
        "fidelity": labcharts.fidelity_chart(lab["fidelity"]) if "fidelity" in lab else None,
    }


def _page(request, tclass, form, lab, status=200):
    proposals = list(
        BudgetProposal.objects.filter(ticket_class=tclass).select_related("created_by").defer("traces_text")[:LISTED]
    )
    for p in proposals:
        p.source_text = describe(p)
    return render(
        request,
        "desk/budget_lab.html",
        {
            "tclass": tclass,
            "form": form,
            "lab": lab,
            "charts": _charts(lab) if lab else None,
            "current": class_budget(tclass),
            "proposals": proposals,
            "changes": TicketClassChange.objects.filter(ticket_class=tclass).select_related("changed_by")[:LISTED],
            "server_traces": server_trace_files(),
        },
        status=status,
    )


@login_required
@require_GET
def budget_lab(request, class_id: int):
    if (away := _admins_only(request)) is not None:
        return away
    tclass = get_object_or_404(TicketClass, pk=class_id)
    asked = bool(request.GET)
    form = ProposalForm(
        {**initial_values(tclass), **request.GET.dict()} if asked else initial_values(tclass), tclass=tclass
    )
    lab = None
    status = 200
    if form.is_valid() and form.cleaned_data["source"] == WINDOW:
        data = form.cleaned_data
        lab = lab_json(
            run_lab(
                tclass,
                proposed_budget(data),
                tickets=data["tickets"] or DEFAULT_TICKETS,
                price_as=data["price_as"] or initial_values(tclass)["price_as"],
                working_model=data["working_model"],
                summariser_model=data["summariser_model"],
            )
        )
    elif asked:
        status = 400  # the form comes back with its errors and the admin's values
    return _page(request, tclass, form, lab, status)


@login_required
@require_POST
def budget_lab_run(request, class_id: int):
    """Keep the proposal and replay it in a worker, with the harness's checks; its page shows the progress."""
    if (away := _admins_only(request)) is not None:
        return away
    tclass = get_object_or_404(TicketClass, pk=class_id)
    values = {k: v for k, v in request.POST.dict().items() if k != "csrfmiddlewaretoken"}
    form = ProposalForm({**initial_values(tclass), **values}, request.FILES, tclass=tclass)
    if not form.is_valid():
        if request.htmx and form.cleaned_data.get("source", values.get("source")) in (None, "", WINDOW):
            # The lab's own page shows the same form's errors, with the admin's values.
            return _hx_redirect(f"{reverse('desk-budget-lab', args=[tclass.pk])}?{urlencode(values)}")
        if request.htmx:
            # A file cannot travel in a link: the page's form is swapped in place, its errors shown and
            # its other values kept (the file input is empty again, as a browser leaves it).
            response = _page(request, tclass, form, None, 422)
            response["HX-Retarget"] = "#lab-page"
            response["HX-Reswap"] = "outerHTML"
            response["HX-Reselect"] = "#lab-page"
            return response
        return _page(request, tclass, form, None, 400)
    data = form.cleaned_data
    traces_name, traces_text = (form.traces[0], form.traces[1]) if form.traces else ("", "")
    proposal = BudgetProposal.objects.create(
        ticket_class=tclass,
        created_by=request.user,
        token_budget=data["budget"],
        trigger_fraction=data["trigger"],
        recent_turns_kept=data["kept"],
        ledger_share=data["ledger"],
        tickets=data["tickets"] or DEFAULT_TICKETS,
        price_as=data["price_as"] or initial_values(tclass)["price_as"],
        working_model=data["working_model"],
        summariser_model=data["summariser_model"],
        call_summariser=data["call_summariser"],  # the form refused it unless its cost was accepted
        source=data["source"],
        traces_name=traces_name if data["source"] == BudgetProposal.Source.TRACES else "",
        traces_text=traces_text if data["source"] == BudgetProposal.Source.TRACES else "",
        scenarios=data["scenarios"] if data["source"] == BudgetProposal.Source.SCENARIOS else "",
    )
    _enqueue(proposal.pk)
    url = reverse("desk-budget-proposal", args=[tclass.pk, proposal.pk])
    return _hx_redirect(url) if request.htmx else redirect(url)


def _hx_redirect(url: str) -> HttpResponse:
    response = HttpResponse()
    response["HX-Redirect"] = url
    return response


def _proposal(request, class_id: int, proposal_id: int) -> BudgetProposal:
    return get_object_or_404(
        BudgetProposal.objects.select_related("ticket_class", "created_by").defer("traces_text"),
        pk=proposal_id,
        ticket_class_id=class_id,
    )


@login_required
@require_GET
def budget_proposal(request, class_id: int, proposal_id: int):
    """A kept proposal: its progress while it runs (the page asks again each second), then its figures."""
    if (away := _admins_only(request)) is not None:
        return away
    proposal = _proposal(request, class_id, proposal_id)
    running = proposal.status in (BudgetProposal.Status.QUEUED, BudgetProposal.Status.RUNNING)
    lab = proposal.figures if proposal.status == BudgetProposal.Status.DONE else None
    context = {
        "proposal": proposal,
        "source_text": describe(proposal),
        "tclass": proposal.ticket_class,
        "running": running,
        "lab": lab,
        "charts": _charts(lab) if lab else None,
        "current": class_budget(proposal.ticket_class),
        "applied": proposal.applied_as.select_related("changed_by").first(),
    }
    if request.htmx and running:
        return render(request, "desk/_lab_progress.html", context)
    if request.htmx:  # finished since the last ask: the whole page once more
        response = render(request, "desk/_lab_progress.html", context)
        response["HX-Refresh"] = "true"
        return response
    return render(request, "desk/budget_proposal.html", context)


@login_required
@require_POST
def budget_proposal_apply(request, class_id: int, proposal_id: int):
    """Write the proposal's settings to the class through the audited service; the class's open tickets see it live."""
    if (away := _admins_only(request)) is not None:
        return away
    proposal = _proposal(request, class_id, proposal_id)
    try:
        change = proposal_apply(
            proposal=proposal, by=request.user, accept_tight=request.POST.get("accept_tight_budget") == "on"
        )
    except ApplyRefused as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, "Applied." if change else "The class already has these settings: nothing changed.")
    return redirect(reverse("desk-budget-proposal", args=[class_id, proposal_id]))
