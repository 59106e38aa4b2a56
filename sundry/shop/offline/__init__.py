"""The built-in offline model (SPEC §7).

Deterministic and self-contained: it reads ONLY the request it is sent — the
lane blocks (parsed with the same helpers that render them) and the tool
results in the recent messages. No database, no Django models, no memory
between calls. If the context loses a fact, this model loses it too, exactly
like a network model would; that is what makes it useful in the harness.

Shape: `RequestView` reads the request; `intent_of` (and `words`)
classify the customer's words; `decide` picks tool calls or a reply.

A question about an action ("is the refund done?") is answered from the
actions and money lanes and never moves money; orders named by product are
mapped through the ledger's descriptions and the tool results in the request;
inferred facts are recorded with `record_fact` for staff to confirm; whenever
the reply says staff will follow up, `request_staff_follow_up` flags the
ticket first (when the request offers that tool).
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from typing import Any

from sundry.agent.guards import consent
from sundry.agent.guards.cards import plain_yes
from sundry.context import render
from sundry.context.rules import candidate_rules, infer_enforcement
from sundry.core.tokens import count_message_tokens, count_tokens
from sundry.shop.ids import WORDS, find_ids, kind_of
from sundry.shop.offline import asks as asks
from sundry.shop.offline import words as words
from sundry.tooling.messages import Message, ModelRequest, ModelResponse, ToolCall, Usage

MAX_CALLS_PER_STEP = 8
# The shop's tools that act on one order: a rule naming its orders forbids these on those orders only.
ORDER_ACTIONS = frozenset({"cancel_order", "issue_refund", "offer_replacement", "book_return"})
RECENT_ORDERS = 5
FOLLOW_UP_TOOL = "request_staff_follow_up"
FOLLOW_UP_REASON_MAX = 160
# Tools that only write Sundry's own lanes: they do not count towards the calls a step may make.
LANE_TOOLS = frozenset({"record_fact", "pin_constraint", "label_entity", FOLLOW_UP_TOOL})
STAFF_FOLLOW_UP = (
    "I wasn't able to complete this automatically. A member of our support staff will follow up with you shortly."
)
CLARIFY = (
    "Thanks for getting in touch. Could you tell me what you need — tracking a delivery, a refund, a "
    "return or a cancellation — and the order number if you have it?"
)
# Mid-case, a message the model cannot place gets a question about it, never the opener again.
MID_CASE_CLARIFY = (
    "Sorry, I'm not sure what you'd like me to do with that. Is it about tracking, a refund, a "
    "return or a cancellation — and which order?"
)
HELD_REPLY = "Your request needs a quick check by our staff; it is with them now and I'll update you once they decide."
_STATUS_TOOL = {
    "refund": "issue_refund",
    "cancel": "cancel_order",
    "return": "book_return",
    "replace": "offer_replacement",
}
_RESOLUTION = {
    "refund": "refund",
    "return": "return",
    "replace": "replacement",
    "cancel": "cancel",
    "track": "tracking",
}
# Words of a ledger description that say where an order stands, not what it holds.
_STATUS_WORDS = {
    "delivered",
    "shipped",
    "placed",
    "cancelled",
    "canceled",
    "returned",
    "transit",
    "processing",
    "lost",
    "refunded",
    "issued",
    "pending",
    "partially",
    "booked",
    "received",
}

# Narrower than the staff-facing classifier: only a constraint on how the case is handled is pinned.
_CONSTRAINT = re.compile(
    r"\bwhatever you do\b"
    r"|\b(?:do not|don't|dont|never)\s+(?:ever\s+)?(?:e-?mail|call|phone|text|contact|send|offer|replace|ship|cancel"
    r"|refund|give|use|charge|share|message)"
    r"|\bi (?:do not|don't|dont) want\b"
    r"|\b(?:phone|e-?mail|text|sms|calls?|post|chat)\s+only\b"
    r"|\bonly\s+(?:by|via|over|through|contact|call|phone|e-?mail|refund|use|send|to)\b"
    r"|\bno\s+(?:e-?mails?|calls?|replacements?|texts?|store credit)\b"
    # "I only check my phone after 6pm": when the customer can be reached.
    r"|\bonly\s+(?:check|answer|pick up|read|look at|available)\b[^.]{0,40}\b(?:after|before|between|until|from)\b",
    re.I,
)
_INTENTS = [
    # "noise-cancelling headphones" is a product, not a request.
    ("cancel", re.compile(r"(?<!-)\bcancel", re.I)),
    ("return", re.compile(r"\breturn(?:ing)?\b|\bsend (?:(?:it|them|this|these|the \w+) )?back\b", re.I)),
    ("refund", re.compile(r"\brefund|money back|charged twice|double[- ]charged|reimburs", re.I)),
    ("replace", re.compile(r"\b(?:replacement|replace|exchange)\b", re.I)),
    ("damaged", re.compile(r"\b(?:damaged|broken|defective|scratched|cracked|faulty)\b", re.I)),
    # "It never arrived" states a missing parcel: the negation is the news, not a denial.
    (
        "track",
        re.compile(
            r"\blost\b|\bnever (?:arrived|came|turned up|got here)|\b(?:hasn't|has not|didn't|did not|"
            r"haven't|have not) (?:arrived|come|turned up|got (?:it|here)|received)|\bnot received\b",
            re.I,
        ),
    ),
    (
        "track",
        re.compile(
            r"\btrack|where(?: is|'s| was)\b|\bdeliver|\barriv|\bshipp|\bparcel|\bpackage\b|"
            r"\bin transit\b|\bon (?:its|the) way\b|\bany news\b|\bstill coming\b|\bcarrier\b|"
            r"\bcourier\b|\bstatus of (?:my |the )?order\b|\blook (?:it |them )?up\b"
            r"|\bcheck (?:on )?(?:su-\d|order\b|my order|that order|the order)|\bship\b|\bstill active\b",
            re.I,
        ),
    ),
    (
        "list",
        re.compile(
            r"\bmy orders\b|\blist\b|\bwhat orders\b|\border history\b|\borders do i have\b|"
            r"\bwhat (?:else )?(?:did |have )?i (?:ordered|order|bought|buy)\b|\bmy other orders\b",
            re.I,
        ),
    ),
]
_READ_FROM_TEXT = {"send_email", "log_phone_call", "offer_replacement"}
# The customer asks to be told by e-mail or phone once it is done (and not that they want none).
_CONTACT_ASK = re.compile(
    r"\be-?mail me\b|\bcall me\b|\blet me know\b|\bsend me a confirmation\b"
    r"|\bconfirm\w*\b[^.!?]{0,30}\b(?:by|via|over|on the)\s+(?:e-?mail|phone|call)",
    re.I,
)
_CONTACT_REFUSED = re.compile(r"\b(?:never|don'?t|do not|no|not)\b[^.!?]{0,20}\b(?:e-?mail|call|phone|contact)", re.I)
# Tools whose call carries a message for the customer (a summary, a body) sent outside the conversation.
_CONTACT_TOOLS = {"send_email", "log_phone_call"}
_NEGATED = re.compile(r"\b(?:no|not|don't|dont|never|without)\b[^.,;!?]{0,20}$")
_HELD = re.compile(r"call is held|held for (?:staff )?approval|awaiting (?:staff )?approval", re.I)
_AWAITING = re.compile(r'"awaiting_customer_confirmation":\s*true')
# "Keep the Stand Mixer order": the one order the earlier request is not about.
_KEEP = re.compile(r"\bkeep\b|\bstill want\b|\bleave (?:it|that|the)\b", re.I)
_THANKS = re.compile(r"\b(?:thanks|thank you|cheers|perfect|great|that's all)\b", re.I)
_EMAIL = re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+")
_NUM = r"\d[\d,]*(?:\.\d{1,2})?"
_AMOUNT = re.compile(
    rf"(?P<sym>[$€£₹])\s?(?P<n1>{_NUM})"
    rf"|(?<![\w-])(?P<n2>{_NUM})\s?(?P<code>USD|EUR|GBP|INR|dollars?|euros?|pounds?|rupees?)\b"
    rf"|\b(?P<code2>USD|EUR|GBP|INR)\s?(?P<n3>{_NUM})",
    re.I,
)
_CURRENCY = {
    "$": "USD",
    "€": "EUR",
    "£": "GBP",
    "₹": "INR",
    "dollar": "USD",
    "euro": "EUR",
    "pound": "GBP",
    "rupee": "INR",
}
_REASONS = [
    (re.compile(r"charged twice|double[- ]charged|duplicate", re.I), "duplicate charge"),
    (re.compile(r"damag|broken|scratch|crack|dent|defect|faulty", re.I), "item arrived damaged"),
    (re.compile(r"never arrived|not arrived|hasn't arrived|lost|missing", re.I), "parcel not delivered"),
    (re.compile(r"\bwrong\b", re.I), "wrong item received"),
]
_STOP = {
    "with",
    "from",
    "this",
    "that",
    "your",
    "order",
    "item",
    "items",
    "pack",
    "have",
    "what",
    "where",
    "when",
    "want",
    "please",
    "thanks",
    "about",
    "still",
    "just",
    "back",
    "them",
    "they",
    "return",
    "refund",
    "mine",
}
# Argument names the tools may use instead of the ones this model prefers.
_ALIASES = {
    "order_number": ("order", "number", "order_id"),
    "customer_id": ("customer",),
    "item_ids": ("items",),
    "message": ("text", "body"),
    "text": ("rule",),
    "tracking_number": ("tracking",),
}


def _norm(text: str) -> str:
    return " ".join((text or "").replace("’", "'").lower().split()).strip(" .!?")


def _words(text: str) -> set[str]:
    return {w.rstrip("s") for w in re.findall(r"[a-z]{4,}", (text or "").lower()) if w not in _STOP}


def _cents(value: Any, key: str = "") -> int | None:
    if isinstance(value, dict):
        if "amount_cents" in value:
            return _cents(value["amount_cents"], "amount_cents")
        return _cents(value.get("amount"))
    if isinstance(value, bool) or value is None:
        return None
    if key.endswith("_cents") and isinstance(value, int):
        return value
    try:
        return int(Decimal(str(value).replace(",", "")) * 100)
    except (InvalidOperation, ValueError):
        return None


@dataclass
class OrderInfo:
    number: str
    status: str = ""
    currency: str = ""
    paid: int | None = None
    refunded: int | None = None
    refundable: int | None = None
    tracking: list[str] = field(default_factory=list)
    items: list[tuple[str, str]] = field(default_factory=list)  # (item_id, name), from get_order
    names: list[str] = field(default_factory=list)  # product names, from any listing
    detailed: bool = False  # seen in a get_order result, not only in a list

    def still_refundable(self) -> int | None:
        if self.refundable is not None:
            return self.refundable
        return None if self.paid is None else max(0, self.paid - (self.refunded or 0))

    def label(self) -> str:
        names = ", ".join(self.names)
        return f"{self.number} ({names})" if names else self.number


def _item_name(d: dict) -> str:
    for key in ("name", "product_name", "title", "product", "description", "sku"):
        v = d.get(key)
        if isinstance(v, dict):
            v = v.get("name") or v.get("sku")
        if isinstance(v, str) and v:
            return v
    return ""


def _read_order(number: str, node: dict, info: OrderInfo) -> None:
    for key, value in node.items():
        k = key.lower()
        if k == "status" and isinstance(value, str):
            info.status = value
        elif k == "currency" and isinstance(value, str):
            info.currency = value
        elif "refundable" in k:
            info.refundable = _cents(value, k) if _cents(value, k) is not None else info.refundable
        elif "refunded" in k:
            info.refunded = _cents(value, k) if _cents(value, k) is not None else info.refunded
        elif "paid" in k or "captured" in k or k in ("total", "total_cents"):
            info.paid = _cents(value, k) if _cents(value, k) is not None else info.paid
        elif k == "items" and isinstance(value, list):
            # search_orders lists product names; get_order lists items with their item_id.
            with_ids = [(d["item_id"], _item_name(d)) for d in value if isinstance(d, dict) and d.get("item_id")]
            info.items = with_ids or info.items
            info.names = [n for _, n in with_ids] or [n for n in value if isinstance(n, str)] or info.names
    tracking = [v for kind, v in find_ids(json.dumps(node)) if kind == "tracking"]
    info.tracking = tracking or info.tracking


def _orders_in(data: Any, found: list[tuple[str, dict]] | None = None) -> list[tuple[str, dict]]:
    """(order number, the dict describing it) for every order object in a tool result."""
    found = [] if found is None else found
    if isinstance(data, dict):
        number = next(
            (
                data[k]
                for k in ("order_number", "number", "order")
                if isinstance(data.get(k), str) and kind_of(data[k]) == "order"
            ),
            None,
        )
        if number:
            found.append((number, data))
        for v in data.values():
            _orders_in(v, found)
    elif isinstance(data, list):
        for v in data:
            _orders_in(v, found)
    return found


@dataclass
class Seen:
    """One tool call in the request, with its result."""

    index: int
    name: str
    args: dict
    ok: bool
    content: str
    data: Any = None

    def key(self) -> str:
        return self.name + json.dumps(self.args, sort_keys=True)

    def targets(self, value: str) -> bool:
        """An argument is exactly `value` (not merely text mentioning it)."""
        return any(a == value or (isinstance(a, list) and value in a) for a in self.args.values())


class RequestView:
    """Everything the offline model knows: what the request shows, parsed."""

    def __init__(self, request: ModelRequest):
        self.request = request
        self.specs = {t.name: t.parameters for t in request.tools}
        blocks = {render.lane_of(m): m.content for m in request.messages if render.lane_of(m)}
        self.rules = render.parse_rules(blocks.get("rules", ""))
        self.ledger = render.parse_ledger(blocks.get("ledger", ""))
        self.state = render.parse_state(blocks.get("state", ""))
        self.has_summary = bool(blocks.get("summary"))
        self.conv: list[Message] = [m for m in request.messages if m.role != "system"]
        self.customer_idx = [i for i, m in enumerate(self.conv) if render.is_customer_message(m)]
        self.calls = self._pair_calls()
        last = self.customer_idx[-1] if self.customer_idx else -1
        self.tail = [s for s in self.calls if s.index > last]
        self.orders = self._orders()
        ok_text = " ".join(s.content for s in self.calls if s.ok)
        self.known_ids = {e.value for e in self.ledger if e.verified} | {v for _, v in find_ids(ok_text)}
        self.descriptions = self._descriptions()

    def _descriptions(self) -> dict[str, str]:
        """Order number → what the ledger says it holds ("Air Fryer 5.5L ×1, delivered"), when it says."""
        out: dict[str, str] = {}
        for e in self.ledger:
            text = " ".join(t for t in (getattr(e, "description", "") or "", e.note or "") if t)
            if e.kind == "order" and text and not text.startswith("of "):
                out[e.value] = text
        return out

    @property
    def mid_case(self) -> bool:
        """Something has happened in this case already: a reply, a summary, or established state."""
        replied = any(m.role == "assistant" and m.content and not m.tool_calls for m in self.conv)
        return replied or self.has_summary or bool(self.state.actions or self.state.fields)

    def _pair_calls(self) -> list[Seen]:
        pending: dict[str, ToolCall] = {}
        out = []
        for i, m in enumerate(self.conv):
            for c in m.tool_calls:
                pending[c.id] = c
            if m.role == "tool" and m.tool_call_id in pending:
                call = pending.pop(m.tool_call_id)
                args = call.arguments if isinstance(call.arguments, dict) else {}
                try:
                    data = json.loads(render.result_data(m.content))
                except ValueError:
                    data = None
                failed = (
                    m.content.startswith(render.ERROR_PREFIX)
                    or bool(_HELD.search(m.content))
                    or (isinstance(data, dict) and data.get("ok") is False)
                )
                out.append(Seen(i, call.name, args, not failed, m.content, data))
        return out

    def _orders(self) -> dict[str, OrderInfo]:
        orders: dict[str, OrderInfo] = {}
        for s in self.calls:  # oldest first, so newer results win
            if not s.ok or s.name == "track_parcel":  # a parcel's status is not its order's
                continue
            for number, node in _orders_in(s.data):
                info = orders.setdefault(number, OrderInfo(number))
                _read_order(number, node, info)
                info.detailed = info.detailed or s.name == "get_order"
        return orders

    # --- the customer's words ---------------------------------------------------------

    def customer_texts(self, last: int = 3) -> list[str]:
        """The latest customer messages, newest first."""
        return [self.conv[i].content for i in reversed(self.customer_idx[-last:])]

    @property
    def latest(self) -> str | None:
        return self.conv[self.customer_idx[-1]].content if self.customer_idx else None

    def last_agent_asked(self) -> bool:
        last = self.customer_idx[-1] if self.customer_idx else 0
        prior = [m for m in self.conv[:last] if m.role == "assistant" and m.content and not m.tool_calls]
        return bool(prior) and prior[-1].content.rstrip().endswith("?")

    # --- rules and tools ---------------------------------------------------------------

    def blocking_rule(self, tool: str, target: str | None = None, asked: bool = False) -> render.ParsedRule | None:
        """The rule that forbids `tool` (on `target`): its structured check, or for contact and
        replacement tools its plain wording too, the way a model reading "never email me" would.
        A rule that names its orders ("only on: SU-…") forbids the action on those orders only.
        `asked`: the customer's message asks for this call, so a rule only flagged from their own
        words does not stop it (the guard puts it on a card quoting the rule, for them to decide)."""
        for r in self.rules:
            if asked and not r.confirmed and r.source == "customer":
                continue
            by_text = tool in _READ_FROM_TEXT and tool in infer_enforcement(r.text, WORDS).get("block_tools", [])
            if not (tool in r.block_tools or by_text):
                continue
            if not r.only_on or tool not in ORDER_ACTIONS or (target is not None and target in r.only_on):
                return r
        return None

    def blocked(self, tool: str, target: str | None = None) -> bool:
        return self.blocking_rule(tool, target) is not None

    def has_tool(self, tool: str) -> bool:
        return not self.specs or tool in self.specs

    def offers(self, tool: str) -> bool:
        """The request lists this tool (a newer tool is used only when the request offers it)."""
        return tool in self.specs

    def args_for(self, tool: str, wanted: dict) -> dict:
        """Wanted arguments under the names the tool's JSON schema uses."""
        props = (self.specs.get(tool) or {}).get("properties") or {}
        if not props:
            return wanted
        out = {}
        for name, value in wanted.items():
            if name == "amount" and "amount" not in props and "amount_cents" in props:
                out["amount_cents"] = _cents(value)
                continue
            target = name if name in props else next((a for a in _ALIASES.get(name, ()) if a in props), None)
            if target:
                out[target] = value
        return out

    # --- ids ---------------------------------------------------------------------------

    def customer_id(self) -> str | None:
        roles = {e.role: e for e in self.ledger}
        if "customer" in roles and roles["customer"].verified:
            return roles["customer"].value
        ids = [e.value for e in self.ledger if e.kind == "customer" and e.verified]
        ids += sorted(v for v in self.known_ids if kind_of(v) == "customer")
        return ids[0] if ids else None

    def failures(self, key: str) -> int:
        return sum(1 for s in self.calls if not s.ok and s.key() == key)

    def last_error(self, key: str) -> str:
        failed = [s.content for s in self.calls if not s.ok and s.key() == key]
        return failed[-1][:200] if failed else ""

    def tail_ok(self, name: str, order: str | None = None) -> Seen | None:
        return next(
            (s for s in reversed(self.tail) if s.ok and s.name == name and (order is None or s.targets(order))), None
        )


# --- decisions -------------------------------------------------------------------------


@dataclass
class Decision:
    text: str | None = None
    call: tuple[str, dict] | None = None
    more: list[tuple[str, dict]] = field(default_factory=list)  # further calls in the same response

    @property
    def calls(self) -> list[tuple[str, dict]]:
        return ([self.call] if self.call else []) + self.more


def reply(text: str) -> Decision:
    return Decision(text=text)


def follow_up(v: RequestView, reason: str, text: str = STAFF_FOLLOW_UP) -> Decision:
    """Tell the customer staff will follow up — after flagging the ticket for them, when the tool exists."""
    if v.offers(FOLLOW_UP_TOOL) and not any(s.name == FOLLOW_UP_TOOL for s in v.tail):
        return Decision(call=(FOLLOW_UP_TOOL, v.args_for(FOLLOW_UP_TOOL, {"reason": _short(reason)})))
    return reply(text)


def _short(reason: str, limit: int = FOLLOW_UP_REASON_MAX) -> str:
    """The reason within what request_staff_follow_up takes."""
    reason = " ".join(reason.split())
    return reason if len(reason) <= limit else reason[: limit - 1].rstrip() + "…"


def emit(v: RequestView, name: str, **wanted) -> Decision:
    if rule := v.blocking_rule(name, wanted.get("order_number"), asked=True):
        return reply(
            f'I can\'t do that here: a rule in force for this ticket says "{rule.text}". '
            "A member of staff can help if something else is needed."
        )
    args = v.args_for(name, wanted)
    key = Seen(0, name, args, True, "").key()
    if not v.has_tool(name):
        return follow_up(v, f"{name} is not available to the agent")
    if v.failures(key) >= 2:
        # Failed twice: never loop.
        return follow_up(v, f"{name} failed twice: {v.last_error(key)}")
    if any(s.ok and s.key() == key for s in v.tail):
        return follow_up(v, f"{name} was already run in this step and the case is still open")
    return Decision(call=(name, args))


def remember(v: RequestView, name: str, value: str, stated: bool = False) -> tuple[str, dict] | None:
    """A record_fact call for an inferred fact, unless the state or this step already holds it."""
    if not v.offers("record_fact") or not value:
        return None
    if v.state.fields.get(name, "").lower() == value.lower():
        return None
    if any(s.name == "record_fact" and s.args.get("name") == name for s in v.tail):
        return None  # recorded (or refused) in this step: once is enough
    return "record_fact", {"name": name, "value": value, "stated_by_customer": stated}


def intent_of(text: str) -> str | None:
    t = _norm(text)
    for name, rx in _INTENTS:
        # "I don't want a replacement" names a replacement but does not ask for one.
        if any(not _NEGATED.search(t[: m.start()]) for m in rx.finditer(t)):
            return name
        # "I'd like 15.00 USD back for the lamp" asks for a refund without the word.
        if name == "refund" and asks.amount_back(text):
            return name
    return None


def asks_for(text: str, intent: str) -> bool:
    """The text asks for the action `intent` names (refund, cancel, return, replace) to be done,
    read as the consent guard reads it: not a question about one, a thought or a withdrawal."""
    action = intent if intent in consent.ACTIONS else None
    if action is None:
        return True
    kinds = {consent.sentence_kind(s, action) for s in consent.sentences(text)}
    return "request" in kinds


def _intent(v: RequestView) -> str | None:
    latest = v.latest or ""
    found = intent_of(latest)
    if found:
        return found
    # A short answer ("it's SU-20481", "the blender") continues the request before it — never a
    # question of its own ("Could you check SU-20212 too?") or thanks, and an action only when the
    # earlier message asked for it.
    if latest.rstrip().endswith("?") or (_THANKS.search(latest) and not find_ids(latest)) or _KEEP.search(latest):
        return None
    if find_ids(latest) or v.last_agent_asked() or _product_match(v, latest):
        earlier = next(((i, t) for t in v.customer_texts()[1:] if (i := intent_of(t))), None)
        if earlier and asks_for(earlier[1], earlier[0]):
            return earlier[0]
    return None


def _not_asked(v: RequestView, intent: str) -> Decision:
    """The customer names an action without asking for it ("I'm thinking about cancelling"): say
    what it would mean and ask, never act. A withdrawal ("don't cancel it") is acknowledged."""
    noun = _NOUN[intent]
    latest = v.latest or ""
    kinds = {consent.sentence_kind(s, intent) for s in consent.sentences(latest)}
    typed = [val for k, val in find_ids(latest) if k == "order"]
    on = f" on order {typed[0]}" if typed else ""
    if "negated" in kinds:
        return reply(f"Understood — I won't go ahead with a {noun}{on}.")
    return reply(f"I haven't done anything yet. If you'd like a {noun}{on}, just tell me and I'll take care of it.")


def _unpinned_constraint(v: RequestView) -> str | None:
    pinned = {_norm(r.text) for r in v.rules}
    pinned |= {_norm(str(s.args.get("text", ""))) for s in v.calls if s.name == "pin_constraint"}
    for sentence in candidate_rules(v.latest or ""):
        n = _norm(sentence)
        if _CONSTRAINT.search(n) and not any(n == p or (p and (n in p or p in n)) for p in pinned):
            return sentence
    return None


def _order_words(v: RequestView) -> dict[str, set[str]]:
    """Order number → words naming what it holds: product names in tool results, and ledger descriptions."""
    out: dict[str, set[str]] = {}
    for o in v.orders.values():
        out.setdefault(o.number, set()).update(_words(" ".join(o.names)))
    for number, text in v.descriptions.items():
        out.setdefault(number, set()).update(_words(text) - _STATUS_WORDS)
    return out


def _product_candidates(v: RequestView, text: str) -> list[str]:
    """Every order the product words of `text` fit best (several when the customer bought it twice)."""
    said = _words(text) - _STATUS_WORDS
    scores = {number: len(said & held) for number, held in _order_words(v).items()}
    best = max(scores.values(), default=0)
    return [n for n, s in scores.items() if s == best] if best else []


def _product_match(v: RequestView, text: str) -> str | None:
    said = _words(text) - _STATUS_WORDS
    scores = {number: len(said & held) for number, held in _order_words(v).items()}
    best = max(scores.values(), default=0)
    winners = [n for n, s in scores.items() if s == best]
    return winners[0] if best and len(winners) == 1 else None


def _typed_or_product(v: RequestView, text: str) -> str | None:
    """The one order a message names, by number or by what was in it."""
    typed = [value for kind, value in find_ids(text) if kind == "order"]
    return typed[0] if len(typed) == 1 else (None if typed else _product_match(v, text))


def _unmatched_product(v: RequestView, text: str) -> str | None:
    """A product the customer names that no order in the request is known to hold."""
    phrase = words.product_phrase(text)
    if not phrase or _product_match(v, phrase) or _role_match(v, phrase):
        return None
    return phrase


def _role_match(v: RequestView, text: str) -> str | None:
    words = _words(text)
    hits = [e.value for e in v.ledger if e.kind == "order" and words & _words(e.role.replace("_", " "))]
    return hits[0] if len(hits) == 1 else None


def _candidate_order(v: RequestView) -> str | None:
    texts = v.customer_texts()
    typed = [val for k, val in find_ids(texts[0]) if k == "order"] if texts else []
    if typed:
        return typed[0]
    if texts and _unmatched_product(v, texts[0]):
        # "the lamp", and nothing in the request says which order holds a lamp: never guess
        # from an earlier message or the only order in view; look the product up instead.
        return None
    for text in texts:
        if found := _role_match(v, text) or _product_match(v, text):
            return found
    if (field_value := v.state.fields.get("order_number")) and kind_of(field_value) == "order":
        return field_value
    for text in texts[1:]:
        if typed := [val for k, val in find_ids(text) if k == "order"]:
            return typed[0]
    # The only order anywhere in the request is the one this ticket is about.
    known = {e.value for e in v.ledger if e.kind == "order"} | set(v.orders)
    if len(known) == 1:
        return known.pop()
    return None


_ID_TROUBLE = re.compile(
    r"\(guard: (?:id|unverified_id|mutation)\)|\bno order\b|does not belong|get_order|"
    r"\blook (?:it|them|the \w+) up\b|verbatim",
    re.I,
)


def _needs_lookup(v: RequestView, order: str) -> bool:
    if order not in v.known_ids:
        return True
    # An error about this order's ID in this step (the ID guard, an unknown or foreign order, a
    # "look it up" instruction), with nothing since that shows the order is fine: a successful
    # lookup, or any call on it that succeeded (a held call approved and run). A hold, or the
    # shop refusing on the order's state ("only placed orders can be cancelled"), is no reason
    # to look the order up again.
    errors = [s.index for s in v.tail if not s.ok and s.targets(order) and _ID_TROUBLE.search(s.content)]
    fine = [
        s.index
        for s in v.tail
        if s.ok and (s.targets(order) or (s.name in ("get_order", "search_orders") and order in s.content))
    ]
    return bool(errors) and (not fine or max(fine) < max(errors))


def resolve_order(v: RequestView) -> str | Decision:
    order = _candidate_order(v)
    if order and not _needs_lookup(v, order):
        return order
    if order and not any(s.name == "get_order" and not s.ok and s.targets(order) for s in v.tail):
        return emit(v, "get_order", order_number=order)
    search = next((s for s in reversed(v.tail) if s.ok and s.name == "search_orders"), None)
    if search and search.args.get("query") and not _orders_in(search.data) and (customer := v.customer_id()):
        # Nothing by that name: list the recent orders instead and ask.
        return emit(v, "search_orders", customer_id=customer, limit=RECENT_ORDERS)
    if search:
        listed = [v.orders[n] for n, _ in _orders_in(search.data) if n in v.orders]
        listed = list({o.number: o for o in listed}.values())
        if len(listed) == 1 and not order:
            return listed[0].number
        lead = f"I couldn't find order {order} on your account. " if order else ""
        if not listed:
            return reply(lead + "I couldn't find any orders on your account. Could you send me the order number?")
        names = "; ".join(o.label() for o in listed)
        return reply(f"{lead}I found these orders on your account: {names}. Which one do you mean?")
    if customer := v.customer_id():
        phrase = _unmatched_product(v, v.latest or "")
        if phrase and not any(s.name == "search_orders" and s.args.get("query") for s in v.tail):
            return emit(v, "search_orders", customer_id=customer, query=phrase)
        return emit(v, "search_orders", customer_id=customer)
    emails = [m.group(0) for t in v.customer_texts() for m in _EMAIL.finditer(t)]
    if emails and not v.tail_ok("lookup_customer"):
        return emit(v, "lookup_customer", email=emails[0])
    return reply("Could you send me your order number, or the email address you ordered with, so I can look it up?")


def _explicit_amount(v: RequestView, latest_only: bool = False) -> tuple[int, str] | None:
    for text in v.customer_texts(1 if latest_only else 3):
        if m := _AMOUNT.search(text):
            num = m.group("n1") or m.group("n2") or m.group("n3")
            unit = (m.group("sym") or m.group("code") or m.group("code2") or "").lower().rstrip("s")
            currency = _CURRENCY.get(unit, unit.upper())
            return int(Decimal(num.replace(",", "")) * 100), currency
        if asks.amount_back(text) and (bare := asks.BARE_AMOUNT_BACK.search(text)):
            # "15 back", no currency named: the figure is theirs, the currency the order's ("").
            return int(Decimal(bare.group(1).replace(",", "")) * 100), ""
    return None


def _reason(v: RequestView, default: str) -> str:
    text = " ".join(v.customer_texts())
    return next((r for rx, r in _REASONS if rx.search(text)), default)


def _on_order(v: RequestView, a: render.ParsedAction, order: str) -> bool:
    """The action was taken on `order`, or on an item of it (a replacement targets the item)."""
    if a.target == order:
        return True
    info = v.orders.get(order)
    return (
        bool(info and any(a.target == item for item, _ in info.items))
        or any(e.value == a.target and e.note == f"of {order}" for e in v.ledger)
        or order in (a.summary or "")
    )


def _done_before(v: RequestView, tool: str, order: str) -> render.ParsedAction | None:
    return next((a for a in v.state.actions if a.tool == tool and _on_order(v, a, order)), None)


def _find_key(data: Any, keys: tuple[str, ...]) -> tuple[str, Any] | None:
    if isinstance(data, dict):
        for k in keys:
            if k in data:
                return k, data[k]
        data = list(data.values())
    if isinstance(data, list):
        return next((hit for v in data if (hit := _find_key(v, keys))), None)
    return None


def _result_money(s: Seen) -> str:
    """The amount a resolving tool reports having moved, else the amount we asked for."""
    hit = _find_key(s.data, ("amount_cents", "amount"))
    cents = _cents(hit[1], hit[0]) if hit else None
    currency = (_find_key(s.data, ("currency",)) or ("", s.args.get("currency", "")))[1]
    if cents is None:
        cents = _cents(s.args.get("amount")) if "amount" in s.args else s.args.get("amount_cents")
    return render.format_money(cents, currency) if cents is not None else "the refund"


def _id_of(s: Seen, kind: str) -> str:
    found = [val for k, val in find_ids(s.content) if k == kind]
    return f" ({found[0]})" if found else ""


def _notify_or_reply(v: RequestView, text: str) -> Decision:
    """After a resolving action: confirm the way the customer asked, within the rules."""
    asked = " ".join(v.customer_texts())
    # "Never email me, phone only" asks for no e-mail; a typed "Confirm." answers a card, not this.
    wanted = [s for s in consent.sentences(asked) if _CONTACT_ASK.search(s) and not _CONTACT_REFUSED.search(s)]
    if not wanted:
        return reply(text)
    if v.tail_ok("send_email") or v.tail_ok("log_phone_call") or not (customer := v.customer_id()):
        return reply(text)
    wants_phone = re.search(r"\bcall\b|\bphone\b", asked, re.I)
    if (wants_phone or v.blocked("send_email")) and not v.blocked("log_phone_call"):
        return emit(v, "log_phone_call", customer_id=customer, summary=text)
    if not v.blocked("send_email"):
        return emit(v, "send_email", customer_id=customer, subject="Your support request", body=text)
    return reply(text)


def _details(v: RequestView, order: str) -> OrderInfo | Decision:
    info = v.orders.get(order)
    if info and info.detailed:
        return info
    return emit(v, "get_order", order_number=order)


def do_track(v: RequestView, order: str) -> Decision:
    # The ledger links a parcel to its order ("of SU-…"), so a compacted
    # get_order result need not be fetched again just for its tracking number.
    linked = [e.value for e in v.ledger if e.kind == "tracking" and e.verified and e.note == f"of {order}"]
    info = v.orders.get(order)
    if linked and not (info and info.detailed):
        number = linked[0]
    else:
        info = _details(v, order)
        if isinstance(info, Decision):
            return info
        if not info.tracking:
            return reply(f"Order {order} is {info.status or 'not shipped yet'}; it has no tracking number yet.")
        number = info.tracking[0]
    done = v.tail_ok("track_parcel", number)
    if not done:
        return emit(v, "track_parcel", tracking_number=number)
    data = done.data if isinstance(done.data, dict) else {}
    events = [e for e in data.get("events") or [] if isinstance(e, dict)]
    latest = events[-1] if events else {}
    where = " — ".join(str(latest[k]) for k in ("description", "location") if latest.get(k))
    status = str(data.get("status") or "in progress").replace("_", " ")
    carrier = f" with {data['carrier']}" if data.get("carrier") else ""
    latest_note = f" Latest: {where}." if where else ""
    if status == "lost":
        return lost_parcel(v, order, f"{number}{carrier}")
    return reply(f"Your parcel for order {order} ({number}{carrier}) is {status}.{latest_note}")


def lost_parcel(v: RequestView, order: str, parcel: str) -> Decision:
    """The carrier lost it: say so once, and offer what the shop can do (a replacement, or a refund)."""
    if fact := remember(v, "issue", f"Parcel lost in transit — order {order}"):
        return Decision(call=fact)
    money, info = v.state.money.get(order), v.orders.get(order)
    refundable = money.refundable_cents if money else (info.still_refundable() if info else None)
    currency = money.currency if money else (info.currency if info else "")
    refund = f"a refund of {render.format_money(refundable, currency)}" if refundable and currency else "a full refund"
    names = ", ".join(info.names) if info and info.names else ""
    offers = [] if v.blocked("offer_replacement") else [f"a replacement{' ' + names if names else ''} sent out"]
    offers += [] if v.blocked("issue_refund") else [refund]
    if not offers:
        return follow_up(v, f"parcel for order {order} is lost; the rules leave no remedy the agent may offer")
    choice = " or ".join(offers)
    return reply(
        f"I'm sorry — the carrier reports your parcel for order {order} ({parcel}) as lost. I can arrange "
        f"{choice} — which would you prefer?"
    )


def do_refund(v: RequestView, order: str) -> Decision:
    if done := v.tail_ok("issue_refund", order):
        money = _result_money(done)
        return _notify_or_reply(v, f"I've refunded {money} on order {order}{_id_of(done, 'refund')}.")
    latest_amount = _explicit_amount(v, latest_only=True)
    earlier = [a for a in v.state.actions if a.tool == "issue_refund" and a.target == order]
    # "Refund another 10.00 USD": a new partial refund (run, or held by policy), not the earlier one again.
    more = latest_amount is not None and (
        words.asks_for_more(v.latest or "") or all(a.amount_cents != latest_amount[0] for a in earlier)
    )
    if earlier and not more:
        prior = earlier[-1]
        amount = render.format_money(prior.amount_cents, prior.currency) if prior.amount_cents else "a refund"
        return reply(
            f"A refund of {amount} was already issued on order {order} (turn {prior.turn}), so I won't "
            "issue it again. If you'd like a further partial refund, tell me the amount."
        )
    if (cancelled := _done_before(v, "cancel_order", order)) and cancelled.amount_cents:
        amount = render.format_money(cancelled.amount_cents, cancelled.currency)
        return reply(
            f"Order {order} was cancelled (turn {cancelled.turn}) and {amount} was refunded with the "
            "cancellation, so there is nothing more to refund on it."
        )
    money, info = v.state.money.get(order), v.orders.get(order)
    refundable = money.refundable_cents if money else (info.still_refundable() if info else None)
    currency = money.currency if money else (info.currency if info else "")
    # A listing's total is not what was paid: without the order's payments in the money lane the
    # refund guard refuses the call, so the order is looked up first.
    if refundable is None or not currency or (money is None and not (info and info.detailed)):
        details = _details(v, order)
        return (
            details
            if isinstance(details, Decision)
            else follow_up(v, f"the refundable amount on order {order} could not be read")
        )
    if refundable <= 0:
        return reply(f"Order {order} has already been refunded in full; there is nothing left to refund.")
    explicit = latest_amount if more else _explicit_amount(v)
    cents, cur = explicit if explicit else (refundable, currency)
    if cur and currency and cur != currency:
        # The shop refunds in the order's currency: ask for the figure in it, never convert one.
        return reply(
            f"Order {order} was paid in {currency}, and the shop can only refund it in {currency}. "
            f"How much in {currency} would you like back?"
        )
    reason = (
        "further partial refund requested by the customer"
        if more and earlier
        else _reason(v, "customer requested a refund")
    )
    return emit(
        v,
        "issue_refund",
        order_number=order,
        amount=f"{Decimal(cents) / 100:.2f}",
        currency=cur or currency,
        reason=reason,
    )


def do_return(v: RequestView, order: str) -> Decision:
    if done := v.tail_ok("book_return", order):
        return _notify_or_reply(v, f"I've booked a return for order {order}{_id_of(done, 'return')}.")
    if prior := _done_before(v, "book_return", order):
        return reply(f"A return for order {order} was already booked (turn {prior.turn}).")
    info = _details(v, order)
    if isinstance(info, Decision):
        return info
    if not info.items:
        return follow_up(v, f"no items could be read on order {order} to book a return")
    said = _words(" ".join(v.customer_texts()))
    chosen = [i for i, name in info.items if said & _words(name)] or [i for i, _ in info.items]
    return emit(v, "book_return", order_number=order, item_ids=chosen, reason=_reason(v, "customer return"))


def do_cancel(v: RequestView, order: str) -> Decision:
    if done := v.tail_ok("cancel_order", order):
        refund = _find_key(done.data, ("refund",))
        money = f" and refunded {_result_money(done)}{_id_of(done, 'refund')}" if refund and refund[1] else ""
        return _notify_or_reply(v, f"I've cancelled order {order}{money}.")
    if prior := _done_before(v, "cancel_order", order):
        return reply(f"Order {order} was already cancelled (turn {prior.turn}).")
    if why := _shop_refusal(v, "cancel_order", order):
        return reply(
            f"I couldn't cancel order {order}: the shop says {why}. If you no longer want it, "
            "I can book a return instead — shall I?"
        )
    if v.blocking_rule("cancel_order", order, asked=True):  # a rule forbids it: say so, look nothing up
        return emit(v, "cancel_order", order_number=order, reason="customer asked to cancel")
    info = v.orders.get(order)
    if order not in v.state.money or not (info and info.status):
        # A cancellation refunds what was paid: its figures come first, so the approval threshold
        # weighs the refund instead of holding a call whose amount nobody knows; and its status
        # says whether the shop can cancel it at all.
        info = _details(v, order)
        if isinstance(info, Decision):
            return info
    if info.status == "cancelled":
        return reply(f"Order {order} is already cancelled.")
    if info.status and info.status != "placed":  # the shop cancels only orders not yet shipped
        return reply(
            f"Order {order} is {info.status} already, so it can't be cancelled — only orders that "
            "haven't shipped can. If you no longer want it, I can book a return instead — shall I?"
        )
    return emit(v, "cancel_order", order_number=order, reason="customer asked to cancel")


def _shop_refusal(v: RequestView, tool: str, order: str) -> str | None:
    """The shop's own reason for refusing `tool` on `order` in this step (not a guard's, not a hold)."""
    prefix = f"{render.ERROR_PREFIX}: "
    failed = next(
        (
            s
            for s in reversed(v.tail)
            if not s.ok
            and s.name == tool
            and s.targets(order)
            and s.content.startswith(prefix)
            and not _HELD.search(s.content)
        ),
        None,
    )
    return failed.content.removeprefix(prefix).strip().rstrip(".") if failed else None


def do_replace(v: RequestView, order: str) -> Decision:
    if v.blocked("offer_replacement"):
        return reply(
            "You asked us not to offer a replacement, so I won't. I can refund or return the item instead "
            "— which would you prefer?"
        )
    if v.tail_ok("offer_replacement", order):
        return _notify_or_reply(v, f"I've arranged a replacement for order {order}.")
    if prior := _done_before(v, "offer_replacement", order):
        return reply(f"A replacement for order {order} was already arranged (turn {prior.turn}).")
    info = _details(v, order)
    if isinstance(info, Decision):
        return info
    if not info.items:
        return follow_up(v, f"no items could be read on order {order} to arrange a replacement")
    said = _words(" ".join(v.customer_texts()))
    item = next((i for i, name in info.items if said & _words(name)), info.items[0][0])
    return emit(v, "offer_replacement", order_number=order, item_id=item, note=_reason(v, "customer asked"))


def do_list(v: RequestView) -> Decision:
    if search := v.tail_ok("search_orders"):
        listed = list({n: v.orders[n] for n, _ in _orders_in(search.data) if n in v.orders}.values())
        if not listed:
            return reply("I couldn't find any orders on your account.")
        data = search.data if isinstance(search.data, dict) else {}
        total = data.get("total_matches") if isinstance(data.get("total_matches"), int) else len(listed)
        shown = listed[:RECENT_ORDERS]
        lines = [f"- {o.label()}{' — ' + o.status.replace('_', ' ') if o.status else ''}" for o in shown]
        rest = max(total, len(listed)) - len(shown)
        tail = f"\n…and {rest} more. Tell me a product or an order number if it isn't listed." if rest > 0 else ""
        return reply("Here are your most recent orders:\n" + "\n".join(lines) + tail)
    if customer := v.customer_id():
        # The few most recent, as a person would read them out: a long listing fills the ID
        # ledger with orders nobody asked about and pushes out IDs the ticket still needs.
        return emit(v, "search_orders", customer_id=customer, limit=RECENT_ORDERS)
    return reply("Could you send me the email address you ordered with, so I can find your orders?")


def do_damaged(v: RequestView, order: str) -> Decision:
    # Damage alone does not say what the customer wants: ask rather than guess.
    return reply(
        f"I'm sorry the item from order {order} arrived damaged. Would you like a refund "
        "(full or partial, keeping the item), a return, or a replacement?"
    )


HANDLERS = {
    "damaged": do_damaged,
    "track": do_track,
    "refund": do_refund,
    "return": do_return,
    "cancel": do_cancel,
    "replace": do_replace,
}


# --- questions about an order: its status, what it holds, which order held a product -------


def _order_fact_question(v: RequestView) -> Decision | None:
    """ "What's the status of <order>?", "what's in <order>?", "what was the order number of the lamp?":
    answered from the shop's own results, looked up first. A message asking for an action is not one."""
    latest = v.latest or ""
    if intent_of(latest) not in (None, "track", "list"):
        return None
    typed = list(dict.fromkeys(val for k, val in find_ids(latest) if k == "order"))
    if len(typed) == 1 and (kind := asks.order_question(latest)):
        return do_order_info(v, typed[0], kind)
    if not typed and (phrase := asks.order_number_of(latest)):
        return do_which_order(v, phrase)
    return None


def _and(parts: list[str]) -> str:
    return parts[0] if len(parts) == 1 else f"{', '.join(parts[:-1])} and {parts[-1]}"


def _order_result_data(v: RequestView, order: str) -> dict:
    """The newest get_order result for `order` in the request, as the shop returned it."""
    seen = next((s for s in reversed(v.calls) if s.ok and s.name == "get_order" and s.targets(order)), None)
    return seen.data if seen and isinstance(seen.data, dict) else {}


def do_order_info(v: RequestView, order: str, kind: str) -> Decision:
    """The order's status, or what it holds, from its get_order result; a parcel still on its way is
    tracked (the carrier's word is its status), a lost one gets the remedies."""
    failed = [s.index for s in v.tail if s.name == "get_order" and not s.ok and s.targets(order)]
    if failed and not any(
        s.index > max(failed) and s.ok and s.name == "get_order" and s.targets(order) for s in v.tail
    ):
        return reply(f"I couldn't find order {order} on your account. Could you check the number?")
    info = _details(v, order)
    if isinstance(info, Decision):
        return info
    data = _order_result_data(v, order)
    parcels = [p for p in data.get("parcels") or [] if isinstance(p, dict)]
    if kind == "status" and info.tracking and any(p.get("status") != "delivered" for p in parcels):
        return do_track(v, order)
    items = [
        f"{d.get('product') or _item_name(d)} ×{d.get('quantity', 1)}"
        for d in data.get("items") or []
        if isinstance(d, dict)
    ]
    currency = data.get("currency") or info.currency
    total = (
        f", {render.format_money(data['total_cents'], currency)} in all"
        if isinstance(data.get("total_cents"), int) and currency
        else ""
    )
    holds = f"It holds {_and(items)}{total}." if items else "I can't see any items on it."
    status = str(data.get("status") or info.status or "").replace("_", " ")
    placed = f" (placed on {data['placed_on']})" if data.get("placed_on") else ""
    refunded = data.get("refunded_cents") if isinstance(data.get("refunded_cents"), int) else 0
    extra = (
        f" {render.format_money(refunded, currency)} has been refunded on it so far." if refunded and currency else ""
    )
    returns = [str(r.get("status", "")).replace("_", " ") for r in data.get("returns") or [] if isinstance(r, dict)]
    extra += f" A return on it is {returns[-1]}." if returns and returns[-1] else ""
    if kind == "contents":
        return reply(f"Order {order}{placed}: {holds[0].lower()}{holds[1:]} It is {status}.{extra}")
    return reply(f"Order {order}{placed} is {status}. {holds}{extra}")


def _found_orders(search: Seen) -> list[dict]:
    """The orders a search_orders result lists, each once, as the shop described them."""
    found: dict[str, dict] = {}
    for number, node in _orders_in(search.data) if search.ok else []:
        found.setdefault(number, node)
    return list(found.values())


def do_which_order(v: RequestView, phrase: str) -> Decision:
    """ "What was the order number of the air fryer?": the customer's orders holding it, from a search by
    its name (then by its last word, "desk lamp" → "lamp"), each with what it holds, never a guess."""
    head = phrase.split()[-1]
    searches = [s for s in v.tail if s.name == "search_orders" and s.args.get("query") in (phrase, head)]
    customer = v.customer_id()
    if not customer:
        return reply("Could you send me the email address you ordered with, so I can look up that order?")
    if not searches:
        return emit(v, "search_orders", customer_id=customer, query=phrase, limit=RECENT_ORDERS)
    found = _found_orders(searches[-1])
    if not found and searches[-1].args.get("query") != head:
        return emit(v, "search_orders", customer_id=customer, query=head, limit=RECENT_ORDERS)
    if not found:
        return reply(
            f'I couldn\'t find an order with "{phrase}" on your account. Could you tell me a little more '
            "about it, or the order number if you have it?"
        )
    said = _words(phrase)

    def line(node: dict) -> str:
        names = [n for n in node.get("items") or [] if isinstance(n, str)]
        held = [n for n in names if said & _words(n)] or names
        when = f", placed on {node['placed_on']}" if node.get("placed_on") else ""
        status = str(node.get("status") or "").replace("_", " ")
        return f"{node['order_number']} ({_and(held) if held else 'no items listed'}{', ' + status if status else ''}{when})"

    data = searches[-1].data if isinstance(searches[-1].data, dict) else {}
    total = data.get("total_matches") if isinstance(data.get("total_matches"), int) else len(found)
    more = f" …and {total - len(found)} more." if total > len(found) else ""
    if len(found) == 1:
        return reply(f"That's order {line(found[0])}.{more}")
    return reply(f"I found {total} orders with {phrase}: " + "; ".join(line(n) for n in found) + f".{more}")


# --- questions about what was done ------------------------------------------------------


def _held_pending(v: RequestView, tool: str, order: str | None) -> list[Seen]:
    """Calls of `tool` held for staff in the request and not yet run or rejected since."""
    out = []
    for s in v.calls:
        if s.ok or not _HELD.search(s.content) or s.name != tool or (order and not s.targets(order)):
            continue
        later = v.conv[s.index + 1 :]
        ran = any(t.ok and t.name == tool and t.index > s.index and t.args == s.args for t in v.calls)
        rejected = any(
            m.content.startswith(render.SYSTEM_EVENT_PREFIX) and f"rejected the held {tool}" in m.content for m in later
        )
        if not ran and not rejected:
            out.append(s)
    return out


def _latest_action(v: RequestView, tools: tuple[str, ...] = tuple(_STATUS_TOOL.values())) -> render.ParsedAction | None:
    done = [a for a in v.state.actions if a.tool in tools]
    return max(done, key=lambda a: a.turn) if done else None


def _order_of(v: RequestView, a: render.ParsedAction) -> str:
    """The order an action was taken on (a replacement names the item; the ledger links it to its order)."""
    if kind_of(a.target) == "order":
        return a.target
    owner = next((e.note[3:] for e in v.ledger if e.value == a.target and e.note.startswith("of ")), "")
    owner = owner or next((o.number for o in v.orders.values() if any(a.target == i for i, _ in o.items)), "")
    return owner or a.target


def do_latest(v: RequestView) -> Decision:
    """ "Is it approved?", "Did that work?": the case's latest action, or what is still with staff."""
    held = [s for tool in _STATUS_TOOL.values() for s in _held_pending(v, tool, None)]
    last = _latest_action(v)
    if held and (
        last is None
        or max(s.index for s in held) > max((s.index for s in v.calls if s.ok and s.name == last.tool), default=-1)
    ):
        return reply(
            _held_reply(max(held, key=lambda s: s.index)).replace(
                "needs a quick check", "is still waiting for a quick check"
            )
        )
    if last is None:
        return reply("Nothing has been done on this case yet. What would you like me to do, and for which order?")
    return reply(f"Yes — that's done: {_action_phrase(last, v)}.")


def do_amount(v: RequestView) -> Decision:
    """ "How much was it?": the money moved on the order the conversation was just about, else the latest."""
    last = _latest_action(v, ("issue_refund", "cancel_order"))
    for text in v.customer_texts()[1:]:
        typed = [val for k, val in find_ids(text) if k == "order"]
        order = typed[0] if typed else (_role_match(v, text) or _product_match(v, text))
        on = [
            a
            for a in v.state.actions
            if a.tool in ("issue_refund", "cancel_order") and a.amount_cents and order and _on_order(v, a, order)
        ]
        if on:
            last = max(on, key=lambda a: a.turn)
            break
    if last is None or not last.amount_cents:
        return reply("No money has been moved on this case yet. Which order would you like me to look at?")
    order = _order_of(v, last)
    what = "refunded with the cancellation of" if last.tool == "cancel_order" else "refunded on"
    return reply(
        f"{render.format_money(last.amount_cents, last.currency)} was {what} order {order} (turn {last.turn})."
    )


_KIND_TOOLS = {
    "refund": ("issue_refund", "cancel_order"),
    "cancel": ("cancel_order",),
    "return": ("book_return",),
    "replace": ("offer_replacement",),
}
_KIND_NOUNS = {
    "refund": ("refund", "refunds"),
    "cancel": ("cancellation", "cancellations"),
    "return": ("return", "returns"),
    "replace": ("replacement", "replacements"),
}


def do_actions(v: RequestView, kind: str) -> Decision:
    """ "How many refunds …?": every action of that kind on this case, from the actions lane (what the
    shop's tools reported), with the money each moved and the total per currency."""
    done = [
        a
        for a in v.state.actions
        if a.tool in _KIND_TOOLS[kind] and (kind != "refund" or a.tool == "issue_refund" or a.amount_cents)
    ]
    one, many = _KIND_NOUNS[kind]
    if not done:
        return reply(f"No {one} has been made on this case so far.")
    parts, totals = [], {}
    for a in sorted(done, key=lambda a: a.turn):
        order = _order_of(v, a)
        if kind == "refund" and a.amount_cents:
            how = "with the cancellation of order" if a.tool == "cancel_order" else "on order"
            parts.append(f"{render.format_money(a.amount_cents, a.currency)} {how} {order} (turn {a.turn})")
            totals[a.currency] = totals.get(a.currency, 0) + a.amount_cents
        else:
            parts.append(f"order {order} (turn {a.turn})")
    head = f"1 {one}" if len(done) == 1 else f"{len(done)} {many}"
    text = f"{head} on this case: {'; '.join(parts)}."
    if kind == "refund" and len(done) > 1:
        text += " In all: " + ", ".join(render.format_money(c, cur) for cur, c in sorted(totals.items())) + "."
    return reply(text)


def do_money_goes(v: RequestView, *, when: bool = False) -> Decision:
    last = _latest_action(v, ("issue_refund", "cancel_order"))
    if last is None or not last.amount_cents:
        return reply("Refunds always go back to the original payment method. No refund has been made on this case yet.")
    money, order = render.format_money(last.amount_cents, last.currency), _order_of(v, last)
    if when:
        # The shop knows when it paid, not when a bank shows it: say which, and promise no date.
        return reply(
            f"The refund of {money} on order {order} has been issued to the original payment method; "
            "how soon it shows depends on your bank or card issuer."
        )
    return reply(f"Yes — the {money} refunded on order {order} goes back to the original payment method.")


def do_options(v: RequestView) -> Decision | None:
    """ "What are my options?", "what happened?": the issue on record again — the carrier's word on a
    lost parcel, a damaged item — with the remedies the shop allows."""
    issue = v.state.fields.get("issue", "")
    typed = [value for kind, value in find_ids(issue) if kind == "order"]
    order = typed[0] if typed else v.state.fields.get("order_number")
    if not order or kind_of(order) != "order":
        return None
    if issue.lower().startswith(("parcel lost", "parcel not delivered")):
        return do_track(v, order)  # the carrier's word, then what the shop allows
    if issue.lower().startswith("item arrived damaged"):
        return do_damaged(v, order)
    return None


def _approved_result(v: RequestView) -> Decision | None:
    """A held call staff approved has just run: tell the customer what was done."""
    if not v.tail or not v.tail[-1].ok:
        return None
    last = v.tail[-1]
    kind = next((k for k, tool in _STATUS_TOOL.items() if tool == last.name), None)
    since = v.conv[(v.customer_idx[-1] if v.customer_idx else 0) : last.index]
    approved = any(
        m.content.startswith(render.SYSTEM_EVENT_PREFIX)
        and (f"approved the held {last.name}" in m.content or f"confirmed the {last.name} call" in m.content)
        for m in since
    )
    order = last.args.get("order_number") or last.args.get("order")
    if kind is None or not approved or not isinstance(order, str):
        return None
    return HANDLERS[kind](v, order)


def _action_phrase(a: render.ParsedAction, v: RequestView | None = None) -> str:
    amount = f" of {render.format_money(a.amount_cents, a.currency)}" if a.amount_cents else ""
    what = {
        "issue_refund": f"a refund{amount}",
        "cancel_order": "a cancellation" + (f" (refunding{amount.removeprefix(' of')})" if amount else ""),
        "book_return": "a return booked",
        "offer_replacement": "a replacement arranged",
    }.get(a.tool, a.tool)
    on = _order_of(v, a) if v else a.target
    return f"{what} on {on} (turn {a.turn})"


_NOUN = {"refund": "refund", "cancel": "cancellation", "return": "return", "replace": "replacement"}


def _status_order(v: RequestView) -> str | Decision | None:
    """The order a status question is about — from the question itself, never guessed."""
    latest = v.latest or ""
    typed = [val for k, val in find_ids(latest) if k == "order"]
    if typed:
        return typed[0]
    if found := _role_match(v, latest) or _product_match(v, latest):
        return found
    phrase = _unmatched_product(v, latest)
    customer = v.customer_id()
    if phrase and customer:
        search = next((s for s in reversed(v.tail) if s.name == "search_orders" and s.args.get("query")), None)
        if search is None:
            return emit(v, "search_orders", customer_id=customer, query=phrase)
        listed = {n for n, _ in _orders_in(search.data)} if search.ok else set()
        if len(listed) == 1:
            return listed.pop()
    if not phrase and (field_value := v.state.fields.get("order_number")) and kind_of(field_value) == "order":
        return field_value
    return None


def do_status(v: RequestView, kind: str) -> Decision:
    """Answer "is the refund done?" from the lanes and the request. Never moves money."""
    tool, noun = _STATUS_TOOL[kind], _NOUN[kind]
    order = _status_order(v)
    if isinstance(order, Decision):
        return order
    relevant = [tool] + (["cancel_order"] if kind == "refund" else [])
    done = [
        a
        for a in v.state.actions
        if a.tool in relevant
        and (order is None or _on_order(v, a, order))
        and (tool != "cancel_order" or a.tool == tool)
        and (a.tool != "cancel_order" or kind == "cancel" or a.amount_cents)
    ]
    if order is None and (named := _product_candidates(v, v.latest or "")):
        # "The air fryer" fits two orders, and only one of them had a refund: that is the one asked about.
        narrowed = [a for a in done if any(_on_order(v, a, o) for o in named)]
        if len({_order_of(v, a) for a in narrowed}) == 1:
            order, done = _order_of(v, narrowed[0]), narrowed
    held = _held_pending(v, tool, order)
    if order is None:
        if done:
            listed = "; ".join(_action_phrase(a, v) for a in done)
            return reply(f"Here is what this case shows: {listed}. If you meant another order, tell me which one.")
        if held:
            return reply(f"A {noun} is waiting for staff approval; I'll update you once they decide.")
        return reply(f"I can't see a {noun} on this case yet. Which order do you mean?")
    if done:
        listed = "; ".join(_action_phrase(a, v) for a in done)
        extra = ""
        if kind == "refund" and (money := v.state.money.get(order)):
            extra = (
                f" In all {render.format_money(money.refunded_cents, money.currency)} has been refunded on "
                f"{order}; it goes back to the original payment method."
            )
        return reply(f"Yes — that's done: {listed}.{extra}")
    if held:
        return reply(f"The {noun} on order {order} is waiting for staff approval; I'll update you once they decide.")
    info, money = v.orders.get(order), v.state.money.get(order)
    if kind == "refund" and money and money.refunded_cents:
        return reply(
            f"Order {order} shows {render.format_money(money.refunded_cents, money.currency)} refunded so "
            f"far; {render.format_money(money.refundable_cents, money.currency)} is still refundable."
        )
    if kind == "cancel" and info and info.status == "cancelled":
        return reply(f"Yes — order {order} is cancelled.")
    if info is None or not (info.detailed or money):
        if order in v.known_ids or order in {e.value for e in v.ledger}:
            return emit(v, "get_order", order_number=order)  # a lookup only: it shows what was done
    if kind == "refund" and info and info.refunded:
        return reply(f"Order {order} shows {render.format_money(info.refunded, info.currency)} refunded so far.")
    status = f" (it is {info.status.replace('_', ' ')})" if info and info.status else ""
    offer = {
        "refund": "Would you like me to request one?",
        "cancel": "Would you like me to cancel it?",
        "return": "Would you like me to book one?",
        "replace": "Would you like me to arrange one?",
    }[kind]
    return reply(f"No — I can't see a {noun} on order {order}{status}. {offer}")


# --- facts for staff to confirm ---------------------------------------------------------


def _case_facts(v: RequestView, intent: str, order: str) -> Decision | None:
    """record_fact calls for what the latest message establishes: the issue, the remedy asked for, an amount,
    and the order they are about."""
    latest = v.latest or ""
    wanted = []
    issue = next((r for rx, r in _REASONS if rx.search(latest)), None)
    if issue:
        info = v.orders.get(order)
        what = f" ({', '.join(info.names)})" if info and info.names else ""
        wanted.append(remember(v, "issue", f"{issue[0].upper()}{issue[1:]} — order {order}{what}"[:200]))
    if intent in _RESOLUTION and intent != "track" and intent_of(latest) == intent:
        wanted.append(remember(v, "resolution", _RESOLUTION[intent]))
        if intent == "refund" and (amount := _explicit_amount(v, latest_only=True)) and amount[1]:
            wanted.append(remember(v, "amount", render.format_money(*amount), stated=True))
    if wanted and kind_of(order) == "order":
        # Which order the case is about: the issue and the remedy above are about it.
        wanted.append(remember(v, "order_number", order))
    calls = [c for c in wanted if c]
    return Decision(call=calls[0], more=calls[1:]) if calls else None


def _stated_constraint(v: RequestView) -> bool:
    latest = v.latest or ""
    return bool(
        words.contact_preference(latest)
        or any(_CONSTRAINT.search(_norm(sentence)) for sentence in candidate_rules(latest))
    )


def _constraint_only(v: RequestView, intent: str) -> bool:
    """ "I don't want replacements, ever. Refunds only.": a preference stated, nothing asked for yet."""
    latest = v.latest or ""
    if find_ids(latest) or not _stated_constraint(v):
        return False
    naming = [s for s in consent.sentences(latest) if intent_of(s) == intent]
    return bool(naming) and all(_CONSTRAINT.search(_norm(s)) or re.search(r"\bonly\b", s, re.I) for s in naming)


def _held_reply(held: Seen) -> str:
    """What is waiting for staff, in the customer's terms: "Your refund of 14.00 USD on SU-21369 …"."""
    args, order = held.args, held.args.get("order_number") or held.args.get("order")
    noun = {tool: _NOUN[kind] for kind, tool in _STATUS_TOOL.items()}.get(held.name)
    if not noun or not isinstance(order, str):
        return HELD_REPLY
    amount = f" of {args['amount']} {args.get('currency', '')}".rstrip() if args.get("amount") else ""
    return (
        f"Your {noun}{amount} on order {order} needs a quick check by our staff; it is with them now and "
        "I'll update you once they decide."
    )


def _card_answer(v: RequestView) -> Decision | None:
    """A card the agent proposed in this step: ask the customer to read it. One they declined since: say
    nothing was done."""
    awaiting = [s for s in v.tail if _AWAITING.search(s.content)]
    if not awaiting:
        return None
    last = awaiting[-1]
    later = v.conv[last.index + 1 :]
    if any(
        m.content.startswith(render.SYSTEM_EVENT_PREFIX) and f"declined the {last.name} call" in m.content
        for m in later
    ):
        return reply(
            "Understood — I haven't done it, and nothing has changed. Let me know if you'd like something else instead."
        )
    if any(s.index > last.index for s in v.tail):
        return None  # a later call answers it (the card was confirmed and ran)
    title = (last.data or {}).get("card") if isinstance(last.data, dict) else ""
    what = f" — {title[:1].lower() + title[1:]}" if title else ""
    # A message to send the customer elsewhere (its own call's text: what was just done) is said here too.
    said = (
        next((str(last.args[k]).strip() for k in ("summary", "body") if last.args.get(k)), "")
        if last.name in _CONTACT_TOOLS
        else ""
    )
    lead = f"{said} " if said else ""
    return reply(
        f"{lead}I've put this on a card for you to confirm{what}. Please check the details on the card and "
        "press Confirm if they are right; nothing happens until you do."
    )


# The system event a customer's (or staff's) answer to a card leaves in the conversation.
_CARD_DECIDED = re.compile(r"\b(?:confirmed|declined) the \w+ call\b")


def _waiting_cards(v: RequestView) -> list[str]:
    """The titles of the cards this conversation shows proposed and not answered since (no event
    says they were confirmed or declined), oldest first."""
    out: list[str] = []
    for s in v.calls:
        if not _AWAITING.search(s.content) or not isinstance(s.data, dict) or not s.data.get("card"):
            continue
        title = str(s.data["card"])
        answered = any(
            m.content.startswith(render.SYSTEM_EVENT_PREFIX) and f"the {s.name} call ({title})" in m.content
            for m in v.conv[s.index + 1 :]
        )
        if not answered and title not in out:
            out.append(title)
    return out


def _yes_to_no_card(v: RequestView) -> Decision | None:
    """A bare "yes" that confirmed nothing (no event follows it) while cards are waiting: say which
    cards wait and ask for the button, rather than guess which one it meant."""
    if not v.customer_idx or not plain_yes(v.latest or ""):
        return None
    since = v.conv[v.customer_idx[-1] + 1 :]
    if any(m.content.startswith(render.SYSTEM_EVENT_PREFIX) and _CARD_DECIDED.search(m.content) for m in since):
        return None
    waiting = _waiting_cards(v)
    if not waiting:
        return None
    listed = "; ".join(t[:1].lower() + t[1:] for t in waiting)
    if len(waiting) == 1:
        return reply(
            f"The card is still waiting for you — {listed}. Please press Confirm on it if it is right; "
            "nothing happens until you do."
        )
    return reply(
        f"There are {len(waiting)} cards waiting for you — {listed}. A plain yes doesn't tell me which one "
        "you mean: please press Confirm on each card you want; nothing happens until you do."
    )


def _card_decided(v: RequestView) -> Decision | None:
    """The customer answered a card after the messages before it were compacted away (the request
    holds no message of theirs): what became of the call, not a greeting."""
    events = [m for m in v.conv if m.content.startswith(render.SYSTEM_EVENT_PREFIX)]
    if not events or not _CARD_DECIDED.search(events[-1].content):
        return None
    if "declined the " in events[-1].content:
        return reply(
            "Understood — I haven't done it, and nothing has changed. Let me know if you'd like something else instead."
        )
    if v.tail and _HELD.search(v.tail[-1].content):
        return reply(_held_reply(v.tail[-1]))
    return _card_answer(v) or _approved_result(v)


# The notice a customer's files leave for the agent: what they are, never what they show.
_ATTACHED = re.compile(
    r"The customer attached (?:a file|\d+ files) to their message \(turn \d+\): (.+?)\. You cannot see", re.S
)


def _attached(v: RequestView) -> list[str]:
    """The names of the files the customer sent since the last reply (their notices are system events)."""
    last_reply = max((i for i, m in enumerate(v.conv) if _is_reply(m)), default=-1)
    return [
        name
        for m in v.conv[last_reply + 1 :]
        if m.content.startswith(render.SYSTEM_EVENT_PREFIX)
        for found in _ATTACHED.findall(m.content)
        for name in re.findall(r"“([^”]+)”", found)
    ]


def _files_for_staff(v: RequestView) -> Decision | None:
    """Files came: the agent cannot see them, so staff are asked to look first (the notice says so)."""
    names = _attached(v)
    if not names or not v.offers(FOLLOW_UP_TOOL) or any(s.name == FOLLOW_UP_TOOL for s in v.tail):
        return None
    return Decision(
        call=(
            FOLLOW_UP_TOOL,
            v.args_for(FOLLOW_UP_TOOL, {"reason": _short(f"the customer sent {', '.join(names)}: please look at it")}),
        )
    )


def _files_acknowledged(v: RequestView, text: str) -> str:
    """The reply, opened by what became of the files: passed to staff (when that call ran in this step)."""
    names = _attached(v)
    if not names or not any(s.name == FOLLOW_UP_TOOL and s.ok for s in v.tail):
        return text
    it = "it" if len(names) == 1 else "them"
    ack = (
        f"Thank you for {', '.join(names)}. I can't open files myself, so I've asked a member of our staff "
        f"to look at {it}; they'll follow up with you here."
    )
    return ack if text in (CLARIFY, MID_CASE_CLARIFY, STAFF_FOLLOW_UP) else f"{ack} {text}"


def decide(v: RequestView) -> Decision:
    if v.latest is None:
        # Compacted down to the last decision: what became of it, never a greeting mid-case.
        return _card_decided(v) or _approved_result(v) or reply("Hello! How can I help you today?")
    if len([s for s in v.tail if s.name not in LANE_TOOLS]) >= MAX_CALLS_PER_STEP:
        return follow_up(v, "the agent made many tool calls on this message without finishing")
    if card := _card_answer(v):
        return card
    if waiting := _yes_to_no_card(v):
        return waiting
    # Held and not yet decided: the newest result in this step is the hold.
    if v.tail and _HELD.search(v.tail[-1].content):
        return reply(_held_reply(v.tail[-1]))
    if files := _files_for_staff(v):
        return files
    if (rule := _unpinned_constraint(v)) and v.has_tool("pin_constraint"):
        return emit(v, "pin_constraint", text=rule, scope="ticket")
    if (pref := words.contact_preference(v.latest)) and (fact := remember(v, "contact_preference", pref, True)):
        return Decision(call=fact)
    if approved := _approved_result(v):
        return approved
    if kind := words.status_question(v.latest):
        return do_status(v, kind)
    if words.vague_status(v.latest) and intent_of(v.latest) is None:
        return do_latest(v)
    if (asked := words.actions_question(v.latest)) and not asks_for(v.latest, asked):
        return do_actions(v, asked)
    if words.amount_question(v.latest) and intent_of(v.latest) is None:
        return do_amount(v)
    if words.where_money_goes(v.latest) and intent_of(v.latest) in (None, "refund"):
        return do_money_goes(v)
    if words.money_timing(v.latest) and intent_of(v.latest) in (None, "refund") and not asks_for(v.latest, "refund"):
        return do_money_goes(v, when=True)
    if words.options_question(v.latest) and intent_of(v.latest) is None and (options := do_options(v)):
        return options
    if words.approval_timing(v.latest) and (
        held := [h for tool in _STATUS_TOOL.values() for h in _held_pending(v, tool, None)]
    ):
        return reply(
            f"{_held_reply(held[-1])} I can't promise a time, but staff decide held requests as soon as they can."
        )
    if talk := words.small_talk(v.latest):
        return reply(
            "Goodbye — take care!" if talk == "goodbye" else "Alright. Is there anything else I can help with?"
        )
    if asked := _order_fact_question(v):
        return asked
    intent = _intent(v)
    if intent in consent.ACTIONS and intent_of(v.latest) == intent and not asks_for(v.latest, intent):
        kinds = {consent.sentence_kind(s, intent) for s in consent.sentences(v.latest)}
        # "And the return for the lamp?": a question naming an action, asking for none, asks how it stands.
        if words.status_question(v.latest) is None and (
            "status" in kinds or ("mention" in kinds and v.latest.rstrip().endswith("?") and "negated" not in kinds)
        ):
            return do_status(v, intent)
        return _not_asked(v, intent)
    if intent is None or _constraint_only(v, intent):
        if _stated_constraint(v):
            return reply(words.acknowledgement(v.latest))
        if _KEEP.search(v.latest) and (kept := _typed_or_product(v, v.latest)):
            return reply(f"Understood — I'll leave order {kept} as it is.")
        if _THANKS.search(v.latest):
            return reply("You're welcome! Is there anything else I can help with?")
        return reply(MID_CASE_CLARIFY if v.mid_case else CLARIFY)
    if intent == "list":
        return do_list(v)
    order = resolve_order(v)
    if isinstance(order, Decision):
        return order
    if facts := _case_facts(v, intent, order):
        return facts
    return HANDLERS[intent](v, order)


def answer(v: RequestView) -> Decision:
    """`decide`, with a constraint the customer just stated acknowledged in the reply."""
    decision = decide(v)
    if decision.text:
        decision.text = _files_acknowledged(v, decision.text)
    if decision.text and _stated_constraint(v) and not decision.text.startswith("Understood"):
        decision.text = f"{words.acknowledgement(v.latest)} {decision.text}"
    return decision


def _is_reply(m: Message) -> bool:
    return m.role == "assistant" and bool(m.content) and not m.tool_calls


def _request_groups(messages: list[Message]) -> list[list[int]]:
    """The customer's messages since the last reply, grouped by request: a message the agent had
    started working on (a call came after it) before the next arrived is a request of its own;
    messages sent one after another with no work between ("cancel my order" — "it's SU-…") are one."""
    groups: list[list[int]] = []
    worked = False
    for i, m in enumerate(messages):
        if _is_reply(m):
            groups, worked = [], False
        elif m.tool_calls:
            worked = True
        elif render.is_customer_message(m):
            if worked or not groups:
                groups.append([i])
            else:
                groups[-1].append(i)
            worked = False
    return groups


def answer_request(request: ModelRequest) -> Decision:
    """`answer`, for every request the customer made since the last reply, oldest first.

    A message that arrives while the agent works on the one before is stored after that work's
    first calls, so a model reading only the newest message would drop the earlier request. Each
    request is worked in turn instead: the calls after it are its own until its answer would be a
    reply; that reply is kept and the next request gets the calls after that point. The customer
    gets one reply answering each request, or the next call one of them still needs."""
    msgs = list(request.messages)
    groups = _request_groups(msgs)
    if len(groups) < 2:
        return answer(RequestView(request))
    later = {i for g in groups[1:] for i in g}
    start = groups[0][0]
    base = msgs[:start]
    # The work after the first request, each with its place among the messages.
    work = [(i, m) for i, m in enumerate(msgs[start:], start) if i not in later and i not in groups[0]]
    said: list[str] = []

    def view(upto: list[Message]) -> RequestView:
        return RequestView(request.model_copy(update={"messages": upto}))

    for n, group in enumerate(groups):
        asked = [msgs[i] for i in group]
        if n == len(groups) - 1:
            decision = answer(view(base + asked + [m for _, m in work]))
            break
        # Where this request's calls end: the first point after a whole call at which it would
        # reply — never before the next request arrived (what came before it was this one's, a
        # call the customer confirmed meanwhile included).
        arrived = groups[n + 1][0]
        cuts = [j for j, (i, m) in enumerate(work) if m.tool_calls and i > arrived] + [len(work)]
        decision = None
        for j in cuts:
            done = [m for _, m in work[:j]]
            decision = answer(view(base + asked + done))
            if decision.text:
                base = base + asked + done + [Message(role="assistant", content=decision.text)]
                work = work[j:]
                break
        if not decision.text:
            return decision  # this request still needs a call
        if decision.text not in said:
            said.append(decision.text)
    if decision.text is None:
        return decision
    if decision.text not in said:
        said.append(decision.text)
    return reply("\n\n".join(said))


class OfflineModel:
    """Deterministic stand-in for a working model; reads only the request."""

    name = "offline"

    def complete(self, request: ModelRequest) -> ModelResponse:
        decision = answer_request(request)
        calls = []
        for n, (name, args) in enumerate(decision.calls):
            digest = hashlib.sha256(f"{len(request.messages)}:{n}:{name}:{json.dumps(args, sort_keys=True)}".encode())
            calls.append(ToolCall(id=f"off_{int(digest.hexdigest()[:8], 16)}", name=name, arguments=args))
        out = decision.text or json.dumps([c.model_dump() for c in calls], ensure_ascii=False)
        usage = Usage(
            input_tokens=count_message_tokens(request.messages, "offline"), output_tokens=count_tokens(out, "offline")
        )
        return ModelResponse(text=decision.text, tool_calls=calls, usage=usage, model="offline", offline=True)
