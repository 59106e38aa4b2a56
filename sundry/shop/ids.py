"""The demo shop's identifier formats and what its tools can do, as pure data.

`shop/domain.py` declares the shop with these; the offline model reads them
here, so it recognises the shop's IDs and rules without Django (the benchmark's
model server runs it in a process of its own).
"""

from __future__ import annotations

from sundry.tooling.domain import Domain

# The name the shop registers as a domain under; the desk's customer records name it as their reference.
DOMAIN_NAME = "demo_shop"

ID_PATTERNS: dict[str, str] = {
    "order": r"SU-\d{5}",
    "customer": r"cus_[0-9a-z]{8}",
    "address": r"adr_[0-9a-z]{8}",
    "payment_method": r"pm_[0-9a-z]{8}",
    "payment": r"pay_[0-9a-z]{8,}",
    "refund": r"rfd_[0-9a-z]{8,}",
    "return": r"ret_[0-9a-z]{8,}",
    "item": r"itm_[0-9a-z]{8}",
    "tracking": r"1Z[0-9A-Z]{14}",
    "sku": r"SKU-[0-9A-Z]{5}",
}

# What each tool can do that a rule may forbid (`tooling.domain.CAPABILITIES`).
CAPABILITIES: dict[str, list[str]] = {
    "issue_refund": ["refunds"],
    "book_return": ["returns"],
    "cancel_order": ["cancels"],
    "offer_replacement": ["replaces"],
    "send_email": ["contacts_customer:email"],
    "log_phone_call": ["contacts_customer:phone"],
}

# The shop's IDs and capabilities without its tools' models: enough to read text and rules.
WORDS = Domain.from_data(
    {
        "name": "demo_shop",
        "id_patterns": ID_PATTERNS,
        "tools": {name: {"capabilities": caps} for name, caps in CAPABILITIES.items()},
    }
)
find_ids = WORDS.find_ids
kind_of = WORDS.kind_of
