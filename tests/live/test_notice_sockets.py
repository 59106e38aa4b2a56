"""The sockets behind notifications: the desk's attention feed lists a staff member's own
flagged tickets (never unassigned or a colleague's) and follows changes; a customer's open page
marks them as viewing their ticket, which the e-mail notifier reads."""

from __future__ import annotations

import asyncio
import json
import time

from channels.db import database_sync_to_async
from django.contrib.auth import get_user_model

from sundry.agent.models import HeldAction
from sundry.desk.lifecycle import ticket_create
from sundry.live import presence
from sundry.live.consumers import CLOSE_FORBIDDEN
from sundry.tickets.attention import attention_flag
from sundry.tickets.versions import ticket_update
from tests.live.test_consumers import _socket, help_, world  # noqa: F401  (world is a fixture)
from tests.live.test_sessions_and_limits import _closed_with

REASON = "Model unavailable: the provider timed out while answering about SU-41234"


def feed(cookie):
    return _socket("/ws/desk/attention/", cookie)


async def _listed(socket, timeout=5) -> dict:
    message = json.loads(await socket.receive_from(timeout=timeout))
    assert message["type"] == "attention"
    return {t["ticket"]: t for t in message["tickets"]}


@database_sync_to_async
def _tickets(world):
    ticket, sam = world["ticket"], world["staff_user"]
    kim = get_user_model().objects.create_user("kim", is_staff=True)

    def make(subject):
        return ticket_create(customer=ticket.customer, ticket_class=ticket.ticket_class, subject=subject)

    mine, unassigned, kims = ticket, make("Nobody's"), make("Kim's")
    ticket_update(mine.pk, assigned_to=sam)
    ticket_update(kims.pk, assigned_to=kim)
    for t in (mine, unassigned, kims):
        attention_flag(t.pk, REASON)
    return mine, unassigned, kims


async def test_staff_are_sent_their_own_flagged_tickets_only(world):
    mine, unassigned, kims = await _tickets(world)
    socket = feed(world["staff"][1])
    connected, _ = await socket.connect()
    assert connected
    listed = await _listed(socket)
    assert list(listed) == [mine.pk]  # not the unassigned one, not Kim's
    entry = listed[mine.pk]
    assert entry["causes"] == ["Model unavailable"] and entry["url"] == f"/desk/tickets/{mine.pk}/"
    assert "SU-41234" not in json.dumps(entry)  # the reason's detail stays on the desk
    # The unassigned ticket is given to sam: it is sent, with an action held on it too.
    await database_sync_to_async(ticket_update)(unassigned.pk, assigned_to=world["staff_user"])
    listed = await _listed(socket)
    assert set(listed) == {mine.pk, unassigned.pk}
    await database_sync_to_async(HeldAction.objects.create)(
        ticket=unassigned, tool="issue_refund", call_id="c9", idempotency_key="feed-held", turn=1, arguments={}
    )
    await database_sync_to_async(ticket_update)(unassigned.pk)  # the hold's own push
    listed = await _listed(socket)
    assert listed[unassigned.pk]["causes"] == ["Model unavailable", "Approval waiting"]
    assert len(set(listed[unassigned.pk]["keys"])) == 2
    await socket.disconnect()


async def test_customers_and_strangers_get_no_feed(world):
    for cookie in (world["alice"][1], None):
        socket = feed(cookie)
        connected, _ = await socket.connect()
        assert connected  # accepted only to say why it closes
        await _closed_with(socket, CLOSE_FORBIDDEN)


async def _until(ticket_id: int, expected: bool, timeout: float = 5) -> bool:
    """The mark is written just after the snapshot goes out: wait for it, within a ceiling."""
    deadline = time.monotonic() + timeout
    while True:
        now = await database_sync_to_async(presence.customer_viewing)(ticket_id)
        if now is expected or time.monotonic() > deadline:
            return now
        await asyncio.sleep(0.05)


async def test_the_customers_open_page_marks_them_as_viewing(world):
    ticket = world["ticket"]
    assert await database_sync_to_async(presence.customer_viewing)(ticket.pk) is False
    socket = help_(ticket.pk, world["alice"][1])
    connected, _ = await socket.connect()
    assert connected
    await socket.receive_from(timeout=5)  # the page's snapshot
    assert await _until(ticket.pk, True) is True
    await socket.disconnect()
    assert await _until(ticket.pk, False) is False
    # Control: staff on the ticket are not the customer.
    staff_page = _socket(f"/ws/desk/tickets/{ticket.pk}/", world["staff"][1])
    await staff_page.connect()
    await staff_page.receive_from(timeout=5)
    assert await _until(ticket.pk, True, timeout=1) is False
    await staff_page.disconnect()
