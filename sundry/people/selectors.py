"""Who is asking: a login's customer record, and so each person's role (admin, staff, customer, none)."""

from __future__ import annotations

from sundry.core.people import is_admin, is_desk_staff
from sundry.people.models import Customer


def customer_of(user) -> Customer | None:
    """The desk's customer record a login belongs to, or None."""
    if not getattr(user, "is_authenticated", False):
        return None
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


def domain_of(customer) -> str:
    """The domain that knows this customer (its name): the desk asks it about the customer's records
    (`tooling.records.records_for`)."""
    return getattr(customer, "domain", "") or ""
