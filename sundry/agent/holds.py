"""When two held calls are the same call, so an approval never runs one twice.

Two holds are equal when they name the same tool and would do the same thing: for
an irreversible or money-moving tool, the same identifiers and the same amount
(the reason given is commentary, so "damaged" and "arrived broken" refund alike);
for any other tool, the same arguments (an email's text is the email). A new hold
equal to one still pending is merged into it; one equal to a hold already executed
is refused; an approval whose equal was executed in the meantime does not run.
"""

from __future__ import annotations

from pydantic import BaseModel, ValidationError

from sundry.agent.guards import amount_minor, repeat_key
from sundry.agent.models import HeldAction
from sundry.agent.spending import moves_money
from sundry.tooling.tools import REGISTRY, Tool


def hold_key(tool: Tool, args: BaseModel) -> str:
    """What makes two calls of `tool` the same held call."""
    data = args.model_dump(mode="json")
    if tool.consent_action or moves_money(tool) or not tool.reversible:
        picked = {name: data.get(name) for name in tool.id_args}
        cents = amount_minor(args)
        if cents is not None:
            picked.update(amount_minor_units=cents, currency=str(getattr(args, "currency", "") or "").upper())
        return f"{tool.name} {repeat_key(picked)}"
    return f"{tool.name} {repeat_key(data, tool.repeat_key)}"


def _key_of(held: HeldAction) -> str:
    tool = REGISTRY.get(held.tool)
    if tool is None:
        return ""
    try:
        return hold_key(tool, tool.args_model.model_validate(held.arguments))
    except ValidationError:
        return ""


def equal_hold(customer_pk: int, tool: Tool, args: BaseModel, *, statuses, exclude: int | None = None) -> HeldAction | None:
    """The customer's first hold of the same call in one of `statuses` (call with the customer's row locked)."""
    key = hold_key(tool, args)
    candidates = HeldAction.objects.filter(ticket__customer_id=customer_pk, tool=tool.name, status__in=statuses)
    if exclude is not None:
        candidates = candidates.exclude(pk=exclude)
    return next((h for h in candidates.order_by("pk") if _key_of(h) == key), None)


LIVE = (HeldAction.Status.PENDING, HeldAction.Status.APPROVED, HeldAction.Status.EXECUTED)


def executed_twin(held: HeldAction, customer_pk: int) -> HeldAction | None:
    """Another hold of the same call that already ran (for an approval about to run `held`)."""
    tool = REGISTRY.get(held.tool)
    if tool is None:
        return None
    try:
        args = tool.args_model.model_validate(held.arguments)
    except ValidationError:
        return None
    return equal_hold(customer_pk, tool, args, statuses=(HeldAction.Status.EXECUTED,), exclude=held.pk)
