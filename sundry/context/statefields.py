"""The named state fields and their validators.

Every value is validated before it is stored; what fails is rejected with a
reason, never stored half-right. Validators are pure: the one check that
needs the shop (does this order exist for this customer?) is passed in.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date
from typing import Callable

from sundry.core import money
from sundry.tooling.domain import get_domain


class StateValueInvalid(ValueError):
    pass


_SYMBOLS = {"$": "USD", "€": "EUR", "£": "GBP", "₹": "INR", "rs": "INR", "rs.": "INR"}
_CURRENCIES = {"USD", "EUR", "GBP", "INR"}
# ASCII digits only ([0-9], not \d, which also matches other scripts' digits).
_AMOUNT = re.compile(
    r"^\s*(?P<pre>[$€£₹]|rs\.?|usd|eur|gbp|inr)?\s*(?P<num>[0-9]{1,3}(?:,[0-9]{2,3})*(?:\.[0-9]{1,2})?|[0-9]+(?:\.[0-9]{1,2})?)\s*(?P<post>usd|eur|gbp|inr)?\s*$",
    re.IGNORECASE,
)


def parse_amount(text: str) -> tuple[int, str]:
    """'4,050 INR' / '$40' / '40.00 USD' → (minor units, currency). Currency is required."""
    if len(text or "") > money.MAX_CHARS:
        raise StateValueInvalid(f"An amount of {len(text)} characters is not plausible; write it as '40.00 USD'.")
    m = _AMOUNT.match(text or "")
    if not m:
        raise StateValueInvalid(f"'{text}' is not an amount with a currency, e.g. '40.00 USD' or '4,050 INR'.")
    pre, post = (m.group("pre") or "").lower(), (m.group("post") or "").upper()
    currency = post or _SYMBOLS.get(pre) or pre.upper()
    if currency not in _CURRENCIES:
        raise StateValueInvalid(f"'{text}' has no currency; write it as '40.00 USD' (USD, EUR, GBP or INR).")
    try:
        cents = money.parse_major(m.group("num").replace(",", ""), currency)
    except money.MoneyError as exc:
        raise StateValueInvalid(f"'{text}': {exc}.") from exc
    if cents <= 0:
        raise StateValueInvalid("An amount must be more than zero.")
    return cents, currency


def _amount(value: str, **_) -> str:
    cents, currency = parse_amount(value)
    return money.format_money(cents, currency)


def _order(value: str, *, order_exists: Callable[[str], bool] | None = None, **_) -> str:
    value = (value or "").strip().upper()
    domain = get_domain()
    pattern, example = domain.id_patterns.get("order"), domain.id_examples.get("order")
    if pattern and not re.fullmatch(pattern, value):
        shape = f"format {example}" if example else "copy it from the ID ledger"
        raise StateValueInvalid(f"'{value}' is not an order number ({shape}).")
    if order_exists is not None and not order_exists(value):
        raise StateValueInvalid(f"Order {value} does not exist for this customer.")
    return value


def _date(value: str, **_) -> str:
    try:
        return date.fromisoformat((value or "").strip()).isoformat()
    except ValueError as exc:
        raise StateValueInvalid(f"'{value}' is not a date (YYYY-MM-DD).") from exc


def _choice(*options: str):
    def check(value: str, **_) -> str:
        v = (value or "").strip().lower().replace(" ", "_")
        if v not in options:
            raise StateValueInvalid(f"'{value}' is not one of: {', '.join(options)}.")
        return v

    return check


def _text(limit: int):
    def check(value: str, **_) -> str:
        v = " ".join((value or "").split())
        if not v:
            raise StateValueInvalid("The value is empty.")
        if len(v) > limit:
            raise StateValueInvalid(f"The value is {len(v)} characters; the limit for this field is {limit}.")
        return v

    return check


@dataclass(frozen=True)
class FieldSpec:
    name: str
    label: str
    validate: Callable[..., str]
    # Shown on the customer's confirmed-details panel when confirmed.
    customer_visible: bool = True


FIELDS: dict[str, FieldSpec] = {
    f.name: f
    for f in [
        FieldSpec("order_number", "Order", _order),
        FieldSpec("issue", "Issue", _text(200)),
        FieldSpec("item", "Item", _text(120)),
        FieldSpec("amount", "Amount", _amount),
        FieldSpec("refund_method", "Refund to", _choice("original_method", "store_credit", "bank_transfer")),
        FieldSpec("contact_preference", "Contact by", _choice("phone", "email", "chat")),
        FieldSpec(
            "resolution", "Resolution wanted", _choice("refund", "return", "replacement", "cancel", "tracking", "other")
        ),
        FieldSpec("delivery_date", "Delivery date", _date),
        FieldSpec("internal_note", "Internal note", _text(300), customer_visible=False),
    ]
}


def validate_field(name: str, value: str, **context) -> str:
    spec = FIELDS.get(name)
    if spec is None:
        raise StateValueInvalid(f"Unknown state field '{name}'. Known fields: {', '.join(FIELDS)}.")
    return spec.validate(value, **context)
