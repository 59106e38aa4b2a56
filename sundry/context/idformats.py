"""Identifiers in text, by the formats the domain declares (`Domain.id_patterns`).

Used to spot IDs a customer typed (they enter the ledger unverified) and to
find ID-shaped tokens in text a model wrote. Never used to promote an ID from
prose to ground truth: only structured tool results do that.
"""

from __future__ import annotations

import re

from sundry.tooling.domain import Domain, get_domain

# Loose shape of "something that looks like an identifier" for summary checks:
# a prefix and a run of digits/letters mixing digits, e.g. ORD-88213, ord_8F3kQ2xM.
ID_SHAPED = re.compile(r"\b(?:[A-Za-z]{1,5}[-_])?(?=[A-Za-z0-9]*\d)[A-Za-z0-9]{5,}\b")


def id_patterns(domain: Domain | None = None) -> dict[str, str]:
    """kind → regex of the domain's identifiers (the default domain's when none is given)."""
    return (domain or get_domain()).id_patterns


def find_ids(text: str, domain: Domain | None = None) -> list[tuple[str, str]]:
    """(kind, value) for every known-format identifier in text, in order, unique."""
    return (domain or get_domain()).find_ids(text or "")


def kind_of(value: str, domain: Domain | None = None) -> str | None:
    return (domain or get_domain()).kind_of(value)


def find_id_shaped(text: str) -> set[str]:
    """Tokens that look like identifiers, known format or not."""
    return {m.group(0) for m in ID_SHAPED.finditer(text or "") if any(c.isdigit() for c in m.group(0))}
