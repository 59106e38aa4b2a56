"""What the desk and the customer's page show of a domain's own records, asked through one hook.

A domain keeps its records (a shop's orders, a travel desk's bookings) in its own
tables; the desk never reads them. It asks the domain's `Records` instead, found
by the domain's name (the domain the ticket's customer belongs to,
`people.selectors.domain_of`): the customer's recent records (the customer card,
the customer's picker), who owns a record a person searched for, a record's
figures beside a call held for approval, a completed action in the customer's
words, and a held call's title. A domain registers its hook when its app is
ready (`register_records`); a domain that registers none gets this base class,
which knows no records and words a call by its tool's name.

Everything here is plain data: the hook is given keys, references, arguments
and stored results, and answers with text and figures already formatted.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from datetime import date, datetime


@dataclass(frozen=True)
class RecordRow:
    """One of a customer's records as the customer card and the picker list it."""

    reference: str
    placed_at: datetime | None
    status: str
    total: str


@dataclass(frozen=True)
class RecordFacts:
    """A record's figures beside a held call: what it is, its lines, and figures in words."""

    reference: str
    status: str
    items: tuple[dict, ...] = ()  # {"product", "quantity", "price"}
    figures: tuple[tuple[str, str], ...] = ()  # (label, value), in the order shown


# What a record's status may be, in the words a reply states it with (`agent.guards.statusclaims`):
# a domain says which of these are true of its record now.
PLACED, SHIPPED, DELIVERED, CANCELLED, RETURNED, REFUNDED, LOST = (
    "placed",
    "shipped",
    "delivered",
    "cancelled",
    "returned",
    "refunded",
    "lost",
)
STATUSES = (PLACED, SHIPPED, DELIVERED, CANCELLED, RETURNED, REFUNDED, LOST)


@dataclass(frozen=True)
class RecordState:
    """What a reply may state of a record: the statuses true of it (`STATUSES`; a delivered order was
    shipped too), the dates of what happened to it (status → dates, in the shop's time zone and in
    UTC), and every figure it holds (cents, currency): total, paid, refunded, left to refund, lines."""

    reference: str
    statuses: frozenset[str] = frozenset()
    dates: tuple[tuple[str, date], ...] = ()  # (PLACED, date) …; a status may have several
    figures: tuple[tuple[int, str], ...] = ()


@dataclass(frozen=True)
class Done:
    """A completed action in the customer's words; `whole` is the part kept on one line (a reference)."""

    text: str
    whole: str = ""


@dataclass
class Records:
    """A domain's answers about its records. This base knows none: subclass it per domain."""

    domain: str = ""
    noun: str = "record"  # what one record is called ("order"), and many ("orders")
    plural: str = "records"
    # The argument naming the record a held call acts on ("" : the call names none the desk can show).
    reference_arg: str = ""
    # The state field that names the ticket's record: a customer's pick sets it, a canned reply's
    # record placeholder reads it ("": the customer's page offers no picker).
    pick_field: str = ""

    def recent(self, external_key: str, limit: int) -> list[RecordRow]:
        """The customer's newest records, newest first, at most `limit`."""
        return []

    def count(self, external_key: str) -> int:
        return 0

    def owners(self, reference: str) -> set[str]:
        """The external keys of the customers who own a record of this reference (searching for it)."""
        return set()

    def normalize(self, reference: str) -> str:
        """A reference as a person typed it, in the form the records keep it."""
        return (reference or "").strip()

    def owned(self, external_key: str, references: list[str]) -> list[str]:
        """Those of `references` that are the customer's own records, in the order the records list them."""
        return []

    def reference(self, arguments: dict) -> str:
        """The record a call's arguments name, by `reference_arg`."""
        return str((arguments or {}).get(self.reference_arg) or "") if self.reference_arg else ""

    def facts(self, reference: str) -> RecordFacts | None:
        """The record's figures for a person deciding a held call; None when there is no such record."""
        return None

    def state(self, reference: str) -> RecordState | None:
        """The record's statuses, dates and figures now, for a reply that states them; None when
        there is no such record."""
        return None

    def done(self, tool: str, result: dict, amount_cents: int | None, currency: str) -> Done | None:
        """A completed action in the customer's words, or None for what the customer need not see."""
        return None

    def held_title(self, tool: str, amount: str | None, reference: str) -> str:
        """A held call in a few words, lower-case first ("refund 12.00 on …"): its tool's name by default."""
        return tool.replace("_", " ") + (f" on {reference}" if reference else "")


_RECORDS: dict[str, Records] = {}
_LOCK = threading.Lock()
_NONE = Records()


def register_records(records: Records) -> Records:
    """Make a domain's hook known by its domain's name (its app's `ready` calls this)."""
    if not records.domain:
        raise ValueError("a records hook names its domain")
    with _LOCK:
        known = _RECORDS.get(records.domain)
        if known is not None and known is not records:
            raise ValueError(f"records for domain {records.domain!r} registered twice")
        _RECORDS[records.domain] = records
    return records


def unregister_records(domain: str) -> None:
    """Forget a domain's hook (a test's own domain, after the test)."""
    with _LOCK:
        _RECORDS.pop(domain, None)


def records_for(domain: str) -> Records:
    """The hook of the named domain; the base (no records) for a domain that registered none."""
    return _RECORDS.get(domain or "", _NONE)


def all_records() -> list[Records]:
    """Every registered hook (search asks each who owns a reference)."""
    return list(_RECORDS.values())


__all__ = [
    "Done",
    "RecordFacts",
    "RecordRow",
    "RecordState",
    "Records",
    "all_records",
    "records_for",
    "register_records",
    "unregister_records",
]
