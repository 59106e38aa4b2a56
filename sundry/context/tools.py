"""Tools that change Sundry's own lanes rather than the shop."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from sundry.agent.tools.base import Tool, ToolContext, ToolError, register


class PinArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    text: str = Field(description="The customer's (or staff's) rule, copied word for word", min_length=3, max_length=500)
    scope: str = Field("ticket", description="ticket, customer or order")
    scope_ref: str = Field("", description="For an order-scoped rule, the order number")


class PinResult(BaseModel):
    pinned: str
    scope: str
    blocks_tools: list[str] = []


def _pin(ctx: ToolContext, args: PinArgs) -> PinResult:
    from sundry.context.services import rule_pin
    from sundry.context.statefields import StateValueInvalid
    from sundry.tickets.models import Ticket

    ticket = Ticket.objects.get(pk=ctx.ticket_id)
    try:
        rule = rule_pin(ticket=ticket, text=args.text, turn=ctx.turn, source="model", scope=args.scope,
                        scope_ref=args.scope_ref)
    except StateValueInvalid as exc:
        raise ToolError(str(exc)) from exc
    return PinResult(pinned=rule.text, scope=rule.scope, blocks_tools=rule.enforcement.get("block_tools", []))


class LabelArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    value: str = Field(description="An identifier exactly as it appears in the ID ledger")
    role: str = Field(description="What it is in this case, e.g. damaged_order, second_refund", max_length=60)


class LabelResult(BaseModel):
    value: str
    role: str


def _label(ctx: ToolContext, args: LabelArgs) -> LabelResult:
    from sundry.context.services import ledger_rename
    from sundry.context.statefields import StateValueInvalid
    from sundry.tickets.models import Ticket

    ticket = Ticket.objects.get(pk=ctx.ticket_id)
    try:
        entry = ledger_rename(ticket=ticket, value=args.value, role=args.role, turn=ctx.turn)
    except StateValueInvalid as exc:
        raise ToolError(str(exc)) from exc
    return LabelResult(value=entry.value, role=entry.role)


register(Tool(
    name="pin_constraint",
    description=(
        "Record a rule that must hold for the rest of this ticket whenever the customer (or staff) states a "
        "prohibition, a hard limit or a preference about how the case is handled (e.g. 'phone only, never email', "
        "'I don't want a replacement'). Copy their words verbatim."
    ),
    args_model=PinArgs, result_model=PinResult, run=_pin, local=True,
))
register(Tool(
    name="label_entity",
    description="Give a ledger entry a role that says what it is in this case (e.g. damaged_order). The value must be copied from the ledger.",
    args_model=LabelArgs, result_model=LabelResult, run=_label, local=True,
))
