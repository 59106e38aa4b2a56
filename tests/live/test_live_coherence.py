"""Changes made outside a desk edit reach an open desk socket, and a socket that
connects afterwards gets them in its snapshot (never a rendering cached from before)."""

from __future__ import annotations

import asyncio
import threading

import pytest
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import connection
from django.test import Client

from sundry.agent.loop import agent_run
from sundry.agent.provider.gateway import Gateway
from sundry.agent.provider.scripted import ScriptedModel
from sundry.asgi import application
from sundry.compaction.services import compaction_consider, compaction_run
from sundry.compaction.trigger import BREAKER_PREFIX
from sundry.tickets.models import Ticket, TicketClass
from sundry.tickets.services import ticket_class_save, turn_append
from sundry.tooling.messages import ModelResponse
from tests.compaction.helpers import long_ticket


def _cookie(user) -> bytes:
    client = Client()
    client.force_login(user)
    return f"{settings.SESSION_COOKIE_NAME}={client.cookies[settings.SESSION_COOKIE_NAME].value}".encode()


@pytest.fixture
def staff_cookie(transactional_db):
    return _cookie(get_user_model().objects.create_user("sam", password="x", is_staff=True))


def desk(ticket_id: int, cookie: bytes) -> WebsocketCommunicator:
    return WebsocketCommunicator(
        application, f"/ws/desk/tickets/{ticket_id}/", headers=[(b"origin", b"http://localhost"), (b"cookie", cookie)]
    )


async def _open(socket) -> str:
    connected, _ = await socket.connect()
    assert connected
    return await socket.receive_from(timeout=5)


async def _until(socket, text: str, *, frames: int = 12) -> str:
    """The first frame containing `text` (a change may bring a few pushes before it)."""
    seen = []
    for _ in range(frames):
        frame = await socket.receive_from(timeout=5)
        if text in frame:
            return frame
        seen.append(frame[:200])
    raise AssertionError(f"no frame with {text!r} among {seen}")


async def test_a_class_budget_edit_reaches_an_open_desk_and_a_reconnecting_one(staff_cookie):
    ticket = await database_sync_to_async(long_ticket)()
    await database_sync_to_async(agent_run)(
        ticket.pk, gateway=Gateway(override=ScriptedModel([ModelResponse(text="Still moving.")]))
    )
    socket = desk(ticket.pk, staff_cookie)
    snapshot = await _open(socket)
    assert "of 8000 tokens · compaction at 6400" in snapshot

    def edit():
        tclass = TicketClass.objects.get(pk=ticket.ticket_class_id)
        tclass.token_budget = 6000
        ticket_class_save(ticket_class=tclass)

    await database_sync_to_async(edit)()
    frame = await _until(socket, "of 6000 tokens · compaction at 4800")
    assert 'id="panel-budget"' in frame
    await socket.disconnect()

    again = desk(ticket.pk, staff_cookie)
    assert "of 6000 tokens · compaction at 4800" in await _open(again)
    await again.disconnect()


async def test_the_compaction_breaker_reaches_an_open_desk_and_a_reconnecting_one(staff_cookie):
    def prepared():
        ticket = long_ticket()
        tclass = ticket.ticket_class
        tclass.trigger_fraction, tclass.token_budget = 0.5, 2000
        tclass.save()
        return ticket

    ticket = await database_sync_to_async(prepared)()

    def fail_once():
        run = compaction_consider(ticket_id=ticket.pk)
        compaction_run(run.pk, gateway=Gateway(override=ScriptedModel([RuntimeError("summariser bug")])))

    def customer_writes():  # the ticket grows, so the next check covers a new range
        turn_append(
            ticket=Ticket.objects.select_related("ticket_class").get(pk=ticket.pk), author="customer", text="Any news?"
        )

    for _ in range(2):
        await database_sync_to_async(fail_once)()
        await database_sync_to_async(customer_writes)()
    socket = desk(ticket.pk, staff_cookie)
    snapshot = await _open(socket)
    assert BREAKER_PREFIX not in snapshot

    # The third failure: the socket is shown the run as running (rendered and cached at that
    # version) before the failure commits, so only a bump with the failure can bring the alert.
    gate = threading.Event()

    def summariser_fails(request):
        assert gate.wait(10)
        raise RuntimeError("summariser bug")

    def third():
        try:
            run = compaction_consider(ticket_id=ticket.pk)
            compaction_run(run.pk, gateway=Gateway(override=ScriptedModel([summariser_fails])))
        finally:
            connection.close()

    # Its own thread: the consumers render on the thread database_sync_to_async shares.
    failing = asyncio.get_running_loop().run_in_executor(None, third)
    await _until(socket, ">running</span>")
    gate.set()
    await failing
    frame = await _until(socket, BREAKER_PREFIX)
    assert 'id="panel-head"' in frame
    await socket.disconnect()

    again = desk(ticket.pk, staff_cookie)
    assert BREAKER_PREFIX in await _open(again)
    await again.disconnect()
