"""The budget lab's proposal form: the page and `manage.py budget_lab` check a proposal with the same bounds
and messages."""

from __future__ import annotations

from django import forms

from sundry.agent.provider.gateway import validate_model_name
from sundry.desk.budgetlab import DEFAULT_TICKETS, MAX_TICKETS
from sundry.tickets.models import TicketClass

# An offline class costs nothing: its figures are priced as this model unless the admin names another.
PRICE_AS_OFFLINE = "openai:gpt-4.1-mini"


class ProposalForm(forms.Form):
    # The bounds are the class model's own, so a proposal is one the admin could save.
    budget = forms.IntegerField(min_value=1000, max_value=2_000_000, label="Token budget")
    trigger = forms.FloatField(min_value=0.3, max_value=0.95, label="Trigger fraction")
    kept = forms.IntegerField(min_value=2, max_value=200, label="Recent turns kept")
    ledger = forms.FloatField(min_value=0.01, max_value=0.5, label="Ledger share")
    tickets = forms.IntegerField(
        min_value=1,
        max_value=MAX_TICKETS,
        required=False,
        label="Tickets to replay",
        help_text=f"The class's latest tickets with recorded steps; at most {MAX_TICKETS}.",
    )
    price_as = forms.CharField(max_length=120, required=False, label="Price as model")

    def clean_price_as(self):
        name = (self.cleaned_data.get("price_as") or "").strip()
        if name:
            try:
                validate_model_name(name)
            except ValueError as exc:
                raise forms.ValidationError(str(exc)) from exc
        return name


def initial_values(tclass: TicketClass) -> dict:
    """The form as the class stands: its settings, the default window, the model its cost is priced as."""
    return {
        "budget": tclass.token_budget,
        "trigger": tclass.trigger_fraction,
        "kept": tclass.recent_turns_kept,
        "ledger": tclass.ledger_share,
        "tickets": DEFAULT_TICKETS,
        "price_as": PRICE_AS_OFFLINE if tclass.working_model == "offline" else tclass.working_model,
    }
