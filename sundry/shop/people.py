"""The shop's customers as the desk knows them: each linked to the desk's own record by reference.

The desk keeps its own customer record (`sundry.people`); the shop keeps its `Customer` and tells
the desk about each one under the shop's domain name and its `customer_id` (`Customer.link`).
Saving a shop customer brings the desk's record up to date (`connect`, from the app's `ready`); a
queryset update or a bulk insert does not, so code that writes around `save()` links itself (the
seed does). Going the other way, the shop resolves a desk record to its own customer here.
"""

from __future__ import annotations

from django.db.models.signals import post_save

from sundry.people.models import Customer as Person
from sundry.shop.ids import DOMAIN_NAME
from sundry.shop.models import Customer


def shop_customer_of(person: Person) -> Customer | None:
    """The shop's own record behind a desk customer, resolved through the external reference."""
    if person is None or person.domain != DOMAIN_NAME:
        return None
    return Customer.objects.filter(customer_id=person.external_key).first()


def _customer_saved(sender, instance, raw=False, **kwargs):
    if not raw:  # a fixture loads the desk's rows itself
        instance.link()


def connect() -> None:
    post_save.connect(_customer_saved, sender=Customer, dispatch_uid="sundry.shop.customer_linked")
