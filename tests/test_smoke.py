"""The app serves pages and websockets through the real ASGI stack.

Websocket tests go through `sundry.asgi.application` as a browser would: an
Origin header, the session cookie of a logged-in user, the URL router.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from channels.layers import channel_layers, get_channel_layer
from channels.testing import WebsocketCommunicator
from django.conf import settings
from django.contrib.auth import get_user_model
from django.test import Client
from django.utils import timezone

from sundry.asgi import application
from sundry.live.consumers import CLOSE_FORBIDDEN
from sundry.shop.models import Customer
from sundry.tickets.models import Ticket, TicketClass

ROOT = Path(__file__).resolve().parent.parent


# --- HTTP -----------------------------------------------------------------------


@pytest.mark.django_db
def test_login_page_is_served(client):
    response = client.get("/login/")
    assert response.status_code == 200
    body = response.content.decode()
    assert 'name="username"' in body and 'name="password"' in body
    assert "csrfmiddlewaretoken" in body


def test_healthz(client):
    response = client.get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"ok": True}


@pytest.mark.django_db
def test_anonymous_home_goes_to_login(client):
    response = client.get("/")
    assert response.status_code == 302
    assert response.url == "/login/"


# --- Websockets -----------------------------------------------------------------


def _session_cookie(user) -> bytes:
    client = Client()
    client.force_login(user)
    return f"{settings.SESSION_COOKIE_NAME}={client.cookies[settings.SESSION_COOKIE_NAME].value}".encode()


@pytest.fixture
def desk(transactional_db):
    """A ticket, a staff login and a customer login, committed for the consumer's own thread."""
    users = get_user_model().objects
    staff = users.create_user("sam", password="x", is_staff=True)
    customer_user = users.create_user("cora", password="x")
    customer = Customer.objects.create(
        customer_id="cus_smoke01",
        name="Cora Lee",
        email="cora@example.com",
        phone="+44 20 0000 0000",
        user=customer_user,
        created_at=timezone.now(),
    )
    ticket_class = TicketClass.objects.create(name="Smoke", slug="smoke")
    ticket = Ticket.objects.create(
        customer=customer.person, ticket_class=ticket_class, subject="Where is my parcel?", version=7
    )
    return {
        "ticket": ticket,
        "staff_cookie": _session_cookie(staff),
        "customer_cookie": _session_cookie(customer_user),
    }


def _socket(ticket_id: int, cookie: bytes | None = None, origin: bytes = b"http://localhost") -> WebsocketCommunicator:
    headers = [(b"origin", origin)]
    if cookie:
        headers.append((b"cookie", cookie))
    return WebsocketCommunicator(application, f"/ws/desk/tickets/{ticket_id}/", headers=headers)


async def _assert_forbidden(communicator: WebsocketCommunicator):
    connected, _ = await communicator.connect()
    assert connected  # accepted only to say why it closes
    assert await communicator.receive_output(timeout=2) == {"type": "websocket.close", "code": CLOSE_FORBIDDEN}
    # End the app instance here, not in the event loop's teardown.
    await communicator.disconnect()


async def test_staff_socket_gets_snapshot_then_group_updates(desk):
    from sundry.tickets.models import Ticket, Turn

    ticket = desk["ticket"]
    communicator = _socket(ticket.pk, desk["staff_cookie"])
    connected, _ = await communicator.connect()
    assert connected
    snapshot = await communicator.receive_from(timeout=5)
    assert 'data-version="7"' in snapshot and 'data-kind="snapshot"' in snapshot and 'id="panel-state"' in snapshot

    # A push after commit reaches the watcher through its ticket's staff group,
    # rendered for it from the database: only the panels that changed.
    await Turn.objects.acreate(ticket=ticket, number=1, author="customer", text="Hello from the smoke test")
    await Ticket.objects.filter(pk=ticket.pk).aupdate(version=8, last_turn_number=1)
    await get_channel_layer().group_send(
        f"ticket-{ticket.pk}-staff", {"type": "ticket.changed", "ticket": ticket.pk, "version": 8}
    )
    update = await communicator.receive_from(timeout=5)
    assert 'data-version="8"' in update and 'data-base="7"' in update and 'data-kind="diff"' in update
    assert "Hello from the smoke test" in update and 'id="panel-budget"' not in update
    await communicator.disconnect()


async def test_anonymous_socket_is_refused(desk):
    await _assert_forbidden(_socket(desk["ticket"].pk))


async def test_customer_socket_is_refused_on_the_staff_channel(desk):
    from sundry.tickets.models import Ticket

    ticket = desk["ticket"]
    staff = _socket(ticket.pk, desk["staff_cookie"])
    assert (await staff.connect())[0]
    assert 'data-kind="snapshot"' in await staff.receive_from(timeout=5)
    customer = _socket(ticket.pk, desk["customer_cookie"])
    connected, _ = await customer.connect()
    assert connected  # accepted only to say why it closes
    assert await customer.receive_output(timeout=2) == {"type": "websocket.close", "code": CLOSE_FORBIDDEN}

    # A push to the staff group while the refused instance still runs: staff get it,
    # the refused socket, which never joined, gets nothing.
    await Ticket.objects.filter(pk=ticket.pk).aupdate(version=8, subject="For staff only")
    await get_channel_layer().group_send(
        f"ticket-{ticket.pk}-staff", {"type": "ticket.changed", "ticket": ticket.pk, "version": 8}
    )
    assert "For staff only" in await staff.receive_from(timeout=5)
    assert not customer.future.done()  # alive, so it could have received the push had it joined
    assert await customer.receive_nothing(timeout=0.5)
    await customer.disconnect()
    await staff.disconnect()


async def test_staff_socket_for_a_missing_ticket_is_refused(desk):
    await _assert_forbidden(_socket(desk["ticket"].pk + 1000, desk["staff_cookie"]))


async def test_foreign_origin_is_refused_before_the_consumer(desk):
    communicator = _socket(desk["ticket"].pk, desk["staff_cookie"], origin=b"https://evil.example")
    connected, _ = await communicator.connect()
    assert not connected
    await communicator.disconnect()


# --- The Redis channel layer, for real --------------------------------------------


@pytest.mark.services
async def test_redis_layer_carries_a_group_message_between_instances(redis_url):
    sender = channel_layers.make_backend("default")
    receiver = channel_layers.make_backend("default")
    assert type(receiver).__name__ == "RedisPubSubChannelLayer"
    group = f"smoke-{uuid.uuid4().hex}"
    channel = await receiver.new_channel()
    await receiver.group_add(group, channel)
    try:
        await sender.group_send(group, {"type": "ticket.update", "version": 3, "html": "<p>hi</p>"})
        message = await asyncio.wait_for(receiver.receive(channel), timeout=5)
        assert message == {"type": "ticket.update", "version": 3, "html": "<p>hi</p>"}
    finally:
        await receiver.flush()
        await sender.flush()


@pytest.mark.services
async def test_idle_staff_socket_survives_on_the_redis_layer(redis_url, desk):
    # redis-py 8 reads with a 5 s socket timeout by default; the layer's blocking
    # pop waits 5 s too, so without an explicit longer timeout every idle socket
    # dies with "Timeout reading from redis" after about 5 s.
    assert type(get_channel_layer()).__name__ == "RedisPubSubChannelLayer"
    ticket = desk["ticket"]
    communicator = _socket(ticket.pk, desk["staff_cookie"])
    connected, _ = await communicator.connect()
    assert connected
    assert 'data-kind="snapshot"' in await communicator.receive_from(timeout=5)
    assert await communicator.receive_nothing(timeout=7)  # idle past both 5 s timeouts
    from sundry.tickets.models import Ticket

    await Ticket.objects.filter(pk=ticket.pk).aupdate(version=8, subject="Late news")
    await get_channel_layer().group_send(
        f"ticket-{ticket.pk}-staff", {"type": "ticket.changed", "ticket": ticket.pk, "version": 8}
    )
    late = await communicator.receive_from(timeout=5)
    assert 'data-version="8"' in late and "Late news" in late
    await communicator.disconnect()


SEND_FROM_ANOTHER_PROCESS = r"""
import sys, django
django.setup()
from sundry.tickets.events import group_send
group_send([sys.argv[1]], {"type": "ticket.changed", "ticket": 1, "version": 5})
"""


@pytest.mark.services
async def test_redis_layer_carries_a_group_message_across_processes(redis_url):
    # What a Celery worker does when it pushes to a websocket served by the web process:
    # one PUBLISH from synchronous code (sundry.tickets.events), read by the layer's subscriber.
    receiver = channel_layers.make_backend("default")
    group = f"smoke-{uuid.uuid4().hex}"
    channel = await receiver.new_channel()
    await receiver.group_add(group, channel)
    env = dict(os.environ, SUNDRY_CHANNEL_PREFIX=receiver.prefix, DJANGO_SETTINGS_MODULE="sundry.settings")
    try:
        done = await asyncio.to_thread(
            subprocess.run,
            [sys.executable, "-c", SEND_FROM_ANOTHER_PROCESS, group],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr
        message = await asyncio.wait_for(receiver.receive(channel), timeout=5)
        assert message == {"type": "ticket.changed", "ticket": 1, "version": 5}
    finally:
        await receiver.flush()


def test_settings_under_test_match_the_environment():
    # Guards the suite itself: CI exports the URLs, so these tests must see real servers.
    if os.environ.get("DATABASE_URL", "").startswith("postgres"):
        assert settings.DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql"
    if os.environ.get("REDIS_URL"):
        assert settings.CHANNEL_LAYERS["default"]["BACKEND"] == "channels_redis.pubsub.RedisPubSubChannelLayer"
