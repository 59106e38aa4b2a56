"""Headers every page carries, login throttling, credentials kept out of error pages,
and an htmx request from an ended session answered 401 instead of the sign-in page."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.test import Client, override_settings
from django.views.debug import SafeExceptionReporterFilter

from sundry.core.security import CredentialsHidingFilter
from sundry.desk.lifecycle import ticket_create
from sundry.tickets.models import Turn
from tests.factories import CustomerFactory, TicketClassFactory

pytestmark = pytest.mark.django_db
HX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture
def people():
    users = get_user_model().objects
    staff = users.create_user("sam", password="right-pw-1", is_staff=True)
    admin = users.create_superuser("ada", password="right-pw-2")
    customer_user = users.create_user("cleo", password="right-pw-3")
    customer = CustomerFactory(user=customer_user)
    return {"staff": staff, "admin": admin, "customer": customer}


def test_every_page_has_csp_and_permissions_policy():
    response = Client().get("/login/")
    csp = response["Content-Security-Policy"]
    assert "default-src 'self'" in csp and "script-src 'self'" in csp and "frame-ancestors 'none'" in csp
    assert "'unsafe-eval'" not in csp and "'unsafe-inline'" not in csp
    assert "camera=()" in response["Permissions-Policy"]


def test_signed_in_pages_are_not_stored_and_the_public_page_is_not_marked(people):
    client = Client()
    client.force_login(people["staff"])
    assert "no-store" in client.get("/desk/")["Cache-Control"]
    assert "no-store" not in Client().get("/healthz").get("Cache-Control", "")


def test_connection_urls_are_hidden_on_debug_error_pages():
    secret_db, secret_redis = "postgres://sundry:hunter2@db:5432/sundry", "redis://:hunter3@cache:6379/0"
    with override_settings(DATABASE_URL=secret_db, REDIS_URL=secret_redis, CELERY_BROKER_URL=secret_redis):
        shown = str(CredentialsHidingFilter().get_safe_settings())
        stock = str(SafeExceptionReporterFilter().get_safe_settings())
    assert "hunter2" not in shown and "hunter3" not in shown
    # Django's own filter shows them: the subclass is what hides them.
    assert "hunter2" in stock and "hunter3" in stock


@pytest.mark.parametrize(
    "url,username,password", [("/login/", "sam", "right-pw-1"), ("/admin/login/", "ada", "right-pw-2")]
)
def test_repeated_wrong_passwords_lock_the_login_even_for_the_right_one(people, url, username, password):
    client = Client()
    for _ in range(4):
        wrong = client.post(url, {"username": username, "password": "nope"})
        assert wrong.status_code == 200  # the form again, with its error
    assert client.post(url, {"username": username, "password": "nope"}).status_code == 429  # the fifth locks
    locked = client.post(url, {"username": username, "password": password})
    assert locked.status_code == 429
    assert "Too many sign-in attempts" in locked.content.decode()
    assert "_auth_user_id" not in client.session
    # Another person on the same address is not locked out by someone else's attempts.
    other = Client().post("/login/", {"username": "cleo", "password": "right-pw-3"})
    assert other.status_code == 302


def test_a_few_wrong_passwords_then_the_right_one_signs_in(people):
    client = Client()
    for _ in range(4):
        client.post("/login/", {"username": "sam", "password": "nope"})
    assert client.post("/login/", {"username": "sam", "password": "right-pw-1"}).status_code == 302
    assert client.session.get("_auth_user_id") == str(people["staff"].pk)


def test_an_htmx_post_from_an_ended_session_is_401_and_stores_nothing(people):
    ticket = ticket_create(customer=people["customer"].person, ticket_class=TicketClassFactory(), subject="Help")
    before = Turn.objects.filter(ticket=ticket).count()
    anonymous = Client()
    ended = anonymous.post(f"/help/tickets/{ticket.pk}/message", {"text": "Where is my order?"}, **HX)
    assert ended.status_code == 401
    assert "Sign in again" in ended.content.decode()
    assert ended["HX-Reswap"] == "none"
    assert Turn.objects.filter(ticket=ticket).count() == before
    # The same request without htmx still gets the ordinary redirect to the sign-in page.
    plain = anonymous.post(f"/help/tickets/{ticket.pk}/message", {"text": "Where is my order?"})
    assert plain.status_code == 302 and plain["Location"].startswith("/login/")


def test_a_refused_request_gets_the_sites_own_page_not_a_bare_one(people):
    client = Client(enforce_csrf_checks=True)
    client.force_login(people["customer"].user)
    refused = client.post("/help/tickets/new", {"subject": "x", "text": "y"})
    assert refused.status_code == 403
    body = refused.content.decode()
    assert "You can't open this page" in body and 'href="/static/sundry.css"' in body.replace("'", '"')


@pytest.fixture
def clean_cache(request):
    """A cache of the test's own: clearing the shared one would flush a Redis database
    that Celery queues and other runs use too."""
    location = f"rates-{request.node.name}"
    with override_settings(
        CACHES={"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache", "LOCATION": location}}
    ):
        yield


def customer_client(people):
    client = Client()
    client.force_login(people["customer"].user)
    return client


@pytest.mark.parametrize("url", ["/desk/?status=a%00b", "/desk/?q%00=1", "/help/?error=x%00"])
def test_a_nul_byte_in_a_query_is_a_clear_400(people, url):
    client = Client()
    client.force_login(people["staff"] if url.startswith("/desk") else people["customer"].user)
    response = client.get(url)
    assert response.status_code == 400 and "NUL" in response.content.decode()


def test_a_nul_byte_in_a_message_is_refused_and_nothing_is_stored(people):
    ticket = ticket_create(customer=people["customer"].person, ticket_class=TicketClassFactory(), subject="Help")
    before = Turn.objects.filter(ticket=ticket).count()
    response = customer_client(people).post(f"/help/tickets/{ticket.pk}/message", {"text": "hi\x00there"}, **HX)
    assert response.status_code == 400
    assert Turn.objects.filter(ticket=ticket).count() == before


def test_a_non_ascii_digit_as_a_detail_id_is_a_422_not_a_500(people):
    ticket = ticket_create(customer=people["customer"].person, ticket_class=TicketClassFactory(), subject="Help")
    response = customer_client(people).post(f"/help/tickets/{ticket.pk}/flag", {"value_id": "²"}, **HX)
    assert response.status_code == 422


def test_messages_past_the_rate_are_refused_with_429_and_not_stored(people, clean_cache):
    ticket = ticket_create(customer=people["customer"].person, ticket_class=TicketClassFactory(), subject="Help")
    client = customer_client(people)
    # A day's window: a minute's could turn over between the posts on a slow machine and reset the count.
    with override_settings(RATE_CUSTOMER_MESSAGES="3/d"):
        answers = [
            client.post(f"/help/tickets/{ticket.pk}/message", {"text": f"message {n}"}, **HX).status_code
            for n in range(5)
        ]
    assert answers == [200, 200, 200, 429, 429]
    texts = list(Turn.objects.filter(ticket=ticket, author="customer").values_list("text", flat=True))
    assert texts == ["message 0", "message 1", "message 2"]
    # Another customer is not slowed by this one.
    other = get_user_model().objects.create_user("dora", password="x-long-pass-9")
    theirs = ticket_create(customer=CustomerFactory(user=other).person, ticket_class=TicketClassFactory(), subject="Hi")
    client2 = Client()
    client2.force_login(other)
    with override_settings(RATE_CUSTOMER_MESSAGES="3/d"):
        assert client2.post(f"/help/tickets/{theirs.pk}/message", {"text": "hello"}, **HX).status_code == 200


def test_new_tickets_past_the_rate_are_refused_with_a_reason(people, clean_cache):
    from sundry.tickets.models import Ticket

    TicketClassFactory(slug="standard")
    client = customer_client(people)
    with override_settings(RATE_CUSTOMER_TICKETS="2/h"):
        for n in range(3):
            response = client.post("/help/tickets/new", {"text": f"problem {n}"})
    assert Ticket.objects.filter(customer=people["customer"].person).count() == 2
    assert "many conversations" in client.get(response["Location"]).content.decode()
