import re

from django import template

from sundry.core.money import format_money

register = template.Library()


@register.simple_tag
def money(cents, currency):
    """Minor units and a currency as people read them: 13,032.00 INR."""
    if cents is None:
        return ""
    return format_money(int(cents), currency)


@register.filter
def whole_minutes(duration) -> int:
    """A timedelta as whole minutes, rounded up (a lockout of 90 s reads "2 minutes")."""
    return max(1, -(-int(duration.total_seconds()) // 60))


# Sentences a guard addresses to the model ("Do not retry it; tell the customer …"): staff
# read why a call was held or refused, not what the model was told to do next.
_MODEL_DIRECTIONS = re.compile(r"\s*(Do not retry it;[^.]*\.|the call is held\.|Repeating it needs staff approval;)",
                               re.IGNORECASE)


@register.filter
def for_staff(reason: str) -> str:
    text = _MODEL_DIRECTIONS.sub("", reason or "").strip()
    return text.rstrip(";,") + ("" if text.endswith(".") or not text else ".")
