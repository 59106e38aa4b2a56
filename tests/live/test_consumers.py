"""Live panels over websockets: per-viewer frames, versions, resync, access, logout."""

from __future__ import annotations

import pytest
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from django.conf import settings
from django.contrib.auth import get_user_model
from django.test import Client

from sundry.asgi import application
from sundry.context import services as lanes
from sundry.desk.lifecycle import ticket_create
from sundry.live.consumers import CLOSE_FORBIDDEN, CLOSE_SIGNED_OUT
from sundry.tickets.models import Ticket
from sundry.tickets.services import turn_append
from tests.factories import CustomerFactory, TicketClassFactory, paid_order

SECRET_NOTE = "staff-only note: customer sounds like a repeat refunder"


def _login(user) -> tuple[Client, bytes]:
    client = Client()
    client.force_login(user)
    return client, f"{settings.SESSION_COOKIE_NAME}={client.cookies[settings.SESSION_COOKIE_NAME].value}".encode()


@pytest.fixture
def world(transactional_db):
    users = get_user_model().objects
    staff = users.create_user("sam", password="x", is_staff=True)
    alice_user, bob_user = users.create_user("alice", password="x"), users.create_user("bob", password="x")
    alice, _bob = CustomerFactory(user=alice_user), CustomerFactory(user=bob_user)
    order = paid_order(customer=alice, number="SU-41234")
    ticket = ticket_create(customer=alice.person, ticket_class=TicketClassFactory(), subject="Broken kettle")
    turn_append(ticket=ticket, author="customer", text="My kettle arrived broken, order SU-41234")
    turn_append(ticket=ticket, author="staff", kind="note", text=SECRET_NOTE, payload={"by": "sam"})
    turn_append(
        ticket=ticket,
        author="agent",
        kind="tool_call",
        text="",
        payload={"calls": [{"id": "c1", "name": "get_order", "arguments": {"order_number": "SU-41234"}}]},
    )
    lanes.ledger_record_system_id(ticket=ticket, kind="payment", value="pay_77SECRET", role="payment", turn=3)
    lanes.state_set(ticket=ticket, name="order_number", value=order.number, turn=1, source="customer", confirmed=True)
    lanes.state_set(ticket=ticket, name="item", value="Inferred Kettle 3000", turn=1, source="model")
    lanes.state_set(
        ticket=ticket, name="internal_note", value="confirmed but internal", turn=1, source="staff", confirmed=True
    )
    return {
        "ticket": Ticket.objects.select_related("customer", "ticket_class").get(pk=ticket.pk),
        "staff": _login(staff),
        "alice": _login(alice_user),
        "bob": _login(bob_user),
        "staff_user": staff,
    }


def _socket(path: str, cookie: bytes | None) -> WebsocketCommunicator:
    headers = [(b"origin", b"http://localhost")] + ([(b"cookie", cookie)] if cookie else [])
    return WebsocketCommunicator(application, path, headers=headers)


def desk(ticket_id, cookie):
    return _socket(f"/ws/desk/tickets/{ticket_id}/", cookie)


def help_(ticket_id, cookie):
    return _socket(f"/ws/help/tickets/{ticket_id}/", cookie)


# How long a socket may take to be accepted and send its snapshot. A wait on that condition, not
# a window: on a loaded machine a 2,000-turn ticket's full render (the push-cost control) took
# longer than 5 s; a generous bound only makes a real failure slower to report.
OPEN_TIMEOUT = 60


async def _open(communicator, timeout: float = OPEN_TIMEOUT) -> str:
    connected, _ = await communicator.connect(timeout=timeout)
    assert connected
    return await communicator.receive_from(timeout=timeout)


async def test_staff_and_customer_each_get_their_own_rendering(world):
    ticket = world["ticket"]
    staff, customer = desk(ticket.pk, world["staff"][1]), help_(ticket.pk, world["alice"][1])
    staff_frame, customer_frame = await _open(staff), await _open(customer)

    for internal in (
        "pay_77SECRET",
        SECRET_NOTE,
        "Inferred Kettle 3000",
        "confirmed but internal",
        "get_order",
        "panel-ledger",
        "panel-state",
        "panel-summary",
        "panel-budget",
    ):
        assert internal in staff_frame
        assert internal not in customer_frame, internal
    assert 'id="panel-details"' in customer_frame and "SU-41234" in customer_frame
    assert "My kettle arrived broken" in customer_frame
    await staff.disconnect()
    await customer.disconnect()


async def test_a_commit_pushes_changed_panels_with_the_next_version_to_every_watcher(world):
    ticket = world["ticket"]
    first, second = desk(ticket.pk, world["staff"][1]), help_(ticket.pk, world["alice"][1])
    await _open(first)
    await _open(second)

    await database_sync_to_async(lanes.state_set)(
        ticket=ticket, name="refund_method", value="store credit", turn=3, source="staff", confirmed=True
    )
    version = await Ticket.objects.filter(pk=ticket.pk).values_list("version", flat=True).aget()
    staff_diff, customer_diff = await first.receive_from(timeout=5), await second.receive_from(timeout=5)
    for frame in (staff_diff, customer_diff):
        assert f'data-version="{version}"' in frame and f'data-base="{ticket.version}"' in frame
        assert 'data-kind="diff"' in frame and "store_credit" in frame
    assert 'id="panel-state"' in staff_diff and 'id="panel-conversation"' not in staff_diff  # only what changed
    assert 'id="panel-details"' in customer_diff and "pay_77SECRET" not in customer_diff
    await first.disconnect()
    await second.disconnect()


async def test_a_refund_the_shop_made_reaches_the_customer_page_live(world):
    ticket = world["ticket"]
    customer = help_(ticket.pk, world["alice"][1])
    await _open(customer)
    await database_sync_to_async(lanes.action_record)(
        ticket=ticket,
        tool="issue_refund",
        target="SU-41234",
        arguments={},
        turn=4,
        reversible=False,
        result={"refund_id": "rfd_SECRET77", "order_number": "SU-41234", "amount_cents": 1250, "currency": "USD"},
        idempotency_key="k-live",
        amount_cents=1250,
        currency="USD",
    )
    frame = await customer.receive_from(timeout=5)
    assert 'id="panel-details"' in frame and 'Refund of 12.50 USD on order <span class="whole">SU-41234</span>' in frame
    assert "rfd_SECRET77" not in frame and "k-live" not in frame
    await customer.disconnect()


async def test_an_internal_change_reaches_staff_and_never_the_customer(world):
    ticket = world["ticket"]
    staff, customer = desk(ticket.pk, world["staff"][1]), help_(ticket.pk, world["alice"][1])
    await _open(staff)
    await _open(customer)
    await database_sync_to_async(turn_append)(
        ticket=ticket, author="staff", kind="note", text="second secret note", payload={"by": "sam"}
    )
    assert "second secret note" in await staff.receive_from(timeout=5)
    frame = await customer.receive_from(timeout=5)  # only the version moves for the customer
    assert "second secret note" not in frame and "panel-" not in frame
    await staff.disconnect()
    await customer.disconnect()


async def test_reconnect_and_resync_requests_get_a_full_snapshot(world):
    ticket = world["ticket"]
    watcher = desk(ticket.pk, world["staff"][1])
    await _open(watcher)
    await watcher.send_to(text_data='{"type": "resync"}')
    again = await watcher.receive_from(timeout=5)
    assert 'data-kind="snapshot"' in again and 'id="panel-ledger"' in again and 'id="panel-budget"' in again

    # A client whose version is current hears nothing; one that is behind gets a snapshot.
    await watcher.send_to(text_data=f'{{"type": "sync", "version": {ticket.version}}}')
    assert await watcher.receive_nothing(timeout=0.3)
    await Ticket.objects.filter(pk=ticket.pk).aupdate(version=ticket.version + 5)  # a push that never came
    await watcher.send_to(text_data=f'{{"type": "sync", "version": {ticket.version}}}')
    caught_up = await watcher.receive_from(timeout=5)
    assert 'data-kind="snapshot"' in caught_up and f'data-version="{ticket.version + 5}"' in caught_up
    await watcher.disconnect()

    later = desk(ticket.pk, world["staff"][1])
    assert f'data-version="{ticket.version + 5}"' in await _open(later)
    await later.disconnect()


async def _assert_refused(communicator):
    connected, _ = await communicator.connect()
    assert connected
    assert await communicator.receive_output(timeout=3) == {"type": "websocket.close", "code": CLOSE_FORBIDDEN}
    await communicator.disconnect()  # end the app instance here, not in the loop's teardown


async def test_another_customer_and_staff_path_guessers_are_refused(world):
    ticket = world["ticket"]
    await _assert_refused(help_(ticket.pk, world["bob"][1]))  # someone else's ticket
    await _assert_refused(desk(ticket.pk, world["alice"][1]))  # a customer on the staff path
    await _assert_refused(help_(ticket.pk, None))  # nobody
    await _assert_refused(help_(ticket.pk + 999, world["alice"][1]))  # no such ticket looks the same


async def test_a_refused_socket_joined_no_group(world):
    # Bob's consumer still runs after it closed his socket (until his side disconnects):
    # had it joined Alice's ticket group, the push below would reach it and it would answer.
    ticket = world["ticket"]
    bob = help_(ticket.pk, world["bob"][1])
    connected, _ = await bob.connect()
    assert connected
    assert await bob.receive_output(timeout=3) == {"type": "websocket.close", "code": CLOSE_FORBIDDEN}
    alice = help_(ticket.pk, world["alice"][1])  # a witness: the push really goes out
    await _open(alice)
    await database_sync_to_async(turn_append)(ticket=ticket, author="agent", text="for Alice only")
    assert "for Alice only" in await alice.receive_from(timeout=5)
    assert await bob.receive_nothing(timeout=0.3)
    await bob.disconnect()
    await alice.disconnect()


async def test_logging_out_closes_the_users_open_sockets(world):
    ticket = world["ticket"]
    client, cookie = world["staff"]
    one, two = desk(ticket.pk, cookie), desk(ticket.pk, cookie)
    await _open(one)
    await _open(two)
    kim = await get_user_model().objects.acreate(username="kim", is_staff=True)
    other_staff = desk(ticket.pk, (await database_sync_to_async(_login)(kim))[1])
    await _open(other_staff)
    response = await database_sync_to_async(client.post)("/logout/")
    assert response.status_code == 302
    for socket in (one, two):
        output = await socket.receive_output(timeout=3)
        while output["type"] == "websocket.send" and 'id="presence"' in output["text"]:  # "kim is viewing"
            output = await socket.receive_output(timeout=3)
        assert output == {"type": "websocket.close", "code": CLOSE_SIGNED_OUT}
    # Only that user's sockets close: kim's stays, told only that sam left.
    while not await other_staff.receive_nothing(timeout=0.5):
        output = await other_staff.receive_output(timeout=1)
        assert output["type"] == "websocket.send" and 'id="presence"' in output["text"], output
    for socket in (one, two, other_staff):
        await socket.disconnect()


async def test_a_revoked_role_stops_the_pushes(world, monkeypatch):
    # Sockets re-read access at most every ACCESS_RECHECK_SECONDS; here, at once.
    monkeypatch.setattr("sundry.live.consumers.ACCESS_RECHECK_SECONDS", 0)
    ticket = world["ticket"]
    watcher = desk(ticket.pk, world["staff"][1])
    await _open(watcher)
    await get_user_model().objects.filter(pk=world["staff_user"].pk).aupdate(is_staff=False)
    await database_sync_to_async(turn_append)(ticket=ticket, author="customer", text="anyone there?")
    assert await watcher.receive_output(timeout=3) == {"type": "websocket.close", "code": CLOSE_FORBIDDEN}
    await watcher.disconnect()


# --- access re-read when it changes; one hub per ticket group per process ----------------------


async def test_saving_a_user_without_the_staff_role_closes_their_socket_at_once(world):
    # The default recheck period is long (a backstop); the save itself makes the socket re-read.
    ticket = world["ticket"]
    watcher = desk(ticket.pk, world["staff"][1])
    await _open(watcher)
    user = await get_user_model().objects.aget(pk=world["staff_user"].pk)
    user.is_staff = False
    await database_sync_to_async(user.save)()  # what the admin's user form does
    assert await watcher.receive_output(timeout=3) == {"type": "websocket.close", "code": CLOSE_FORBIDDEN}
    await watcher.disconnect()


async def test_saving_a_user_who_keeps_the_role_keeps_their_socket(world):
    ticket = world["ticket"]
    watcher = desk(ticket.pk, world["staff"][1])
    await _open(watcher)
    user = await get_user_model().objects.aget(pk=world["staff_user"].pk)
    user.first_name = "Sam"
    await database_sync_to_async(user.save)()
    await database_sync_to_async(turn_append)(ticket=ticket, author="customer", text="still there?")
    assert "still there?" in await watcher.receive_from(timeout=3)
    await watcher.disconnect()


async def test_a_ticket_moved_to_another_customer_closes_the_old_owners_socket(world):
    ticket = world["ticket"]
    alice = help_(ticket.pk, world["alice"][1])
    await _open(alice)
    staff = desk(ticket.pk, world["staff"][1])
    await _open(staff)
    bob = await database_sync_to_async(lambda: get_user_model().objects.get(username="bob").desk_customer)()
    moved = await Ticket.objects.aget(pk=ticket.pk)
    moved.customer = bob
    await database_sync_to_async(moved.save)()
    assert await alice.receive_output(timeout=3) == {"type": "websocket.close", "code": CLOSE_FORBIDDEN}
    assert await staff.receive_nothing(timeout=0.3)  # staff may still watch it
    await alice.disconnect()
    await staff.disconnect()


async def test_watchers_of_a_ticket_share_one_group_member_and_one_rendering(world, monkeypatch):
    from sundry.live import fanout, panels

    ticket = world["ticket"]
    renders = []
    real_render_all = panels.render_all
    monkeypatch.setattr(
        panels, "render_all", lambda t, v, **kw: renders.append(v.audience) or real_render_all(t, v, **kw)
    )
    watchers = [desk(ticket.pk, world["staff"][1]) for _ in range(12)]
    for w in watchers:
        await _open(w)
    (hub,) = fanout.hubs_of(f"ticket-{ticket.pk}-staff")
    assert len(hub.watchers) == 12
    renders.clear()
    await database_sync_to_async(turn_append)(ticket=ticket, author="customer", text="twelve of you?")
    frames = [await w.receive_from(timeout=3) for w in watchers]
    assert all("twelve of you?" in f for f in frames)
    assert renders == ["staff"]  # rendered once for all twelve
    for w in watchers:
        await w.disconnect()
    assert fanout.hubs_of(f"ticket-{ticket.pk}-staff") == []  # the last one out stops the hub
    assert hub.listener.done()


async def test_one_watcher_failing_does_not_stop_the_others_pushes(world):
    from sundry.live import fanout

    ticket = world["ticket"]
    broken, fine = desk(ticket.pk, world["staff"][1]), desk(ticket.pk, world["staff"][1])
    await _open(broken)
    (hub,) = fanout.hubs_of(f"ticket-{ticket.pk}-staff")
    (first,) = hub.watchers

    async def fails(event):
        raise RuntimeError("broken socket")

    first.ticket_changed = fails
    await _open(fine)
    await database_sync_to_async(turn_append)(ticket=ticket, author="customer", text="first")
    await database_sync_to_async(turn_append)(ticket=ticket, author="customer", text="second")
    frame = await fine.receive_from(timeout=3)
    assert "first" in frame
    if "second" not in frame:  # unless its render already saw the second commit
        frame = await fine.receive_from(timeout=3)
    assert "second" in frame
    assert await broken.receive_nothing(timeout=0.2)
    await broken.disconnect()
    await fine.disconnect()


# --- the conversation is pushed item by item --------------------------------------------------


async def test_a_new_turn_is_appended_not_the_whole_conversation_resent(world):
    ticket = world["ticket"]
    staff, customer = desk(ticket.pk, world["staff"][1]), help_(ticket.pk, world["alice"][1])
    await _open(staff)
    await _open(customer)
    turn = await database_sync_to_async(turn_append)(ticket=ticket, author="agent", text="A replacement is on its way.")
    n = turn.number
    for frame, item in (
        (await staff.receive_from(timeout=3), f"turn-{n}"),
        (await customer.receive_from(timeout=3), f"msg-{n}"),
    ):
        assert 'hx-swap-oob="beforeend:#panel-conversation"' in frame
        assert f'id="{item}"' in frame and "A replacement is on its way." in frame
        assert "My kettle arrived broken" not in frame  # earlier turns stay on the page, not in the push
        assert 'id="panel-conversation"' not in frame
    await staff.disconnect()
    await customer.disconnect()


async def test_turns_a_compaction_covers_are_replaced_in_place(world):
    from sundry.context.models import Summary
    from sundry.tickets.events import ticket_changed
    from sundry.tickets.services import ticket_touch

    ticket = world["ticket"]
    staff = desk(ticket.pk, world["staff"][1])
    first = await _open(staff)
    assert "turn customer message compacted" not in first

    def compact_through_two():
        Summary.objects.create(ticket=ticket, covers_through_turn=2, text="Earlier: kettle broken.", is_current=True)
        ticket_touch(ticket.pk)
        ticket_changed(ticket.pk)

    await database_sync_to_async(compact_through_two)()
    frame = await staff.receive_from(timeout=3)
    assert frame.count('hx-swap-oob="true"') >= 3  # marker, turn 1, turn 2 (and other changed panels)
    assert '<div hx-swap-oob="true" class="turn-item" id="turn-1">' in frame
    assert 'id="turn-2"' in frame and 'id="turn-3"' not in frame  # turn 3 is not covered: not re-sent
    assert "beforeend" not in frame and 'id="panel-conversation"' not in frame
    await staff.disconnect()


async def test_a_customer_who_reconnects_gets_the_whole_conversation(world):
    ticket = world["ticket"]
    customer = help_(ticket.pk, world["alice"][1])
    await _open(customer)
    await customer.send_to(text_data='{"type": "resync"}')
    frame = await customer.receive_from(timeout=3)
    assert 'data-kind="snapshot"' in frame and 'id="panel-conversation"' in frame
    assert "My kettle arrived broken" in frame and SECRET_NOTE not in frame
    await customer.disconnect()
