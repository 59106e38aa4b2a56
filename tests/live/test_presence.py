"""Presence on a ticket: colleagues see who else has it open and who is typing; the customer sees
"Support is typing" only while the person who holds the ticket types; marks go with their socket,
and lapse on their own when nobody renews them (a process that died). Kept in Redis when it is
configured, so the web processes share them."""

from __future__ import annotations

import pytest
from channels.layers import get_channel_layer
from django.conf import settings
from django.contrib.auth import get_user_model

from sundry.live import presence
from sundry.tickets.events import staff_group
from sundry.tickets.models import Ticket
from tests.live.test_consumers import _login, _open, desk, help_, world  # noqa: F401  (world is a fixture)

# A bound on waits for a frame that must come, generous for a loaded machine (nothing waits it out).
LAPSE_WAIT = 30


async def _presence_frame(socket, element: str, timeout: float = 3) -> str:
    """The next frame that carries the presence element `element` (other frames are skipped)."""
    while True:
        frame = await socket.receive_from(timeout=timeout)
        if f'id="{element}"' in frame:
            assert 'id="live-version"' in frame  # a frame like any other, at the version the page holds
            return frame[frame.index(f'<p id="{element}"') :]  # the element alone


@pytest.fixture
def colleague(world):
    user = get_user_model().objects.create_user("ben", password="x", is_staff=True)
    return user, _login(user)[1]


async def test_colleagues_see_each_other_viewing_and_typing(world, colleague):
    ticket = world["ticket"]
    sam = desk(ticket.pk, world["staff"][1])
    await _open(sam)
    assert await sam.receive_nothing(timeout=0.5)  # alone on the ticket: nothing to say (never "sam is viewing")
    ben = desk(ticket.pk, colleague[1])
    await _open(ben)
    assert "ben is viewing this ticket" in await _presence_frame(sam, "presence")
    assert "sam is viewing this ticket" in await _presence_frame(ben, "presence")

    await ben.send_to(text_data='{"type": "typing", "on": true}')
    assert "ben is typing…" in await _presence_frame(sam, "presence")
    await ben.send_to(text_data='{"type": "typing", "on": false}')
    frame = await _presence_frame(sam, "presence")
    assert "typing" not in frame and "ben is viewing" in frame

    await ben.disconnect()  # gone with its socket
    assert " hidden>" in await _presence_frame(sam, "presence")
    await sam.disconnect()
    assert await presence.people(ticket.pk) == []


async def test_a_second_page_of_the_same_person_tells_only_itself(world, colleague, monkeypatch):
    """A person already on the ticket opening it again (or closing one of two pages) changes
    nobody's line: no news goes to the ticket's watchers, and the new page still shows who else
    is there. Negative control: a colleague's arrival and departure are broadcast."""
    ticket = world["ticket"]
    sent = []
    real = presence.PresenceWatcher.presence_broadcast

    async def counted(self, *args, **kwargs):
        sent.append(self.scope["user"].get_username())
        return await real(self, *args, **kwargs)

    monkeypatch.setattr(presence.PresenceWatcher, "presence_broadcast", counted)
    ben = desk(ticket.pk, colleague[1])
    await _open(ben)
    sam = desk(ticket.pk, world["staff"][1])
    await _open(sam)
    assert "sam is viewing this ticket" in await _presence_frame(ben, "presence")
    assert sent == ["ben", "sam"]  # each arrival told
    again = desk(ticket.pk, world["staff"][1])  # sam's second page
    await _open(again)
    assert "ben is viewing this ticket" in await _presence_frame(again, "presence")  # told alone
    await again.disconnect()
    assert sent == ["ben", "sam"] and await ben.receive_nothing(timeout=0.5)
    await sam.disconnect()  # sam's last page: ben is told
    assert " hidden>" in await _presence_frame(ben, "presence")
    assert sent == ["ben", "sam", "sam"]
    await ben.disconnect()


async def test_the_customer_sees_support_typing_only_from_the_person_holding_the_ticket(world, colleague):
    ticket = world["ticket"]
    customer = help_(ticket.pk, world["alice"][1])
    await _open(customer)
    ben = desk(ticket.pk, colleague[1])
    await _open(ben)
    await ben.send_to(text_data='{"type": "typing", "on": true}')  # a note for colleagues, maybe
    assert await customer.receive_nothing(timeout=0.8)
    await ben.send_to(text_data='{"type": "typing", "on": false}')
    await Ticket.objects.filter(pk=ticket.pk).aupdate(handler="staff", assigned_to=colleague[0])
    await ben.send_to(text_data='{"type": "typing", "on": true}')
    shown = await _presence_frame(customer, "staff-typing")
    assert "Support is typing" in shown and " hidden>" not in shown and "ben" not in shown
    await ben.disconnect()
    assert " hidden>" in await _presence_frame(customer, "staff-typing")
    await customer.disconnect()


async def test_customers_cannot_mark_anyone_typing(world, colleague):
    ticket = world["ticket"]
    sam = desk(ticket.pk, world["staff"][1])
    await _open(sam)
    customer = help_(ticket.pk, world["alice"][1])
    await _open(customer)
    await customer.send_to(text_data='{"type": "typing", "on": true}')
    assert await sam.receive_nothing(timeout=0.8)
    assert await presence.people(ticket.pk) == [{"user": world["staff_user"].pk, "name": "sam", "typing": False}]
    await customer.disconnect()
    await sam.disconnect()


async def test_a_mark_nobody_renews_lapses_and_the_pages_are_told(world, monkeypatch):
    """A colleague's web process died mid-sentence: its marks stay until they lapse, and the
    pages showing "typing" look again on their own and drop it. Waits are on the frames, with a
    generous bound: the test's process told the page "cat is typing" itself (what the dead process
    last broadcast), so how long the machine takes between the mark and the page's first frame
    cannot let the mark lapse before it is shown."""
    monkeypatch.setattr(presence, "TYPING_TTL", 1.0)
    ticket = world["ticket"]
    sam = desk(ticket.pk, world["staff"][1])
    await _open(sam)
    ghost = presence.Mark(999, "cat", "specific.elsewhere!dead")
    await presence.mark(ticket.pk, presence.VIEWING, ghost)
    await presence.mark(ticket.pk, presence.TYPING, ghost)
    await get_channel_layer().group_send(
        staff_group(ticket.pk),
        {"type": "presence.changed", "people": [{"user": 999, "name": "cat", "typing": True}]},
    )
    assert "cat is typing…" in await _presence_frame(sam, "presence", timeout=LAPSE_WAIT)
    # Nobody says it stopped; the socket looks again once the mark could have lapsed.
    frame = await _presence_frame(sam, "presence", timeout=LAPSE_WAIT)
    assert "typing" not in frame and "cat is viewing" in frame
    assert not any(p["typing"] for p in await presence.people(ticket.pk))  # lapsed in the store too
    await sam.disconnect()


async def test_marks_live_in_redis_when_it_is_configured(world):
    if not settings.REDIS_URL:
        pytest.skip("needs REDIS_URL")
    import redis.asyncio as aioredis

    ticket = world["ticket"]
    sam = desk(ticket.pk, world["staff"][1])
    await _open(sam)
    assert await sam.receive_nothing(timeout=0.5)  # marked by then
    client = aioredis.from_url(settings.REDIS_URL)
    key = f"{settings.CHANNEL_PREFIX}:presence:{ticket.pk}:viewing"
    members = [m.decode() for m in await client.zrange(key, 0, -1)]
    assert len(members) == 1 and members[0].startswith(f"{world['staff_user'].pk}|") and members[0].endswith("|sam")
    assert 0 < await client.ttl(key) <= presence.VIEWING_TTL * 2 + 1  # nothing outlives its watchers
    await sam.disconnect()
    assert await client.zrange(key, 0, -1) == []
    await client.aclose()


def test_the_presence_line_names_a_few_and_counts_the_rest():
    everyone = [{"user": n, "name": f"staff{n}", "typing": n == 2} for n in range(1, 8)]
    line = presence.staff_html(everyone, me=1)
    assert "staff2 is typing…" in line
    assert "staff3, staff4, staff5, 2 others are viewing" in line and "staff1" not in line


async def test_a_redis_out_of_reach_costs_the_presence_line_not_the_socket(world, settings):
    settings.REDIS_URL = "redis://127.0.0.1:1/0"  # nothing listens there: presence's store only
    ticket = world["ticket"]
    who = presence.Mark(1, "sam", "specific.x!y")
    await presence.mark(ticket.pk, presence.VIEWING, who)  # logged, not raised
    await presence.unmark(ticket.pk, presence.VIEWING, who)
    assert await presence.people(ticket.pk) == []
