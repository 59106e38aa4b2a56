"""When two calls are the same call, so an approval never runs one twice.

One definition of "equal" serves held calls, confirmation cards and actions already
taken: the same tool doing the same thing. For an irreversible or money-moving tool
that is the same identifiers and the same amount (the reason given is commentary, so
"damaged" and "arrived broken" refund alike); for any other tool, the same arguments
(an email's text is the email). It is read from plain arguments and the tool's
declaration, so a tool server's tools compare exactly as in-process ones do.

A new hold equal to one still pending is merged into it; one equal to a hold already
executed is refused; an approval whose equal hold or action ran in the meantime does
not run.
"""

from __future__ import annotations

from collections.abc import Callable

from sundry.agent.guards.callguards import repeat_key
from sundry.agent.guards.spending import moves_money
from sundry.agent.models import HeldAction
from sundry.context.models import ActionTaken
from sundry.core import money
from sundry.tooling.tools import REGISTRY, Tool


def _amount(data: dict) -> tuple[int, str] | None:
    currency = str(data.get("currency") or "").upper()
    cents = data.get("amount_cents")
    if isinstance(cents, int) and not isinstance(cents, bool):
        return cents, currency
    if data.get("amount") in (None, ""):
        return None
    try:
        return money.parse_major(str(data["amount"]), currency, allow_negative=True), currency
    except money.MoneyError:
        return None


def call_key(tool: Tool, arguments: dict) -> str:
    """What makes two calls of `tool` the same call (plain JSON arguments)."""
    data = arguments if isinstance(arguments, dict) else {}
    if tool.consent_action or moves_money(tool) or not tool.reversible:
        picked = {name: data.get(name) for name in tool.id_args}
        amount = _amount(data)
        if amount is not None:
            picked.update(amount_minor_units=amount[0], currency=amount[1])
        return f"{tool.name} {repeat_key(picked)}"
    return f"{tool.name} {repeat_key(data, tool.repeat_key)}"


def hold_key(tool: Tool, args) -> str:
    """`call_key` of parsed arguments."""
    return call_key(tool, args.model_dump(mode="json"))


Lookup = Callable[[str], Tool | None]


def equal_hold(customer_pk: int, tool: Tool, args, *, statuses, exclude: int | None = None) -> HeldAction | None:
    """The customer's first hold of the same call in one of `statuses` (call with the customer's row locked)."""
    key = hold_key(tool, args)
    candidates = HeldAction.objects.filter(ticket__customer_id=customer_pk, tool=tool.name, status__in=statuses)
    if exclude is not None:
        candidates = candidates.exclude(pk=exclude)
    return next((h for h in candidates.order_by("pk") if call_key(tool, h.arguments or {}) == key), None)


LIVE = (HeldAction.Status.PENDING, HeldAction.Status.APPROVED, HeldAction.Status.EXECUTED)


def already_done(held: HeldAction, customer_pk: int, lookup: Lookup = REGISTRY.get) -> str:
    """Why `held` must not run because the same call already ran ("" when it did not): another hold of
    it executed, or the same action taken directly (by the agent, or a confirmed card), on any of the
    customer's tickets. `lookup` finds the tool by name (a class's tool servers included)."""
    tool = lookup(held.tool)
    if tool is None:
        return ""
    key = call_key(tool, held.arguments or {})
    twin = next(
        (
            h
            for h in HeldAction.objects.filter(
                ticket__customer_id=customer_pk, tool=held.tool, status=HeldAction.Status.EXECUTED
            )
            .exclude(pk=held.pk)
            .order_by("pk")
            if call_key(tool, h.arguments or {}) == key
        ),
        None,
    )
    if twin is not None:
        return (
            f"The same {held.tool} call was already approved and executed (hold #{twin.pk} on ticket #{twin.ticket_id})"
        )
    action = next(
        (
            a
            for a in ActionTaken.objects.filter(ticket__customer_id=customer_pk, tool=held.tool).order_by("pk")
            if call_key(tool, a.arguments or {}) == key
        ),
        None,
    )
    if action is not None:
        return f"The same {held.tool} call already ran (turn {action.turn} on ticket #{action.ticket_id})"
    return ""
