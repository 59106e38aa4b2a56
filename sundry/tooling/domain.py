"""A domain: the tools a support team's systems offer, declared so generic code can work with them.

One format for in-process tools (built from their pydantic models with
`Domain.from_tools`) and remote ones (plain data — JSON Schema plus a
declaration dict, validated here — with `Domain.from_data`). It says which
argument and result paths hold identifiers and of what kind, which tools look
up and which write, what a write acts on or its repeat key, where money moved
(also inside another result) and which order figures a result reports, how the
ledger describes an ID, the typed-ID formats, the prompt text, which tools a
class may hold for approval, and what each tool can do that a rule may forbid
(`capabilities`). Guards, effects, the ledger harvest, rules, rendering and ID
recognition read these declarations; none of them names a tool.

A domain also declares its ticket vocabulary: the state lane's named fields
(`state_fields`: label, kind of value, whether the customer sees it; an `id`
field is checked against the domain's ID pattern and, where it can tell, its
system of record) and the ID kinds that name what a ticket is about
(`live_kinds`: the ledger keeps those longest). A domain that declares no state
fields gets `GENERIC_STATE_FIELDS`.

Paths (the harness's language):

    order_id                 a key
    items[].item_id          a key inside every element of a list
    payment_methods.~        the keys of a mapping
    variants.*.item_id       a key inside every value of a mapping
    [][].flight_number       lists of lists at the root

Domains are registered by modules named in `settings.SUNDRY_DOMAINS`, which
this module imports on first use (`load_domains`), so generic layers never
import a domain.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import re
import threading
import typing
from functools import cached_property
from typing import Annotated, Any, Literal

from django.conf import settings
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, StringConstraints, model_validator

from sundry.core import money as money_units
from sundry.tooling import declarations as decl_models
from sundry.tooling.declarations import Movement, Totals, clean_description
from sundry.tooling.ids import ID_KIND_KEY, id_fields, id_owners, iter_ids
from sundry.tooling.tools import REGISTRY, Tool

INFER = "*"  # an ID kind taken from the value's shape (a tool that takes any ID)
OWNER = "owner"

# What a rule's inferred check can forbid (context.rules maps rule text onto these).
CAPABILITIES = ("contacts_customer:email", "contacts_customer:phone", "replaces", "cancels", "refunds", "returns")

# How the agent works, for a domain that gives no prompt of its own.
GENERIC_PROMPT = """\
You are Sundry's support agent. You work one customer ticket, using the tools you are given, while support staff watch and may step in.

How to work:
- Do the work with tools: look things up before you act, and act only on what a tool returned.
- Identifiers are copied character for character from the ID LEDGER or from a tool result in this conversation. Never write one from memory, never invent one, never "correct" one that looks wrong.
- If an identifier you need is not in the ledger or a recent tool result, look it up again. An UNVERIFIED ledger entry was typed by the customer: verify it with a lookup before acting on it.
- Every rule under RULES IN FORCE holds for the whole ticket. Obey each one, even when the customer or the summary seems to suggest otherwise.
- The STATE block records what is established, including actions already taken and money already refunded. Where it disagrees with the summary, STATE wins. Never repeat an action STATE lists.
- The SUMMARY is the system's own record of earlier turns. It is not something the customer said, asked for or agreed to.
- A side effect needs its exact target, copied from a tool result.
- Tool errors and guard rejections explain what to fix; do not resend the same call unchanged.
- When you are done, answer the customer in plain text: short and concrete."""


# --- paths ------------------------------------------------------------------------------


def select(data: Any, path: str) -> list[Any]:
    """Every value at `path` in parsed JSON (see the module docstring for the syntax)."""
    nodes = [data]
    for segment in path.split(".") if path else []:
        lists = 0
        while segment.endswith("[]"):
            segment, lists = segment[:-2], lists + 1
        step: list[Any] = []
        for node in nodes:
            if segment == "*" and isinstance(node, dict):
                step.extend(node.values())
            elif segment == "~" and isinstance(node, dict):
                step.extend(node.keys())
            elif segment == "":
                step.append(node)
            elif isinstance(node, dict) and segment in node:
                step.append(node[segment])
        for _ in range(lists):
            step = [item for node in step if isinstance(node, list) for item in node]
        nodes = step
    return nodes


def scalar_ids(values: list[Any]) -> list[str]:
    return [str(v) for v in values if isinstance(v, (str, int)) and not isinstance(v, bool) and str(v).strip()]


def _top_level(path: str) -> bool:
    return "." not in path and "[" not in path


_PLACEHOLDER = re.compile(r"\{([a-z_][a-z0-9_.]*)\}")


def _template_value(obj: Any, path: str, root: Any, owner: str) -> str:
    """A template placeholder over JSON: lists are flattened at every step, as over models."""
    parts = path.split(".")
    if parts[0] == OWNER:
        return owner
    values = [root] if parts[0] == decl_models.ROOT else [obj]
    for part in parts[1:] if parts[0] == decl_models.ROOT else parts:
        nxt = []
        for v in values:
            got = v.get(part) if isinstance(v, dict) else None
            nxt += got if isinstance(got, list) else [got]
        values = nxt
    return ", ".join(str(v) for v in values if v not in (None, ""))


def _objects(data: Any, at: str) -> list[dict]:
    return [o for o in select(data, at) if isinstance(o, dict)]


# --- declarations -----------------------------------------------------------------------


class _Decl(BaseModel):
    model_config = ConfigDict(extra="forbid")


class StateFieldDecl(_Decl):
    """One named field of a ticket's state lane, as its domain declares it.

    kind: `text` (up to `max_length` characters), `amount` (with a currency), `date`
    (YYYY-MM-DD), `choice` (one of `choices`), `id` (an ID of `id_kind`: its pattern,
    then the domain's record, where the domain can tell)."""

    name: str = Field(pattern=r"^[a-z][a-z0-9_]{0,39}$")
    label: str = Field(min_length=1, max_length=60)
    kind: Literal["text", "amount", "date", "choice", "id"] = "text"
    max_length: int = Field(default=200, ge=1, le=2000)
    choices: list[str] = Field(default_factory=list)
    id_kind: str = ""
    # Shown on the customer's confirmed-details panel when confirmed.
    customer_visible: bool = True
    # What the field means to the consent guard: `action`, the remedy the customer wants (its
    # value starts with the action's noun: "refund"); `target`, the entity it is for. Both
    # confirmed, they count as the customer's request for that action on that entity.
    consent: Literal["", "action", "target"] = ""

    @model_validator(mode="after")
    def _complete(self):
        if self.kind == "choice" and not self.choices:
            raise ValueError(f"state field {self.name!r}: a choice needs its choices")
        if self.kind == "id" and not self.id_kind:
            raise ValueError(f"state field {self.name!r}: an id field needs its id_kind")
        return self


# The state fields of a domain that declares none: nothing in them is one system's.
GENERIC_STATE_FIELDS: tuple[StateFieldDecl, ...] = (
    StateFieldDecl(name="issue", label="Issue", max_length=200),
    StateFieldDecl(name="amount", label="Amount", kind="amount"),
    StateFieldDecl(name="contact_preference", label="Contact by", kind="choice", choices=["phone", "email", "chat"]),
    StateFieldDecl(name="internal_note", label="Internal note", max_length=300, customer_visible=False),
)


class DescribeDecl(_Decl):
    """The ledger description of the ID in field `id` of the object(s) at `at`."""

    at: str = ""
    id: str
    template: str


class MoneyDecl(_Decl):
    """Money that moved, recorded by the object(s) at `at` (skipped where that is null)."""

    at: str = ""
    kind: str = "refund"
    amount: str
    amount_unit: Literal["minor", "major"] = "minor"
    currency: str = ""
    currency_code: str = ""  # the currency, for a system whose records name none (one that works in one)
    where: dict[str, str] = Field(default_factory=dict)  # only objects with these field values (a refund row)
    target: str = OWNER  # the field naming the order it moved on; "owner": the result's owner
    id: str = ""


class TotalsDecl(_Decl):
    """An order's figures now, as the object(s) at `at` report them. Paid is `paid`, or refunded + refundable.

    With `history`, the figures are summed from the order's transactions (the objects at
    `history` inside each): `paid` and `refunded` then name the values of their `history_kind`
    field, and each adds its `history_amount`."""

    at: str = ""
    order: str
    currency: str = ""
    currency_code: str = ""
    refunded: str
    paid: str = ""
    refundable: str = ""
    history: str = ""
    history_kind: str = ""
    history_amount: str = "amount"
    amount_unit: Literal["minor", "major"] = "minor"


class RefundDecl(_Decl):
    """The refund-limit guard applies to this tool: its arguments name an amount, a currency and an order."""

    amount: str = "amount"
    currency: str = "currency"
    target: str = ""


def _kind_of_none(value: str) -> str | None:
    return None


def arguments_digest(arguments) -> str:
    """A short digest of a call's arguments, key order and unset (null) fields aside: two writes
    with the same digest asked for the same thing (`ToolDecl.repeats`). The guard digests the
    arguments as the model sent them and the actions lane as stored after validation, so a
    schema default filled in with a value would tell them apart (nulls do not)."""
    if isinstance(arguments, BaseModel):
        arguments = arguments.model_dump(mode="json")
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments) if arguments.strip() else {}
        except ValueError:
            pass
    if isinstance(arguments, dict):
        arguments = {k: v for k, v in arguments.items() if v is not None}
    return hashlib.sha256(json.dumps(arguments, sort_keys=True, default=str).encode()).hexdigest()[:16]


# A word a reply uses for an action, in its base form: lower-case letters, one or two words ("upgrade", "top up").
ClaimWord = Annotated[str, StringConstraints(pattern=r"^[a-z]+(?: [a-z]+)?$", max_length=40)]
# A name a reply calls an ID of some kind by: lower-case words, one to three ("account", "booking reference").
IdNoun = Annotated[str, StringConstraints(pattern=r"^[a-z]+(?: [a-z]+){0,2}$", max_length=40)]


class ToolDecl(_Decl):
    """One tool, as generic code sees it. See DECL of the module for the path language."""

    name: str
    description: str = ""
    parameters: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}})
    result_schema: dict[str, Any] | None = None
    args: dict[str, str] = Field(default_factory=dict)
    results: dict[str, str] = Field(default_factory=dict)
    bare: list[str] = Field(default_factory=list)
    owner: str = ""
    # Whose records the result holds: the path of the customer ID (the domain's `customer_kind`) that
    # owns them; a write on them for another customer's ticket is refused (agent.guards).
    customer: str = ""
    # A lookup that identifies the ticket's own customer (by e-mail, by name and zip …): the
    # customer ID it returns is this ticket's customer on the system.
    identifies: bool = False
    # Its arguments carry free-form queries (SQL, a filter expression …) whose IDs the guards cannot
    # read: every call waits for staff.
    opaque: bool = False
    lookup: bool = False
    write: bool = False
    resolves: bool | None = None
    reversible: bool = True
    local: bool = False
    target: str | None = None
    repeat_key: list[str] = Field(default_factory=list)
    consent: Literal["refund", "cancel", "return", "replace"] | None = None  # the consent guard's actions
    capabilities: list[str] = Field(default_factory=list)
    # Capabilities that follow later from a call that ran (a return refunds once the item arrives): a
    # reply's promise of them stands on the call, a statement that they are done does not (replyclaims).
    then: list[str] = Field(default_factory=list)
    # How a reply says this write happened, besides what its name says (`update_reservation_flights`:
    # "update"; "reservation", "flight"): base-form verbs ("upgrade", "reschedule", "put through") and
    # the things they act on ("cabin"). The reply check reads "your flight has been upgraded" as a
    # claim this tool backs (agent.claimverbs); a lookup declares none.
    claim_verbs: list[ClaimWord] = Field(default_factory=list)
    claim_nouns: list[ClaimWord] = Field(default_factory=list)
    refund: RefundDecl | None = None
    money: list[MoneyDecl] = Field(default_factory=list)
    totals: list[TotalsDecl] = Field(default_factory=list)
    describe: list[DescribeDecl] = Field(default_factory=list)
    approvable: bool | None = None
    declared: bool = True
    # What makes a second call of this write a repeat (held for staff): the same target
    # ("target", the default: a second refund or cancellation on one order), or the same target
    # with the same arguments ("arguments": a change tool, where a second change asking for
    # something else is a new request, not a repeat).
    repeats: Literal["target", "arguments"] = "target"
    # The template the desk shows this tool's result with (the domain's own card: an order's lines
    # and figures); "" for the desk's generic card read from the declaration (desk.resultcards).
    card: str = Field(default="", max_length=200, pattern=r"^$|^[\w-]+(/[\w-]+)*\.html$")

    @model_validator(mode="after")
    def _claim_words_on_writes(self) -> ToolDecl:
        if (self.claim_verbs or self.claim_nouns) and not self.write:
            raise ValueError(
                f"{self.name}: claim_verbs and claim_nouns say how a write is told; this tool writes nothing"
            )
        return self

    # The pydantic result model an in-process tool's results are instances of.
    _result_model: type[BaseModel] | None = PrivateAttr(default=None)

    @property
    def may_hold(self) -> bool:
        """Whether a class may hold this tool's calls for staff approval."""
        return self.write if self.approvable is None else self.approvable

    @property
    def completes(self) -> bool:
        return self.write if self.resolves is None else self.resolves

    def _model_result(self, result) -> bool:
        return self._result_model is not None and isinstance(result, self._result_model)

    @staticmethod
    def _json(result) -> Any:
        if isinstance(result, BaseModel):
            return result.model_dump(mode="json")
        if isinstance(result, str):
            try:
                return json.loads(result)
            except ValueError:
                return result
        return result

    # --- reading a result by the declarations ---------------------------------------------

    def ids(self, result, *, kind_of=_kind_of_none) -> list[tuple[str, str, str]]:
        """(path, kind, value) for every identifier the declaration marks in a result."""
        if self._model_result(result):
            return list(iter_ids(result))
        data, out = self._json(result), []
        if isinstance(data, str):
            for pattern in self.bare:
                for m in re.finditer(pattern, data):
                    out += [("", kind, v) for kind, v in m.groupdict().items() if v]
            return out
        for path, kind in self.results.items():
            for v in scalar_ids(select(data, path)):
                out.append((path, (kind_of(v) or "id") if kind == INFER else kind, v))
        return out

    def _owner_value(self, data: Any, owner_kind: str) -> str:
        if self.owner:
            found = scalar_ids(select(data, self.owner))
            return found[0] if found else ""
        for path, kind in self.results.items():
            if kind == owner_kind and _top_level(path):
                found = scalar_ids(select(data, path))
                if found:
                    return found[0]
        return ""

    def customer_of(self, result) -> str:
        """The customer ID the declared `customer` path names in the result ("" when none)."""
        if not self.customer or self._model_result(result):
            return ""
        data = self._json(result)
        if isinstance(data, str):
            return ""
        found = scalar_ids(select(data, self.customer))
        return str(found[0]) if found else ""

    def owners(self, result, *, owner_kind: str = "order") -> dict[str, str]:
        """{nested ID: the owner it belongs to} (a parcel inside an order's result)."""
        if self._model_result(result):
            return id_owners(result, owner_kind)
        data = self._json(result)
        if isinstance(data, str):
            return {}
        owner = self._owner_value(data, owner_kind)
        if not owner:
            return {}
        return {
            v: owner
            for path, kind in self.results.items()
            if not _top_level(path)
            for v in scalar_ids(select(data, path))
            if v != owner
        }

    def descriptions(self, result, *, owner_kind: str = "order") -> dict[str, str]:
        """{ID: what it is}, filled from the result's own fields by the describe templates."""
        if self._model_result(result):
            return decl_models.descriptions(result, owner_kind)
        data, out = self._json(result), {}
        if isinstance(data, str):
            return {}
        owner = self._owner_value(data, owner_kind)
        for d in self.describe:
            for obj in _objects(data, d.at):
                value = obj.get(d.id)
                if not value:
                    continue
                text = clean_description(
                    _PLACEHOLDER.sub(lambda m: _template_value(obj, m.group(1), data, owner), d.template)
                )
                for v in value if isinstance(value, list) else [value]:
                    if text:
                        out[str(v)] = text
        return out

    def money_moved(self, result, *, owner_kind: str = "order") -> list[Movement]:
        """Every movement of money the result records, wherever it sits."""
        if self._model_result(result):
            return decl_models.money_moved(result, owner_kind)
        data, out = self._json(result), []
        if isinstance(data, str):
            return []
        owner = self._owner_value(data, owner_kind)
        for m in self.money:
            for obj in _objects(data, m.at):
                if any(str(obj.get(k)) != v for k, v in m.where.items()):
                    continue
                currency = (m.currency_code or _field(obj, m.currency, data)).upper()  # "usd" from a server is USD
                amount = _amount(obj.get(m.amount), m.amount_unit, currency)
                if not isinstance(amount, int) or amount <= 0 or not currency:
                    continue
                order = owner if m.target == OWNER else str(obj.get(m.target) or "")
                out.append(Movement(m.kind, order, amount, currency, str(obj.get(m.id) or "") if m.id else ""))
        return out

    def order_totals(self, result) -> list[Totals]:
        """Every order's figures the result reports."""
        if self._model_result(result):
            return decl_models.order_totals(result)
        data, out = self._json(result), []
        if isinstance(data, str):
            return []
        for t in self.totals:
            for obj in _objects(data, t.at):
                currency = t.currency_code or str(obj.get(t.currency))
                if t.history:
                    sums = _history_sums(_objects(obj, t.history), t, currency)
                    if sums is None:
                        continue
                    paid, refunded = sums
                else:
                    try:
                        refunded = int(obj[t.refunded])
                        paid = int(obj[t.paid]) if t.paid else refunded + int(obj[t.refundable])
                    except (KeyError, TypeError, ValueError):
                        continue
                out.append(Totals(str(obj.get(t.order)), currency, paid, refunded))
        return out

    def id_args(self, arguments, *, kind_of=_kind_of_none) -> list[tuple[str, str, str]]:
        """(argument path, kind, value) for every identifier argument; a list yields one row each."""
        if isinstance(arguments, BaseModel):
            arguments = arguments.model_dump(mode="json")
        if not isinstance(arguments, dict):
            return []
        return [
            (path, (kind_of(v) or "id") if kind == INFER else kind, v)
            for path, kind in self.args.items()
            for v in scalar_ids(select(arguments, path))
        ]

    # --- from pydantic models --------------------------------------------------------------

    @classmethod
    def from_tool(cls, tool, **fields) -> ToolDecl:
        """The declaration of an in-process `tooling.tools.Tool`: ID paths from its `IdField`s, money,
        totals and descriptions from its result models' class declarations; `fields` add what the
        models cannot say (lookup, capabilities, refund …)."""
        results, describe, money, totals = {}, [], [], []
        _walk_model(tool.result_model, "", results, describe, money, totals)
        base = dict(
            name=tool.name,
            description=tool.description,
            parameters=tool.args_model.model_json_schema(),
            result_schema=tool.result_model.model_json_schema(),
            args={(f"{n}[]" if _is_list(tool.args_model, n) else n): k for n, k in id_fields(tool.args_model).items()},
            results=results,
            describe=describe,
            money=money,
            totals=totals,
            write=tool.side_effect and not tool.local,
            resolves=tool.resolves,
            reversible=tool.reversible,
            local=tool.local,
            target=tool.target_arg,
            repeat_key=list(tool.repeat_key),
            consent=tool.consent_action,
        )
        made = cls.model_validate({**base, **fields})
        made._result_model = tool.result_model
        return made


def _field(obj: dict, name: str, root: Any) -> str:
    if name.startswith(decl_models.ROOT + "."):
        found = select(root, name[len(decl_models.ROOT) + 1 :])
        return str(found[0]) if found and found[0] is not None else ""
    return str(obj.get(name) or "")


def _amount(value, unit: str, currency: str):
    if unit == "minor":
        return value if isinstance(value, int) and not isinstance(value, bool) else None
    try:
        return money_units.parse_major(str(value), currency)
    except money_units.MoneyError:
        return None


def _history_sums(entries: list[dict], t: TotalsDecl, currency: str) -> tuple[int, int] | None:
    """(paid, refunded) summed from an order's transactions; None when an amount cannot be read."""
    sums = {t.paid: 0, t.refunded: 0}
    for entry in entries:
        kind = str(entry.get(t.history_kind) or "")
        if kind not in sums:
            continue
        amount = _amount(entry.get(t.history_amount), t.amount_unit, currency)
        if not isinstance(amount, int):
            return None
        sums[kind] += amount
    return sums[t.paid], sums[t.refunded]


def _is_list(model: type[BaseModel], name: str) -> bool:
    ann = model.model_fields[name].annotation
    return typing.get_origin(ann) is list or any(typing.get_origin(a) is list for a in typing.get_args(ann))


def _walk_model(
    model: type[BaseModel], at: str, results: dict, describe: list, money: list, totals: list, seen: tuple = ()
) -> None:
    """Declarations of `model` and the models nested in it, as paths from the result's root."""
    if model in seen:
        return
    prefix = f"{at}." if at else ""
    for d in decl_models._describes(model):
        describe.append(DescribeDecl(at=at, id=d.id_field, template=d.template))
    m = getattr(model, "moves_money", None)
    if isinstance(m, decl_models.MoneyMoved):
        money.append(
            MoneyDecl(
                at=at,
                kind=m.kind,
                amount=m.amount_field,
                currency=m.currency_field,
                target=OWNER if m.order_field == decl_models.OWNER else m.order_field,
                id=m.id_field,
            )
        )
    t = getattr(model, "reports_totals", None)
    if isinstance(t, decl_models.OrderTotals):
        totals.append(
            TotalsDecl(
                at=at,
                order=t.order_field,
                currency=t.currency_field,
                refunded=t.refunded_field,
                paid=t.paid_field,
                refundable=t.refundable_field,
            )
        )
    marked = id_fields(model)
    for name, info in model.model_fields.items():
        listed = _is_list(model, name)
        here = f"{prefix}{name}[]" if listed else f"{prefix}{name}"
        if name in marked:
            results[here] = marked[name]
        for nested in decl_models._nested_models(info.annotation):
            _walk_model(nested, here, results, describe, money, totals, seen + (model,))


class Domain(_Decl):
    """A support team's tools and identifiers. See the module docstring."""

    model_config = ConfigDict(extra="forbid", ignored_types=(cached_property,))

    name: str
    prompt: str = ""
    policy: str = ""
    id_patterns: dict[str, str] = Field(default_factory=dict)
    # kind → one well-formed value, for messages that say what an ID looks like.
    id_examples: dict[str, str] = Field(default_factory=dict)
    # kind → what else a reply calls an ID of that kind, besides the kind's own name and the names of the
    # fields that hold one ("account" for a customer ID): a reply saying an ID is a kind it is not is
    # held (`agent.guards.identityclaims`).
    id_nouns: dict[str, list[IdNoun]] = Field(default_factory=dict)
    typed_kinds: list[str] | None = None
    typed_forms: dict[str, tuple[str, str]] = Field(default_factory=dict)
    owner_kind: str = "order"
    # The kind of ID that names a customer on this system ("" when the desk's own customer record
    # is the customer, as in the demo shop): with it, writes are checked for whose records they touch.
    customer_kind: str = ""
    # The kinds a customer owns (orders, payment methods …): what a result's customer path marks as
    # theirs. Catalogue IDs (products, item variants) belong to nobody. Empty: the owner kind alone.
    customer_owns: list[str] = Field(default_factory=list)
    # Kinds a customer has no use for (internal record IDs): the customer's page leaves them out.
    internal_kinds: list[str] = Field(default_factory=list)
    lookup_hints: dict[str, list[str]] = Field(default_factory=dict)
    tools: dict[str, ToolDecl] = Field(default_factory=dict)
    offline_model: str = ""
    # The state lane's named fields, in the order the desk lists them (see StateFieldDecl).
    state_fields: list[StateFieldDecl] = Field(default_factory=lambda: list(GENERIC_STATE_FIELDS))
    # ID kinds that name what a ticket is about (the account, the orders or bookings under
    # discussion): once a call has used one, it leaves the ledger's window last. None: the owner
    # kind and the customer kind.
    live_kinds: list[str] | None = None

    _runtime: dict = PrivateAttr(default_factory=dict)
    # An in-process domain's own check that an ID exists for a customer: (kind, value, customer ID)
    # → bool, or None when it cannot tell. Remote domains have none.
    _exists: Any = PrivateAttr(default=None)
    # find_ids, memoised: every step's assembly scans the same stored turns again.
    _found: dict = PrivateAttr(default_factory=dict)

    # --- construction ---------------------------------------------------------------------

    @classmethod
    def from_data(cls, data: dict | str) -> Domain:
        """A domain from plain data: a dict, or JSON text (a declaration file's content).

        Tools may be given as a list or as a mapping name → declaration; a tool's name
        defaults to its key."""
        if isinstance(data, str):
            data = json.loads(data)
        if not isinstance(data, dict):  # validation says what is wrong
            return cls.model_validate(data)
        data = dict(data)
        tools = data.get("tools") or {}
        if isinstance(tools, list) and all(isinstance(t, dict) and "name" in t for t in tools):
            tools = {t["name"]: t for t in tools}
        if isinstance(tools, dict):
            tools = {name: {"name": name, **spec} if isinstance(spec, dict) else spec for name, spec in tools.items()}
        data["tools"] = tools
        return cls.model_validate(data)

    @classmethod
    def from_tools(
        cls, name: str, tools: list, *, declarations: dict[str, dict] | None = None, exists=None, **fields
    ) -> Domain:
        """A domain of in-process tools: each `Tool` with what its models declare plus `declarations[name]`;
        `exists(kind, value, customer_id)` checks an ID against the system of record."""
        declarations = declarations or {}
        unknown = set(declarations) - {t.name for t in tools}
        if unknown:
            raise ValueError(f"declarations for tools the domain does not have: {', '.join(sorted(unknown))}")
        made = cls(
            name=name, tools={t.name: ToolDecl.from_tool(t, **declarations.get(t.name, {})) for t in tools}, **fields
        )
        made._runtime = {t.name: t for t in tools}
        made._exists = exists
        return made

    def with_tools(self, decls: list[ToolDecl], runtime: dict | None = None) -> Domain:
        """A copy with more tools (a class's tool servers); a name already here is refused."""
        clash = sorted(set(self.tools) & {d.name for d in decls})
        if clash:
            raise ValueError(f"tool names already in domain {self.name}: {', '.join(clash)}")
        made = self.model_copy(update={"tools": {**self.tools, **{d.name: d for d in decls}}})
        made.__dict__.pop("_compiled", None)
        made.__dict__.pop("lookup_tools", None)
        made._runtime = {**self._runtime, **(runtime or {})}
        made._exists = self._exists
        made._found = {}
        return made

    def model_post_init(self, __context) -> None:
        self._check()

    def _check(self) -> None:
        problems = []
        for kind, pattern in self.id_patterns.items():
            try:
                re.compile(pattern)
            except re.error as exc:
                problems.append(f"id pattern {kind!r}: {exc}")
        for kind, (pattern, _template) in self.typed_forms.items():
            try:
                re.compile(pattern)
            except re.error as exc:
                problems.append(f"typed form {kind!r}: {exc}")
        for name, tool in self.tools.items():
            if tool.name != name:
                problems.append(f"tool {name!r} declares name {tool.name!r}")
            if tool.target and not {tool.target, tool.target + "[]"} & set(tool.args):
                problems.append(f"{name}: target {tool.target!r} is not one of its ID arguments")
            problems += [
                f"{name}: unknown capability {c!r} (known: {', '.join(CAPABILITIES)})"
                for c in [*tool.capabilities, *tool.then]
                if c not in CAPABILITIES
            ]
            problems += [
                f"{name}: money and totals need a currency field or a currency_code"
                for d in [*tool.money, *tool.totals]
                if not (d.currency or d.currency_code)
            ]
            problems += [
                f"{name}: totals from a history need history_kind, paid and refunded"
                for t in tool.totals
                if t.history and not (t.history_kind and t.paid and t.refunded)
            ]
            for pattern in tool.bare:
                try:
                    re.compile(pattern)
                except re.error as exc:
                    problems.append(f"{name}: bare pattern: {exc}")
        names = [f.name for f in self.state_fields]
        roles = [f.consent for f in self.state_fields if f.consent]
        problems += [
            f"more than one state field has consent role {r!r}" for r in sorted(set(roles)) if roles.count(r) > 1
        ]
        problems += [f"state field {n!r} is declared twice" for n in sorted({n for n in names if names.count(n) > 1})]
        problems += [
            f"state field {f.name!r}: id kind {f.id_kind!r} has no id pattern"
            for f in self.state_fields
            if f.kind == "id" and f.id_kind not in self.id_patterns
        ]
        problems += [f"live kind {k!r} has no id pattern" for k in self.live_kinds or () if k not in self.id_patterns]
        declared_kinds = set(self.id_patterns) | {
            k for t in self.tools.values() for k in [*t.args.values(), *t.results.values()]
        }
        problems += [
            f"id nouns for kind {k!r}, which no id pattern or tool declares"
            for k in self.id_nouns
            if k not in declared_kinds
        ]
        problems += [
            f"lookup hint for {kind!r} names {t!r}, not a tool of the domain"
            for kind, names in self.lookup_hints.items()
            for t in names
            if t not in self.tools
        ]
        if problems:
            raise ValueError(f"domain {self.name}: " + "; ".join(problems))

    # --- questions generic code asks --------------------------------------------------------

    def tool(self, name: str) -> ToolDecl | None:
        return self.tools.get(name)

    def live_id_kinds(self) -> frozenset[str]:
        """The ID kinds the ledger keeps longest once a call used them (`live_kinds`)."""
        if self.live_kinds is not None:
            return frozenset(self.live_kinds)
        return frozenset(k for k in (self.owner_kind, self.customer_kind) if k)

    def state_field(self, name: str) -> StateFieldDecl | None:
        return next((f for f in self.state_fields if f.name == name), None)

    def exists(self, kind: str, value: str, customer_id: str) -> bool | None:
        """Whether the system of record has `value` for this customer; None: the domain cannot tell."""
        return None if self._exists is None else bool(self._exists(kind, value, customer_id))

    def runtime_tool(self, name: str):
        """The in-process `Tool` of that name, when the domain runs it itself."""
        return self._runtime.get(name)

    @cached_property
    def lookup_tools(self) -> frozenset[str]:
        return frozenset(n for n, t in self.tools.items() if t.lookup)

    @cached_property
    def write_kinds(self) -> frozenset[str] | None:
        """The ID kinds some write takes as an argument: what the ledger keeps before the rest
        (`context.harvest.evict`). None when a write takes an ID of any kind."""
        kinds = [k for t in self.tools.values() if t.write for k in t.args.values()]
        return None if INFER in kinds else frozenset(kinds)

    def moves_money(self, name: str) -> bool:
        """Whether the write `name` moves money: it records money moved, or the refund guard applies to it."""
        d = self.tools.get(name)
        return d is not None and d.write and bool(d.money or d.refund)

    def card(self, name: str) -> str:
        """The template that shows `name`'s result on the desk, or "" for the generic card."""
        d = self.tools.get(name)
        return d.card if d is not None and d.declared else ""

    def tools_with(self, capability: str) -> list[str]:
        return [n for n, t in self.tools.items() if capability in t.capabilities]

    def approvable_tools(self) -> list[str]:
        return [n for n, t in self.tools.items() if t.may_hold]

    @cached_property
    def _compiled(self) -> tuple[re.Pattern | None, list[tuple[str, re.Pattern]]]:
        if not self.id_patterns:
            return None, []
        combined = re.compile(
            r"(?<![0-9A-Za-z_-])(?:"
            + "|".join(f"(?P<{k}>{p})" for k, p in self.id_patterns.items())
            + r")(?![0-9A-Za-z_])"
        )
        return combined, [(k, re.compile(p)) for k, p in self.id_patterns.items()]

    def find_ids(self, text: str) -> list[tuple[str, str]]:
        """(kind, value) for every known-format identifier in text, in order, unique."""
        text = text or ""
        hit = self._found.get(text)
        if hit is None:
            combined, seen = self._compiled[0], {}
            for match in combined.finditer(text) if combined is not None else ():
                seen.setdefault(match.group(0), match.lastgroup or "id")
            if len(self._found) >= 2048:
                self._found.clear()
            hit = self._found[text] = tuple((kind, value) for value, kind in seen.items())
        return list(hit)

    def kind_of(self, value: str) -> str | None:
        return next((k for k, rx in self._compiled[1] if rx.fullmatch(value or "")), None)

    def typed_ids(self, text: str) -> list[tuple[str, str]]:
        """IDs of a known shape in what a person typed, in the forms people type them."""
        if self.typed_kinds is None and not self.typed_forms:
            return self.find_ids(text)
        out: dict[str, str] = {}
        for kind, rx in self._compiled[1]:
            if self.typed_kinds is not None and kind not in self.typed_kinds:
                continue
            for m in re.finditer(rf"(?<![\w#-]){rx.pattern}(?![\w-])", text or ""):
                out.setdefault(m.group(0), kind)
        for kind, (pattern, template) in self.typed_forms.items():
            for m in re.finditer(pattern, text or ""):
                out.setdefault(m.expand(template), kind)
        return [(k, v) for v, k in out.items()]

    # --- a tool's result and arguments, read by its declaration -----------------------------

    def ids(self, tool: str, result) -> list[tuple[str, str, str]]:
        d = self.tools.get(tool)
        return d.ids(result, kind_of=self.kind_of) if d else []

    def ownership(self, tool: str, result, found: list[tuple[str, str]]) -> tuple[str, list[str], list[str]]:
        """Whose the records a result holds are: (the customer its declared path names, the found
        (value, kind) values of kinds customers own, the customer IDs a lookup that identifies the
        customer returned). Nothing where the domain names no customer kind."""
        d = self.tools.get(tool)
        if d is None or not self.customer_kind:
            return "", [], []
        owns = self.customer_owns or [self.owner_kind]
        return (
            d.customer_of(result),
            [v for v, k in found if k in owns],
            [v for v, k in found if k == self.customer_kind] if d.identifies else [],
        )

    def owners(self, tool: str, result) -> dict[str, str]:
        d = self.tools.get(tool)
        return d.owners(result, owner_kind=self.owner_kind) if d else {}

    def descriptions(self, tool: str, result) -> dict[str, str]:
        d = self.tools.get(tool)
        return d.descriptions(result, owner_kind=self.owner_kind) if d else {}

    def money_moved(self, tool: str, result) -> list[Movement]:
        d = self.tools.get(tool)
        return d.money_moved(result, owner_kind=self.owner_kind) if d else []

    def order_totals(self, tool: str, result) -> list[Totals]:
        d = self.tools.get(tool)
        return d.order_totals(result) if d else []

    def id_args(self, tool: str, arguments) -> list[tuple[str, str, str]]:
        d = self.tools.get(tool)
        return d.id_args(arguments, kind_of=self.kind_of) if d else []

    def looked_up(self, tool: str, arguments, result) -> list[tuple[str, str]]:
        """(value, kind) of the IDs a lookup was called with, when it answered with something: the
        system knows them, whether or not its answer repeats them (a user's details need not
        carry the user ID they were asked for). A write proves nothing this way, nor an empty
        answer (a search that found nothing)."""
        d = self.tools.get(tool)
        if d is None or not d.lookup or d.write or ToolDecl._json(result) in (None, "", [], {}):
            return []
        return [(v, k) for _path, k, v in d.id_args(arguments, kind_of=self.kind_of)]


# --- the registry ---------------------------------------------------------------------------

_DOMAINS: dict[str, Domain] = {}
_LOADED = threading.Event()
_LOCK = threading.RLock()


def register_domain(domain: Domain) -> Domain:
    """Make a domain known by its name (a domain module calls this when imported)."""
    with _LOCK:
        if domain.name in _DOMAINS and _DOMAINS[domain.name] is not domain:
            raise ValueError(f"domain {domain.name!r} registered twice")
        _DOMAINS[domain.name] = domain
    return domain


def load_domains() -> None:
    """Import the modules `settings.SUNDRY_DOMAINS` names (each registers its domain). Idempotent."""
    if _LOADED.is_set():
        return
    with _LOCK:
        if _LOADED.is_set():
            return
        for module in getattr(settings, "SUNDRY_DOMAINS", ()):
            importlib.import_module(module)
        _LOADED.set()


def get_domain(name: str | None = None) -> Domain:
    """The named domain, or the default: `settings.SUNDRY_DEFAULT_DOMAIN`, else the first loaded."""
    load_domains()
    if not name:
        name = getattr(settings, "SUNDRY_DEFAULT_DOMAIN", "") or next(iter(_DOMAINS), "")
    try:
        return _DOMAINS[name]
    except KeyError:
        raise LookupError(
            f"unknown domain {name!r}; known: {', '.join(_DOMAINS) or 'none'} "
            "(settings.SUNDRY_DOMAINS names the modules that register them)"
        ) from None


def domains() -> dict[str, Domain]:
    load_domains()
    return dict(_DOMAINS)


def tools_for(domain: Domain) -> list[Tool]:
    """The tools a ticket in `domain` may call, in registry order: Sundry's own lane tools and the
    domain's in-process tools; then the domain's runtime tools the registry does not hold (remote ones)."""
    runtime = domain._runtime
    out = [t for n, t in REGISTRY.items() if t.local or (n in domain.tools and runtime.get(n, t) is t)]
    out += [t for n, t in runtime.items() if REGISTRY.get(n) is not t]
    return out


def tool_named(domain: Domain, name: str) -> Tool | None:
    """The tool a ticket in `domain` calls by `name`; None when it has none of that name."""
    tool = domain._runtime.get(name) or REGISTRY.get(name)
    return tool if tool is not None and (tool.local or name in domain.tools) else None


def offline_model(domain: Domain | None = None):
    """A new instance of the domain's in-process offline model (the default domain's if it names none)."""
    domain = domain or get_domain()
    where = domain.offline_model or get_domain().offline_model
    if not where:
        raise LookupError(f"domain {domain.name!r} names no offline model; give its classes a network model")
    module, _, attr = where.partition(":")
    return getattr(importlib.import_module(module), attr)()


def domain_for(ticket_class) -> Domain:
    """The domain a ticket class works in: the one it names, else the default."""
    return get_domain(getattr(ticket_class, "domain", "") or None)


__all__ = [
    "CAPABILITIES",
    "GENERIC_PROMPT",
    "INFER",
    "DescribeDecl",
    "Domain",
    "GENERIC_STATE_FIELDS",
    "StateFieldDecl",
    "MoneyDecl",
    "RefundDecl",
    "ToolDecl",
    "TotalsDecl",
    "domain_for",
    "domains",
    "offline_model",
    "tool_named",
    "tools_for",
    "get_domain",
    "load_domains",
    "register_domain",
    "scalar_ids",
    "select",
    "ID_KIND_KEY",
]
