"""Desk text as a customer reads it: amounts in one format, no internal identifiers.

Pure text in, text out. Messages stay as stored (the desk and the model see
them verbatim); only the customer's rendering goes through here.
"""

from __future__ import annotations

import re

from sundry.context.idformats import ID_PATTERNS
from sundry.core import money

# Identifiers a customer has no use for: the shop's own records of payments, refunds,
# returns, addresses and items. Order numbers, tracking numbers and SKUs stay.
INTERNAL_KINDS = ("customer", "address", "payment_method", "payment", "refund", "return", "item")
_INTERNAL = "|".join(f"(?:{ID_PATTERNS[k]})" for k in INTERNAL_KINDS)
_BOUNDED = rf"(?<![0-9A-Za-z_-])(?:{_INTERNAL})(?![0-9A-Za-z_])"
# "(rfd_…)", "(refund rfd_…)", "(turn 12)", "(idempotency key …)": asides meant for the desk.
_ASIDE = re.compile(rf"\s*\((?:[a-z ]*{_BOUNDED}|turn \d+|idempotency key [^)]*)\)")
_BARE = re.compile(rf"[ \t]*{_BOUNDED}")
# 1234.5 USD, 1,234.50 USD, USD 1234.50: one format, format_money's. Only real currency codes
# (never "SKU 5" or "ABC 2021").
CURRENCIES = ("USD", "EUR", "GBP", "INR", "JPY", "CAD", "AUD", "CHF", "SEK", "NOK", "DKK", "PLN", "NZD", "SGD")
_CODES = "|".join(CURRENCIES)
_NUMBER = r"[0-9][0-9,]*(?:\.[0-9]+)?"
_AMOUNT = re.compile(rf"(?<![\w.,])(?:({_NUMBER})\s?({_CODES})|({_CODES})\s?({_NUMBER}))(?![\w])")


def _amount(match: re.Match) -> str:
    number, code = (match.group(1), match.group(2)) if match.group(1) else (match.group(4), match.group(3))
    try:
        return money.format_money(money.parse_major(number.replace(",", ""), code), code)
    except money.MoneyError:
        return match.group(0)


def customer_wording(text: str) -> str:
    text = _ASIDE.sub("", text or "")
    text = _BARE.sub("", text)
    text = re.sub(r"[ \t]+([.,;:!?])", r"\1", text)
    return _AMOUNT.sub(_amount, text)
