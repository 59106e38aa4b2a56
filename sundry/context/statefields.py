"""The named state fields and their validators, read from the domain's declaration.

A domain declares its fields (`tooling.domain.StateFieldDecl`: label, kind of value,
whether the customer sees it); this module turns each into a validator. Every value
is validated before it is stored; what fails is rejected with a reason, never stored
half-right. Validators are pure: the one check that needs the domain's system (does
this ID exist for this customer?) is passed in.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date
from typing import Callable

from sundry.core import money
from sundry.tooling.domain import Domain, StateFieldDecl, domain_for, get_domain


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


def _id(spec: StateFieldDecl, pattern: str | None, example: str | None):
    """A value of an ID kind: the domain's pattern (as written, or in capitals), then its record."""

    def check(value: str, *, exists: Callable[[str, str], bool] | None = None, **_) -> str:
        raw = (value or "").strip()
        if pattern:
            value = next((v for v in (raw, raw.upper()) if re.fullmatch(pattern, v)), None)
            if value is None:
                shape = f"format {example}" if example else "copy it from the ID ledger"
                raise StateValueInvalid(f"'{raw}' is not a valid {spec.label.lower()} ({shape}).")
        else:
            value = raw
        if not value:
            raise StateValueInvalid("The value is empty.")
        if exists is not None and not exists(spec.id_kind, value):
            raise StateValueInvalid(f"{spec.label} {value} does not exist for this customer.")
        return value

    return check


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


def _validator(spec: StateFieldDecl, domain: Domain) -> Callable[..., str]:
    if spec.kind == "amount":
        return _amount
    if spec.kind == "date":
        return _date
    if spec.kind == "choice":
        return _choice(*spec.choices)
    if spec.kind == "id":
        return _id(spec, domain.id_patterns.get(spec.id_kind), domain.id_examples.get(spec.id_kind))
    return _text(spec.max_length)


def fields(domain: Domain | None = None) -> dict[str, FieldSpec]:
    """The state fields a domain declares (the default domain's without one), name → spec, in its order."""
    domain = domain or get_domain()
    return {
        f.name: FieldSpec(f.name, f.label, _validator(f, domain), customer_visible=f.customer_visible)
        for f in domain.state_fields
    }


def fields_for(ticket) -> dict[str, FieldSpec]:
    """The state fields of the domain a ticket's class works in."""
    return fields(domain_for(ticket.ticket_class))


def validate_field(name: str, value: str, *, domain: Domain | None = None, **context) -> str:
    """The stored form of `value` for field `name`, or StateValueInvalid saying why not.
    `exists(kind, value)`, when given, checks an ID field's value against the domain's records."""
    known = fields(domain)
    spec = known.get(name)
    if spec is None:
        raise StateValueInvalid(f"Unknown state field '{name}'. Known fields: {', '.join(known)}.")
    return spec.validate(value, **context)
