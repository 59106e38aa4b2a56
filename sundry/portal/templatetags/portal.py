from django import template

from sundry.portal.wording import customer_wording

register = template.Library()


@register.filter
def for_customer(text: str) -> str:
    """A desk message as the customer reads it (see portal.wording)."""
    return customer_wording(text)


@register.filter
def get_item(mapping, key):
    return (mapping or {}).get(key or "")
