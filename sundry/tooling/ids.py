"""Identifier fields: how a tool's argument and result models mark the values that are IDs.

The ID guard checks marked arguments, and the ledger harvests marked result fields —
by schema, never by scanning prose.
"""

from __future__ import annotations

import functools
import typing
from typing import Any

from pydantic import BaseModel, Field

ID_KIND_KEY = "x-id-kind"


def IdField(kind: str, description: str = "", **kwargs) -> Any:
    """A pydantic field that holds an identifier of `kind` (the domain's `id_patterns` name the kinds)."""
    return Field(
        description=description or f"{kind} identifier, copied verbatim",
        json_schema_extra={ID_KIND_KEY: kind},
        **kwargs,
    )


def id_fields(model: type[BaseModel]) -> dict[str, str]:
    """Top-level fields of `model` marked as identifiers: {field_name: kind}."""
    out = {}
    for name, info in model.model_fields.items():
        extra = info.json_schema_extra if isinstance(info.json_schema_extra, dict) else {}
        if ID_KIND_KEY in extra:
            out[name] = extra[ID_KIND_KEY]
    return out


def iter_ids(instance: BaseModel, path: str = ""):
    """Yield (path, kind, value) for every marked identifier in a result, nested models and lists included."""
    marked = id_fields(type(instance))
    for name in type(instance).model_fields:
        value = getattr(instance, name)
        here = f"{path}.{name}" if path else name
        if name in marked and value:
            for i, v in enumerate(value if isinstance(value, list) else [value]):
                yield (f"{here}[{i}]" if isinstance(value, list) else here), marked[name], str(v)
        elif isinstance(value, BaseModel):
            yield from iter_ids(value, here)
        elif isinstance(value, list):
            for i, item in enumerate(value):
                if isinstance(item, BaseModel):
                    yield from iter_ids(item, f"{here}[{i}]")


def _models_in(annotation) -> list[type[BaseModel]]:
    """The pydantic models a field's annotation holds: X, list[X], X | None."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for arg in typing.get_args(annotation) for m in _models_in(arg)]


def declared_ids(model: type[BaseModel], data) -> set[str]:
    """The values at `model`'s declared ID paths in `data` (a result as stored JSON), nested models included.

    Read by the schema only: free text (a product name, a tracking event, a
    search's echoed `query`) never yields an ID, whatever it says. Data that
    does not fit the schema yields what fits and nothing else.
    """
    out: set[str] = set()
    if not isinstance(data, dict):
        return out
    for name, marked, nested_models in _id_schema(model):
        value = data.get(name)
        if value is None or value == "":
            continue
        values = value if isinstance(value, list) else [value]
        if marked:
            out.update(str(v) for v in values if isinstance(v, (str, int)) and not isinstance(v, bool) and v != "")
            continue
        for nested in nested_models:
            for v in values:
                out |= declared_ids(nested, v)
    return out


@functools.lru_cache(maxsize=512)
def _id_schema(model: type[BaseModel]) -> tuple[tuple[str, bool, tuple[type[BaseModel], ...]], ...]:
    """Per field of `model`, in order: (name, marked as an ID, the models it nests). A model's schema
    does not change once defined; every step's request walks its tool results by it."""
    marked = id_fields(model)
    return tuple(
        (name, name in marked, () if name in marked else tuple(_models_in(info.annotation)))
        for name, info in model.model_fields.items()
    )


def id_owners(instance: BaseModel, owner_kind: str = "order") -> dict[str, str]:
    """For IDs nested inside a result, the entity they belong to: {value: owner ID}.

    A parcel's tracking number inside an order's result belongs to that
    order; the ledger says so, so the link survives when the raw result has
    been compacted away. `owner_kind` is the domain's (`Domain.owner_kind`).
    """
    top = {kind: value for path, kind, value in iter_ids(instance) if "." not in path and "[" not in path}
    owner = top.get(owner_kind)
    if not owner:
        return {}
    return {
        value: owner for path, _kind, value in iter_ids(instance) if ("." in path or "[" in path) and value != owner
    }
