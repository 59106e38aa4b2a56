"""Guards that run in code before any tool executes (SPEC §4, §10).

Pure logic: plain data in, a verdict out. The guards only know what the
request showed the model (ledger, recent tool results, rules, state); they
never ask the shop, so an injected or mutated ID cannot talk its way through.
What a tool is (a lookup, a refund, what consent it needs) comes from the
domain's declaration (`tooling.domain`), never from its name.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field

from pydantic import BaseModel, ValidationError

from sundry.agent.guards import (
    addressee,
    approvals,
    cards,
    consent,
    refusals,
    replycheck,
    replyclaims,
    spending,
    unfinished,
)
from sundry.agent.provider import strictjson
from sundry.context.internaltext import InternalText, describe, quotes
from sundry.context.lanes import ActionData, LedgerData, MoneyData, RuleData
from sundry.context.rules import infer_enforcement
from sundry.core import money
from sundry.tooling.domain import Domain, RefundDecl, arguments_digest, get_domain
from sundry.tooling.tools import Tool


@dataclass(frozen=True)
class GuardInput:
    tool: Tool
    arguments: dict | str
    ledger: list[LedgerData] = field(default_factory=list)
    recent_ids: frozenset[str] = frozenset()
    recent_text_ids: frozenset[str] = frozenset()
    rules: list[RuleData] = field(default_factory=list)
    actions: list[ActionData] = field(default_factory=list)
    money: list[MoneyData] = field(default_factory=list)
    approval_rules: dict = field(default_factory=dict)  # as stored on the class; read by approvals.rule_for
    approved: bool = False
    # The domain whose declarations say what each tool is (None: the default domain).
    domain: Domain | None = None
    # Tools that may take an ID the customer typed (None: the domain's lookups).
    lookup_tools: frozenset[str] | None = None
    # The conversation the request showed (customer messages and staff notes), for the consent
    # guard; None when the caller has none to judge by (the harness' ID checks).
    said: tuple[consent.Said, ...] | None = None
    # Current state fields: name → (value, confirmed).
    state: dict = field(default_factory=dict)
    # Internal-only text the request showed, which a tool's customer_text arguments must not quote.
    internal: InternalText | None = None
    # What the customer's tickets refunded or hold over the class's window, so thresholds apply to
    # running totals (agent.spending); None judges each call alone (the harness' replays).
    window: spending.Window | None = None
    # The customer (or staff on their behalf) confirmed this exact call on its card.
    confirmed: bool = False
    # Candidate rules of the customer's that the confirmed card quoted: they confirmed the call anyway.
    overridden_rules: frozenset[int] = frozenset()
    # Open and declined cards and holds (`replyclaims.Proposal`), for a tool's customer text that says
    # an action is pending, will happen or was declined; read only for a tool with customer text.
    proposals: tuple = ()
    # The statuses, dates and figures of the ticket's records now (`tooling.records.RecordState`), for a
    # tool's customer text that states them (None: the domain states none), or a function reading them
    # when a sentence first needs them; read only for such a tool.
    states: object = None
    # The day the text is written (shop's time zone, UTC), or a function giving it: "15 days ago" in it
    # counts from that day (none: such a time is not judged).
    today: object = ()
    # The descriptions of the tools declared to the model and of their parameters
    # (`replycheck.declared_texts`): a tool's customer text that is one of them is Sundry's words.
    declared: tuple[str, ...] = ()
    # Every identifier the request showed, as the reply check reads them (`answer.known_identifiers`): an
    # identifier in a tool's customer text that is none of them is invented. None: not judged (a replay).
    known: frozenset[str] | None = None


@dataclass(frozen=True)
class GuardVerdict:
    decision: str  # allow, reject, hold, confirm (a card the customer must confirm)
    guard: str = ""  # schema, rule, id, unverified_id, mutation, internal_text, invented_id, unfinished, refund_limit, confirmation, repeat, approval (the loop adds duplicate)
    reason: str = ""
    args: BaseModel | None = None
    details: dict = field(default_factory=dict)

    @property
    def allowed(self) -> bool:
        return self.decision == "allow"


def _domain(inp: GuardInput) -> Domain:
    return inp.domain or get_domain()


def _lookups(inp: GuardInput) -> frozenset[str]:
    return inp.lookup_tools if inp.lookup_tools is not None else _domain(inp).lookup_tools


def _reject(guard: str, reason: str, args=None, **details) -> GuardVerdict:
    return GuardVerdict("reject", guard, reason, args, details)


def levenshtein_at_most_one(a: str, b: str) -> bool:
    """True when a and b differ by at most one insert, delete or substitution."""
    if a == b:
        return True
    if abs(len(a) - len(b)) > 1:
        return False
    if len(a) < len(b):
        a, b = b, a
    i = next((k for k, (x, y) in enumerate(zip(a, b)) if x != y), len(b))
    return a[i + 1 :] == (b[i + 1 :] if len(a) == len(b) else b[i:])


def _swapped_pair(a: str, b: str) -> bool:
    # Two neighbouring characters swapped (AB-20481 -> AB-20418): the commonest
    # copying slip, two edits for Levenshtein but one for a human.
    if len(a) != len(b) or a == b:
        return False
    i = next(k for k, (x, y) in enumerate(zip(a, b)) if x != y)
    return a[i : i + 2] == b[i : i + 2][::-1] and a[i + 2 :] == b[i + 2 :]


def ids_in_arguments(tool: Tool, args: BaseModel | dict) -> list[tuple[str, str, str]]:
    """(arg, kind, value) for every identifier argument; list values yield one row each."""
    out = []
    for name, kind in tool.id_args.items():
        value = args.get(name) if isinstance(args, dict) else getattr(args, name, None)
        for v in value if isinstance(value, (list, tuple, set, frozenset)) else [value]:
            if v is not None and v != "":
                out.append((name, kind, str(v)))
    return out


def amount_minor(args: BaseModel, refund: RefundDecl | None = None) -> int | None:
    """An amount argument in minor units: `amount_cents`, or decimal `amount` + `currency`
    (the argument names a refund declaration gives)."""
    cents = getattr(args, "amount_cents", None)
    if cents is not None:
        return int(cents)
    amount = getattr(args, refund.amount if refund else "amount", None)
    if amount is None:
        return None
    try:
        return money.parse_major(
            amount if isinstance(amount, str) else str(amount),
            str(getattr(args, refund.currency if refund else "currency", "")),
            allow_negative=True,
        )
    except money.MoneyError:
        return None


def _fmt(cents: int, currency: str) -> str:
    try:
        return money.format_money(cents, currency)
    except money.MoneyError:  # a currency that is not a code: still say the figure
        return f"{cents} minor units of {currency!r}"


def _parse(inp: GuardInput) -> GuardVerdict | BaseModel:
    raw = inp.arguments
    if isinstance(raw, str):
        try:
            raw = strictjson.loads(raw) if raw.strip() else {}
        except json.JSONDecodeError as exc:
            return _reject(
                "schema",
                f"Arguments for {inp.tool.name} are not valid JSON ({exc.msg} at position {exc.pos}). Send a JSON object matching the tool's schema.",
            )
        except strictjson.NonStandardJSON as exc:
            return _reject(
                "schema",
                f"Arguments for {inp.tool.name} are not valid JSON: {exc}. Send a JSON object matching the tool's schema.",
            )
    if not isinstance(raw, dict):
        return _reject("schema", f"Arguments for {inp.tool.name} must be a JSON object, not {type(raw).__name__}.")
    try:
        return inp.tool.args_model.model_validate(raw)
    except ValidationError as exc:
        problems = [f"{'.'.join(str(p) for p in e['loc']) or '(arguments)'}: {e['msg']}" for e in exc.errors()[:5]]
        return _reject(
            "schema",
            f"Invalid arguments for {inp.tool.name}: " + "; ".join(problems) + ". Fix these fields and call again.",
            problems=problems,
        )


def _rule_covers(enforcement: dict, tool: Tool, args) -> bool:
    """A rule naming its orders covers an order action on those orders, or on an
    ID one slip away from them; any other rule, or a call that targets no order, is covered whole."""
    only_on = enforcement.get("only_on") or ()
    if not only_on or tool.name not in enforcement.get("narrowed_tools", ()):
        return True
    targets = _target(tool, args)
    if not targets:
        return True
    return any(t == o or levenshtein_at_most_one(t, o) or _swapped_pair(t, o) for t in targets for o in only_on)


def _rule_checks(rule: RuleData, domain: Domain) -> list[dict]:
    """A rule's checks: the one stored when it was made, and its text read again against the tools
    this call is judged among. A rule inferred for other tools (a class whose tools come from a
    tool server, a rule carried from another class's ticket) still blocks what it forbids here."""
    return [e for e in (rule.enforcement or {}, infer_enforcement(rule.text, domain)) if e]


def _blocking_rules(inp: GuardInput, args) -> list[RuleData]:
    domain = _domain(inp)
    return [
        rule
        for rule in inp.rules
        if rule.id not in inp.overridden_rules
        and any(
            inp.tool.name in e.get("block_tools", ()) and _rule_covers(e, inp.tool, args)
            for e in _rule_checks(rule, domain)
        )
    ]


def _check_rules(inp: GuardInput, args) -> GuardVerdict | None:
    """A confirmed rule refuses the call. A rule only flagged from the customer's own words (a
    candidate) may have been read too widely ("don't cancel it *yet*"): a write it would block
    becomes a card quoting it, and the customer decides; a staff rule, or a call the customer
    cannot confirm (a lookup, a lane edit), is refused as before."""
    blocking = _blocking_rules(inp, args)
    if not blocking:
        return None
    askable = (
        inp.tool.side_effect
        and not inp.tool.local
        and not inp.approved
        and inp.said is not None
        and all(not r.confirmed and r.source == "customer" for r in blocking)
    )
    if askable:
        quoted = [{"id": r.id, "text": r.text, "turn": r.turn} for r in blocking]
        return GuardVerdict("confirm", "rule", "", args, {"rules": quoted})
    rule = blocking[0]
    what = "Pinned rule" if rule.confirmed else "Rule flagged (unconfirmed, in force until staff decide)"
    reason = (
        f'{what} from turn {rule.turn} (scope: {rule.scope}) forbids {inp.tool.name}: "{rule.text}". '
        f"Do not call {inp.tool.name}; do what the rule allows instead, or explain to the customer."
    )
    return _reject("rule", reason, args, rule_id=rule.id, rule_text=rule.text, rule_turn=rule.turn)


def _hint(kind: str, lookups: frozenset[str], domain: Domain) -> str:
    names = [n for n in domain.lookup_hints.get(kind, ()) if n in lookups]
    return " or ".join(names) if names else "the lookup tool that returns it"


def id_usable(value: str, *, lookup: bool, ledger, recent, typed) -> bool:
    """The ID guard's rule for one value: verified in the ledger's window or in a recent tool
    result; a lookup may also take what was typed (unverified) to verify it. The safety harness
    judges every recorded ID by this same function."""
    active = [e for e in ledger if not e.archived]
    if value in {e.value for e in active if e.verified} or value in recent:
        return True
    return lookup and value in ({e.value for e in active if not e.verified} | set(typed))


def _check_ids(inp: GuardInput, args) -> GuardVerdict | None:
    ledger = [e for e in inp.ledger if not e.archived]
    unverified = {e.value for e in ledger if not e.verified} | set(inp.recent_text_ids)
    lookups = _lookups(inp)
    is_lookup = inp.tool.name in lookups
    for arg, kind, value in ids_in_arguments(inp.tool, args):
        if id_usable(value, lookup=is_lookup, ledger=ledger, recent=inp.recent_ids, typed=inp.recent_text_ids):
            continue
        hint = _hint(kind, lookups, _domain(inp))
        # Ledger entries first (they carry a role), verified before unverified.
        known = [(e.value, f"ledger entry [{e.role}]", e.role) for e in sorted(ledger, key=lambda e: not e.verified)]
        known += [(v, "a recent tool result", "") for v in sorted(inp.recent_ids)]
        near = next(
            (
                (v, where, role)
                for v, where, role in known
                if v != value and (levenshtein_at_most_one(value, v) or _swapped_pair(value, v))
            ),
            None,
        )
        if near:
            v, where, role = near
            return _reject(
                "mutation",
                f"{arg} '{value}' is one edit away from {where} {v} — a probable mutation. "
                f"Copy the value verbatim from the ID ledger; if you meant a different {kind}, look it up with {hint} first.",
                args,
                arg=arg,
                value=value,
                mutation_of=v,
                role=role,
            )
        if value in unverified:
            return _reject(
                "unverified_id",
                f"{arg} '{value}' was typed by the customer and is not verified. "
                f"Verify it with {hint} first, then act on the value the tool returns.",
                args,
                arg=arg,
                value=value,
            )
        return _reject(
            "id",
            f"{arg} '{value}' is not in the ID ledger or in a recent tool result. "
            f"Look it up again with {hint}; never type an ID from memory.",
            args,
            arg=arg,
            value=value,
        )
    return None


def _target(tool: Tool, args) -> set[str]:
    # Tools without a target repeat per customer.
    value = getattr(args, tool.target_arg or "customer_id", None)
    values = value if isinstance(value, (list, tuple, set)) else [value]
    return {str(v) for v in values if v not in (None, "")}


def repeat_key(arguments: dict | str, key_args: tuple[str, ...] = ()) -> str:
    """What makes two writes without a target the same write: the declared key arguments (or
    every argument), normalised — case, surrounding space, key order and list order ignored."""
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments) if arguments.strip() else {}
        except json.JSONDecodeError:
            return "repeat:" + " ".join(arguments.split()).lower()
    if not isinstance(arguments, dict):
        return ""

    def norm(v):
        if isinstance(v, str):
            return " ".join(v.split()).lower()
        if isinstance(v, dict):
            return {str(k): norm(x) for k, x in v.items()}
        if isinstance(v, (list, tuple)):
            return sorted((norm(x) for x in v), key=lambda x: json.dumps(x, sort_keys=True, default=str))
        return v

    picked = {k: arguments.get(k) for k in key_args} if key_args else arguments
    canonical = json.dumps(norm(picked), sort_keys=True, default=str)
    return (
        "same "
        + ("+".join(key_args) if key_args else "arguments")
        + " #"
        + hashlib.sha256(canonical.encode()).hexdigest()[:10]
    )


def write_targets(tool: Tool, args, raw: dict | str) -> set[str]:
    """What a write acts on, for the repeat guard and the actions lane: its target argument;
    without one, the customer it is for; without that, its repeat key (`repeat_key`)."""
    found = _target(tool, args)
    if found or tool.target_arg:
        return found
    key = repeat_key(raw, tool.repeat_key)
    return {key} if key else set()


def _order_arg(tool: Tool, args, refund: RefundDecl, owner_kind: str) -> str | None:
    if refund.target:
        return getattr(args, refund.target, None)
    if tool.target_arg and tool.id_args.get(tool.target_arg) == owner_kind:
        return getattr(args, tool.target_arg, None)
    return next((getattr(args, n, None) for n, k in tool.id_args.items() if k == owner_kind), None)


def _refetch_hint(domain: Domain) -> str:
    # The last lookup named for the owner kind is the one that reports its figures again.
    names = domain.lookup_hints.get(domain.owner_kind) or []
    return f"Call {names[-1]} for it first" if names else "Look it up first"


def _check_refund(inp: GuardInput, args, refund: RefundDecl) -> GuardVerdict | None:
    domain = _domain(inp)
    cents, order = amount_minor(args, refund), _order_arg(inp.tool, args, refund, domain.owner_kind)
    if cents is None or cents <= 0:
        return _reject(
            "refund_limit",
            "The refund amount must be a positive amount in the order's currency, exact to its smallest unit.",
            args,
        )
    money = next((m for m in inp.money if m.order == order), None)
    if money is None:
        return _reject(
            "refund_limit",
            f"No payment record for order '{order}' in state. {_refetch_hint(domain)}, then retry.",
            args,
            order=order,
        )
    currency = str(getattr(args, refund.currency, "") or money.currency).upper()
    if currency != money.currency.upper():
        return _reject(
            "refund_limit",
            f"Order {order} was paid in {money.currency}, not {currency}. Refund in {money.currency}.",
            args,
            order=order,
            currency=money.currency,
        )
    if cents > money.refundable_cents:
        return _reject(
            "refund_limit",
            f"Refund of {_fmt(cents, money.currency)} exceeds what is still refundable on {order}: "
            f"{_fmt(money.refundable_cents, money.currency)} (paid {_fmt(money.paid_cents, money.currency)}, "
            f"already refunded {_fmt(money.refunded_cents, money.currency)}). Refund at most the refundable amount.",
            args,
            order=order,
            refundable_cents=money.refundable_cents,
            requested_cents=cents,
        )
    return None


def _check_held(inp: GuardInput, args) -> GuardVerdict | None:
    tool = inp.tool
    repeat = _check_repeat(inp, args)
    if repeat is not None:
        return repeat
    rule = approvals.rule_for(inp.approval_rules, tool.name)
    moved = spending.call_money(tool, args, inp.money) if inp.window is not None else None
    if moved is not None:
        return _check_running_total(inp, args, moved, rule)
    if rule is not None:
        decl = _domain(inp).tool(tool.name)
        refund = decl.refund if decl is not None else None
        currency = str(getattr(args, refund.currency if refund else "currency", "") or "").upper()
        cents = amount_minor(args, refund)
        limit = rule.limit(currency)
        if limit is None or cents is None or cents > limit:
            why = "" if limit is None else f"above {_fmt(limit, currency) if currency else f'{limit} minor units'} "
            if limit is None and rule.per_currency_only:
                why = f"in {currency or 'an unstated currency'} (no threshold set for it) "
            return GuardVerdict(
                "hold",
                "approval",
                f"{tool.name} {why}needs staff approval; the call is held. "
                "Do not retry it; tell the customer it is awaiting approval.",
                args,
                {"above_cents": limit, "amount_cents": cents, "currency": currency},
            )
    return None


def _check_running_total(
    inp: GuardInput, args, moved: spending.CallMoney, rule: approvals.ToolApproval | None
) -> GuardVerdict | None:
    """Money: the call plus what moved (or is held) on its order and for its customer over the window.

    A tool without a rule of its own that moves money (a cancellation that refunds) is judged
    by the class's rules for the tools that move money: the strictest in the call's currency."""
    moving = [name for name, decl in _domain(inp).tools.items() if decl.money]
    rules = [rule] if rule is not None else approvals.money_rules(inp.approval_rules, moving)
    if not rules:
        return None
    limits = [r.limit(moved.currency) for r in rules]
    limit = None if any(x is None for x in limits) else min(limits)
    name = inp.tool.name
    details = {
        "above_cents": limit,
        "amount_cents": moved.cents,
        "currency": moved.currency,
        "order": moved.order,
        "window_hours": inp.window.hours,
    }
    if limit is None or moved.cents is None:
        why = (
            "its amount is not known before it runs (no figures for the order yet)"
            if moved.cents is None
            else f"{moved.currency or 'an unstated currency'} has no threshold set"
        )
        return GuardVerdict(
            "hold",
            "approval",
            f"{name} needs staff approval: {why}; the call is held. "
            "Do not retry it; tell the customer it is awaiting approval.",
            args,
            details,
        )
    why = spending.over_limit(inp.window, moved, limit)
    if not why:
        return None
    on_order, for_customer, _ = inp.window.before(moved.order, moved.currency)
    return GuardVerdict(
        "hold",
        "approval",
        f"{name} needs staff approval: {why}. The call is held. "
        "Do not retry it or split it; tell the customer it is awaiting approval.",
        args,
        {**details, "order_before_cents": on_order, "customer_before_cents": for_customer},
    )


def needs_card(inp: GuardInput) -> str:
    """Why this call waits for the customer's confirmation ("" when it does not). Only live tickets
    ask (the harness's replays judge IDs alone, `said` None); a call staff approved, or one the
    customer confirmed, does not ask again."""
    if inp.said is None or inp.approved or inp.confirmed:
        return ""
    return cards.needs_confirmation(inp.tool, _domain(inp).tool(inp.tool.name))


def _check_repeat(inp: GuardInput, args) -> GuardVerdict | None:
    tool, targets = inp.tool, write_targets(inp.tool, args, inp.arguments)
    decl = _domain(inp).tool(tool.name)
    # A change tool repeats only with the same arguments; anything else repeats by its target.
    digest = arguments_digest(inp.arguments) if decl is not None and decl.repeats == "arguments" else None
    prior = next(
        (
            a
            for a in inp.actions
            if a.tool == tool.name and a.target in targets and (digest is None or a.arguments_digest == digest)
        ),
        None,
    )
    if prior is None:
        return None
    return GuardVerdict(
        "hold",
        "repeat",
        f"{tool.name} was already done for {prior.target} at turn {prior.turn} "
        f"(idempotency key {prior.idempotency_key}). Repeating it needs staff approval; the call is held. "
        "Do not retry it; tell the customer it is with staff.",
        args,
        {"target": prior.target, "previous_turn": prior.turn, "idempotency_key": prior.idempotency_key},
    )


def corrected_ids(inp: GuardInput, args) -> list[dict]:
    """The call's IDs that a correction replaced: {"id", "by", "turn", "source"} each. Only live
    tickets ask (`said` given); a call staff approved or the customer confirmed does not ask again."""
    if inp.said is None or inp.approved or inp.confirmed:
        return []
    superseded = {e.value: e for e in inp.ledger if e.superseded_by}
    return [
        {
            "id": v,
            "by": superseded[v].superseded_by,
            "turn": superseded[v].superseded_turn,
            "source": superseded[v].superseded_source,
        }
        for _, _, v in ids_in_arguments(inp.tool, args)
        if v in superseded
    ]


def _confirm(
    inp: GuardInput, args, why: str, rule_verdict: GuardVerdict | None, corrected: list[dict] = ()
) -> GuardVerdict:
    rules = rule_verdict.details.get("rules", []) if rule_verdict is not None else []
    why = why or ("" if corrected and not rules else "it goes against what you told us")
    if corrected:
        fixed = "; ".join(f"{c['id']} was corrected to {c['by']}" for c in corrected)
        why = (
            f"{why}, and it acts on a corrected number ({fixed})" if why else f"it acts on a corrected number ({fixed})"
        )
    return GuardVerdict(
        "confirm",
        "confirmation",
        f"{inp.tool.name} waits for the customer's confirmation ({why}).",
        args,
        {"why": why, "rules": rules, "corrections": list(corrected)},
    )


def _text(args, name: str) -> str:
    """An argument's text as the checks read it ("" when absent or empty)."""
    return str(getattr(args, name, "") or "")


def _customer_texts(inp: GuardInput, args):
    """(argument, text) for each argument the tool declares the customer reads."""
    return ((name, _text(args, name)) for name in inp.tool.customer_text)


def _read_by_customer(inp: GuardInput, args, *, on_card: bool = True) -> list[str]:
    """The arguments the customer reads: those the tool declares, then what its card shows of the call
    (`cards.shown_text`: a phone call's summary) unless `on_card` is false; each once."""
    shown = cards.shown_text(inp.tool, _domain(inp).tool(inp.tool.name), args) if on_card else []
    return list(dict.fromkeys([*inp.tool.customer_text, *shown]))


def _check_internal(inp: GuardInput, args) -> GuardVerdict | None:
    """Text bound for the customer (a reply, an email) that quotes internal-only text waits for staff."""
    if not inp.internal or not inp.tool.customer_text:
        return None
    found = [q for _, text in _customer_texts(inp, args) for q in quotes(text, inp.internal)]
    if not found:
        return None
    labels = ", ".join(dict.fromkeys(f"the {q.label}" for q in found))
    return GuardVerdict(
        "hold",
        "internal_text",
        f"The {inp.tool.name} text quotes internal-only text ({labels}); "
        "it goes to staff instead of the customer. Do not retry it; never quote internal notes or "
        "staff notes to the customer.",
        args,
        {"quoted": describe(found)},
    )


def _check_opaque(inp: GuardInput, args) -> GuardVerdict | None:
    """A tool declared opaque takes queries the guards cannot see into (which orders a SQL statement
    touches, whose they are): each call waits for staff, read or write."""
    decl = _domain(inp).tool(inp.tool.name)
    if decl is None or not decl.opaque:
        return None
    return GuardVerdict(
        "hold",
        "opaque",
        f"{inp.tool.name} takes a free-form query the guards cannot check; each "
        "call waits for staff approval. Do not retry it; tell the customer it is being checked.",
        args,
        {},
    )


def _check_customer(inp: GuardInput, args) -> GuardVerdict | None:
    """A write acts only on this ticket's customer's records, where the domain says whose records are
    whose (`customer_kind`): an ID a result said belongs to another customer — or another customer's
    own ID — is refused, approved by staff or not; so is any owned record before a lookup that
    identifies the customer has said who the ticket's customer is."""
    domain = _domain(inp)
    if not domain.customer_kind or not inp.tool.side_effect or inp.tool.local:
        return None
    ours = {e.value for e in inp.ledger if e.identifies}
    by_value = {e.value: e for e in inp.ledger}
    for _name, kind, value in ids_in_arguments(inp.tool, args):
        entry = by_value.get(value)
        owner = value if kind == domain.customer_kind else (entry.customer if entry is not None else "")
        if not owner or owner in ours:
            continue
        if ours:
            why = (
                f"{value} belongs to customer {owner}, not to this ticket's customer ({', '.join(sorted(ours))}). "
                "Never act on another customer's records; tell the customer you can only help with their own."
            )
        else:
            finders = [n for n, d in domain.tools.items() if d.identifies]
            why = (
                f"{value} belongs to customer {owner}, and this ticket's customer has not been identified yet. "
                f"Identify them first ({', '.join(finders) or 'a lookup that identifies the customer'}), "
                "then act only on their own records."
            )
        return _reject("customer", why, args, id=value, owner=owner, ours=sorted(ours))
    return None


def _latest_customer(inp: GuardInput) -> str:
    """The customer's latest message the request showed (what a bare "Yes." answers, what an echo repeats)."""
    return next((m.text for m in reversed(inp.said or ()) if m.author == "customer"), "")


def _check_copied(inp: GuardInput, args) -> GuardVerdict | None:
    """Text bound for the customer that repeats Sundry's own words to the model (a re-ask, a guard's
    reason, a notice) or says the customer's message back is refused, as the reply check asks a plain
    reply again: a small model copies what it reads into whatever reaches the customer. Text a card shows
    (a phone call's summary) is held to Sundry's words only: it may well repeat what the customer said."""
    names = _read_by_customer(inp, args)
    if not names:
        return None
    recent = [m.text for m in reversed(inp.said or ()) if m.author == "customer"][: replycheck.RECENT_CUSTOMER]
    for name in names:
        why = replycheck.copied(_text(args, name), recent if name in inp.tool.customer_text else (), inp.declared)
        if why == "notice":
            return _reject(
                "notice",
                f"The {inp.tool.name} text repeats Sundry's instructions to you; the customer never sees "
                "those. It was not sent. Write to the customer about their request in plain words.",
                args,
                field=name,
            )
        if why:
            return _reject(
                "echo",
                f"The {inp.tool.name} text repeats the customer's message back to them, or nearly. It was not "
                "sent. Answer what they asked in your own words.",
                args,
                field=name,
            )
    return None


def _check_addressee(inp: GuardInput, args) -> GuardVerdict | None:
    """A tool's customer text that speaks of the customer in the third person ("I have no reply for the
    customer.") was written for someone else, whatever its words (`addressee`): refused, as the reply check
    asks a plain reply again. Only the declared customer text: a card's other text (a phone call's summary)
    is a record of the customer, rightly about them."""
    said = [m.text for m in inp.said or () if m.author == "customer"]
    for name, text in _customer_texts(inp, args):
        about = addressee.about_customer(text, said)
        if about:
            phrases = ", ".join(f'"{p}"' for p in dict.fromkeys(about))
            return _reject(
                "about_customer",
                f"The {inp.tool.name} text speaks of the customer in the third person ({phrases}), as a note "
                "for staff or for yourself. It was not sent. The customer reads it: write to them directly, as "
                '"you", about their request.',
                args,
                field=name,
                phrases=about,
            )
    return None


# A tool's customer text that only refuses help is refused, as a plain reply is asked again (real-model run 19
# sent "Sorry, I can't help with that." twice through the reply tool). Off, only the reply check reads it.
BARE_REFUSAL_IN_CUSTOMER_TEXT = True


def _check_bare_refusal(inp: GuardInput, args) -> GuardVerdict | None:
    """Text bound for the customer that is nothing but a refusal of help (`refusals.bare`): the customer is
    left with nothing and staff are never told. Refused with the reply check's words; a model that keeps
    refusing ends its run, and the hand-off tells the customer a person will reply."""
    if not BARE_REFUSAL_IN_CUSTOMER_TEXT:
        return None
    for name, text in _customer_texts(inp, args):
        if refusals.bare(text):
            return _reject(
                replycheck.BARE_REFUSAL,
                f"The {inp.tool.name} text only refused to help, with no reason and nothing the customer can do "
                f"next. It was not sent. {replycheck.BARE_REFUSAL_NEXT}",
                args,
                field=name,
            )
    return None


# A tool's customer text is read for invented identifiers as a plain reply is. Off, only the reply check reads them.
IDS_IN_CUSTOMER_TEXT = True


def _check_invented(inp: GuardInput, args) -> GuardVerdict | None:
    """Text bound for the customer (a reply, an email) that names an identifier nothing the request showed
    holds — no tool result, ledger entry or customer message; a tool call's ID never counts — is refused,
    as the reply check asks a plain reply again (`replycheck.invented_ids`, the same reading on the same
    identifiers): an invented order or refund reference, or the ID of one of the model's own calls."""
    if not IDS_IN_CUSTOMER_TEXT or inp.known is None:
        return None
    for name, text in _customer_texts(inp, args):
        invented = replycheck.invented_ids(text, inp.known)
        if invented:
            return _reject(
                "invented_id",
                f"The {inp.tool.name} text names {', '.join(invented)}, which is in no tool result, ledger entry "
                f"or customer message.{replycheck.call_ids_note(invented)} It was not sent. Never write a "
                "reference that a tool did not return: use only identifiers from the ledger or tool results, "
                "and if an action did not happen, do not say it did.",
                args,
                field=name,
                invented=invented,
            )
    return None


# A card's text (a phone call's summary) is read for claims as a reply is: the customer reads it on the card.
# Off, only the declared customer text is (a real model's card said "a refund is given" where none was).
CLAIMS_ON_CARDS = True


def _check_claims(inp: GuardInput, args) -> GuardVerdict | None:
    """Text bound for the customer that says an action was done which no record of this ticket shows
    (`replyclaims`) is refused: nothing is sent, and the model is told which sentence to fix. So is such
    text on the card a contact tool shows the customer (`cards.shown_text`)."""
    names = _read_by_customer(inp, args, on_card=CLAIMS_ON_CARDS)
    if not names:
        return None
    records = replyclaims.Records.of(
        _domain(inp),
        actions=inp.actions,
        money=inp.money,
        ledger=inp.ledger,
        proposals=inp.proposals,
        rules=inp.rules,
        overridden=inp.overridden_rules,
        states=inp.states,
        today=inp.today,
    )
    # What a bare "Yes." or "It's done." answers: the customer's latest message the request showed.
    question = _latest_customer(inp)
    false = [c for name in names for c in records.unsupported(_text(args, name), question)]
    if not false:
        return None
    said = replyclaims.describe(false)
    return _reject(
        "unsupported_claim",
        f"The {inp.tool.name} text says something was done that no tool did on "
        f"this ticket, or will be that no card or hold stands for ({said}). It was not sent. Say an action "
        "happened, and for how much, only as its tool call's result showed it, and that one will happen "
        "only once its card or staff hold is open; otherwise say what happens next. State an order's status, "
        "dates and amounts only as the records or tool results show them, and what an identifier is (an order, "
        "a customer ID, a tracking number …) only as the ID ledger or a tool result shows its kind.",
        args,
        unsupported=said,
    )


# A tool's customer text is read for an unfinished ending as a plain reply is. Off, only the reply check reads it.
UNFINISHED_IN_CUSTOMER_TEXT = True


def _check_unfinished(inp: GuardInput, args) -> GuardVerdict | None:
    """Text bound for the customer that ends introducing what never follows — "Here are your options:", "the
    following", an empty list item, a heading with nothing under it (`unfinished`) — is refused, as the reply
    check asks a plain reply again: the customer reads the message whole, and no call made beside it shows
    them what it announced. Read last, so that what the text does say is judged first."""
    if not UNFINISHED_IN_CUSTOMER_TEXT:
        return None
    for name, text in _customer_texts(inp, args):
        how = unfinished.ending(text)
        if how:
            return _reject(
                unfinished.UNFINISHED,
                f"The {inp.tool.name} text ends with {how}: it introduces something it never gives. It was "
                "not sent. Write a complete message, shorter if need be, that gives in full whatever it announces.",
                args,
                field=name,
                ending=how,
            )
    return None


def check_call(inp: GuardInput) -> GuardVerdict:
    """Run schema, rule, ID and consequence guards in order; the first non-allow wins.

    A call that needs the customer's confirmation (`needs_card`, a candidate rule of theirs it goes
    against, or a number a correction replaced) passes every other guard first, so a card never stands for a call that
    would be refused; once confirmed it is judged again, thresholds and repeats included."""
    args = _parse(inp)
    if isinstance(args, GuardVerdict):
        return args
    rule_verdict = _check_rules(inp, args)
    if rule_verdict is not None and rule_verdict.decision == "reject":
        return rule_verdict
    verdict = _check_ids(inp, args) or _check_customer(inp, args)
    if verdict:
        return verdict
    if not inp.approved:
        verdict = (
            _check_opaque(inp, args)
            or _check_internal(inp, args)
            or _check_copied(inp, args)
            or _check_invented(inp, args)
            or _check_addressee(inp, args)
            or _check_bare_refusal(inp, args)
            or _check_claims(inp, args)
            or _check_unfinished(inp, args)
        )
        if verdict:
            return verdict
    # Consequence guards: shop side effects only; local lane edits repeat freely.
    if inp.tool.side_effect and not inp.tool.local:
        decl = _domain(inp).tool(inp.tool.name)
        verdict = _check_refund(inp, args, decl.refund) if decl is not None and decl.refund else None
        if verdict:
            return verdict
        if not inp.approved:
            why = needs_card(inp)
            # A write on a number the customer or staff corrected names both on a card, whatever the tool.
            corrected = corrected_ids(inp, args)
            if why or rule_verdict is not None or corrected:
                return _check_repeat(inp, args) or _confirm(inp, args, why, rule_verdict, corrected)
            verdict = _check_held(inp, args)
            if verdict:
                return verdict
    return GuardVerdict("allow", "", "", args, {})
