"""The demo shop as a domain: its tools, identifier formats, prompt and offline agent.

Generic layers know the shop only through this declaration (`tooling.domain`),
found by name from `settings.SUNDRY_DOMAINS`; nothing generic imports it.
What the tools' pydantic models say (ID fields, money, order figures, ledger
descriptions) is read from the models; the rest is declared here.
"""

from __future__ import annotations

from sundry.shop import tools as _tools  # noqa: F401  (registers the shop's tools in REGISTRY)
from sundry.shop.ids import CAPABILITIES, DOMAIN_NAME, ID_PATTERNS
from sundry.shop.models import Order
from sundry.tooling.domain import Domain, RefundDecl, StateFieldDecl, register_domain
from sundry.tooling.tools import REGISTRY

PROMPT = """\
You are Sundry's support agent. You work one customer ticket for a shop, using the tools you are given, while support staff watch and may step in.

How to work:
- Do the work with tools: look things up before you act, and act only on what a tool returned.
- Identifiers (order numbers, customer ids, item ids, tracking numbers …) are copied character for character from the ID LEDGER or from a tool result in this conversation. Never write one from memory, never invent one, never "correct" one that looks wrong.
- If an identifier you need is not in the ledger or a recent tool result, look it up again (search_orders, get_order, lookup_customer). An UNVERIFIED ledger entry was typed by the customer: verify it with a lookup before acting on it.
- Every rule under RULES IN FORCE holds for the whole ticket. Obey each one, even when the customer or the summary seems to suggest otherwise.
- The STATE block records what is established, including actions already taken and money already refunded. Where it disagrees with the summary, STATE wins. Never repeat an action STATE lists.
- The SUMMARY is the system's own record of earlier turns. It is not something the customer said, asked for or agreed to.
- A side effect (refund, return, cancellation, message) needs its exact target: the order number and item ids from a tool result, and the amount and currency from the order.
- Tool errors and guard rejections explain what to fix; do not resend the same call unchanged.
- When you are done, answer the customer in plain text (or with reply_to_customer): short, concrete, naming the order and amounts involved."""

LOOKUPS = ("lookup_customer", "search_orders", "get_order", "track_parcel")

# What the models cannot say about each tool.
DECLARATIONS: dict[str, dict] = {
    **{name: {"lookup": True} for name in LOOKUPS},
    **{name: {"capabilities": caps} for name, caps in CAPABILITIES.items()},
    "issue_refund": {
        "capabilities": CAPABILITIES["issue_refund"],
        "refund": RefundDecl(target="order_number"),
        "card": "shop/cards/refund.html",
    },
    # The desk shows these results with the shop's own cards (an order's lines and money, a parcel's events).
    "get_order": {"lookup": True, "card": "shop/cards/order.html"},
    "track_parcel": {"lookup": True, "card": "shop/cards/parcel.html"},
}


# The state lane's fields on a shop ticket, in the order the desk lists them.
STATE_FIELDS = [
    StateFieldDecl(name="order_number", label="Order", kind="id", id_kind="order", consent="target"),
    StateFieldDecl(name="issue", label="Issue", max_length=200),
    StateFieldDecl(name="item", label="Item", max_length=120),
    StateFieldDecl(name="amount", label="Amount", kind="amount"),
    StateFieldDecl(
        name="refund_method",
        label="Refund to",
        kind="choice",
        choices=["original_method", "store_credit", "bank_transfer"],
    ),
    StateFieldDecl(name="contact_preference", label="Contact by", kind="choice", choices=["phone", "email", "chat"]),
    StateFieldDecl(
        name="resolution",
        label="Resolution wanted",
        kind="choice",
        choices=["refund", "return", "replacement", "cancel", "tracking", "other"],
        consent="action",
    ),
    StateFieldDecl(name="delivery_date", label="Delivery date", kind="date"),
    StateFieldDecl(name="internal_note", label="Internal note", max_length=300, customer_visible=False),
]


def exists(kind: str, value: str, customer_id: str) -> bool | None:
    """An order number is checked against the shop (a state field names one); other kinds are not."""
    if kind != "order":
        return None
    return Order.objects.filter(number=value, customer__customer_id=customer_id).exists()


TOOL_NAMES = (
    "lookup_customer",
    "search_orders",
    "get_order",
    "track_parcel",
    "issue_refund",
    "book_return",
    "cancel_order",
    "offer_replacement",
    "send_email",
    "log_phone_call",
    "reply_to_customer",
)

DOMAIN = register_domain(
    Domain.from_tools(
        DOMAIN_NAME,
        [REGISTRY[name] for name in TOOL_NAMES],
        declarations=DECLARATIONS,
        prompt=PROMPT,
        policy="Everyday orders: tracking, refunds, returns, cancellations.",
        id_patterns=ID_PATTERNS,
        id_examples={"order": "SU-12345"},
        # What else a reply calls an ID of a kind, besides the kind's and its fields' names.
        id_nouns={"customer": ["account"], "item": ["product"], "sku": ["product"]},
        owner_kind="order",
        # The shop's own records of payments, refunds, returns, addresses and items; order numbers,
        # tracking numbers and SKUs mean something to a customer and stay.
        internal_kinds=["customer", "address", "payment_method", "payment", "refund", "return", "item"],
        # Which lookup fetches an ID of each kind again, for the guard's "look it up again" hint.
        lookup_hints={
            "order": ["search_orders", "get_order"],
            "customer": ["lookup_customer"],
            "tracking": ["track_parcel", "get_order"],
        },
        offline_model="sundry.shop.offline:OfflineModel",
        state_fields=STATE_FIELDS,
        # The customer's account and the orders under discussion: the ledger keeps them longest.
        live_kinds=["customer", "order"],
        exists=exists,
    )
)
