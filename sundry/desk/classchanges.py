"""Changing a class's settings with an audit trail: who changed what, from what to what, and when.

One writer for the admin's form and an applied budget proposal alike: the class is saved through
`services.ticket_class_save` (every ticket of the class is bumped, the open ones pushed after
commit, so their Budget panels re-render live) and a `TicketClassChange` keeps the differences.
"""

from __future__ import annotations

from django.db import transaction

from sundry.desk.budgetfit import fixed_part
from sundry.tickets.models import BudgetProposal, TicketClass, TicketClassChange
from sundry.tickets.services import ticket_class_save

# What an applied proposal writes: its fields are named as the class's.
PROPOSAL_FIELDS = ("token_budget", "trigger_fraction", "recent_turns_kept", "ledger_share")
# Written only when the proposal names one ("" keeps the class's model).
PROPOSAL_MODELS = ("working_model", "summariser_model")


class ApplyRefused(ValueError):
    """The proposal cannot be applied as it stands; the message says why."""


def _plain(value):
    return value if value is None or isinstance(value, (bool, int, float, str, list, dict)) else str(value)


def class_change_record(
    *, ticket_class: TicketClass, before: dict, by, proposal: BudgetProposal | None = None
) -> TicketClassChange | None:
    """Record what differs between `before` ({field: value}) and the class as it is now; None when nothing does."""
    changes = {
        name: [_plain(old), _plain(getattr(ticket_class, name))]
        for name, old in before.items()
        if old != getattr(ticket_class, name)
    }
    if not changes:
        return None
    return TicketClassChange.objects.create(
        ticket_class=ticket_class, changed_by=by if by and by.pk else None, changes=changes, proposal=proposal
    )


def proposal_apply(*, proposal: BudgetProposal, by, accept_tight: bool = False) -> TicketClassChange | None:
    """Write the proposal's settings (and the models it names) to its class, with the audit record. The same room check the
    class's form makes: a budget compaction cannot work under is refused, a tight one needs `accept_tight`."""
    if proposal.status != BudgetProposal.Status.DONE:
        raise ApplyRefused("This proposal has not finished its run: apply it once its figures are shown.")
    with transaction.atomic():
        tclass = TicketClass.objects.select_for_update().get(pk=proposal.ticket_class_id)
        fit = fixed_part(
            tclass,
            budget=proposal.token_budget,
            trigger_fraction=proposal.trigger_fraction,
            recent_turns_kept=proposal.recent_turns_kept,
            ledger_share=proposal.ledger_share,
        )
        if fit.impossible:
            raise ApplyRefused(
                f"{fit.explain()} Even with {fit.kept_turns} recent turns at 50 tokens each and a "
                f"summary, a request needs {fit.hard_floor:,}: this budget cannot work."
            )
        if fit.tight and not accept_tight:
            raise ApplyRefused(fit.problem() + " To apply it anyway, tick “Apply this budget anyway”.")
        names = PROPOSAL_FIELDS + tuple(m for m in PROPOSAL_MODELS if getattr(proposal, m))
        before = {name: getattr(tclass, name) for name in names}
        for name in names:
            setattr(tclass, name, getattr(proposal, name))
        ticket_class_save(ticket_class=tclass)
        return class_change_record(ticket_class=tclass, before=before, by=by, proposal=proposal)
