"""A streamed reply's messages are handed to the process's push loop without holding the model call
that writes them (`events.areply_stream`), and still reach a watcher in order, "done" last.

The push loop is held busy while the stream sends: the sends return at once and go out once it is
free. Control: `events.STREAM_UNAWAITED = False` (each send waited for, as before) — the first send
is still waiting when the test's bound runs out, and the test fails.
"""

from __future__ import annotations

import asyncio
import threading

import pytest
from channels.layers import InMemoryChannelLayer, get_channel_layer

from sundry.agent.streaming import ReplyStream
from sundry.tickets import events, sendloop

TICKET = 987_654_321  # no row: the stream only sends


@pytest.fixture
def redis_layer():
    layer = get_channel_layer()
    if layer is None or isinstance(layer, InMemoryChannelLayer):
        pytest.skip("needs the Redis channel layer (set REDIS_URL)")
    return layer


def test_stream_sends_do_not_wait_for_the_push_loop_and_arrive_in_order(redis_layer):
    free = threading.Event()

    async def busy() -> None:
        free.wait(30)  # blocks the push loop's thread, as a slow Redis would

    async def scenario() -> list[tuple[str, int]]:
        channel = await redis_layer.new_channel()
        group = events.staff_group(TICKET)
        await redis_layer.group_add(group, channel)
        try:
            stream = ReplyStream(TICKET, min_interval=0)
            sendloop.submit(busy())
            try:
                # Returns while the push loop is held: the call it is made from is not.
                await asyncio.wait_for(stream.typing(), 5)
                await asyncio.wait_for(stream.written("Your parcel left the depot today.", final=True), 5)
            finally:
                free.set()
            await asyncio.to_thread(stream.finish)
            got = []
            while len(got) < 3:
                message = await asyncio.wait_for(redis_layer.receive(channel), 10)
                got.append((message["state"], message["seq"]))
            return got
        finally:
            await redis_layer.group_discard(group, channel)

    assert asyncio.run(scenario()) == [("typing", 1), ("text", 2), ("done", 3)]
