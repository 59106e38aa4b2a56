"""Tools that change Sundry's own lanes rather than the shop."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from sundry.context.models import StateValue
from sundry.context.services import ledger_rename, rule_pin, state_set
from sundry.context.statefields import StateValueInvalid
from sundry.tickets.models import Ticket, Turn
from sundry.tooling.tools import Tool, ToolContext, ToolError, register


class PinArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    text: str = Field(
        description="The customer's (or staff's) rule, copied word for word", min_length=3, max_length=500
    )
    scope: str = Field("ticket", description="ticket, customer or order")
    scope_ref: str = Field(
        "",
        description="For an order-scoped rule, the order number copied from the ID ledger; "
        "empty for ticket and customer scope",
    )


class PinResult(BaseModel):
    pinned: str
    scope: str
    blocks_tools: list[str] = []
    # "candidate": in force now, until staff confirm or dismiss it.
    status: str = "active"


def _pin(ctx: ToolContext, args: PinArgs) -> PinResult:
    ticket = Ticket.objects.get(pk=ctx.ticket_id)
    try:
        rule = rule_pin(
            ticket=ticket, text=args.text, turn=ctx.turn, source="model", scope=args.scope, scope_ref=args.scope_ref
        )
    except StateValueInvalid as exc:
        raise ToolError(str(exc)) from exc
    return PinResult(
        pinned=rule.text, scope=rule.scope, blocks_tools=rule.enforcement.get("block_tools", []), status=rule.status
    )


class LabelArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    value: str = Field(description="An identifier exactly as it appears in the ID ledger")
    role: str = Field(description="What it is in this case, e.g. damaged_order, second_refund", max_length=60)


class LabelResult(BaseModel):
    value: str
    role: str


def _label(ctx: ToolContext, args: LabelArgs) -> LabelResult:
    ticket = Ticket.objects.get(pk=ctx.ticket_id)
    try:
        entry = ledger_rename(ticket=ticket, value=args.value, role=args.role, turn=ctx.turn)
    except StateValueInvalid as exc:
        raise ToolError(str(exc)) from exc
    return LabelResult(value=entry.value, role=entry.role)


class FactArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    # The ticket's domain names its fields in the spec the model is offered (`_fact_spec`).
    name: str = Field(description="One of the state fields")
    value: str = Field(max_length=300, description="The value as it was stated; an amount keeps its currency code")
    stated_by_customer: bool = Field(False, description="True only if the customer wrote this value themselves")


class FactResult(BaseModel):
    name: str
    value: str
    source: str
    superseded: str | None = None


def _normalised(text: str) -> str:
    return "".join(ch for ch in text.lower() if ch.isalnum() or ch == ".")


def _record_fact(ctx: ToolContext, args: FactArgs) -> FactResult:
    ticket = Ticket.objects.get(pk=ctx.ticket_id)
    # Provenance is checked, not taken on the model's word: "customer" only if
    # the value really appears in something the customer wrote.
    source = "model"
    if args.stated_by_customer:
        wanted = _normalised(args.value)
        texts = Turn.objects.filter(ticket=ticket, author="customer", kind="message").values_list("text", flat=True)
        if wanted and any(wanted in _normalised(t) for t in texts):
            source = "customer"
    before = StateValue.objects.filter(ticket=ticket, name=args.name, is_current=True).first()
    try:
        row = state_set(ticket=ticket, name=args.name, value=args.value, turn=ctx.turn, source=source)
    except StateValueInvalid as exc:
        raise ToolError(str(exc)) from exc
    superseded = before.value if before and before.pk != row.pk else None
    return FactResult(name=row.name, value=row.value, source=row.source, superseded=superseded)


_FACT_RULES = (
    "Values are validated; a changed value supersedes the old one and both are kept. "
    "Staff confirm facts before the customer sees them."
)


def _fact_fields(domain) -> list:
    """The fields the model may record: the domain's declared ones in its order, less those the customer
    never sees (an internal note is staff's to write)."""
    return [f for f in domain.state_fields if f.customer_visible]


def _fact_spec(domain) -> dict:
    """record_fact as a ticket in `domain` is offered it: naming that domain's own state fields."""
    fields = _fact_fields(domain)
    listed = ", ".join(f.name + (" with currency" if f.kind == "amount" else "") for f in fields)
    parameters = FactArgs.model_json_schema()
    parameters["properties"]["name"]["description"] = "One of the state fields: " + ", ".join(f.name for f in fields)
    return {
        "name": "record_fact",
        "description": f"Record an established fact of this case in the state ({listed}). {_FACT_RULES}",
        "parameters": parameters,
    }


register(
    Tool(
        name="record_fact",
        description=f"Record an established fact of this case in the state (one of its named fields). {_FACT_RULES}",
        spec_for=_fact_spec,
        args_model=FactArgs,
        result_model=FactResult,
        run=_record_fact,
        local=True,
    )
)
register(
    Tool(
        name="pin_constraint",
        description=(
            "Record a rule that must hold for the rest of this ticket whenever the customer (or staff) states a "
            "prohibition, a hard limit or a preference about how the case is handled (e.g. 'phone only, never email', "
            "'I don't want a replacement'). Copy their words verbatim. It is enforced at once and stays unconfirmed "
            "until staff confirm it; you can add or widen rules, never narrow or remove one."
        ),
        args_model=PinArgs,
        result_model=PinResult,
        run=_pin,
        local=True,
    )
)
register(
    Tool(
        name="label_entity",
        description="Give a ledger entry a role that says what it is in this case (e.g. damaged_order). The value must be copied from the ledger.",
        args_model=LabelArgs,
        result_model=LabelResult,
        run=_label,
        local=True,
    )
)
