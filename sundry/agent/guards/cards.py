"""Confirmation cards: which calls the customer must confirm, and what the card says. Pure.

An irreversible action runs without staff only when the customer confirms that
exact call. Whether a call needs a card is read from the tool's declaration
(money it moves, `reversible`, a consent action, contacting the customer outside
the conversation), never from anyone's words. The card is written here from the
call's arguments, the ID ledger's descriptions and the money lane: no text the
model wrote reaches it except a message the call would send, shown as the
message itself so the customer sees exactly what would go out.

A typed answer confirms only when its whole meaning is "yes" (`plain_yes`), and
only when one card is pending (the caller checks that).
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import asdict, dataclass, field

from pydantic import BaseModel

from sundry.agent.guards import spending
from sundry.context.lanes import LedgerData, MoneyData
from sundry.tooling.domain import ToolDecl
from sundry.tooling.tools import Tool

CONTACT = "contacts_customer:"

# What each consent action is, on a card.
_ACTIONS = {"refund": "Refund", "cancel": "Cancel", "return": "Book a return of", "replace": "Send a replacement for"}
_CONTACT_VERBS = {"email": "Send you an e-mail", "phone": "Log a phone call with you", "sms": "Send you a text message"}
_KIND_NAMES = {"order": "Order", "item": "Item", "tracking": "Parcel", "customer": "Account"}


@dataclass(frozen=True)
class Card:
    """What the customer (and staff) read before confirming one call."""

    title: str  # "Refund 15.00 USD on order <its number>"
    why: str  # why a confirmation is needed: "moves money", "cannot be undone", …
    entities: list[dict] = field(default_factory=list)  # {"label", "id", "description"}
    amount: str = ""  # "15.00 USD"
    destination: str = ""  # where the money goes
    message: list[dict] = field(default_factory=list)  # {"label", "text"}: what would be sent
    final: str = ""  # what cannot be undone
    rules: list[dict] = field(default_factory=list)  # {"id", "text", "turn"}: the customer's own words it goes against
    # {"id", "by", "turn", "source"}: a number it acts on that a later message (or staff) replaced.
    corrections: list[dict] = field(default_factory=list)

    def as_dict(self) -> dict:
        return asdict(self)


def needs_confirmation(tool: Tool, decl: ToolDecl | None) -> str:
    """Why a call of `tool` needs the customer's confirmation ("" when it does not)."""
    if not tool.side_effect or tool.local:
        return ""
    capabilities = decl.capabilities if decl is not None else []
    if (decl is not None and (decl.refund or decl.money)) or spending.moves_money(tool):
        return "it moves money"
    if tool.consent_action or (decl is not None and decl.consent):
        return "it cannot be undone from here"
    if not tool.reversible or (decl is not None and not decl.reversible):
        return "it cannot be undone"
    if any(c.startswith(CONTACT) for c in capabilities):
        return "it contacts you outside this conversation"
    return ""


def digest(tool: str, arguments: dict) -> str:
    """The exact call a card stands for: the tool and its arguments, canonical."""
    canonical = json.dumps([tool, arguments], sort_keys=True, separators=(",", ":"), default=str, ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()


def _arg(args: BaseModel | dict, name: str):
    return args.get(name) if isinstance(args, dict) else getattr(args, name, None)


def _ids(tool: Tool, args) -> list[tuple[str, str]]:
    """(kind, value) of every identifier argument, in the schema's order."""
    out = []
    for name, kind in tool.id_args.items():
        value = _arg(args, name)
        for v in value if isinstance(value, (list, tuple)) else [value]:
            if v not in (None, ""):
                out.append((kind, str(v)))
    return out


def entity_ids_of(card: dict) -> set[str]:
    """What a card's call acts on (a newer card for one of them retires it)."""
    return {str(e.get("id")) for e in card.get("entities") or [] if e.get("id")}


def _what(description: str) -> str:
    return (description or "").split(" · ")[0].strip()


def shown_text(tool: Tool, decl: ToolDecl | None, args) -> list[str]:
    """The arguments whose text a card shows the customer as it would go out: a contact tool's declared
    customer text, or, where none is declared, every text argument but its IDs. None for other tools."""
    capabilities = decl.capabilities if decl is not None else []
    if not any(c.startswith(CONTACT) for c in capabilities):
        return []
    declared = [name for name in tool.customer_text if _arg(args, name)]
    return declared or [
        name
        for name in tool.args_model.model_fields
        if isinstance(_arg(args, name), str) and _arg(args, name) and name not in tool.id_args
    ]


def build(
    tool: Tool,
    decl: ToolDecl | None,
    args,
    *,
    ledger: list[LedgerData] = (),
    money: list[MoneyData] = (),
    rules: list[dict] = (),
    why: str = "",
    corrections: list[dict] = (),
) -> Card:
    """The card for `tool(args)`, from the arguments, the ledger's descriptions and the money lane."""
    by_value = {e.value: e for e in ledger if not e.archived}
    ids = _ids(tool, args)
    entities = [
        {
            "label": _KIND_NAMES.get(kind, kind.replace("_", " ").capitalize()),
            "id": value,
            "description": _what(by_value[value].description) if value in by_value else "",
        }
        for kind, value in ids
        if kind != "customer"
    ]
    moved = spending.call_money(tool, args, money) if isinstance(args, BaseModel) else None
    amount = ""
    if moved is not None and moved.cents is not None:
        amount = spending.fmt(moved.cents, moved.currency)
    elif moved is not None:  # never a money card without its figure: the raw one, or plainly unknown
        raw = _arg(args, decl.refund.amount if decl is not None and decl.refund else "amount")
        amount = f"{raw} (currency not stated)" if raw not in (None, "") else "not known until it runs"
    action = tool.consent_action or (decl.consent if decl is not None else None)
    capabilities = decl.capabilities if decl is not None else []
    contact = next((c.removeprefix(CONTACT) for c in capabilities if c.startswith(CONTACT)), "")
    if action in _ACTIONS:
        verb = _ACTIONS[action]
    elif contact:
        verb = _CONTACT_VERBS.get(contact, f"Contact you by {contact}")
    else:
        verb = tool.name.replace("_", " ").capitalize()
    main = entities[0] if entities else None
    on = ""
    if main is not None:
        named = f"{main['label'].lower()} {main['id']}"
        on = f" {named}" if action in ("cancel",) else f" on {named}" if action else f" about {named}"
    if action == "refund" and amount and moved is not None and moved.cents is not None:
        title = f"Refund {amount}{on}"
    elif action in ("return", "replace") and len(entities) > 1:
        title = f"{verb} {entities[1]['description'] or entities[1]['id']}{on}"
    else:
        title = f"{verb}{on}"
    destination = ""
    if moved is not None and moved.order:
        order = moved.order
        method = next(
            (
                e
                for e in ledger
                if e.kind in ("payment_method", "payment") and e.note == f"of {order}" and e.description
            ),
            None,
        )
        destination = (
            f"Back to {_what(method.description)}" if method is not None else "Back to the way the order was paid"
        )
    message = [
        {"label": name.replace("_", " ").capitalize(), "text": str(_arg(args, name))}
        for name in shown_text(tool, decl, args)
    ]
    reversible = tool.reversible and (decl is None or decl.reversible)
    final = (
        "Money that is refunded cannot be taken back."
        if moved is not None
        else "This cannot be undone."
        if action or not reversible
        else "Once sent, it cannot be unsent."
        if contact
        else ""
    )
    return Card(
        title=title,
        why=why or needs_confirmation(tool, decl),
        entities=entities,
        amount=amount,
        destination=destination,
        message=message,
        final=final,
        rules=list(rules),
        corrections=[
            {**c, "by_description": _what(by_value[c["by"]].description) if c.get("by") in by_value else ""}
            for c in corrections
        ],
    )


# --- a typed answer ----------------------------------------------------------------------------

_YES = (
    "yes",
    "yeah",
    "yep",
    "yup",
    "yea",
    "y",
    "sure",
    "absolutely",
    "definitely",
    "correct",
    "confirm",
    "confirmed",
    "affirmative",
)
_GO = (
    "go ahead",
    "please go ahead",
    "go ahead please",
    "do it",
    "please do",
    "please do it",
    "do it please",
    "confirm",
    "i confirm",
    "confirmed",
    "that's right",
    "that is right",
    "that's correct",
    "that is correct",
    "proceed",
    "please proceed",
    "yes please",
    "please",
)
_THANKS = ("thanks", "thank you", "thx", "cheers")
_PUNCT = re.compile(r"[\s!.,;:\-–—…👍🙂😊]+")


def _forms() -> frozenset[str]:
    out = set(_GO) - {"please"}
    for yes in _YES:
        out.add(yes)
        for go in _GO:
            out.add(f"{yes} {go}")
            for thanks in _THANKS:
                out.add(f"{yes} {go} {thanks}")
        for thanks in _THANKS:
            out.add(f"{yes} {thanks}")
    for go in set(_GO) - {"please"}:
        for thanks in _THANKS:
            out.add(f"{go} {thanks}")
    return frozenset(out)


_PLAIN_YES = _forms()


def plain_yes(text: str) -> bool:
    """Whether the whole message means "yes": nothing else in it (no ID, no condition, no second thought).
    "ok" alone is not enough: it acknowledges as often as it agrees; "yes?" asks, it does not answer."""
    if "?" in (text or ""):
        return False
    words = _PUNCT.sub(" ", (text or "").lower().replace("\u2019", "'")).strip()
    return words in _PLAIN_YES
