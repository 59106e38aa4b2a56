"""A card for any tool result on the desk's timeline, read from the tool's declaration.

A declaration says which result paths hold identifiers and of what kind, how the
ledger describes each, what money moved and which order figures a result reports.
That is enough to show a result at a glance: its title, its plain fields, the
IDs it holds with what they are, and its money. The domain's tools, Sundry's own
lane tools and a class's tool-server tools all get one. A result nothing
declares (an undeclared server tool, an unknown name, a result cut short) gets
no card: it shows as readable JSON (`readable`).

No tool server is contacted here: a class's declaration files and its servers'
last listings (kept on their rows) are what the desk reads.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from sundry.agent.toolbox import Toolbox, toolbox_for
from sundry.core.money import MoneyError, format_money
from sundry.tooling.domain import Domain, ToolDecl
from sundry.tooling.tools import REGISTRY

MAX_FIELDS = 8
MAX_IDS = 12
MAX_TEXT = 120
MAX_JSON = 1500

# A sentence ends at a stop before a capital (or the end): "(e.g. damaged_order)" does not end one.
_SENTENCE = re.compile(r"^(.+?[.!?])(?=\s+[A-Z\"“(]|$)", re.DOTALL)


@dataclass(frozen=True)
class ResultCard:
    tool: str
    title: str  # the tool's name, in words
    about: str = ""  # the first sentence of the tool's description
    fields: tuple[tuple[str, str], ...] = ()  # (label, value) of the result's plain fields
    ids: tuple[dict, ...] = ()  # {"kind", "id", "description"}
    more_ids: int = 0  # IDs past MAX_IDS, counted not listed
    money: tuple[str, ...] = ()  # money moved and order figures, in words
    depends_on: tuple = field(default=(), compare=False)  # the ledger descriptions it used


def _words(name: str) -> str:
    text = str(name).replace("_", " ").replace("-", " ").strip()
    return text[:1].upper() + text[1:]


def _first_sentence(text: str) -> str:
    text = " ".join((text or "").split())
    found = _SENTENCE.match(text)
    sentence = found.group(1) if found else text
    return sentence if len(sentence) <= MAX_TEXT else sentence[: MAX_TEXT - 1] + "…"


def _short(value: Any) -> str:
    text = " ".join(str(value).split())
    return text if len(text) <= MAX_TEXT else text[: MAX_TEXT - 1] + "…"


def _money(cents: Any, currency: str) -> str | None:
    if not isinstance(cents, int) or isinstance(cents, bool) or not currency:
        return None
    try:
        return format_money(cents, currency)
    except (MoneyError, ValueError, KeyError):
        return None


def _scalar(value: Any) -> bool:
    return isinstance(value, (str, int, float, bool))


def _plain(value: Any) -> str:
    return ("yes" if value else "no") if isinstance(value, bool) else _short(value)


def _fields(data: Any, id_values: set[str], figures: bool) -> list[tuple[str, str]]:
    """The result's own plain fields: scalars, lists of words, small records of words. IDs are listed
    apart; amounts in minor units read as money beside the result's currency (unless the declaration's
    figures already say them)."""
    if isinstance(data, list):
        return [("Entries", str(len(data)))]
    if not isinstance(data, dict):
        text = str(data).strip()
        return [("Answer", _short(text))] if text and text not in id_values else []
    currency = data.get("currency") if isinstance(data.get("currency"), str) else ""
    out, later = [], []  # plain values first, then counts and small records
    for key, value in data.items():
        if value is None or value == "" or value == [] or value == {}:
            continue
        if _scalar(value) and str(value) in id_values:
            continue
        if key.endswith("_cents"):
            amount = _money(value, currency)
            if amount is not None and not figures:
                out.append((_words(key.removesuffix("_cents")), amount))
            continue
        if _scalar(value):
            out.append((_words(key), _plain(value)))
        elif isinstance(value, list) and all(_scalar(v) for v in value):
            shown = [str(v) for v in value if str(v) not in id_values]
            if shown:
                later.append((_words(key), _short(", ".join(shown))))
        elif isinstance(value, list):
            later.append((_words(key), str(len(value))))
        elif isinstance(value, dict) and value and all(isinstance(v, str) for v in value.values()):
            words = [v for v in value.values() if v and v not in id_values]
            if words:
                later.append((_words(key), _short(" ".join(words))))
    return (out + later)[:MAX_FIELDS]


class ToolCards:
    """What the desk knows of one ticket's tools, read once per rendering and only if a result needs it."""

    def __init__(self, ticket, ledger: dict[str, tuple[str, str]] | None = None):
        self.ticket = ticket
        self.ledger = ledger or {}  # ID → (its kind, the ledger's description)

    @cached_property
    def _toolbox(self) -> Toolbox:
        return toolbox_for(self.ticket.ticket_class, listing=False)  # the declaration files; no server contacted

    @cached_property
    def domain(self) -> Domain:
        """A class with tool servers works with its declaration files' tools; any other with its domain's."""
        return self._toolbox.declared

    @cached_property
    def _listed(self) -> dict[str, str]:
        """Tool name → the description its server listed it with (the last listing kept on the row)."""
        out: dict[str, str] = {}
        for server in self._toolbox.servers:
            for t in server.listed_tools or []:
                if isinstance(t, dict) and t.get("name"):
                    out.setdefault(str(t["name"]), str(t.get("description") or ""))
        return out

    def declaration(self, name: str) -> ToolDecl | None:
        decl = self.domain.tools.get(name)
        if decl is not None:
            return decl if decl.declared else None
        tool = REGISTRY.get(name)
        # Sundry's own lane tools (rules, labels, facts, follow-ups) belong to every class.
        return ToolDecl.from_tool(tool) if tool is not None and tool.local else None

    def template(self, name: str) -> str:
        """The card template the tool's declaration names (a domain's own card), or ""."""
        decl = self.declaration(name)
        return decl.card if decl is not None else ""

    def about(self, name: str, decl: ToolDecl) -> str:
        tool = REGISTRY.get(name)
        text = decl.description or self._listed.get(name, "") or (tool.description if tool is not None else "")
        return _first_sentence(text)

    def card(self, name: str, result: Any) -> ResultCard | None:
        """The card for `name`'s result (parsed JSON, or text); None when no declaration describes it."""
        decl = self.declaration(name)
        if decl is None or result is None:
            return None
        owner_kind = self.domain.owner_kind
        found = decl.ids(result, kind_of=self.domain.kind_of)
        described = decl.descriptions(result, owner_kind=owner_kind)
        # A plain field holding an ID the ledger knows (a lane tool's value) is that ID too.
        if isinstance(result, dict):
            found = [
                *found,
                *(
                    ("", self.ledger[str(v)][0], str(v))
                    for v in result.values()
                    if _scalar(v) and not isinstance(v, bool) and str(v) in self.ledger
                ),
            ]
        ids, seen, used = [], set(), []
        for _path, kind, value in found:
            if value in seen:
                continue
            seen.add(value)
            description = described.get(value) or self.ledger.get(value, ("", ""))[1]
            if value not in described:
                used.append((value, description))
            ids.append({"kind": _words(kind), "id": value, "description": description})
        moved = [
            f"{_words(m.kind)} {text} on {m.order}" if m.order else f"{_words(m.kind)} {text}"
            for m in decl.money_moved(result, owner_kind=owner_kind)
            if (text := _money(m.amount_cents, m.currency))
        ]
        figures = []
        for t in decl.order_totals(result):
            paid, refunded = _money(t.paid_cents, t.currency), _money(t.refunded_cents, t.currency)
            left = _money(t.paid_cents - t.refunded_cents, t.currency)
            if paid and refunded and left:
                figures.append(f"{t.order}: paid {paid} · refunded {refunded} · refundable {left}")
        return ResultCard(
            tool=name,
            title=_words(name),
            about=self.about(name, decl),
            fields=tuple(_fields(result, seen, bool(figures or moved))),
            ids=tuple(ids[:MAX_IDS]),
            more_ids=max(0, len(ids) - MAX_IDS),
            money=tuple(moved + figures),
            depends_on=tuple(used),
        )


def stored_result(turn) -> Any:
    """A tool result turn's result as data: what an in-process tool returned, or a server's text parsed
    (text that is not JSON stays text). None for a result with no card: a failure, a hold, a card
    waiting for the customer, a result cut short."""
    payload = turn.payload or {}
    if not payload.get("ok") or payload.get("held") or payload.get("confirmation") or payload.get("truncated"):
        return None
    if payload.get("undeclared"):
        return None
    if isinstance(payload.get("result"), (dict, list)):
        return payload["result"]
    try:
        return json.loads(turn.text)
    except ValueError:
        return turn.text


def readable(text: str) -> str:
    """A result no card describes, as people read JSON: indented, keys sorted; other text as it is."""
    try:
        data = json.loads(text)
    except (TypeError, ValueError):
        return (text or "")[:MAX_JSON]
    shown = json.dumps(data, indent=1, ensure_ascii=False, sort_keys=True, default=str)
    return shown if len(shown) <= MAX_JSON else shown[: MAX_JSON - 1] + "…"
