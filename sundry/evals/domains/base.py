"""Declarative ID descriptions for tools nobody here designed.

A domain says, per foreign tool, which argument and result fields hold
identifiers and of what kind, with a tiny path language:

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

import json
import re
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from pydantic import BaseModel, ConfigDict, create_model

from sundry.agent.guards import repeat_key
from sundry.context.lanes import TurnData
from sundry.context.rules import infer_enforcement
from sundry.tooling.tools import IdField, Tool

INFER = "*"  # kind taken from the value's shape (telecom's get_details_by_id takes any id)


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


def _scalar_ids(values: list[Any]) -> list[str]:
    return [str(v) for v in values if isinstance(v, (str, int)) and not isinstance(v, bool) and str(v).strip()]


def field_name(path: str) -> str:
    """An argument path as a Python identifier, for the guard's argument model."""
    return re.sub(r"\W+", "_", path.replace("[]", "")).strip("_") or "root"


@dataclass(frozen=True)
class ToolDesc:
    args: dict[str, str] = field(default_factory=dict)  # argument path → kind
    results: dict[str, str] = field(default_factory=dict)  # JSON result path → kind
    bare: tuple[str, ...] = ()  # regexes for string results; named groups are kinds
    write: bool = False  # changes the world (τ²'s ToolType.WRITE)
    lookup: bool = False  # returns records; may take an ID the customer typed
    target: str | None = None  # argument path naming what a write acts on
    repeat_key: tuple[str, ...] = ()  # a write without a target: the arguments that make it the same write
    description: str = ""


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
    name: str
    policy: str
    id_patterns: dict[str, str]  # kind → regex, most specific first
    tools: dict[str, ToolDesc]
    planted: Planted
    # Sundry's structured checks name Sundry's tools; this maps them onto the domain's.
    rule_tools: dict[str, tuple[str, ...]] = field(default_factory=dict)
    # Kinds a customer plausibly types; shapes too loose to spot in prose are left out.
    typed_kinds: tuple[str, ...] = ()
    # How customers type a kind when it differs from the stored shape: kind → (regex, template).
    # Retail order numbers are "#W1234567"; customers write "W1234567" or "1234567".
    typed_forms: dict[str, tuple[str, str]] = field(default_factory=dict)

    # --- what the harness asks of every domain --------------------------------------

    def tool_names(self) -> list[str]:
        return list(self.tools)

    def tool_specs(self) -> list[dict]:
        specs = []
        for name, desc in self.tools.items():
            props = {field_name(p): {"type": "string", "description": f"{k} identifier, copied verbatim"}
                     for p, k in desc.args.items()}
            specs.append({"name": name, "description": desc.description or name.replace("_", " "),
                          "parameters": {"type": "object", "properties": props}})
        return specs

    @cached_property
    def _compiled(self) -> list[tuple[str, re.Pattern]]:
        return [(k, re.compile(p)) for k, p in self.id_patterns.items()]

    def kind_of(self, value: str) -> str:
        return next((k for k, rx in self._compiled if rx.fullmatch(value)), "id")

    def typed_ids(self, text: str) -> list[tuple[str, str]]:
        """IDs of a known shape in what a person typed; they enter the ledger unverified."""
        out: dict[str, str] = {}
        for kind, rx in self._compiled:
            if kind not in self.typed_kinds:
                continue
            for m in re.finditer(rf"(?<![\w#-]){rx.pattern}(?![\w-])", text or ""):
                out.setdefault(m.group(0), kind)
        for kind, (pattern, template) in self.typed_forms.items():
            for m in re.finditer(pattern, text or ""):
                out.setdefault(m.expand(template), kind)
        return [(k, v) for v, k in out.items()]

    def _kind(self, kind: str, value: str) -> str:
        return self.kind_of(value) if kind == INFER else kind

    def owners(self, tool: str, turn: TurnData) -> dict[str, str]:
        """{nested ID: the order it belongs to}, where the domain knows (see tools.base.id_owners)."""
        return {}

    def harvest(self, tool: str, turn: TurnData) -> list[tuple[str, str]]:
        """(kind, value) for every identifier the description marks in a successful result."""
        desc = self.tools.get(tool)
        if desc is None or not (turn.payload or {}).get("ok", True):
            return []
        text = turn.text or ""
        try:
            data = json.loads(text)
        except ValueError:
            data = text
        out: list[tuple[str, str]] = []
        if isinstance(data, str):
            for pattern in desc.bare:
                for m in re.finditer(pattern, data):
                    out += [(kind, v) for kind, v in m.groupdict().items() if v]
        else:
            for path, kind in desc.results.items():
                out += [(self._kind(kind, v), v) for v in _scalar_ids(select(data, path))]
        seen: set[str] = set()
        return [(k, v) for k, v in out if not (v in seen or seen.add(v))]

    def id_args(self, tool: str, arguments: dict | str) -> list[tuple[str, str, str]]:
        desc = self.tools.get(tool)
        if desc is None or not isinstance(arguments, dict):
            return []
        return [(path, self._kind(kind, v), v) for path, kind in desc.args.items()
                for v in _scalar_ids(select(arguments, path))]

    def side_effect(self, tool: str) -> bool:
        return bool(self.tools.get(tool) and self.tools[tool].write)

    def reversible(self, tool: str) -> bool:
        return not tool.startswith("cancel")

    def target(self, tool: str, arguments: dict | str) -> str:
        """What a write acts on: its target argument, or for a write without one its repeat key
        (`agent.guards.repeat_key`, the same key the guard holds repeats by)."""
        desc = self.tools.get(tool)
        if not desc or not isinstance(arguments, dict):
            return ""
        if not desc.target:
            return repeat_key(arguments, desc.repeat_key) if desc.write else ""
        return ",".join(_scalar_ids(select(arguments, desc.target)))

    @cached_property
    def lookup_tools(self) -> frozenset[str]:
        return frozenset(n for n, d in self.tools.items() if d.lookup)

    def enforcement(self, text: str) -> dict:
        blocked = [t for sundry_tool in infer_enforcement(text).get("block_tools", [])
                   for t in self.rule_tools.get(sundry_tool, ())]
        return {"block_tools": blocked} if blocked else {}

    # --- the runtime guard, on foreign tools ----------------------------------------------

    @cached_property
    def _guard_tools(self) -> dict[str, Tool]:
        out = {}
        for name, desc in self.tools.items():
            fields = {field_name(p): (Any, IdField(kind if kind != INFER else "id", default=None))
                      for p, kind in desc.args.items()}
            model = create_model(f"{name}_ids", __config__=ConfigDict(extra="ignore"), **fields)
            out[name] = Tool(name=name, description=desc.description, args_model=model, result_model=BaseModel,
                             run=lambda ctx, args: None, side_effect=desc.write, resolves=desc.write,
                             target_arg=field_name(desc.target) if desc.target else None,
                             repeat_key=desc.repeat_key)
        return out

    def guard_tool(self, tool: str) -> Tool | None:
        return self._guard_tools.get(tool)

    def guard_arguments(self, tool: str, arguments: dict | str) -> dict | str:
        """The call's identifier arguments, flattened to the guard tool's fields (nested ones included)."""
        desc = self.tools.get(tool)
        if desc is None or not isinstance(arguments, dict):
            return arguments
        out: dict[str, Any] = {}
        for path in desc.args:
            values = _scalar_ids(select(arguments, path))
            if values:
                out[field_name(path)] = values if ("[]" in path or len(values) > 1) else values[0]
        for name in desc.repeat_key:  # what the repeat guard compares, as written
            if name in arguments:
                out.setdefault(name, arguments[name])
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
