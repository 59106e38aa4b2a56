from django import template

from sundry.shop.demo import DEMO_PASSWORD, seeded_logins

register = template.Library()


@register.inclusion_tag("core/_demo_logins.html")
def demo_logins():
    """The sign-in page's list of demo logins: on a development server with the demo seeded, else nothing."""
    return {"logins": seeded_logins(), "password": DEMO_PASSWORD}
