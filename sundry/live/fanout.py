"""One member per ticket group per web process, handing each push to the process's watchers.

Channels gives every consumer its own pass through `dispatch` for each group
message, and that pass hops to a worker thread to close stale database
connections before the handler runs. For a push to hundreds of watchers of one
ticket those hops queue one behind another on the same thread: measured with
the push benchmark (docs/benchmarks.md), 500 watchers of one ticket waited
several times longer than with one group member per process. So the ticket's
group has one member here, joined and read through the channel layer's public
API (`new_channel`, `group_add`, `receive`, `group_discard`), and it calls each
local watcher's handler itself. Every database touch of a watcher already goes
through `database_sync_to_async`, which closes stale connections on its own.

A watcher implements `ready()` (True when it can take a push now without the
database or waiting on itself) and the handler for each message type its
ticket group carries. The first ready watcher renders the new version (shared
by the rest, see sundry.live.panels); a watcher that is not ready is served on
a task of its own, held here until it ends.
"""

from __future__ import annotations

import asyncio
import logging

from channels.layers import get_channel_layer

log = logging.getLogger("sundry.live")

HANDLERS = {
    "ticket.changed": "ticket_changed",
    "access.changed": "access_changed",
    "reply.stream": "reply_stream",  # a reply as the agent writes it (sundry.tickets.events.REPLY_STREAM)
    "presence.changed": "presence_changed",  # who else is on the ticket (sundry.live.presence)
}


class Hub:
    def __init__(self, group: str):
        self.group = group
        self.layer = get_channel_layer()
        self.watchers: dict = {}  # insertion-ordered set
        self.listener: asyncio.Task | None = None
        self.serving: set[asyncio.Task] = set()  # watchers served apart, held until done
        self.channel: str | None = None
        self.started = asyncio.get_running_loop().create_future()

    async def start(self) -> None:
        try:
            self.channel = await self.layer.new_channel()
            await self.layer.group_add(self.group, self.channel)
            self.listener = asyncio.ensure_future(self._listen())
            self.started.set_result(None)
        except BaseException as exc:
            self.started.set_exception(exc)
            raise

    async def stop(self) -> None:
        """Leave the group. Watchers still being served apart finish on their own."""
        try:
            await self.started
        except Exception:
            return
        self.listener.cancel()  # the layer unsubscribes a channel whose receive is cancelled
        await self.layer.group_discard(self.group, self.channel)

    async def _listen(self) -> None:
        while True:
            try:
                message = await self.layer.receive(self.channel)
            except asyncio.CancelledError:
                raise
            except Exception:  # a hub that died would leave its sockets on the pages' version check alone
                log.exception("push hub for %s: receiving failed; listening on", self.group)
                await asyncio.sleep(0.1)
                continue
            name = HANDLERS.get(message.get("type"))
            if name is None:
                log.warning("push hub for %s: no handler for %r", self.group, message.get("type"))
                continue
            for watcher in list(self.watchers):
                if watcher.ready():
                    await _serve(watcher, name, message)
                else:
                    task = asyncio.ensure_future(_serve(watcher, name, message))
                    self.serving.add(task)
                    task.add_done_callback(self.serving.discard)


async def _serve(watcher, name: str, message: dict) -> None:
    try:
        await getattr(watcher, name)(message)
    except Exception:  # one broken socket must not stop the others' pushes
        log.warning("push to a watcher of %s failed", message.get("type"), exc_info=True)


_HUBS: "dict[tuple, Hub]" = {}
_STOPPING: set[asyncio.Task] = set()  # hubs leaving their group, held until done


async def join(group: str, watcher) -> None:
    key = (asyncio.get_running_loop(), group)
    hub = _HUBS.get(key)
    if hub is None:
        hub = _HUBS[key] = Hub(group)
        hub.watchers[watcher] = None
        try:
            await hub.start()
        except BaseException:
            _HUBS.pop(key, None)
            raise
        return
    hub.watchers[watcher] = None
    await asyncio.shield(hub.started)


async def leave(group: str, watcher) -> None:
    key = (asyncio.get_running_loop(), group)
    hub = _HUBS.get(key)
    if hub is None or watcher not in hub.watchers:
        return
    del hub.watchers[watcher]
    if not hub.watchers:
        del _HUBS[key]  # a watcher joining from now on starts a new hub
        current = asyncio.current_task()
        if current is not hub.listener and current not in hub.serving:
            await hub.stop()
            return
        task = asyncio.ensure_future(hub.stop())  # not from inside the listener it cancels
        _STOPPING.add(task)
        task.add_done_callback(_STOPPING.discard)


def hubs_of(group: str) -> list[Hub]:
    """This process's hubs for a group (one per event loop that has watchers of it)."""
    return [hub for (_, g), hub in _HUBS.items() if g == group]
