"""The budget lab's page: an admin proposes a class's budget and sees what it would have done."""

from __future__ import annotations

from django import forms
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.shortcuts import get_object_or_404, render
from django.views.decorators.http import require_GET

from sundry.agent.gateway import validate_model_name
from sundry.core.people import is_admin
from sundry.tickets.budgetlab import DEFAULT_TICKETS, MAX_TICKETS, class_budget, run_lab
from sundry.tickets.budgetreplay import Budget
from sundry.tickets.models import TicketClass

# An offline class costs nothing: its figures are priced as this model unless the admin names another.
PRICE_AS_OFFLINE = "openai:gpt-4.1-mini"


class ProposalForm(forms.Form):
    # The bounds are the class model's own, so a proposal is one the admin could save.
    budget = forms.IntegerField(min_value=1000, max_value=2_000_000, label="Token budget")
    trigger = forms.FloatField(min_value=0.3, max_value=0.95, label="Trigger fraction")
    kept = forms.IntegerField(min_value=2, max_value=200, label="Recent turns kept")
    ledger = forms.FloatField(min_value=0.01, max_value=0.5, label="Ledger share")
    tickets = forms.IntegerField(min_value=1, max_value=MAX_TICKETS, required=False, label="Tickets to replay",
                                 help_text=f"The class's latest tickets with recorded steps; at most {MAX_TICKETS}.")
    price_as = forms.CharField(max_length=120, required=False, label="Price as model")

    def clean_price_as(self):
        name = (self.cleaned_data.get("price_as") or "").strip()
        if name:
            try:
                validate_model_name(name)
            except ValueError as exc:
                raise forms.ValidationError(str(exc)) from exc
        return name


def _initial(tclass: TicketClass) -> dict:
    return {"budget": tclass.token_budget, "trigger": tclass.trigger_fraction, "kept": tclass.recent_turns_kept,
            "ledger": tclass.ledger_share, "tickets": DEFAULT_TICKETS,
            "price_as": PRICE_AS_OFFLINE if tclass.working_model == "offline" else tclass.working_model}


@login_required
@require_GET
def budget_lab(request, class_id: int):
    if not is_admin(request.user):
        raise PermissionDenied("The budget lab is for admins.")
    tclass = get_object_or_404(TicketClass, pk=class_id)
    asked = bool(request.GET)
    form = ProposalForm({**_initial(tclass), **request.GET.dict()} if asked else _initial(tclass))
    lab = None
    status = 200
    if form.is_valid():
        data = form.cleaned_data
        proposed = Budget(data["budget"], data["trigger"], data["kept"], data["ledger"])
        lab = run_lab(tclass, proposed, tickets=data["tickets"] or DEFAULT_TICKETS,
                      price_as=data["price_as"] or _initial(tclass)["price_as"])
    elif asked:
        status = 400  # the form comes back with its errors and the admin's values
    return render(request, "tickets/budget_lab.html", {"tclass": tclass, "form": form, "lab": lab,
                                                       "current": class_budget(tclass)}, status=status)
