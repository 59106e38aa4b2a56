"""Sockets end with their session (logout anywhere, expiry), are capped per user and per
process, and a (re)connecting socket is always sent what the database holds now."""

from __future__ import annotations

from datetime import timedelta

import pytest
from channels.db import database_sync_to_async
from django.contrib.auth import get_user_model
from django.contrib.sessions.models import Session
from django.utils import timezone

from sundry.live import limits
from sundry.live.consumers import CLOSE_FORBIDDEN, CLOSE_SIGNED_OUT, CLOSE_TOO_MANY, CLOSE_TRY_AGAIN_LATER
from sundry.tickets.models import Ticket, TicketClass
from sundry.tickets.services import turn_append
from tests.live.test_consumers import _login, _open, desk, help_, world  # noqa: F401  (world is a fixture)


async def _closed_with(socket, code: int) -> None:
    assert await socket.receive_output(timeout=3) == {"type": "websocket.close", "code": code}
    await socket.disconnect()


# --- logout and expiry -------------------------------------------------------------------------


async def test_the_admins_logout_closes_that_sessions_sockets(world):
    client, cookie = world["staff"]
    watcher = desk(world["ticket"].pk, cookie)
    await _open(watcher)
    response = await database_sync_to_async(client.post)("/admin/logout/")
    assert response.status_code == 302 and response.url == "/login/"  # LOGOUT_REDIRECT_URL
    key = cookie.decode().split("=", 1)[1]
    assert not await Session.objects.filter(session_key=key).aexists()
    await _closed_with(watcher, CLOSE_SIGNED_OUT)


async def test_the_customers_logout_closes_their_sockets(world):
    client, cookie = world["alice"]
    watcher = help_(world["ticket"].pk, cookie)
    await _open(watcher)
    response = await database_sync_to_async(client.post)("/logout/")
    assert response.status_code == 302
    await _closed_with(watcher, CLOSE_SIGNED_OUT)


async def test_a_logout_leaves_the_same_users_other_sessions_live(world):
    ticket = world["ticket"]
    client, cookie = world["staff"]
    _, other_cookie = await database_sync_to_async(_login)(world["staff_user"])  # another browser
    here, elsewhere = desk(ticket.pk, cookie), desk(ticket.pk, other_cookie)
    await _open(here)
    await _open(elsewhere)
    await database_sync_to_async(client.post)("/logout/")
    await _closed_with(here, CLOSE_SIGNED_OUT)
    await database_sync_to_async(turn_append)(ticket=ticket, author="customer", text="still watched elsewhere")
    assert "still watched elsewhere" in await elsewhere.receive_from(timeout=3)
    await elsewhere.disconnect()


async def test_an_expired_session_stops_the_pushes(world, monkeypatch):
    # The socket re-reads its session when its recheck is due (here: every time). The
    # session row is still there, only past its expiry date: that must be enough.
    monkeypatch.setattr("sundry.live.consumers.ACCESS_RECHECK_SECONDS", 0)
    ticket = world["ticket"]
    _, cookie = world["alice"]
    watcher = help_(ticket.pk, cookie)
    await _open(watcher)
    key = cookie.decode().split("=", 1)[1]
    expired = await Session.objects.filter(session_key=key).aupdate(expire_date=timezone.now() - timedelta(seconds=1))
    assert expired == 1
    await database_sync_to_async(turn_append)(ticket=ticket, author="agent", text="must not arrive")
    await _closed_with(watcher, CLOSE_SIGNED_OUT)


async def test_an_expired_session_is_noticed_on_the_pages_version_check(world, monkeypatch):
    monkeypatch.setattr("sundry.live.consumers.ACCESS_RECHECK_SECONDS", 0)
    ticket = world["ticket"]
    _, cookie = world["staff"]
    watcher = desk(ticket.pk, cookie)
    await _open(watcher)
    key = cookie.decode().split("=", 1)[1]
    await Session.objects.filter(session_key=key).aupdate(expire_date=timezone.now() - timedelta(seconds=1))
    await watcher.send_to(text_data=f'{{"type": "sync", "version": {ticket.version}}}')
    await _closed_with(watcher, CLOSE_SIGNED_OUT)


# --- caps --------------------------------------------------------------------------------------


async def test_one_user_may_hold_only_so_many_sockets(world, settings):
    settings.LIVE_MAX_SOCKETS_PER_USER = 3
    before = limits.open_sockets()
    ticket = world["ticket"]
    _, cookie = world["alice"]
    sockets = [help_(ticket.pk, cookie) for _ in range(3)]
    for s in sockets:
        await _open(s)
    one_too_many = help_(ticket.pk, cookie)
    connected, _ = await one_too_many.connect()
    assert connected  # accepted only to say why it closes
    await _closed_with(one_too_many, CLOSE_TOO_MANY)
    staff = desk(ticket.pk, world["staff"][1])  # someone else is not affected
    await _open(staff)
    await sockets[0].disconnect()  # a closed socket frees its place
    again = help_(ticket.pk, cookie)
    assert 'data-kind="snapshot"' in await _open(again)
    for s in (*sockets[1:], again, staff):
        await s.disconnect()
    assert limits.open_sockets() == before


async def test_the_process_holds_only_so_many_sockets(world, settings):
    before = limits.open_sockets()
    settings.LIVE_MAX_SOCKETS_PER_PROCESS = before + 2
    ticket = world["ticket"]
    first, second = desk(ticket.pk, world["staff"][1]), help_(ticket.pk, world["alice"][1])
    await _open(first)
    await _open(second)
    third = desk(ticket.pk, world["staff"][1])
    connected, _ = await third.connect()
    assert connected
    await _closed_with(third, CLOSE_TRY_AGAIN_LATER)  # the page retries later
    await first.disconnect()
    await second.disconnect()
    assert limits.open_sockets() == before


async def test_a_refused_socket_takes_no_place(world, settings):
    settings.LIVE_MAX_SOCKETS_PER_USER = 1
    before = limits.open_sockets()
    ticket = world["ticket"]
    bob = help_(ticket.pk, world["bob"][1])  # not his ticket
    connected, _ = await bob.connect()
    assert connected
    await _closed_with(bob, CLOSE_FORBIDDEN)
    assert limits.open_sockets() == before


# --- snapshots are current ---------------------------------------------------------------------


async def test_a_reconnecting_socket_sees_a_change_that_did_not_bump_the_version(world):
    # A write that changes a panel without bumping the ticket's version (here: the class
    # renamed directly) must still show on the next snapshot, although a rendering of
    # that very version is kept in the process.
    ticket = world["ticket"]
    first = desk(ticket.pk, world["staff"][1])
    await _open(first)
    await database_sync_to_async(turn_append)(ticket=ticket, author="customer", text="a push, so a rendering is kept")
    await first.receive_from(timeout=3)
    await first.disconnect()
    version = await Ticket.objects.filter(pk=ticket.pk).values_list("version", flat=True).aget()
    await TicketClass.objects.filter(pk=ticket.ticket_class_id).aupdate(name="Renamed class 6123")
    assert await Ticket.objects.filter(pk=ticket.pk).values_list("version", flat=True).aget() == version
    again = desk(ticket.pk, world["staff"][1])
    snapshot = await _open(again)
    assert f'data-version="{version}"' in snapshot and "Renamed class 6123" in snapshot
    await again.disconnect()


@pytest.mark.django_db
def test_logout_without_sockets_is_harmless(client):
    user = get_user_model().objects.create_user("lone", password="x")
    client.force_login(user)
    assert client.post("/logout/").status_code == 302
