"""Recorded tickets: the one shape every importer produces and the harness reads.

Our own format is a JSON export of a Sundry ticket's turns (`export_ticket`);
importers for foreign formats (τ²-bench results, OpenAI message lists) map
onto the same `RecordedTicket`, so the harness never knows where a ticket
came from. Turns use Sundry's vocabulary (author, kind, payload with `calls`
and `call_id`), so `render.turns_to_messages` renders them unchanged.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from sundry.context.lanes import TurnData

FORMAT = "sundry-ticket/1"


class RecordedTurn(BaseModel):
    number: int
    author: str  # customer, agent, tool, staff, system
    kind: str  # message, tool_call, tool_result, note, event, rejection, error
    text: str = ""
    payload: dict[str, Any] = Field(default_factory=dict)

    def data(self) -> TurnData:
        return TurnData(number=self.number, author=self.author, kind=self.kind, text=self.text, payload=self.payload)


class RecordedTicket(BaseModel):
    format: str = FORMAT
    id: str
    source: str  # sundry, tau2, openai
    domain: str  # demo_shop, retail, airline, telecom …
    subject: str = ""
    customer_id: str = ""
    turns: list[RecordedTurn]
    meta: dict[str, Any] = Field(default_factory=dict)

    def turn_data(self) -> list[TurnData]:
        return [t.data() for t in self.turns]


def export_ticket(ticket) -> RecordedTicket:
    """A stored Sundry ticket → our recorded format (turns only; lanes are rebuilt from them)."""
    from sundry.tickets.models import Turn

    turns = [
        RecordedTurn(number=t.number, author=t.author, kind=t.kind, text=t.text, payload=t.payload or {})
        for t in Turn.objects.filter(ticket=ticket).order_by("number")
    ]
    return RecordedTicket(
        id=f"sundry-{ticket.pk}",
        source="sundry",
        domain="demo_shop",
        subject=ticket.subject,
        customer_id=ticket.customer.external_key,
        turns=turns,
        meta={"ticket_class": ticket.ticket_class.slug, "ticket_pk": ticket.pk},
    )


def dump(tickets: list[RecordedTicket], path: str | Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    body = [t.model_dump(mode="json") for t in tickets]
    path.write_text(json.dumps(body if len(body) != 1 else body[0], ensure_ascii=False, indent=1))
    return path


def load(path: str | Path) -> list[RecordedTicket]:
    """One recorded ticket, or a list of them, in our format."""
    data = json.loads(Path(path).read_text())
    items = data if isinstance(data, list) else [data]
    return [RecordedTicket.model_validate(item) for item in items]


def is_recorded(data: Any) -> bool:
    first = data[0] if isinstance(data, list) and data else data
    return isinstance(first, dict) and first.get("format") == FORMAT
