"""A long ticket built through the real services: lanes plus 40+ turns."""

from __future__ import annotations

import json

from sundry.context import services as lanes
from sundry.desk.lifecycle import ticket_create
from sundry.tickets.models import Turn
from sundry.tickets.services import turn_append
from tests.factories import CustomerFactory, TicketClassFactory

ORDER, ITEM, TRACKING, REFUND = "SU-40118", "itm_7k2m9q4x", "1Z9A8B7C6D5E4F3G", "rfd_3h8j2k5m"
RULE = "Phone only, never email me about this."


def tracking_result(i: int) -> str:
    events = [
        {
            "at": f"2025-03-{(d % 28) + 1:02d}T0{d % 10}:15:00Z",
            "location": f"Depot {d} North Distribution Hub",
            "description": "Parcel scanned at facility and routed to the next sorting centre on schedule",
        }
        for d in range(i, i + 14)
    ]
    return json.dumps(
        {"tracking_number": TRACKING, "order": ORDER, "carrier": "UPS", "status": "in_transit", "events": events},
        ensure_ascii=False,
    )


def long_ticket(*, exchanges: int = 11, tclass=None, recent_turns_kept: int = 8):
    """A ticket with rules, ledger, an action taken, and 4 turns per exchange (+ a few), large tool results early."""
    tclass = tclass or TicketClassFactory(approval_rules={}, recent_turns_kept=recent_turns_kept)
    ticket = ticket_create(
        customer=CustomerFactory().person, ticket_class=tclass, subject="Garden table, scratched leg"
    )
    add = lambda **kw: turn_append(ticket=ticket, **kw)  # noqa: E731
    add(
        author=Turn.Author.CUSTOMER,
        text=f"My garden table from {ORDER} arrived with a scratched leg. {RULE} I don't want a replacement.",
    )
    lanes.ledger_record_system_id(ticket=ticket, kind="order", value=ORDER, role="damaged_order", turn=1)
    lanes.ledger_record_system_id(ticket=ticket, kind="item", value=ITEM, role="garden_table", turn=1)
    lanes.ledger_record_system_id(ticket=ticket, kind="tracking", value=TRACKING, role="second_parcel", turn=1)
    lanes.rule_pin(ticket=ticket, text=RULE, turn=1, source="customer")
    for i in range(exchanges):
        add(
            author=Turn.Author.AGENT,
            kind=Turn.Kind.TOOL_CALL,
            text="",
            payload={"calls": [{"id": f"c{i}", "name": "track_parcel", "arguments": {"tracking_number": TRACKING}}]},
        )
        add(
            author=Turn.Author.TOOL,
            kind=Turn.Kind.TOOL_RESULT,
            text=tracking_result(i),
            payload={"call_id": f"c{i}", "name": "track_parcel", "ok": True},
        )
        add(author=Turn.Author.AGENT, text=f"Your second parcel is still moving (update {i}); I'll keep watching it.")
        add(author=Turn.Author.CUSTOMER, text=f"Thanks. Any news on it? ({i})")
        if i == 1:
            refund = add(
                author=Turn.Author.AGENT,
                kind=Turn.Kind.TOOL_CALL,
                payload={
                    "calls": [
                        {
                            "id": "r1",
                            "name": "issue_refund",
                            "arguments": {"order_number": ORDER, "amount": "40.00 USD"},
                        }
                    ]
                },
            )
            res = add(
                author=Turn.Author.TOOL,
                kind=Turn.Kind.TOOL_RESULT,
                text=json.dumps({"refund_id": REFUND, "order": ORDER, "amount": "40.00 USD", "status": "issued"}),
                payload={"call_id": "r1", "name": "issue_refund", "ok": True},
            )
            lanes.ledger_record_system_id(
                ticket=ticket, kind="refund", value=REFUND, role="table_refund", turn=res.number
            )
            lanes.action_record(
                ticket=ticket,
                tool="issue_refund",
                target=ORDER,
                arguments={"order_number": ORDER},
                result={"refund_id": REFUND},
                turn=refund.number,
                idempotency_key="key-refund-1",
                reversible=False,
                amount_cents=4000,
                currency="USD",
            )
    # The recent turns are short chat, as at the end of a long ticket.
    for i in range(4):
        add(author=Turn.Author.AGENT, text="Noted.")
        add(author=Turn.Author.CUSTOMER, text="ok thanks")
    ticket.refresh_from_db()
    return ticket
