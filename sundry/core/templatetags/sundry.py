import re
import uuid

from django import template

from sundry.core.money import format_money

register = template.Library()


@register.simple_tag
def money(cents, currency):
    """Minor units and a currency as people read them: 13,032.00 INR."""
    # A result recorded without the field (an older or foreign tool result) shows nothing
    # rather than failing the whole panel.
    if cents is None or cents == "" or not currency:
        return ""
    return format_money(int(cents), currency)


@register.filter
def whole_minutes(duration) -> int:
    """A timedelta as whole minutes, rounded up (a lockout of 90 s reads "2 minutes")."""
    return max(1, -(-int(duration.total_seconds()) // 60))


# Sentences a guard addresses to the model ("Do not retry it; tell the customer …"): staff
# read why a call was held or refused, not what the model was told to do next.
_MODEL_DIRECTIONS = re.compile(
    r"\s*(Do not retry it;[^.]*\.|the call is held\.|Repeating it needs staff approval;)", re.IGNORECASE
)


@register.filter
def for_staff(reason: str) -> str:
    text = _MODEL_DIRECTIONS.sub("", reason or "").strip()
    return text.rstrip(";,") + ("" if text.endswith(".") or not text else ".")


_GUARDS = {
    "schema": "arguments the tool does not accept",
    "rule": "a pinned rule forbids it",
    "id": "an ID that is in neither the ledger nor a recent result",
    "unverified_id": "an ID the customer typed that no tool has confirmed",
    "mutation": "an ID one slip away from a known one",
    "refund_limit": "more than the order allows",
    "repeat": "already done",
    "approval": "needs staff approval",
    "duplicate": "the same call twice in one answer",
}


@register.filter
def guard_words(guard: str) -> str:
    """Why a guard stopped a call, in the desk's words."""
    return _GUARDS.get(guard or "", "refused by a guard")


@register.filter
def as_json(value) -> str:
    """Arguments as readable JSON (never a Python repr)."""
    import json

    return json.dumps(value, indent=1, ensure_ascii=False, sort_keys=True, default=str)


@register.filter
def times(cents, quantity) -> int:
    return int(cents or 0) * int(quantity or 0)


@register.simple_tag
def client_key_input():
    """A hidden field with a fresh key for one message: a resend of that message (after an
    answer that never arrived) carries the same key and is stored once. sundry-live.js
    gives the form a new key after each accepted post."""
    from django.utils.html import format_html

    return format_html('<input type="hidden" name="client_key" value="{}" data-client-key>', uuid.uuid4().hex)
