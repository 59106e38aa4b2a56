"""The one writer of the desk's customer records: a domain links its customer by reference."""

from __future__ import annotations

from sundry.people.models import Customer

_FIELDS = ("name", "email", "phone", "user_id")


def customer_link(*, domain: str, external_key: str, name: str, email: str = "", phone: str = "", user_id=None):
    """The desk's record of the domain's customer `external_key`, created or brought up to date.

    Saves only when something changed, so a domain that links on every save of its own record
    does not wake the desk's watchers for nothing.
    """
    wanted = {"name": name, "email": email or "", "phone": phone or "", "user_id": user_id}
    if user_id is not None:
        # A login is one customer's: the domain moved it (perhaps around `save()`), so the last link wins.
        Customer.objects.filter(user_id=user_id).exclude(domain=domain, external_key=external_key).update(user=None)
    person, created = Customer.objects.get_or_create(domain=domain, external_key=external_key, defaults=wanted)
    if not created:
        changed = [f for f in _FIELDS if getattr(person, f) != wanted[f]]
        if changed:
            for f in changed:
                setattr(person, f, wanted[f])
            person.save(update_fields=[f.removesuffix("_id") if f == "user_id" else f for f in changed])
    return person


def customer_by_reference(domain: str, external_key: str) -> Customer | None:
    return Customer.objects.filter(domain=domain, external_key=external_key).first()


def customers_link_many(*, domain: str, rows: list[dict]) -> None:
    """Link many of a domain's customers at once (a bulk load that bypassed `save()`).

    Each row: external_key, name, email, phone, user_id. A reference already linked is updated.
    """
    Customer.objects.bulk_create(
        [Customer(domain=domain, **row) for row in rows],
        update_conflicts=True,
        unique_fields=["domain", "external_key"],
        update_fields=["name", "email", "phone", "user"],
        batch_size=1000,
    )


def customers_unlink(*, domain: str) -> None:
    """Forget every customer of a domain (it is deleting its own). Tickets protect their customer:
    while one points at a record, this raises ProtectedError and deletes nothing."""
    Customer.objects.filter(domain=domain).delete()
