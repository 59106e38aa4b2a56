"""A digest of what a panel's template is given, so a push renders only the panels whose data changed.

A panel's context is read afresh on every push (the database is the truth);
rendering it is what costs. When the context's digest equals the one of the
rendering before, that rendering's HTML is reused. What this cannot read (a
queryset not yet evaluated, a function) makes the digest None, and the panel
is rendered as before. Ticket row fields that change on every write and no
panel shows (its version, turn counter, claim) are left out, or every panel
showing the ticket would change on every push.
"""

from __future__ import annotations

import dataclasses
import datetime
import decimal
import enum
import hashlib
import uuid

from django.db import models

# Written on every bump or step, shown by no panel (the page's version marker is sent apart); and
# what an audience reads with the ticket for the panel whose own context carries it (`read_with`).
# The outbox's wake-up marks and the writes' stamps are the same kind: no panel shows them.
VOLATILE = {
    "tickets.ticket": {
        "version",
        "last_turn_number",
        "updated_at",
        "agent_claimed_at",
        "agent_claimed_by",
        "agent_wake_turn",
        "agent_wake_at",
        "stamps",
    }
}


def read_with(label: str, names) -> None:
    """Annotations or related rows (`names`) read with each `label` row for one panel, which puts
    them in its own context: left out of the row's digest, or a change to them (a customer's
    message moves the timer) would re-render every panel showing the row."""
    VOLATILE.setdefault(label, set()).update(names)


_PLAIN = (
    type(None),
    bool,
    int,
    float,
    str,
    bytes,
    decimal.Decimal,
    datetime.date,
    datetime.time,
    datetime.timedelta,
    uuid.UUID,
    enum.Enum,
)


class Unreadable(Exception):
    pass


def fingerprint(context: dict, skip: tuple = ("viewer",)) -> str | None:
    """The digest of `context` (without the keys in `skip`), or None if it holds something unreadable."""
    out: list[str] = []
    try:
        _walk({k: v for k, v in context.items() if k not in skip}, out, {})
    except (Unreadable, RecursionError):
        return None
    return hashlib.blake2b("\x1f".join(out).encode(), digest_size=16).hexdigest()


def _walk(value, out: list, seen: dict) -> None:
    if isinstance(value, _PLAIN):
        out.append(f"{type(value).__name__}:{value!r}")
        return
    if id(value) in seen:  # met before (a row's cached relation pointing back): named by when it was met
        out.append(f"@{seen[id(value)]}")
        return
    seen[id(value)] = len(seen)
    if isinstance(value, dict):
        out.append("{")
        for k, v in value.items():
            _walk(k, out, seen)
            _walk(v, out, seen)
        out.append("}")
    elif isinstance(value, (list, tuple)):
        out.append("[")
        for v in value:
            _walk(v, out, seen)
        out.append("]")
    elif isinstance(value, (set, frozenset)):
        out.append("{" + ",".join(sorted(repr(v) for v in value)) + "}")
    elif isinstance(value, models.Model):
        label = value._meta.label_lower
        skip = VOLATILE.get(label, ())
        out.append(f"<{label}")
        for k in sorted(value.__dict__):
            if k != "_state" and k not in skip and not k.startswith("_prefetched"):
                out.append(k)
                _walk(value.__dict__[k], out, seen)
        for k, related in sorted(value._state.fields_cache.items()):  # relations read with select_related
            if k in skip:
                continue
            out.append(k)
            _walk(related, out, seen)
        out.append(">")
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        out.append(f"<{type(value).__qualname__}")
        for f in dataclasses.fields(value):
            _walk(getattr(value, f.name), out, seen)
        out.append(">")
    elif type(value).__module__.startswith("sundry.") and hasattr(value, "__dict__"):
        out.append(f"<{type(value).__qualname__}")
        _walk(vars(value), out, seen)
        out.append(">")
    else:
        raise Unreadable(type(value).__name__)
