"""State changes made by code when a tool succeeds.

Money moved → an action taken with its idempotency key and the order's
totals; any other side effect → an action taken. Models never write these.
"""

from __future__ import annotations

from sundry.agent.guards import write_targets
from sundry.context import services as lanes
from sundry.context.models import LedgerEntry
from sundry.core.money import format_money


def apply_effects(*, ticket, tool, args, result, turn: int, key: str) -> None:
    name = tool.name
    data = result.model_dump(mode="json")
    if name == "get_order":
        lanes.money_observe(ticket=ticket, order=data["order_number"], currency=data["currency"],
                            paid_cents=data["paid_cents"], refunded_cents=data["refunded_cents"], turn=turn)
        return
    if not tool.side_effect or tool.local:
        return
    target = ",".join(sorted(write_targets(tool, args, args.model_dump(mode="json"))))
    amount = data.get("amount_cents")
    currency = data.get("currency", "")
    lanes.action_record(
        ticket=ticket, tool=name, target=target, arguments=args.model_dump(mode="json"), result=data, turn=turn,
        idempotency_key=key, reversible=tool.reversible, amount_cents=amount, currency=currency,
    )
    if name == "issue_refund":
        # The tool reports the shop's totals after the refund: take them as the truth.
        lanes.money_observe(ticket=ticket, order=data["order_number"], currency=currency,
                            paid_cents=data["refunded_cents"] + data["refundable_cents"],
                            refunded_cents=data["refunded_cents"], turn=turn)
        LedgerEntry.objects.filter(ticket=ticket, value=data["refund_id"]).update(
            note=f"{data['status']} {format_money(amount, currency)} on {data['order_number']}"
        )
    elif name == "book_return":
        LedgerEntry.objects.filter(ticket=ticket, value=data["return_id"]).update(note=f"return {data['status']}")
