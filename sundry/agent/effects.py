"""State changes made by code when a tool succeeds.

What a result means for the lanes is read from the domain's declaration of
the tool (`tooling.domain`), never from the tool's name: an order's figures
(`totals`) go into the money lane as the system of record's truth; money that
moved (`money`, wherever it sits in the result — a refund inside a
cancellation counts as much as a refund) goes onto the action, so the actions
lane says "<cancellation> on <order> · 2899.00 INR" and the refund guard sees
the order as refunded. Any other side effect is an action taken. Models never
write these.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pydantic import BaseModel

from sundry.agent.guards.callguards import write_targets
from sundry.context import services as lanes
from sundry.tooling.declarations import Movement, Totals
from sundry.tooling.domain import Domain, get_domain


@dataclass(frozen=True)
class ActionPlan:
    target: str
    amount_cents: int | None
    currency: str


@dataclass(frozen=True)
class EffectsPlan:
    """What one successful result changes in the lanes. Pure: `apply_effects` writes it."""

    totals: list[Totals] = field(default_factory=list)
    movements: list[Movement] = field(default_factory=list)
    action: ActionPlan | None = None

    @property
    def unreported(self) -> list[Movement]:
        """Money that moved on an order the result reports no figures for: added to what the lane holds."""
        reported = {t.order for t in self.totals}
        return [m for m in self.movements if m.order and m.order not in reported]


def plan_effects(tool, args, result, domain: Domain | None = None) -> EffectsPlan:
    domain = domain or get_domain()
    totals, movements = domain.order_totals(tool.name, result), domain.money_moved(tool.name, result)
    action = None
    if tool.side_effect and not tool.local:
        target = ",".join(sorted(write_targets(tool, args, args.model_dump(mode="json"))))
        currencies = {m.currency for m in movements}
        # One action, one amount: the money it moved (in one currency; several would be a shop error).
        amount = sum(m.amount_cents for m in movements) if movements and len(currencies) == 1 else None
        action = ActionPlan(target=target, amount_cents=amount, currency=currencies.pop() if amount else "")
    return EffectsPlan(totals=totals, movements=movements, action=action)


def apply_effects(*, ticket, tool, args, result, turn: int, key: str, domain: Domain | None = None) -> EffectsPlan:
    """Write what a result changes: `result` is an in-process tool's model, or a tool server's JSON
    read by `domain` (its declaration file)."""
    plan = plan_effects(tool, args, result, domain)
    for t in plan.totals:
        lanes.money_observe(
            ticket=ticket,
            order=t.order,
            currency=t.currency,
            paid_cents=t.paid_cents,
            refunded_cents=t.refunded_cents,
            turn=turn,
        )
    for m in plan.unreported:
        lanes.money_add_refund(ticket=ticket, order=m.order, amount_cents=m.amount_cents, turn=turn)
    if plan.action is not None:
        # A tool server's result is plain JSON already (a bare string is kept under "result").
        stored = (
            result.model_dump(mode="json")
            if isinstance(result, BaseModel)
            else result
            if isinstance(result, dict)
            else {"result": result}
        )
        lanes.action_record(
            ticket=ticket,
            tool=tool.name,
            target=plan.action.target,
            arguments=args.model_dump(mode="json"),
            result=stored,
            turn=turn,
            idempotency_key=key,
            reversible=tool.reversible,
            amount_cents=plan.action.amount_cents,
            currency=plan.action.currency,
        )
    return plan
