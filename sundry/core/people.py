"""Who is asking: staff, admins and customers, on top of Django auth.

Staff are `is_staff` users; admins are superusers (they tune ticket classes);
customers are users linked to a shop customer record.
"""

from __future__ import annotations


def is_admin(user) -> bool:
    return bool(getattr(user, "is_authenticated", False) and user.is_superuser)


def is_desk_staff(user) -> bool:
    return bool(getattr(user, "is_authenticated", False) and user.is_active and user.is_staff)


def customer_of(user):
    """The shop customer a login belongs to, or None."""
    if not getattr(user, "is_authenticated", False):
        return None
    from sundry.shop.models import Customer

    return Customer.objects.filter(user=user).first()


def role_of(user) -> str:
    if not getattr(user, "is_authenticated", False):
        return "anonymous"
    if is_admin(user):
        return "admin"
    if is_desk_staff(user):
        return "staff"
    if customer_of(user) is not None:
        return "customer"
    return "none"
