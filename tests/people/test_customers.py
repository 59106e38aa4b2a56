"""The desk's own customer record: linked to the shop's customer by reference, the one that says who
a login is, and what a ticket belongs to."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model

from sundry.desk.lifecycle import ticket_create
from sundry.people.models import Customer as Person
from sundry.people.selectors import customer_of, role_of
from sundry.shop.ids import DOMAIN_NAME
from sundry.shop.models import Customer
from sundry.shop.people import shop_customer_of
from sundry.shop.seed import generate_shop
from tests.factories import CustomerFactory, TicketClassFactory

pytestmark = pytest.mark.django_db


def test_saving_a_shop_customer_links_the_desks_record_by_reference():
    login = get_user_model().objects.create_user("ann")
    shop = CustomerFactory(name="Ann Lee", email="ann@example.com", phone="+44 1", user=login)
    person = Person.objects.get(domain=DOMAIN_NAME, external_key=shop.customer_id)
    assert (person.name, person.email, person.phone, person.user) == ("Ann Lee", "ann@example.com", "+44 1", login)
    assert shop.person == person and shop_customer_of(person) == shop

    shop.name, shop.email, shop.user = "Ann Lee-Park", "ann.park@example.com", None
    shop.save()
    person.refresh_from_db()
    assert (person.name, person.email, person.user) == ("Ann Lee-Park", "ann.park@example.com", None)
    assert Person.objects.filter(external_key=shop.customer_id).count() == 1


def test_a_record_of_another_domain_is_not_the_shops():
    shop = CustomerFactory()
    stranger = Person.objects.create(name="R", domain="records", external_key=shop.customer_id)
    assert shop_customer_of(stranger) is None and shop.person != stranger


def test_the_seed_links_every_shop_customer():
    generate_shop(seed=3, customers=12, orders=40)
    keys = set(Customer.objects.values_list("customer_id", flat=True))
    assert len(keys) == 12
    assert set(Person.objects.filter(domain=DOMAIN_NAME).values_list("external_key", flat=True)) == keys


def test_the_desks_record_says_who_is_a_customer():
    users = get_user_model().objects
    ann, bo, sam = users.create_user("ann"), users.create_user("bo"), users.create_user("sam", is_staff=True)
    shop = CustomerFactory(user=ann)
    assert customer_of(ann) == shop.person and role_of(ann) == "customer"
    assert role_of(sam) == "staff" and customer_of(bo) is None and role_of(bo) == "none"
    # A login the shop's table names but the desk's record does not is no customer of the desk's.
    Customer.objects.filter(pk=shop.pk).update(user=bo)
    assert customer_of(bo) is None and role_of(bo) == "none"


def test_a_ticket_belongs_to_the_desks_record_and_its_ledger_holds_the_domains_key():
    shop = CustomerFactory()
    ticket = ticket_create(customer=shop.person, ticket_class=TicketClassFactory(), subject="Lamp")
    assert isinstance(ticket.customer, Person) and ticket.customer.external_key == shop.customer_id
    entry = ticket.ledger.get(role="customer")
    assert entry.value == shop.customer_id and entry.verified
