"""Desk text as a customer reads it: amounts in one format, no internal identifiers.

Pure text in, text out. Messages stay as stored (the desk and the model see
them verbatim); only the customer's rendering goes through here.
"""

from __future__ import annotations

import functools
import re

from sundry.core import money
from sundry.tooling.domain import get_domain


@functools.lru_cache(maxsize=8)
def _internal(name: str) -> tuple[re.Pattern, re.Pattern]:
    """Identifiers a customer has no use for (the domain's `internal_kinds`: its own records of
    payments, refunds and the like), as (an aside naming one, a bare one)."""
    domain = get_domain(name)
    kinds = [domain.id_patterns[k] for k in domain.internal_kinds if k in domain.id_patterns]
    bounded = rf"(?<![0-9A-Za-z_-])(?:{'|'.join(f'(?:{p})' for p in kinds)})(?![0-9A-Za-z_])" if kinds else r"(?!x)x"
    # "(<refund id>)", "(refund <id>)", "(turn 12)", "(idempotency key …)": asides meant for the desk.
    return (re.compile(rf"\s*\((?:[a-z ]*{bounded}|turn \d+|idempotency key [^)]*)\)"), re.compile(rf"[ \t]*{bounded}"))


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
    aside, bare = _internal(get_domain().name)
    text = aside.sub("", text or "")
    text = bare.sub("", text)
    text = re.sub(r"[ \t]+([.,;:!?])", r"\1", text)
    return _AMOUNT.sub(_amount, text)
