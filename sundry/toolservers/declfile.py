"""A tool server's declaration file: what its tools' arguments and results mean, validated by pydantic.

The file is JSON in the domain declaration format (`name`, `prompt`, `id_patterns`,
`typed_kinds`, `typed_forms`, `tools`: one entry per tool with `args` and `results`
— path → ID kind —, `bare` regexes for plain-string results, `lookup`, `write`,
`target`, `repeat_key`, `consent`, `describe` …). The server supplies each tool's
JSON Schema when it lists its tools; the file adds what a schema cannot say.

Paths:

    order_id                 a key
    items[].item_id          a key inside every element of a list
    payment_methods.~        the keys of a mapping
    variants.*.item_id       a key inside every value of a mapping

This module reads the format for tool servers; it is the same shape as the domain
declarations the in-process tools use, so one file serves both.
"""

from __future__ import annotations

import json
import re
from functools import cached_property
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from sundry.core import money
from sundry.tooling.declarations import clean_description

INFER = "*"
CONSENT_ACTIONS = ("refund", "cancel", "return", "replace")


class DeclarationError(ValueError):
    """The file is missing, not JSON, or not in the format; the message says where."""


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


class _Decl(BaseModel):
    model_config = ConfigDict(extra="forbid")


class DescribeDecl(_Decl):
    at: str = ""
    id: str
    template: str


class MoneyDecl(_Decl):
    at: str = ""
    kind: str = "refund"
    amount: str
    amount_unit: Literal["minor", "major"] = "minor"
    currency: str
    target: str = "owner"
    id: str = ""


class ToolDecl(_Decl):
    name: str
    description: str = ""
    parameters: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}})
    result_schema: dict[str, Any] | None = None
    args: dict[str, str] = Field(default_factory=dict)
    results: dict[str, str] = Field(default_factory=dict)
    bare: list[str] = Field(default_factory=list)
    owner: str = ""
    lookup: bool = False
    write: bool = False
    resolves: bool | None = None
    reversible: bool = True
    local: bool = False
    target: str | None = None
    repeat_key: list[str] = Field(default_factory=list)
    consent: Literal["refund", "cancel", "return", "replace"] | None = None
    capabilities: list[str] = Field(default_factory=list)
    money: list[MoneyDecl] = Field(default_factory=list)
    # Accepted as the domain format has them; a remote tool's refund limit and order figures are not
    # read yet (money that moved is: the action taken carries its amount).
    refund: dict[str, str] | None = None
    totals: list[dict[str, str]] = Field(default_factory=list)
    describe: list[DescribeDecl] = Field(default_factory=list)
    approvable: bool | None = None
    declared: bool = True

    @property
    def completes(self) -> bool:
        return self.write if self.resolves is None else self.resolves

    def ids(self, data: Any, kind_of=lambda v: None) -> list[tuple[str, str, str]]:
        """(path, kind, value) for every identifier the declaration marks in a result (parsed JSON or a string)."""
        out = []
        if isinstance(data, str):
            for pattern in self.bare:
                for m in re.finditer(pattern, data):
                    out += [("", kind, v) for kind, v in m.groupdict().items() if v]
            return out
        for path, kind in self.results.items():
            for v in scalar_ids(select(data, path)):
                out.append((path, (kind_of(v) or "id") if kind == INFER else kind, v))
        return out

    def owner_value(self, data: Any, owner_kind: str) -> str:
        if isinstance(data, str):
            return ""
        if self.owner:
            found = scalar_ids(select(data, self.owner))
            return found[0] if found else ""
        for path, kind in self.results.items():
            if kind == owner_kind and _top_level(path):
                found = scalar_ids(select(data, path))
                if found:
                    return found[0]
        return ""

    def owners(self, data: Any, owner_kind: str = "order") -> dict[str, str]:
        """{nested ID: the owner it belongs to} (an item inside an order's result)."""
        owner = self.owner_value(data, owner_kind)
        if not owner:
            return {}
        return {v: owner for path, _kind in self.results.items() if not _top_level(path)
                for v in scalar_ids(select(data, path)) if v != owner}

    def descriptions(self, data: Any, owner_kind: str = "order") -> dict[str, str]:
        """{ID: what it is}, from the describe templates over the result's own fields."""
        if isinstance(data, str):
            return {}
        owner, out = self.owner_value(data, owner_kind), {}
        for d in self.describe:
            for obj in (o for o in select(data, d.at) if isinstance(o, dict)):
                value = obj.get(d.id)
                if not value:
                    continue
                text = clean_description(re.sub(r"\{([a-z_][a-z0-9_.]*)\}",
                                                lambda m: _fill(obj, m.group(1), data, owner), d.template))
                for v in value if isinstance(value, list) else [value]:
                    if text:
                        out[str(v)] = text
        return out

    def money_moved(self, data: Any) -> list[tuple[int, str]]:
        """(amount in minor units, currency) for every movement of money the `money` entries find."""
        if isinstance(data, str):
            return []
        out = []
        for m in self.money:
            for obj in (o for o in select(data, m.at) if isinstance(o, dict)):
                currency = _currency(obj, m.currency, data)
                value = obj.get(m.amount)
                try:
                    cents = (value if isinstance(value, int) and not isinstance(value, bool) else None) \
                        if m.amount_unit == "minor" else money.parse_major(str(value), currency)
                except money.MoneyError:
                    cents = None
                if cents and cents > 0 and currency:
                    out.append((cents, currency))
        return out

    def id_args(self, arguments: Any, kind_of=lambda v: None) -> list[tuple[str, str, str]]:
        if not isinstance(arguments, dict):
            return []
        return [(path, (kind_of(v) or "id") if kind == INFER else kind, v) for path, kind in self.args.items()
                for v in scalar_ids(select(arguments, path))]


def _currency(obj: dict, name: str, root: Any) -> str:
    if name.startswith("root."):
        found = select(root, name[5:])
        return str(found[0]).upper() if found and found[0] else ""
    return str(obj.get(name) or "").upper()


def _fill(obj: dict, path: str, root: Any, owner: str) -> str:
    parts = path.split(".")
    if parts[0] == "owner":
        return owner
    values = [root] if parts[0] == "root" else [obj]
    for part in parts[1:] if parts[0] == "root" else parts:
        nxt = []
        for v in values:
            got = v.get(part) if isinstance(v, dict) else None
            nxt += got if isinstance(got, list) else [got]
        values = nxt
    return ", ".join(str(v) for v in values if v not in (None, ""))


class Declarations(_Decl):
    """A declaration file: the domain a server's tools belong to."""

    name: str
    prompt: str = ""
    policy: str = ""
    id_patterns: dict[str, str] = Field(default_factory=dict)
    id_examples: dict[str, str] = Field(default_factory=dict)
    typed_kinds: list[str] | None = None
    typed_forms: dict[str, tuple[str, str]] = Field(default_factory=dict)
    owner_kind: str = "order"
    internal_kinds: list[str] = Field(default_factory=list)
    lookup_hints: dict[str, list[str]] = Field(default_factory=dict)
    tools: dict[str, ToolDecl] = Field(default_factory=dict)
    offline_model: str = ""

    def model_post_init(self, __context) -> None:
        problems = []
        for key, tool in self.tools.items():
            if tool.name != key:
                problems.append(f"tools.{key}: name says {tool.name!r}")
            if tool.target and tool.target not in tool.args:
                problems.append(f"tools.{key}: target {tool.target!r} is not one of its ID arguments")
        for kind, pattern in self.id_patterns.items():
            try:
                re.compile(pattern)
            except re.error as exc:
                problems.append(f"id_patterns.{kind}: {exc}")
        for kind, (pattern, _template) in self.typed_forms.items():
            try:
                re.compile(pattern)
            except re.error as exc:
                problems.append(f"typed_forms.{kind}: {exc}")
        if problems:
            raise ValueError("; ".join(problems))

    @cached_property
    def _compiled(self) -> list[tuple[str, re.Pattern]]:
        return [(k, re.compile(p)) for k, p in self.id_patterns.items()]

    def kind_of(self, value: str) -> str | None:
        return next((k for k, rx in self._compiled if rx.fullmatch(value or "")), None)

    def find_ids(self, text: str) -> list[tuple[str, str]]:
        """(kind, value) for every identifier of a declared format in text, in order, unique."""
        out: dict[str, str] = {}
        for kind, rx in self._compiled:
            for m in re.finditer(rf"(?<![\w#-]){rx.pattern}(?![\w-])", text or ""):
                out.setdefault(m.group(0), kind)
        return [(k, v) for v, k in out.items()]

    def typed_ids(self, text: str) -> list[tuple[str, str]]:
        """IDs a person typed: the kinds customers type, and the forms they type them in (W1234567 → #W1234567)."""
        kinds = self.typed_kinds if self.typed_kinds is not None else list(self.id_patterns)
        out = {v: k for k, v in self.find_ids(text) if k in kinds}
        for kind, (pattern, template) in self.typed_forms.items():
            for m in re.finditer(pattern, text or ""):
                out.setdefault(m.expand(template), kind)
        return [(k, v) for v, k in out.items()]


def undeclared(name: str, parameters: dict, *, read_only: bool) -> ToolDecl:
    """A listed tool the file does not declare: usable, nothing harvested; a write unless the
    server says it only reads, and then held for staff by default."""
    return ToolDecl(name=name, parameters=parameters or {"type": "object", "properties": {}}, write=not read_only,
                    approvable=not read_only, declared=False)


def parse(text: str, *, where: str = "declaration file") -> Declarations:
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise DeclarationError(f"{where}: not JSON ({exc})") from None
    try:
        return Declarations.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[:5]
        problems = "; ".join(f"{'.'.join(str(p) for p in e['loc']) or '(file)'}: {e['msg']}" for e in first)
        raise DeclarationError(f"{where}: {problems}") from None


def load(path: str | Path, base: Path | None = None) -> Declarations:
    """The file at `path` (relative to `base` when not absolute), validated."""
    p = Path(path)
    if not p.is_absolute() and base is not None:
        p = base / p
    try:
        text = p.read_text()
    except OSError as exc:
        raise DeclarationError(f"{path}: cannot read it ({exc.strerror or exc})") from None
    return parse(text, where=str(path))
