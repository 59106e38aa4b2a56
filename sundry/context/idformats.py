"""The identifier formats Sundry knows, by kind.

Used to spot IDs a customer typed (they enter the ledger unverified) and to
find ID-shaped tokens in text a model wrote. Never used to promote an ID from
prose to ground truth: only structured tool results do that.
"""

from __future__ import annotations

import functools
import re

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

_COMBINED = re.compile(
    r"(?<![0-9A-Za-z_-])(?:" + "|".join(f"(?P<{k}>{p})" for k, p in ID_PATTERNS.items()) + r")(?![0-9A-Za-z_])"
)
# Loose shape of "something that looks like an identifier" for summary checks:
# a prefix and a run of digits/letters mixing digits, e.g. ORD-88213, ord_8F3kQ2xM.
ID_SHAPED = re.compile(r"\b(?:[A-Za-z]{1,5}[-_])?(?=[A-Za-z0-9]*\d)[A-Za-z0-9]{5,}\b")


def find_ids(text: str) -> list[tuple[str, str]]:
    """(kind, value) for every known-format identifier in text, in order, unique."""
    return list(_find_ids(text or ""))


@functools.lru_cache(maxsize=2048)
def _find_ids(text: str) -> tuple[tuple[str, str], ...]:
    # Memoised: every step's assembly scans the same stored turns again.
    seen: dict[str, str] = {}
    for match in _COMBINED.finditer(text):
        kind = match.lastgroup or "id"
        seen.setdefault(match.group(0), kind)
    return tuple((kind, value) for value, kind in seen.items())


def kind_of(value: str) -> str | None:
    for kind, pattern in ID_PATTERNS.items():
        if re.fullmatch(pattern, value or ""):
            return kind
    return None


def find_id_shaped(text: str) -> set[str]:
    """Tokens that look like identifiers, known format or not."""
    return {m.group(0) for m in ID_SHAPED.finditer(text or "") if any(c.isdigit() for c in m.group(0))}
