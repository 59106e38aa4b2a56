"""Plain-data snapshots of a ticket's lanes.

Selectors read the database into these; assembly, rendering, guards and the
offline model take only these, so they are pure, fast and testable without
an ORM.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class RuleData:
    id: int
    text: str
    turn: int
    scope: str = "ticket"
    scope_ref: str = ""
    source: str = "customer"
    # e.g. {"block_tools": ["<a tool that emails>"]}
    enforcement: dict[str, Any] = field(default_factory=dict)
    # False for a candidate: flagged, enforced (fail-safe), not yet confirmed by staff.
    confirmed: bool = True


@dataclass(frozen=True)
class LedgerData:
    role: str
    value: str
    kind: str
    verified: bool
    first_seen_turn: int
    last_used_turn: int
    note: str = ""
    archived: bool = False
    # Used as an argument of a tool call (not merely seen in a result).
    used: bool = False
    # What it is ("Air Fryer 5.5L · delivered"), built by code from the result that described it.
    description: str = ""
    # A correction named another value as the one meant: (value, turn, source). Empty when none.
    superseded_by: str = ""
    superseded_turn: int = 0
    superseded_source: str = ""
    # Whose it is, as a tool result said (a customer ID), and whether it is this ticket's own customer.
    customer: str = ""
    identifies: bool = False

    def superseded_note(self) -> str:
        """'superseded by <value> at turn N (customer)': what the ledger line and a card say."""
        if not self.superseded_by:
            return ""
        who = {"customer": "the customer's correction", "staff": "a staff correction"}.get(
            self.superseded_source, self.superseded_source or "a correction"
        )
        return f"superseded by {self.superseded_by} at turn {self.superseded_turn} ({who})"


def next_role(base: str, taken: set[str]) -> str:
    """A ledger role by kind and order of appearance: `order`, then `order_2`, `order_3` …"""
    if base not in taken:
        return base
    n = 2
    while f"{base}_{n}" in taken:
        n += 1
    return f"{base}_{n}"


def is_live(entry, live_kinds: frozenset[str] = frozenset()) -> bool:
    """Tied to the ticket's live entities: the desk's customer, or an ID of one of the domain's
    live kinds (`Domain.live_id_kinds`: its accounts, orders, bookings) a tool call has taken as
    an argument."""
    used = getattr(entry, "used", None)
    if used is None:
        used = getattr(entry, "used_in_call", False)
    return entry.role == "customer" or (bool(used) and entry.kind in live_kinds)


def eviction_key(entry, live_kinds: frozenset[str] = frozenset()) -> tuple:
    """Order in which ledger entries leave the window: by true last use, live entities last.

    Entering the ledger counts as a use, so a payment method read at the start
    and needed at the end competes on when it was last seen or used, not on
    whether a call has taken it yet. Works on LedgerData and LedgerEntry rows alike.
    """
    return (is_live(entry, live_kinds), entry.last_used_turn, entry.first_seen_turn)


@dataclass(frozen=True)
class StateFieldData:
    name: str
    value: str
    turn: int
    source: str
    confirmed: bool


@dataclass(frozen=True)
class ActionData:
    tool: str
    target: str
    turn: int
    idempotency_key: str
    reversible: bool
    amount_cents: int | None = None
    currency: str = ""
    summary: str = ""
    # Every plain value its arguments named (the order of an item it acted on, say).
    on: tuple[str, ...] = ()
    # `tooling.domain.arguments_digest` of its arguments: a second change asking for something
    # else is no repeat, where the tool's declaration says so.
    arguments_digest: str = ""


@dataclass(frozen=True)
class MoneyData:
    """Per order: what was paid and what has been refunded so far."""

    order: str
    currency: str
    paid_cents: int
    refunded_cents: int

    @property
    def refundable_cents(self) -> int:
        return max(0, self.paid_cents - self.refunded_cents)


@dataclass(frozen=True)
class TurnData:
    number: int
    author: str  # customer, agent, tool, staff, system
    kind: str  # message, tool_call, tool_result, note, event, rejection, error
    text: str
    payload: dict[str, Any] = field(default_factory=dict)
    tokens: int = 0


@dataclass(frozen=True)
class SummaryData:
    covers_through_turn: int
    text: str
    fallback: bool = False


@dataclass
class LaneSnapshot:
    """Everything a model request for one ticket is built from."""

    ticket_id: int
    customer_id: str
    class_policy: str
    rules: list[RuleData] = field(default_factory=list)
    ledger: list[LedgerData] = field(default_factory=list)
    state: list[StateFieldData] = field(default_factory=list)
    actions: list[ActionData] = field(default_factory=list)
    money: list[MoneyData] = field(default_factory=list)
    summary: SummaryData | None = None
    # Turns after the summary, oldest first; assembly keeps the newest that fit.
    turns: list[TurnData] = field(default_factory=list)
    recent_turns_kept: int = 8
    # The ticket's version when the lanes were read (None when not read from the database).
    version: int | None = None
    # The domain the ticket is worked in (`tooling.domain` registry name; "" is the default domain).
    domain: str = ""
    # Rows read beside the lanes for a layer above (`selectors.ALSO`), by name: tuples of their fields.
    also: dict[str, list[tuple]] = field(default_factory=dict)
