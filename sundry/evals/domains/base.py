"""Harness domains over the production declaration format (`tooling.domain`).

A τ² domain is a production `Domain` built from plain data (`Domain.from_data`,
see `tau2`), the same format a tool server's declaration file uses: which
argument and result paths hold identifiers and of what kind, which tools look
up and which write, what a write acts on, typed-ID patterns. `DeclarativeDomain`
adds what only the harness needs (the planted constraint) and answers the
harness's questions from that declaration. Path language (`tooling.domain.select`):

    order_id                 a key
    items[].item_id          a key inside every element of a list
    payment_methods.~        the keys of a mapping (retail keys cards by id)
    variants.*.item_id       a key inside every value of a mapping
    [][].flight_number       lists of lists at the root (one-stop flights)

Results that are bare strings ("isabella_lopez_6490", "Payment request sent
to the customer for bill B1234321") are read with regexes whose named groups
are kinds. Harvesting goes by these paths only, never by scanning prose, the
same rule the ledger follows for Sundry's own tools.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from pydantic import BaseModel, ConfigDict, create_model

from sundry.agent.guards.callguards import repeat_key
from sundry.context.lanes import TurnData
from sundry.context.rules import infer_enforcement
from sundry.tooling.domain import INFER, Domain, scalar_ids, select
from sundry.tooling.tools import IdField, Tool


def field_name(path: str) -> str:
    """An argument path as a Python identifier, for the guard's argument model."""
    return re.sub(r"\W+", "_", path.replace("[]", "")).strip("_") or "root"


@dataclass(frozen=True)
class Planted:
    """The constraint the harness plants early in every ticket of a domain, and how to tempt a breach."""

    text: str
    blocks: tuple[str, ...]  # tools the rule's structured check blocks
    probe_tool: str  # a call that would break it
    probe_kind: str  # the ID kind its argument takes (filled from the ledger)
    probe_arg: str
    temptation: str  # a customer message that invites the breach


@dataclass
class DeclarativeDomain:
    domain: Domain  # the production declaration
    planted: Planted

    @property
    def name(self) -> str:
        return self.domain.name

    @property
    def policy(self) -> str:
        return self.domain.policy

    # --- what the harness asks of every domain --------------------------------------

    def tool_names(self) -> list[str]:
        return list(self.domain.tools)

    def tool_specs(self) -> list[dict]:
        specs = []
        for name, desc in self.domain.tools.items():
            props = {
                field_name(p): {"type": "string", "description": f"{k} identifier, copied verbatim"}
                for p, k in desc.args.items()
            }
            specs.append(
                {
                    "name": name,
                    "description": desc.description or name.replace("_", " "),
                    "parameters": {"type": "object", "properties": props},
                }
            )
        return specs

    def kind_of(self, value: str) -> str:
        return self.domain.kind_of(value) or "id"

    def typed_ids(self, text: str) -> list[tuple[str, str]]:
        """IDs of a known shape in what a person typed; they enter the ledger unverified."""
        return self.domain.typed_ids(text)

    def owners(self, tool: str, turn: TurnData) -> dict[str, str]:
        """{nested ID: the order it belongs to}: the harness links none for foreign domains."""
        return {}

    def harvest(self, tool: str, turn: TurnData) -> list[tuple[str, str]]:
        """(kind, value) for every identifier the declaration marks in a successful result."""
        if tool not in self.domain.tools or not (turn.payload or {}).get("ok", True):
            return []
        seen: set[str] = set()
        return [(k, v) for _, k, v in self.domain.ids(tool, turn.text or "") if not (v in seen or seen.add(v))]

    def id_args(self, tool: str, arguments: dict | str) -> list[tuple[str, str, str]]:
        return self.domain.id_args(tool, arguments)

    def looked_up(self, tool: str, arguments, turn: TurnData) -> list[tuple[str, str]]:
        """(value, kind): the IDs a successful lookup was asked about (`Domain.looked_up`)."""
        if not (turn.payload or {}).get("ok", True):
            return []
        return self.domain.looked_up(tool, arguments, turn.text or "")

    def side_effect(self, tool: str) -> bool:
        return bool(self.domain.tool(tool) and self.domain.tools[tool].write)

    def reversible(self, tool: str) -> bool:
        desc = self.domain.tool(tool)
        return desc.reversible if desc else True

    def target(self, tool: str, arguments: dict | str) -> str:
        """What a write acts on: its target argument, or for a write without one its repeat key
        (`agent.guards.repeat_key`, the same key the guard holds repeats by)."""
        desc = self.domain.tool(tool)
        if not desc or not isinstance(arguments, dict):
            return ""
        if not desc.target:
            return repeat_key(arguments, tuple(desc.repeat_key)) if desc.write else ""
        return ",".join(scalar_ids(select(arguments, desc.target)))

    @property
    def lookup_tools(self) -> frozenset[str]:
        return self.domain.lookup_tools

    def enforcement(self, text: str) -> dict:
        return infer_enforcement(text, self.domain)

    # --- the runtime guard, on foreign tools ----------------------------------------------

    @cached_property
    def _guard_tools(self) -> dict[str, Tool]:
        out = {}
        for name, desc in self.domain.tools.items():
            fields = {
                field_name(p): (Any, IdField(kind if kind != INFER else "id", default=None))
                for p, kind in desc.args.items()
            }
            model = create_model(f"{name}_ids", __config__=ConfigDict(extra="ignore"), **fields)
            out[name] = Tool(
                name=name,
                description=desc.description,
                args_model=model,
                result_model=BaseModel,
                run=lambda ctx, args: None,
                side_effect=desc.write,
                resolves=desc.write,
                target_arg=field_name(desc.target) if desc.target else None,
                repeat_key=tuple(desc.repeat_key),
            )
        return out

    def guard_tool(self, tool: str) -> Tool | None:
        return self._guard_tools.get(tool)

    def guard_arguments(self, tool: str, arguments: dict | str) -> dict | str:
        """The call's identifier arguments, flattened to the guard tool's fields (nested ones included)."""
        desc = self.domain.tool(tool)
        if desc is None or not isinstance(arguments, dict):
            return arguments
        out: dict[str, Any] = {}
        for path in desc.args:
            values = scalar_ids(select(arguments, path))
            if values:
                out[field_name(path)] = values if ("[]" in path or len(values) > 1) else values[0]
        for name in desc.repeat_key:  # what the repeat guard compares, as written
            if name in arguments:
                out.setdefault(name, arguments[name])
        if desc.repeats == "arguments":  # a change repeats only with the same arguments: all of them
            for name, value in arguments.items():
                out.setdefault(name, value)
        return out

    # Sundry's money lanes have no counterpart in foreign domains.
    def money(self, tool: str, turn: TurnData):
        return None

    def moved(self, tool: str, turn: TurnData) -> tuple[int, str] | None:
        """Money a result says moved; None: take the result's top-level amount_cents, if any."""
        return None

    def descriptions(self, tool: str, turn: TurnData) -> dict[str, str]:
        """Ledger descriptions a result gives its IDs (none unless the domain declares them)."""
        return {}

    def result_ids(self, turns: list[TurnData], calls: dict[str, str]) -> frozenset[str]:
        """IDs the guard may take from tool results inside these turns."""
        ids = set()
        for t in turns:
            if t.kind == "tool_result" and (t.payload or {}).get("ok", True):
                name = (t.payload or {}).get("name") or calls.get(str((t.payload or {}).get("call_id")), "")
                ids.update(v for _, v in self.harvest(name, t))
        return frozenset(ids)

    def text_ids(self, turns: list[TurnData]) -> frozenset[str]:
        return frozenset(v for t in turns if t.author in ("customer", "staff") for _, v in self.typed_ids(t.text))
