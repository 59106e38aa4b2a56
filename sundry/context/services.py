"""Writes to the lanes: ledger, state, rules, actions, money.

Each service records who changed what and at which turn, and announces the
change to watchers after commit (tickets.versions). Tool results reach the ledger only through
`ledger_harvest`, by schema.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass

from django.db import IntegrityError, transaction
from django.db.models import F, Max, PositiveIntegerField, Value
from django.db.models.functions import Greatest

from sundry.context import corrections, harvest
from sundry.context.models import (
    ActionTaken,
    LedgerEntry,
    MoneyTotal,
    PinnedRule,
    StateValue,
)
from sundry.context.rules import RuleRefused, candidate_rules, check_scope, infer_enforcement, plan_pin
from sundry.context.statefields import StateValueInvalid, validate_field
from sundry.tickets.models import Turn
from sundry.tickets.versions import ACTIONS, LEDGER, RULES, STATE, ticket_lock, ticket_touch
from sundry.tooling.domain import Domain, domain_for

ROLE_RE = re.compile(r"^[a-z][a-z0-9_]{0,59}$")


# --- ID ledger -------------------------------------------------------------------


def ledger_record_system_id(*, ticket, kind: str, value: str, role: str, turn: int) -> LedgerEntry:
    entry, _ = LedgerEntry.objects.get_or_create(
        ticket=ticket,
        value=value,
        defaults=dict(
            role=role,
            kind=kind,
            verified=True,
            first_seen_turn=turn,
            last_used_turn=turn,
            source="desk",
            used_in_call=True,
        ),
    )
    return entry


_LEDGER_ROW = (
    "id",
    "value",
    "role",
    "kind",
    "status",
    "verified",
    "used_in_call",
    "first_seen_turn",
    "last_used_turn",
    "note",
    "description",
    "superseded_by",
)


def _later(turn: int) -> Greatest:
    """`last_used_turn` raised to `turn`, never lowered."""
    return Greatest("last_used_turn", Value(turn), output_field=PositiveIntegerField())


def ledger_harvest(
    *,
    ticket,
    turn: int,
    tool_name: str,
    result,
    cap: int | None = None,
    used: list[str] = (),
    domain: Domain | None = None,
    arguments=None,
    bumped: bool = False,
) -> list[str]:
    """Record every identifier a structured tool result marks, as verified. Returns their roles.

    `used`: the IDs the call itself took as arguments. They count as used
    first (as `ledger_touch` leaves them), so the eviction below never picks the order the
    call just looked up ahead of what its result brought. `bumped`: the caller's transaction
    has just bumped the version for this result (its turn) and nothing read the lanes since,
    so the one bump covers these writes too (every reader outside the transaction sees both
    or neither); otherwise the harvest bumps. `arguments`: the call's, so a lookup
    that answered verifies the IDs it was asked about (`Domain.looked_up`). Roles, changes and
    eviction are worked out on plain rows by `harvest.plan_harvest`. What the result
    marks is read from the domain's declaration of the tool.
    """
    domain = domain or domain_for(ticket.ticket_class)
    found = [(value, kind) for _path, kind, value in domain.ids(tool_name, result)]
    if arguments is not None:  # a lookup that answered verifies what it was asked about
        data = result.model_dump(mode="json") if hasattr(result, "model_dump") else result
        found += domain.looked_up(tool_name, arguments, data)
    found = list(dict.fromkeys(found))
    return ledger_harvest_found(
        ticket=ticket,
        turn=turn,
        tool_name=tool_name,
        found=found,
        cap=cap,
        used=used,
        owners=domain.owners(tool_name, result) if found else {},
        descriptions=domain.descriptions(tool_name, result) if found else {},
        bumped=bumped,
    )


def ledger_harvest_found(
    *,
    ticket,
    turn: int,
    tool_name: str,
    found: list[tuple[str, str]],
    cap: int | None = None,
    used: list[str] = (),
    owners: dict[str, str] | None = None,
    descriptions: dict[str, str] | None = None,
    bumped: bool = False,
) -> list[str]:
    """`ledger_harvest` for IDs already read from a result: (value, kind) pairs, the owner each nested
    one belongs to, and what each is (a tool server's result, read by its declaration file)."""
    if not found:
        ledger_touch(ticket=ticket, values=used, turn=turn)
        return []
    with transaction.atomic(savepoint=False):
        if not bumped:
            # The ticket row first, then its ledger rows (see tickets.versions).
            ticket_touch(ticket.pk, LEDGER)
        rows, versions = _ledger_rows_versioned(ticket)
        touched = set(used) & set(rows)  # before the plan adds its new rows to `rows`
        rows = _touched(rows, touched, turn)  # written with the plan's writes: no statement of its own
        plan = harvest.plan_harvest(
            rows,
            found,
            turn=turn,
            cap=cap or harvest.class_allowance(ticket.ticket_class),
            notes={v: f"of {o}" for v, o in (owners or {}).items()},
            descriptions=descriptions or {},
            needed_kinds=_needed_kinds(
                ticket, {**rows, **{v: harvest.LedgerRow(v, "", k, True, 0, 0) for v, k in found}}
            ),
            live_kinds=_live_kinds(ticket),
        )
        _apply_plan(ticket.pk, plan, turn=turn, source=tool_name, rows=rows, versions=versions, touched=touched)
    return plan.roles


def _touched(rows: dict[str, harvest.LedgerRow], used, turn: int) -> dict[str, harvest.LedgerRow]:
    """The rows as `ledger_touch(values=used)` would leave them: used in a call, last used at `turn` or later."""
    return {
        v: (dataclasses.replace(r, used=True, last_used_turn=max(r.last_used_turn, turn)) if v in used else r)
        for v, r in rows.items()
    }


def ledger_mark_customer(*, ticket, values: list[str], customer: str, identifies: list[str] = ()) -> None:
    """Whose the entries are: `customer` owns `values` (a result's declared customer path); the
    `identifies` values were returned by a lookup that identifies this ticket's own customer."""
    if customer and values:
        LedgerEntry.objects.filter(ticket=ticket, value__in=values).exclude(customer=customer).update(
            customer=customer, version=F("version") + 1
        )
    if identifies:
        LedgerEntry.objects.filter(ticket=ticket, value__in=list(identifies), identifies_customer=False).update(
            identifies_customer=True, customer=F("value"), version=F("version") + 1
        )


def customer_typed_ids(ticket, text: str) -> list[tuple[str, str]]:
    """(value, kind) of the IDs the class's domain recognises in what a person typed."""
    return [(value, kind) for kind, value in domain_for(ticket.ticket_class).typed_ids(text)]


def ledger_note_customer_ids(*, ticket, turn: int, text: str) -> list[str]:
    """IDs a customer typed: new ones enter the ledger UNVERIFIED until a lookup returns them;
    ones a tool returned before come back into the window (`harvest.plan_mentions`).
    Runs in the message's own transaction, whose turn already moved the version.
    Returns the roles of the new entries."""
    return ledger_note_typed(ticket=ticket, turn=turn, found=customer_typed_ids(ticket, text))


def ledger_note_customer_message(
    *, ticket, turn: int, text: str, found: list[tuple[str, str]]
) -> list[corrections.Correction]:
    """A customer's message's IDs (`found`, every format the class reads) into the ledger, and the
    corrections it makes (`corrections.plan`) onto it. In the message's transaction. Returns the corrections."""
    found = list(dict.fromkeys(found))
    if not found:
        return []  # no ID typed: nothing to note, and a correction names the ID it brings
    # The ledger is read once: the corrections judge it as it was before the message, the notes
    # are planned on it (the plan changes its rows in place: `known` is taken first).
    rows, versions = _ledger_rows_versioned(ticket)
    known = [corrections.Known(r.value, r.kind, r.last_used_turn, superseded=r.superseded) for r in rows.values()]
    ledger_note_typed(ticket=ticket, turn=turn, found=found, read=(rows, versions))
    made = corrections.plan(text, found, known)
    for c in made:
        ledger_supersede(ticket=ticket, old=c.old, new=c.new, turn=turn, source="customer")
    return made


def ledger_supersede(*, ticket, old: str, new: str, turn: int, source: str, user=None) -> LedgerEntry:
    """Mark `old` as corrected to `new`, with the turn and who said so (as state values keep theirs).
    `new` enters the ledger unverified when it is not there yet. Never deletes; a later correction
    of the same entry replaces the earlier one."""
    new = (new or "").strip()
    with transaction.atomic():
        ticket_lock(ticket.pk)  # lock order: the ticket row first, then lane rows (see tickets.versions)
        entry = LedgerEntry.objects.select_for_update().filter(ticket=ticket, value=old).first()
        if entry is None:
            raise StateValueInvalid(f"'{old}' is not in this ticket's ledger.")
        if not new or len(new) > 120 or not new.isprintable():
            raise StateValueInvalid("Give the value that replaces it (at most 120 printable characters).")
        if new == old:
            raise StateValueInvalid("A value cannot replace itself.")
        if not LedgerEntry.objects.filter(ticket=ticket, value=new).exists():
            ledger_note_typed(ticket=ticket, turn=turn, found=[(new, entry.kind)], source=source)
        entry.superseded_by, entry.superseded_at_turn = new, turn
        entry.superseded_source, entry.superseded_by_user = source, user
        entry.version += 1
        entry.save(
            update_fields=["superseded_by", "superseded_at_turn", "superseded_source", "superseded_by_user", "version"]
        )
        ticket_touch(ticket.pk, LEDGER)
    return entry


def ledger_note_typed(
    *, ticket, turn: int, found: list[tuple[str, str]], source: str = "customer", read=None
) -> list[str]:
    """`ledger_note_customer_ids` for IDs already found in what a person typed: (value, kind) pairs.
    `read`: the ledger as the caller read it under the ticket's row lock (`_ledger_rows_versioned`)."""
    if not found:
        return []
    rows, versions = _ledger_rows_versioned(ticket) if read is None else read
    plan = harvest.plan_mentions(
        rows,
        found,
        turn=turn,
        cap=harvest.class_allowance(ticket.ticket_class),
        needed_kinds=_needed_kinds(ticket, rows),
        live_kinds=_live_kinds(ticket),
    )
    _apply_plan(ticket.pk, plan, turn=turn, source=source, rows=rows, versions=versions)
    return [r.role for r in plan.new]


def _apply_plan(
    ticket_id: int,
    plan: harvest.HarvestPlan,
    *,
    turn: int,
    source: str,
    rows: dict[str, harvest.LedgerRow],
    versions: dict[str, int],
    touched: set[str] = frozenset(),
) -> None:
    """Write a plan in one statement: every new and changed row as it ends, upserted on (ticket,
    value). `rows` (as the plan left them: it updates them in place) and `versions`: the ledger as
    read under the ticket's row lock (every ledger writer takes it first), so each row's end
    state is worked out here; `touched`: rows used by the call, changed only by that (no version
    of their own, as `ledger_touch`)."""
    Status = LedgerEntry.Status
    ending: dict[str, dict] = {v: {} for v in touched}  # value → the fields that change

    def change(r: harvest.LedgerRow, bump: bool = True, **fields) -> None:
        end = ending.setdefault(r.value, {})
        end.update(fields)
        if bump:
            end["version"] = end.get("version", 0) + 1

    later = {"verified": True, "last_used_turn": turn}  # last use only moves forward (below)
    for r in plan.seen_again:
        change(r, **later)
    for r in plan.restored:
        change(r, status=Status.ACTIVE, **later)
    for r in plan.renamed:  # a mentioned ID verified, or a restored one whose role was taken: rare
        change(r, role=r.role, status=Status.ACTIVE, **later)
    for r in plan.described:  # a later result says what the ID is now (an order cancelled)
        change(r, bump=False, description=r.description)
    for r in plan.evicted:
        if r.id is not None:
            change(r, status=Status.ARCHIVED)
    entries = [
        LedgerEntry(
            ticket_id=ticket_id,
            value=r.value,
            role=r.role,
            kind=r.kind,
            status=Status.ACTIVE if r.active else Status.ARCHIVED,  # a new row that leaves at once is archived
            verified=r.verified,
            used_in_call=False,
            first_seen_turn=turn,
            last_used_turn=turn,
            source=source,
            note=r.note,
            version=1 if r.active else 2,
            description=r.description,
        )
        for r in plan.new
    ]
    for value, end in ending.items():
        r = rows[value]
        entries.append(
            LedgerEntry(
                ticket_id=ticket_id,
                value=value,
                role=end.get("role", r.role),
                kind=r.kind,
                status=end.get("status", Status.ACTIVE if r.active else Status.ARCHIVED),
                verified=end.get("verified", r.verified),
                used_in_call=r.used,
                first_seen_turn=r.first_seen_turn,
                last_used_turn=max(r.last_used_turn, end.get("last_used_turn", 0)),
                source=source,
                note=r.note,
                version=versions[value] + end.get("version", 0),
                description=end.get("description", r.description),
            )
        )
    if entries:
        # Rows archived first: a role an archived row gives up is free before another row takes it.
        entries.sort(key=lambda e: e.status != Status.ARCHIVED)
        LedgerEntry.objects.bulk_create(
            entries,
            update_conflicts=True,
            unique_fields=["ticket", "value"],
            update_fields=["role", "status", "verified", "used_in_call", "last_used_turn", "description", "version"],
        )


def ledger_touch(*, ticket, values: list[str], turn: int) -> None:
    """Mark entries used by a tool call; eviction goes by last use."""
    if values:
        LedgerEntry.objects.filter(ticket=ticket, value__in=list(values)).update(
            last_used_turn=_later(turn), used_in_call=True
        )


def ledger_evict(*, ticket, cap: int) -> list[str]:
    """Archive active entries past `cap` tokens in `eviction_key` order. Never deletes. Returns their values."""
    rows = _ledger_rows(ticket)
    victims = harvest.evict(rows, cap, _needed_kinds(ticket, rows), _live_kinds(ticket))
    _archive([v.id for v in victims])
    return [v.value for v in victims]


def _live_kinds(ticket) -> frozenset[str]:
    """The ID kinds the class's domain says a ticket is about: the ledger keeps them longest."""
    return domain_for(ticket.ticket_class).live_id_kinds()


def _needed_kinds(ticket, rows: dict[str, harvest.LedgerRow]) -> frozenset[str] | None:
    """The kinds the class's writes take: entries of other kinds, or superseded ones, leave the window
    first. None (last use alone) when the ledger holds kinds the class's domain does not declare:
    a tool server's, whose writes this domain cannot speak for."""
    if not harvest.EVICT_BY_NEED:
        return None
    domain = domain_for(ticket.ticket_class)
    known = set(domain.id_patterns) | {
        k for t in domain.tools.values() for k in (*t.args.values(), *t.results.values())
    }
    return domain.write_kinds if all(r.kind in known for r in rows.values()) else None


def _ledger_rows(ticket) -> dict[str, harvest.LedgerRow]:
    """Every ledger entry of the ticket (any status), as the pure plans take them."""
    return _ledger_rows_versioned(ticket)[0]


def _ledger_rows_versioned(ticket) -> tuple[dict[str, harvest.LedgerRow], dict[str, int]]:
    """`_ledger_rows`, and each entry's version (by value)."""
    active = LedgerEntry.Status.ACTIVE
    rows, versions = {}, {}
    for (
        pk,
        value,
        role,
        kind,
        status,
        verified,
        used_in_call,
        first,
        last,
        note,
        description,
        superseded_by,
        version,
    ) in LedgerEntry.objects.filter(ticket=ticket).values_list(*_LEDGER_ROW, "version"):
        rows[value] = harvest.LedgerRow(
            value,
            role,
            kind,
            verified,
            first,
            last,
            active=status == active,
            used=used_in_call,
            order=pk,
            note=note,
            id=pk,
            description=description,
            superseded=bool(superseded_by),
        )
        versions[value] = version
    return rows, versions


def _archive(ids: list[int]) -> None:
    if ids:
        LedgerEntry.objects.filter(pk__in=ids).update(status=LedgerEntry.Status.ARCHIVED, version=F("version") + 1)


class LaneConflict(Exception):
    """An edit based on a stale version; carries the current row."""

    def __init__(self, message: str, current=None):
        super().__init__(message)
        self.current = current


def ledger_rename(*, ticket, value: str, role: str, turn: int, expected_version: int | None = None) -> LedgerEntry:
    role = (role or "").strip().lower().replace(" ", "_").replace("-", "_")
    if not ROLE_RE.match(role):
        raise StateValueInvalid("A role is lower-case letters, digits and underscores, starting with a letter.")
    with transaction.atomic():
        ticket_lock(ticket.pk)  # lock order: the ticket row first, then lane rows (see tickets.versions)
        entry = LedgerEntry.objects.select_for_update().filter(ticket=ticket, value=value).first()
        if entry is None:
            raise StateValueInvalid(f"'{value}' is not in this ticket's ledger.")
        if expected_version is not None and entry.version != expected_version:
            raise LaneConflict("Someone renamed this entry first.", current=entry)
        if LedgerEntry.objects.filter(ticket=ticket, role=role, status="active").exclude(pk=entry.pk).exists():
            raise StateValueInvalid(f"The role '{role}' is already used by another entry.")
        entry.role = role
        entry.version += 1
        entry.last_used_turn = max(entry.last_used_turn, turn)
        entry.save()
        ticket_touch(ticket.pk, LEDGER)
    return entry


# --- State ------------------------------------------------------------------------


def _exists_for(ticket):
    """Whether an ID a state field names exists for the ticket's customer (True where the domain cannot tell)."""
    domain = domain_for(ticket.ticket_class)
    return lambda kind, value: domain.exists(kind, value, ticket.customer.external_key) is not False


def state_set(
    *,
    ticket,
    name: str,
    value: str,
    turn: int,
    source: str,
    confirmed: bool = False,
    user=None,
    expected_current_id: int | None = None,
    check_conflict: bool = False,
) -> StateValue:
    """Set a state field. Validates first; a changed value supersedes the old one, never overwrites it.

    Staff edits pass `check_conflict=True` with the id of the value they saw:
    if another edit landed first, `LaneConflict` carries the current value.
    """
    clean = validate_field(name, value, domain=domain_for(ticket.ticket_class), exists=_exists_for(ticket))
    with transaction.atomic():
        ticket_lock(ticket.pk)
        current = StateValue.objects.select_for_update().filter(ticket=ticket, name=name, is_current=True).first()
        if check_conflict and (current.pk if current else None) != expected_current_id:
            raise LaneConflict("This field changed since you opened it.", current=current)
        if current is not None and current.value == clean:
            if confirmed and not current.confirmed:
                current.confirmed = True
                current.changed_by = user
                current.save(update_fields=["confirmed", "changed_by"])
                ticket_touch(ticket.pk, STATE)
            return current
        if current is not None:
            current.is_current = False
            current.superseded_at_turn = turn
            current.save(update_fields=["is_current", "superseded_at_turn"])
        new = StateValue.objects.create(
            ticket=ticket, name=name, value=clean, turn=turn, source=source, confirmed=confirmed, changed_by=user
        )
        if current is not None:
            StateValue.objects.filter(pk=current.pk).update(superseded_by=new)
        ticket_touch(ticket.pk, STATE)
    return new


def state_confirm(*, ticket, value_id: int, user) -> StateValue:
    with transaction.atomic():
        ticket_lock(ticket.pk)
        row = StateValue.objects.select_for_update().get(pk=value_id, ticket=ticket)
        if not row.is_current:
            raise LaneConflict("That value was superseded; confirm the current one.", current=None)
        row.confirmed = True
        row.changed_by = user
        row.save(update_fields=["confirmed", "changed_by"])
        ticket_touch(ticket.pk, STATE)
    return row


# --- Actions and money ---------------------------------------------------------------


@dataclass
class ActionOutcome:
    action: ActionTaken
    created: bool


def action_record(
    *,
    ticket,
    tool: str,
    target: str,
    arguments: dict,
    result: dict,
    turn: int,
    idempotency_key: str,
    reversible: bool,
    amount_cents: int | None = None,
    currency: str = "",
) -> ActionOutcome:
    """Record a side effect at tool success. The same key records once."""
    try:
        with transaction.atomic():
            action = ActionTaken.objects.create(
                ticket=ticket,
                tool=tool,
                target=target,
                arguments=arguments,
                result=result,
                turn=turn,
                idempotency_key=idempotency_key,
                reversible=reversible,
                amount_cents=amount_cents,
                currency=currency,
            )
    except IntegrityError:
        return ActionOutcome(ActionTaken.objects.get(ticket=ticket, idempotency_key=idempotency_key), False)
    ticket_touch(ticket.pk, ACTIONS)
    return ActionOutcome(action, True)


def money_observe(*, ticket, order: str, currency: str, paid_cents: int, refunded_cents: int, turn: int) -> None:
    """A tool reported the shop's figures for an order: they are the truth.

    One upsert on the (ticket, order) constraint: a concurrent writer's figures
    are as true as ours. Runs in the step whose turn already moved the version.
    """
    MoneyTotal.objects.bulk_create(
        [
            MoneyTotal(
                ticket_id=ticket.pk,
                order=order,
                currency=currency,
                paid_cents=paid_cents,
                refunded_cents=refunded_cents,
                turn=turn,
            )
        ],
        update_conflicts=True,
        unique_fields=["ticket", "order"],
        update_fields=["currency", "paid_cents", "refunded_cents", "turn"],
    )


def money_add_refund(*, ticket, order: str, amount_cents: int, turn: int) -> None:
    """Money moved on an order whose result reported no figures: it adds to what the lane holds.
    An order the lane has no figures for stays unknown here; the action still records the amount."""
    MoneyTotal.objects.filter(ticket=ticket, order=order).update(
        refunded_cents=F("refunded_cents") + amount_cents, turn=turn
    )


# --- Pinned rules ----------------------------------------------------------------------


def rule_add_candidate(*, ticket, text: str, turn: int, source: str, domain: Domain | None = None) -> PinnedRule | None:
    """A possible rule for staff to confirm; None if the same text is already known.

    `domain`: the tools the class really offers (a class with tool servers: theirs), which the
    rule's check names; the class's own domain by default. The guard reads the rule's text
    against the tools of each call again, so a rule mapped onto other tools still holds."""
    text = (text or "").strip()
    if not text or PinnedRule.objects.filter(ticket=ticket, text=text).exists():
        return None
    return PinnedRule.objects.create(
        ticket=ticket,
        text=text,
        turn=turn,
        source=source,
        status=PinnedRule.Status.CANDIDATE,
        enforcement=infer_enforcement(text, domain or domain_for(ticket.ticket_class)),
        changed_at_turn=turn,
    )


def rule_flag_candidates(
    *, ticket, turn: int, text: str, source: str, domain: Domain | None = None
) -> list[PinnedRule]:
    """The classifier pass over a customer or staff message."""
    made = [
        r
        for s in candidate_rules(text)
        if (r := rule_add_candidate(ticket=ticket, text=s, turn=turn, source=source, domain=domain))
    ]
    if made:
        ticket_touch(ticket.pk, RULES)
    return made


def rule_pin(
    *,
    ticket,
    text: str,
    turn: int,
    source: str,
    scope: str = "ticket",
    scope_ref: str = "",
    user=None,
    stated_turn: int | None = None,
) -> PinnedRule:
    """Pin a rule. Staff (or a customer's own statement) put it in force, activating the candidate
    the classifier flagged for the same sentence; the model adds restrictions only, within its
    authority (`rules.plan_pin`), and its own new rules stay candidates until staff confirm them."""
    text = (text or "").strip()
    if not text:
        raise StateValueInvalid("A rule needs its text.")
    with transaction.atomic():
        ticket_lock(ticket.pk)
        rule = PinnedRule.objects.select_for_update().filter(ticket=ticket, text=text).first()
        try:
            scope_ref = check_scope(scope, scope_ref, orders=_verified_orders(ticket) if scope == "order" else set())
            if rule is not None:
                rule.confirmed = rule.changed_by_id is not None
            plan = plan_pin(rule, source=source, scope=scope, scope_ref=scope_ref)
        except RuleRefused as exc:
            raise StateValueInvalid(str(exc)) from exc
        if rule is None:
            rule = PinnedRule(ticket=ticket, text=text, turn=stated_turn or turn, source=source)
        rule.status = plan.status
        rule.scope, rule.scope_ref = plan.scope, plan.scope_ref
        rule.enforcement = rule.enforcement or infer_enforcement(text, domain_for(ticket.ticket_class))
        rule.changed_by, rule.changed_at_turn = user, turn
        rule.version = (rule.version or 0) + 1
        rule.save()
        ticket_touch(ticket.pk, RULES)
    return rule


def rule_decide(
    *,
    ticket,
    rule_id: int,
    decision: str,
    user,
    turn: int,
    expected_version: int | None = None,
    scope: str | None = None,
    scope_ref: str | None = None,
) -> PinnedRule:
    """Staff confirm, dismiss or re-scope a rule or candidate."""
    statuses = {"confirm": PinnedRule.Status.ACTIVE, "dismiss": PinnedRule.Status.DISMISSED, "scope": None}
    if decision not in statuses:
        raise StateValueInvalid("Decision must be confirm, dismiss or scope.")
    with transaction.atomic():
        ticket_lock(ticket.pk)
        rule = PinnedRule.objects.select_for_update().get(pk=rule_id, ticket=ticket)
        if expected_version is not None and rule.version != expected_version:
            raise LaneConflict("This rule changed since you opened it.", current=rule)
        if statuses[decision]:
            rule.status = statuses[decision]
        if scope:
            try:
                ref = check_scope(
                    scope, scope_ref or "", orders=_verified_orders(ticket) if scope == "order" else set()
                )
            except RuleRefused as exc:
                raise StateValueInvalid(str(exc)) from exc
            rule.scope, rule.scope_ref = scope, ref
        rule.changed_by, rule.changed_at_turn = user, turn
        rule.version += 1
        rule.save()
        ticket_touch(ticket.pk, RULES)
    return rule


def _verified_orders(ticket) -> set[str]:
    """The orders a rule may be scoped to: those a tool returned on this ticket."""
    return set(LedgerEntry.objects.filter(ticket=ticket, kind="order", verified=True).values_list("value", flat=True))


def rules_carry_customer_scope(*, ticket) -> int:
    """Copy the customer's active customer-scoped rules from their other tickets onto a new one.

    A rule the model pinned carries only once staff confirmed it (a staff member changed it)."""
    seen = set(PinnedRule.objects.filter(ticket=ticket).values_list("text", flat=True))
    made = 0
    for rule in (
        PinnedRule.objects.filter(
            ticket__customer_id=ticket.customer_id, scope=PinnedRule.Scope.CUSTOMER, status=PinnedRule.Status.ACTIVE
        )
        .exclude(ticket=ticket)
        .exclude(source__in=("model", "summariser"), changed_by__isnull=True)
        .order_by("id")
    ):
        if rule.text in seen:
            continue
        seen.add(rule.text)
        PinnedRule.objects.create(
            ticket=ticket,
            text=rule.text,
            scope=rule.scope,
            turn=0,
            source=rule.source,
            status=PinnedRule.Status.ACTIVE,
            enforcement=rule.enforcement,
            changed_at_turn=0,
        )
        made += 1
    return made


def rule_close_scope(*, ticket, scope: str, scope_ref: str = "", turn: int) -> int:
    """A scope closed (an order's case finished, the ticket resolved): its rules leave the lane."""
    qs = PinnedRule.objects.filter(ticket=ticket, scope=scope, status__in=["active", "candidate"])
    if scope_ref:
        qs = qs.filter(scope_ref=scope_ref)
    n = qs.update(status=PinnedRule.Status.CLOSED, changed_at_turn=turn, version=F("version") + 1)
    if n:
        ticket_touch(ticket.pk, RULES)
    return n


def last_turn(ticket) -> int:
    return Turn.objects.filter(ticket=ticket).aggregate(n=Max("number"))["n"] or 0
