"""Who is asking, from Django auth alone: staff and admins.

Staff are `is_staff` users; admins are superusers (they tune ticket classes).
Which login is a customer is the desk's customer record to say (`sundry.people.selectors`).
"""

from __future__ import annotations


def is_admin(user) -> bool:
    return bool(getattr(user, "is_authenticated", False) and user.is_superuser)


def is_desk_staff(user) -> bool:
    return bool(getattr(user, "is_authenticated", False) and user.is_active and user.is_staff)
