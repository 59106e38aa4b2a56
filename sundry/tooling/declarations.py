"""What a tool's result model declares about itself, for code that reads results by schema.

A result model (or a model nested in one) may carry, as class variables:

- `describe`: one `Describe` or a tuple of them — how an identifier field is
  described in the ID ledger ("Air Fryer 5.5L · delivered"), filled from the
  model's own fields;
- `moves_money`: a `MoneyMoved` — this model records money that moved (the
  refund inside a cancellation's result as much as a refund's own result);
- `reports_totals`: an `OrderTotals` — this model reports an order's figures as
  the shop has them now.

Code never parses prose to learn these, and never asks which tool produced a
result: the effects, the money lane and the ledger read the declarations.
`check_declarations` runs when a tool is registered, so a declaration naming a
field the model does not have fails at import, not at the first refund.
"""

from __future__ import annotations

import re
import typing
from dataclasses import dataclass

from pydantic import BaseModel

from sundry.tooling.ids import id_fields

# In a template or an order field: the order the whole result belongs to (see `base.id_owners`).
OWNER = "owner"
# A template path starting here reads the top-level result (a nested refund's currency).
ROOT = "root"
# The longest description stored or shown; longer ones end in "…".
DESCRIPTION_MAX = 100


@dataclass(frozen=True)
class Describe:
    """The ledger description of the ID in `id_field`: `template` with `{field}` filled in.

    `{items}` is a field's value (a list joined with ", "), `{items.product}` a
    field of each model in a list, `{owner}` the result's order, `{root.currency}`
    a field of the top-level result.
    """

    id_field: str
    template: str


@dataclass(frozen=True)
class MoneyMoved:
    """This model records money that moved: amount in minor units, currency, the order it moved on."""

    kind: str  # "refund"
    amount_field: str
    currency_field: str
    order_field: str = OWNER
    id_field: str = ""


@dataclass(frozen=True)
class OrderTotals:
    """This model reports an order's money figures now. Paid is `paid_field`, or refunded + refundable."""

    order_field: str
    currency_field: str
    refunded_field: str
    paid_field: str = ""
    refundable_field: str = ""


@dataclass(frozen=True)
class Movement:
    kind: str
    order: str
    amount_cents: int
    currency: str
    id: str = ""


@dataclass(frozen=True)
class Totals:
    order: str
    currency: str
    paid_cents: int
    refunded_cents: int


_PLACEHOLDER = re.compile(r"\{([a-z_][a-z0-9_.]*)\}")


def _describes(model_cls) -> tuple[Describe, ...]:
    d = getattr(model_cls, "describe", None)
    if isinstance(d, Describe):
        return (d,)
    return tuple(x for x in (d or ()) if isinstance(x, Describe))


def _nested_models(annotation) -> list[type[BaseModel]]:
    """The pydantic models a field's annotation holds: X, list[X], X | None."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    out = []
    for arg in typing.get_args(annotation):
        out += _nested_models(arg)
    return out


def _field_model(model_cls, name: str) -> type[BaseModel] | None:
    info = model_cls.model_fields.get(name)
    models = _nested_models(info.annotation) if info else []
    return models[0] if models else None


def _path_exists(model_cls, path: str, root_cls) -> bool:
    parts = path.split(".")
    if parts[0] == OWNER:
        return len(parts) == 1
    if parts[0] == ROOT:
        model_cls, parts = root_cls, parts[1:]
        if not parts:
            return False
    for i, part in enumerate(parts):
        if part not in model_cls.model_fields:
            return False
        if i < len(parts) - 1:
            model_cls = _field_model(model_cls, part)
            if model_cls is None:
                return False
    return True


def check_declarations(model_cls: type[BaseModel], root_cls: type[BaseModel] | None = None) -> None:
    """Raise TypeError if a declaration on `model_cls` or a model nested in it names a missing field."""
    root_cls = root_cls or model_cls
    problems = []
    for d in _describes(model_cls):
        if d.id_field not in model_cls.model_fields:
            problems.append(f"describe names id field {d.id_field!r}")
        problems += [
            f"describe template names {p!r}"
            for p in _PLACEHOLDER.findall(d.template)
            if not _path_exists(model_cls, p, root_cls)
        ]
    money = getattr(model_cls, "moves_money", None)
    if isinstance(money, MoneyMoved):
        for name in (money.amount_field, money.currency_field, money.order_field, money.id_field):
            if name and name != OWNER and name not in model_cls.model_fields:
                problems.append(f"moves_money names {name!r}")
    totals = getattr(model_cls, "reports_totals", None)
    if isinstance(totals, OrderTotals):
        if not (totals.paid_field or totals.refundable_field):
            problems.append("reports_totals needs paid_field or refundable_field")
        for name in (
            totals.order_field,
            totals.currency_field,
            totals.refunded_field,
            totals.paid_field,
            totals.refundable_field,
        ):
            if name and name not in model_cls.model_fields:
                problems.append(f"reports_totals names {name!r}")
    if problems:
        raise TypeError(f"{model_cls.__name__}: " + "; ".join(problems))
    for name, info in model_cls.model_fields.items():
        for nested in _nested_models(info.annotation):
            if nested is not model_cls:
                check_declarations(nested, root_cls)


# --- reading a result by its declarations ---------------------------------------------------


def _walk(instance: BaseModel):
    """Every model in a result, the result itself first."""
    yield instance
    for name in type(instance).model_fields:
        value = getattr(instance, name)
        for v in value if isinstance(value, list) else [value]:
            if isinstance(v, BaseModel):
                yield from _walk(v)


def _owner(result: BaseModel, owner_kind: str = "order") -> str:
    return next(
        (
            str(getattr(result, n))
            for n, kind in id_fields(type(result)).items()
            if kind == owner_kind and getattr(result, n, None)
        ),
        "",
    )


def _value(instance: BaseModel, path: str, root: BaseModel, owner: str):
    parts = path.split(".")
    if parts[0] == OWNER:
        return owner
    if parts[0] == ROOT:
        values, parts = [root], parts[1:]
    else:
        values = [instance]
    for part in parts:
        nxt = []
        for v in values:
            got = getattr(v, part, None)
            nxt += got if isinstance(got, list) else [got]
        values = nxt
    values = [v for v in values if v not in (None, "")]
    return ", ".join(str(v) for v in values)


def clean_description(text: str, limit: int = DESCRIPTION_MAX) -> str:
    """One line, no ledger cell separator, at most `limit` characters."""
    text = " ".join((text or "").replace("|", "/").split())
    text = re.sub(r"^(?:[·,;:] ?)+|(?: ?[·,;:])+$", "", text).strip()
    text = re.sub(r"(?: ·)+ ·", " ·", text)
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def descriptions(result: BaseModel, owner_kind: str = "order") -> dict[str, str]:
    """{identifier: description} for every identifier a declaration in the result describes."""
    owner, out = _owner(result, owner_kind), {}
    for instance in _walk(result):
        for d in _describes(type(instance)):
            value = getattr(instance, d.id_field, None)
            if not value:
                continue
            text = _PLACEHOLDER.sub(lambda m: _value(instance, m.group(1), result, owner), d.template)
            text = clean_description(text)
            for v in value if isinstance(value, list) else [value]:
                if text:
                    out[str(v)] = text
    return out


def money_moved(result: BaseModel, owner_kind: str = "order") -> list[Movement]:
    """Every movement of money a result records, wherever in it the declaring model sits."""
    owner, out = _owner(result, owner_kind), []
    for instance in _walk(result):
        m = getattr(type(instance), "moves_money", None)
        if not isinstance(m, MoneyMoved):
            continue
        amount = getattr(instance, m.amount_field, None)
        if not isinstance(amount, int) or amount <= 0:
            continue
        order = owner if m.order_field == OWNER else str(getattr(instance, m.order_field, "") or "")
        out.append(
            Movement(
                m.kind,
                order,
                amount,
                str(getattr(instance, m.currency_field, "") or ""),
                str(getattr(instance, m.id_field, "") or "") if m.id_field else "",
            )
        )
    return out


def order_totals(result: BaseModel) -> list[Totals]:
    """Every order's figures a result reports."""
    out = []
    for instance in _walk(result):
        t = getattr(type(instance), "reports_totals", None)
        if not isinstance(t, OrderTotals):
            continue
        refunded = int(getattr(instance, t.refunded_field))
        paid = (
            int(getattr(instance, t.paid_field))
            if t.paid_field
            else refunded + int(getattr(instance, t.refundable_field))
        )
        out.append(
            Totals(str(getattr(instance, t.order_field)), str(getattr(instance, t.currency_field)), paid, refunded)
        )
    return out


def model_declares(model_cls: type[BaseModel], attr: str) -> bool:
    """Whether `model_cls` or a model nested in it declares `attr` (e.g. moves_money)."""
    if getattr(model_cls, attr, None) is not None:
        return True
    return any(
        model_declares(n, attr)
        for info in model_cls.model_fields.values()
        for n in _nested_models(info.annotation)
        if n is not model_cls
    )


__all__ = [
    "Describe",
    "MoneyMoved",
    "OrderTotals",
    "Movement",
    "Totals",
    "OWNER",
    "ROOT",
    "DESCRIPTION_MAX",
    "check_declarations",
    "descriptions",
    "money_moved",
    "order_totals",
    "clean_description",
    "model_declares",
]
