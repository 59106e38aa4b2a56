"""Demo logins are linked to their customers once and never moved to someone else."""

from __future__ import annotations

import pytest

from sundry.shop.demo import ensure_logins
from sundry.shop.models import Customer, Order
from tests.factories import CustomerFactory, paid_order

pytestmark = pytest.mark.django_db


def demo_ready_customer(customer_id):
    customer = CustomerFactory(customer_id=customer_id)
    for status in ("delivered", "delivered", "shipped", "placed"):
        paid_order(customer=customer, status=status)
    return customer


def linked():
    return {c.user.username: c.customer_id for c in Customer.objects.filter(user__username__startswith="customer")}


def test_a_second_run_keeps_every_login_on_its_customer():
    for n in range(1, 6):
        demo_ready_customer(f"cus_DEMO{n:04d}")
    ensure_logins()
    first = linked()
    assert sorted(first) == ["customer1", "customer2", "customer3"]
    # The shop moves on: the first pick's unshipped order ships and a new customer now
    # ranks first. The logins must stay where they were.
    Order.objects.filter(customer__customer_id=first["customer1"], status="placed").update(status="shipped")
    demo_ready_customer("cus_AAAA0000")
    ensure_logins()
    assert linked() == first


def test_a_login_without_a_customer_gets_one_nobody_else_has():
    for n in range(1, 6):
        demo_ready_customer(f"cus_DEMO{n:04d}")
    ensure_logins()
    first = linked()
    Customer.objects.filter(user__username="customer2").update(user=None)
    ensure_logins()
    after = linked()
    assert after["customer1"] == first["customer1"] and after["customer3"] == first["customer3"]
    assert after["customer2"] not in (first["customer1"], first["customer3"])


# --- the sign-in page lists them on a development server only ----------------------------------------


@pytest.fixture
def fast_hashing(settings):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]  # six demo passwords per test


def login_page(client) -> str:
    return client.get("/login/").content.decode()


def test_the_sign_in_page_lists_the_seeded_demo_logins_in_development(client, settings, fast_hashing):
    settings.DEBUG, settings.PRODUCTION = True, False
    assert "Demo logins" not in login_page(client)  # control: nothing seeded, nothing listed
    customers = [demo_ready_customer(f"cus_DEMO{n:04d}") for n in range(1, 4)]
    ensure_logins()
    page = login_page(client)
    assert "Demo logins" in page and "<code>sundry-demo</code>" in page
    for name in ("admin", "staff", "staff2", "customer1", "customer2", "customer3"):
        assert f"<code>{name}</code>" in page
    assert all(c.name in page for c in customers)


def test_the_sign_in_page_never_lists_them_under_production_settings_or_without_debug(client, settings, fast_hashing):
    for n in range(1, 4):
        demo_ready_customer(f"cus_DEMO{n:04d}")
    ensure_logins()
    for debug, production in ((True, True), (False, True), (False, False)):
        settings.DEBUG, settings.PRODUCTION = debug, production
        page = login_page(client)
        assert "Sign in" in page
        assert "Demo logins" not in page and "sundry-demo" not in page and "<code>customer1</code>" not in page, (
            debug,
            production,
        )
