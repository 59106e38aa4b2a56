"""Amounts of money: integer minor units of an ISO 4217 currency.

Amounts are stored and compared as integers of the currency's minor unit
(cents, paise, yen); this module turns them into text and back. It knows the
minor-unit exponent of every ISO 4217 currency and nothing about who trades in
which: callers decide which currencies they accept.
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation

# ISO 4217 minor-unit exponents other than 2 (every other currency has 2).
_EXPONENTS = {
    **dict.fromkeys(
        (
            "BIF",
            "CLP",
            "DJF",
            "GNF",
            "ISK",
            "JPY",
            "KMF",
            "KRW",
            "PYG",
            "RWF",
            "UGX",
            "UYI",
            "VND",
            "VUV",
            "XAF",
            "XOF",
            "XPF",
        ),
        0,
    ),
    **dict.fromkeys(("BHD", "IQD", "JOD", "KWD", "LYD", "OMR", "TND"), 3),
    **dict.fromkeys(("CLF", "UYW"), 4),
}
# Active ISO 4217 codes: text that names one ("20 EUR") names money; "2 USB" does not.
CODES = frozenset(
    """
AED AFN ALL AMD ANG AOA ARS AUD AWG AZN BAM BBD BDT BGN BHD BIF BMD BND BOB BRL BSD BTN BWP BYN BZD CAD
CDF CHF CLP CNY COP CRC CUP CVE CZK DJF DKK DOP DZD EGP ERN ETB EUR FJD FKP GBP GEL GHS GIP GMD GNF GTQ
GYD HKD HNL HTG HUF IDR ILS INR IQD IRR ISK JMD JOD JPY KES KGS KHR KMF KPW KRW KWD KYD KZT LAK LBP LKR
LRD LSL LYD MAD MDL MGA MKD MMK MNT MOP MRU MUR MVR MWK MXN MYR MZN NAD NGN NIO NOK NPR NZD OMR PAB PEN
PGK PHP PKR PLN PYG QAR RON RSD RUB RWF SAR SBD SCR SDG SEK SGD SHP SLE SOS SRD SSP STN SVC SYP SZL THB
TJS TMT TND TOP TRY TTD TWD TZS UAH UGX USD UYU UZS VES VND VUV WST XAF XCD XOF XPF YER ZAR ZMW ZWL
""".split()
)
# Longer than any real amount in any currency; refuses text built to exhaust parsing.
MAX_CHARS = 32
_CODE = re.compile(r"[A-Z]{3}")
# ASCII digits only: str.isdigit() and \d accept "²" and "٤", which are not amounts.
_PLAIN = re.compile(r"-?[0-9]+(?:\.[0-9]+)?")


class MoneyError(ValueError):
    """Text or a number that is not an amount of the given currency; the message says why."""


def currency_code(value: object) -> str:
    """An ISO 4217 code, upper-cased: three ASCII letters."""
    code = value.strip().upper() if isinstance(value, str) else ""
    if not _CODE.fullmatch(code):
        raise MoneyError(f"{value!r} is not a currency code (three letters, e.g. USD)")
    return code


def exponent(currency: str) -> int:
    """Digits after the decimal point in `currency`'s minor unit: 2 for USD, 0 for JPY, 3 for KWD."""
    return _EXPONENTS.get(currency_code(currency), 2)


def to_minor(amount: Decimal | int, currency: str) -> int:
    """A major-unit amount in minor units; refuses more decimal places than the currency has."""
    amount = Decimal(amount)
    if not amount.is_finite():
        raise MoneyError("an amount must be a finite number")
    places = exponent(currency)
    # Digits as written count: "40.500" claims a precision USD does not have.
    if -amount.as_tuple().exponent > places:
        raise MoneyError(
            f"{currency} has {places} decimal place{'s' if places != 1 else ''}; {amount} is finer than that"
        )
    return int(amount.scaleb(places))


def parse_decimal(value: str | int | float | Decimal, *, allow_negative: bool = False) -> Decimal:
    """A major-unit amount ("40.00", 40, 40.5) as a finite Decimal. Strict.

    Text must be plain ASCII digits with an optional "." and digits after it: no
    symbols, grouping, exponents, NaN or infinity, and at most MAX_CHARS long.
    """
    if isinstance(value, bool):
        raise MoneyError('an amount must be a number such as "40.00", not true/false')
    if isinstance(value, str):
        text = value.strip()
        if len(text) > MAX_CHARS:
            raise MoneyError(f"an amount of {len(text)} characters is not plausible (at most {MAX_CHARS})")
        if not _PLAIN.fullmatch(text):
            raise MoneyError(
                f'{value!r} is not a plain decimal amount such as "40.00" '
                "(ASCII digits and one point; no symbols, commas or exponents)"
            )
        amount = Decimal(text)
    elif isinstance(value, float):
        # repr() is the shortest text that round-trips: 40.1 stays 40.1, not 40.0999...
        try:
            amount = Decimal(repr(value))
        except InvalidOperation:
            raise MoneyError("an amount must be a finite number") from None
    elif isinstance(value, (int, Decimal)):
        amount = Decimal(value)
    else:
        raise MoneyError(f'an amount must be a decimal string such as "40.00" or a number, not {type(value).__name__}')
    if not amount.is_finite():
        raise MoneyError("an amount must be a finite number")
    if amount < 0 and not allow_negative:
        raise MoneyError("an amount cannot be negative")
    return amount


def parse_major(value: str | int | float | Decimal, currency: str, *, allow_negative: bool = False) -> int:
    """A major-unit amount as minor units of `currency` (see `parse_decimal` and `to_minor`)."""
    return to_minor(parse_decimal(value, allow_negative=allow_negative), currency)


def major_str(minor: int, currency: str) -> str:
    """Minor units as a plain major-unit decimal: -1234.50. The form a tool argument takes."""
    places = exponent(currency)
    return f"{Decimal(int(minor)).scaleb(-places):.{places}f}"


def format_money(minor: int, currency: str, *, grouping: bool = True) -> str:
    """Minor units as people read them: "1,234.50 USD", "-0.05 USD", "1,500 JPY".

    `grouping=False` leaves out the thousands separator, for text a model may copy
    into a tool argument.
    """
    code = currency_code(currency)
    places = exponent(code)
    amount = Decimal(int(minor)).scaleb(-places)
    return f"{amount:{',' if grouping else ''}.{places}f} {code}"
