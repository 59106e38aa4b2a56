"""The long-ticket set: one customer's τ²-bench tasks chained into a single ticket.

A real desk's long ticket is one customer coming back with issue after issue:
early lookups, payment methods and constraints must still hold many turns
later, which short traces never test. Tasks are grouped by the account their
calls name first (a user, customer or phone), in file order, and chained
until a ticket has at least `min_turns` turns; call IDs get a per-part prefix
so no two parts share one.
"""

from __future__ import annotations

from sundry.evals.domains import DOMAINS
from sundry.evals.records import RecordedTicket, RecordedTurn

ACCOUNT_KINDS = ("user", "customer", "phone")


def account(ticket: RecordedTicket) -> str | None:
    """The first account ID the ticket's calls name, or None."""
    domain = DOMAINS[ticket.domain]
    for t in ticket.turns:
        for c in (t.payload or {}).get("calls") or [] if t.kind == "tool_call" else []:
            for _path, kind, value in domain.id_args(str(c.get("name")), c.get("arguments") or {}):
                if kind in ACCOUNT_KINDS:
                    return value
    return None


def _part_turns(ticket: RecordedTicket, part: int, start: int) -> list[RecordedTurn]:
    out = []
    for i, t in enumerate(ticket.turns):
        payload = dict(t.payload or {})
        if t.kind == "tool_call":
            payload["calls"] = [{**c, "id": f"p{part}-{c.get('id')}"} for c in payload.get("calls") or []]
        elif payload.get("call_id") is not None:
            payload["call_id"] = f"p{part}-{payload['call_id']}"
        out.append(RecordedTurn(number=start + i, author=t.author, kind=t.kind, text=t.text, payload=payload))
    return out


def chain(tickets: list[RecordedTicket], *, min_turns: int = 40, max_turns: int = 120) -> list[RecordedTicket]:
    """Long tickets (≥ `min_turns` turns, ≥ 2 tasks each) from the τ²-bench tickets given."""
    groups: dict[tuple[str, str], list[RecordedTicket]] = {}
    for t in tickets:
        if t.source == "tau2" and (who := account(t)):
            groups.setdefault((t.domain, who), []).append(t)
    out = []
    for (domain, who), members in groups.items():
        batch: list[RecordedTicket] = []
        for member in members + [None]:
            size = sum(len(m.turns) for m in batch)
            if member is None or (size >= min_turns and size + len(member.turns) > max_turns):
                if len(batch) >= 2 and size >= min_turns:
                    out.append(_join(batch, domain, who, len(out) + 1))
                batch = []
            if member is not None:
                batch.append(member)
    return out


def _join(parts: list[RecordedTicket], domain: str, who: str, n: int) -> RecordedTicket:
    turns: list[RecordedTurn] = []
    for k, p in enumerate(parts, 1):
        turns += _part_turns(p, k, len(turns) + 1)
    return RecordedTicket(
        id=f"long-{domain}-{n}",
        source="tau2",
        domain=domain,
        turns=turns,
        subject=f"{len(parts)} τ²-bench {domain} tasks of {who}, one after another",
        meta={
            "parts": [(p.meta.get("file"), p.meta.get("source_id", p.id)) for p in parts],
            "account": who,
            "long": True,
        },
    )
