from django import template

from sundry.context.statefields import format_amount

register = template.Library()


@register.simple_tag
def money(cents, currency):
    """Minor units and a currency as people read them: 13,032.00 INR."""
    if cents is None:
        return ""
    return format_amount(int(cents), currency)
