"""How identifiers entering a ticket change its ledger, worked out on plain rows. Pure.

The live services (`context.services`) turn a plan into SQL; the harness's
replay (`evals.replay`) keeps its rows in memory. Both apply the same plan, so
roles, restores and eviction cannot drift apart between production and the
figures that claim to measure it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sundry.context.lanes import LedgerData, eviction_key, next_role
from sundry.context.render import DESCRIPTION_CHARS, cell, ledger_line
from sundry.core.tokens import count_tokens

# The live ledger may fill this share of the class budget; past it, entries are archived.
# Sized in tokens, not entries: a lookup that lists twenty item IDs costs what it shows.
LEDGER_SHARE = 0.3
# Past the allowance, entries no write takes (and superseded ones) leave before any a write may
# need (`evict`). Off, eviction is by last use alone: the control that shows what the rule keeps.
EVICT_BY_NEED = True


@dataclass
class LedgerRow:
    """One ledger entry as a plan works on it (mutable; `eviction_key` reads `used`)."""

    value: str
    role: str
    kind: str
    verified: bool
    first_seen_turn: int
    last_used_turn: int
    active: bool = True
    used: bool = False  # an argument of a tool call, not merely seen in a result
    order: int = 0  # insertion order, the tie-break when eviction keys are equal
    note: str = ""
    id: int | None = None  # the database row, once there is one
    # What the ID is, built by code from the declared fields of the result that last
    # described it ("Air Fryer 5.5L · delivered"): how "the air fryer" finds its order.
    description: str = ""
    # A correction named another value as the one meant: no write will take this one.
    superseded: bool = False


@dataclass
class HarvestPlan:
    """What changed, by kind of change (each kind is one write for the services)."""

    new: list[LedgerRow] = field(default_factory=list)
    seen_again: list[LedgerRow] = field(default_factory=list)  # active, verified again, last use moved
    restored: list[LedgerRow] = field(default_factory=list)  # archived, back under its old role
    renamed: list[LedgerRow] = field(default_factory=list)  # a mentioned ID verified, or restored under a new role
    evicted: list[LedgerRow] = field(default_factory=list)  # archived now to keep within the cap
    described: list[LedgerRow] = field(default_factory=list)  # rows already stored whose description changed
    roles: list[str] = field(default_factory=list)  # the role of each found ID, in the order found


class _Roles:
    """Roles in use: every role counts as taken (archived ones too), active ones block restores."""

    def __init__(self, rows):
        self.taken = {r.role for r in rows}
        self.active = {r.role for r in rows if r.active}
        self._from: dict[str, int] = {}  # per kind, where the next free number is looked for

    def new(self, base: str) -> str:
        # As `next_role`, without counting up from 2 each time (a result with n IDs of a kind would
        # cost n² probes): roles are only ever taken, so the first free number never goes down.
        if base in self.taken:
            n = self._from.get(base, 2)
            while f"{base}_{n}" in self.taken:
                n += 1
            self._from[base] = n + 1
            role = f"{base}_{n}"
        else:
            role = next_role(base, self.taken)
        self.taken.add(role)
        return role


def _next_order(rows: dict[str, LedgerRow]) -> int:
    return max((r.order for r in rows.values()), default=0) + 1


def plan_harvest(
    rows: dict[str, LedgerRow],
    found: list[tuple[str, str]],
    *,
    turn: int,
    cap: int,
    notes: dict[str, str] | None = None,
    descriptions: dict[str, str] | None = None,
    needed_kinds: frozenset[str] | None = None,
    live_kinds: frozenset[str] = frozenset(),
) -> HarvestPlan:
    """IDs a successful tool result returned (`found`: (value, kind)) enter the ledger verified.

    `rows` (value → row, every status) is updated in place. A new ID takes its
    kind's next free role; a customer-mentioned one earns its kind's role once
    verified; an archived one comes back under its old role unless an active
    entry holds it. Past `cap` tokens of active entries, the plan archives by `eviction_key`,
    entries no write needs first when `needed_kinds` is given (see `evict`).
    `descriptions` (value → text, from the result's declarations) replace an
    entry's description; an ID the result does not describe keeps the one it has.
    """
    plan, roles, notes, descriptions = HarvestPlan(), _Roles(rows.values()), notes or {}, descriptions or {}
    order = _next_order(rows)
    for value, kind in found:
        row = rows.get(value)
        if row is None:
            row = rows[value] = LedgerRow(
                value,
                roles.new(kind),
                kind,
                True,
                turn,
                turn,
                order=order,
                note=notes.get(value, ""),
                description=descriptions.get(value, ""),
            )
            order += 1
            plan.new.append(row)
        else:
            described = descriptions.get(value)
            if described and described != row.description:
                row.description = described
                if row.id is not None:
                    plan.described.append(row)
            role, was_active = row.role, row.active
            if not row.verified and row.role.endswith("_mentioned"):
                row.role = roles.new(kind)
            if not row.active:
                row.active = True
                if row.role in roles.active:
                    row.role = roles.new(kind)
            row.verified = True
            row.last_used_turn = max(row.last_used_turn, turn)
            (plan.renamed if row.role != role else plan.restored if not was_active else plan.seen_again).append(row)
        roles.active.add(row.role)
        plan.roles.append(row.role)
    plan.evicted = evict(rows, cap, needed_kinds, live_kinds)
    return plan


def plan_mentions(
    rows: dict[str, LedgerRow],
    found: list[tuple[str, str]],
    *,
    turn: int,
    cap: int,
    needed_kinds: frozenset[str] | None = None,
    live_kinds: frozenset[str] = frozenset(),
) -> HarvestPlan:
    """IDs a customer typed. New ones enter UNVERIFIED as `<kind>_mentioned`. One a tool returned
    before counts as used now and, if archived, comes back, with the archived IDs noted as its own."""
    plan, roles = HarvestPlan(), _Roles(rows.values())
    order = _next_order(rows)
    for value, kind in dict.fromkeys(found):  # an ID typed twice in one message is one mention
        known = rows.get(value)
        if known is not None:
            if known.verified:
                # A tool returned it before and the customer brings it up again: it, and the
                # IDs noted as its own (a parcel's tracking number), come back into the window.
                # Typing it earns no trust: only what a tool returned is restored.
                if known.active:
                    known.last_used_turn = max(known.last_used_turn, turn)
                    plan.seen_again.append(known)
                else:
                    _restore(known, roles, turn, plan)
                for row in [r for r in rows.values() if not r.active and r.verified and r.note == f"of {value}"]:
                    _restore(row, roles, turn, plan)
            continue
        row = rows[value] = LedgerRow(value, roles.new(f"{kind}_mentioned"), kind, False, turn, turn, order=order)
        order += 1
        plan.new.append(row)
        plan.roles.append(row.role)
    if plan.new or plan.restored or plan.renamed:
        plan.evicted = evict(rows, cap, needed_kinds, live_kinds)
    return plan


def _restore(row: LedgerRow, roles: _Roles, turn: int, plan: HarvestPlan) -> None:
    role = row.role
    row.active = True
    if row.role in roles.active:
        row.role = roles.new(row.kind)
    row.last_used_turn = max(row.last_used_turn, turn)
    roles.active.add(row.role)
    (plan.renamed if row.role != role else plan.restored).append(row)


def ledger_allowance(budget: int, share: float = LEDGER_SHARE) -> int:
    """Tokens the live ledger may fill in a class with this budget."""
    return max(0, int(budget * share))


def class_allowance(ticket_class) -> int:
    """The allowance of a ticket class (anything with `token_budget` and `ledger_share`)."""
    return ledger_allowance(ticket_class.token_budget, ticket_class.ledger_share)


def entry_tokens(row: LedgerRow) -> int:
    """What one entry costs in the ledger block: its rendered line and the line break."""
    # With its description at the most it may show: eviction must not undercount what a line costs.
    line = ledger_line(
        LedgerData(row.role, row.value, row.kind, row.verified, row.first_seen_turn, row.last_used_turn, note=row.note),
        cell(row.description, DESCRIPTION_CHARS),
    )
    return count_tokens(line) + 1


def needed(row: LedgerRow, needed_kinds: frozenset[str] | None) -> bool:
    """Whether a write may still take this entry: of a kind some write takes, and not superseded.
    None (a write takes any kind, or the rule is off): every entry may be needed."""
    if needed_kinds is None:
        return True
    return not row.superseded and row.kind in needed_kinds


def evict(
    rows: dict[str, LedgerRow],
    cap: int,
    needed_kinds: frozenset[str] | None = None,
    live_kinds: frozenset[str] = frozenset(),
) -> list[LedgerRow]:
    """Archive active rows until they fit `cap` tokens, by `eviction_key`: least recently used
    (a harvest counts as a use) first, entries tied to the ticket's live entities last. Never deletes.

    With `needed_kinds` (the kinds the domain's writes take), entries no write will need leave
    before any that one may: a catalogue listing's product IDs (a lookup can list them again)
    and superseded entries go before the payment method read at the start. The share then holds
    what calls need instead of what was seen last."""
    active = sorted(
        (r for r in rows.values() if r.active),
        key=lambda r: (eviction_key(r, live_kinds)[0], needed(r, needed_kinds), *eviction_key(r)[1:], r.order),
    )
    costs = [entry_tokens(r) for r in active]  # once each: counting tokens is most of a large harvest's work
    total = sum(costs)
    victims = []
    for victim, cost in zip(active, costs):
        if total <= cap:
            break
        victim.active = False
        total -= cost
        victims.append(victim)
    return victims


def fill(rows: dict[str, LedgerRow]) -> int:
    """Tokens the active entries take, as eviction counts them."""
    return sum(entry_tokens(r) for r in rows.values() if r.active)


# At or past this share of its allowance the ledger is "near full": the desk and the harness say so.
NEAR_FULL = 0.9


def near_full(tokens: int, cap: int) -> bool:
    return cap > 0 and tokens >= NEAR_FULL * cap


def touch(rows: dict[str, LedgerRow], values, turn: int) -> None:
    """IDs a tool call took as arguments: used, and last used now."""
    for value in values:
        row = rows.get(value)
        if row is not None:
            row.used = True
            row.last_used_turn = max(row.last_used_turn, turn)
