from django import template

from sundry.core.money import format_money

register = template.Library()


@register.simple_tag
def money(cents, currency):
    """Minor units and a currency as people read them: 13,032.00 INR."""
    if cents is None:
        return ""
    return format_money(int(cents), currency)
