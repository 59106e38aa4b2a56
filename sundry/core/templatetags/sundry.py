import uuid

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


@register.simple_tag
def client_key_input():
    """A hidden field with a fresh key for one message: a resend of that message (after an
    answer that never arrived) carries the same key and is stored once. sundry-live.js
    gives the form a new key after each accepted post."""
    from django.utils.html import format_html

    return format_html('<input type="hidden" name="client_key" value="{}" data-client-key>', uuid.uuid4().hex)
