"""One listener per ticket group per process, fanning pushes out to its sockets.

With every socket in the channel layer's group, a push to 500 watchers is 500
queued messages, 500 consumer wake-ups and 500 tasks before anything is
written. Here the group has one member per process — a hub — and the hub
hands each push to its local watchers in one pass: the first one renders the
new version (shared by all, see sundry.live.panels), the rest only compose and
write. A watcher that must re-read its access first is served on its own task,
so the database never holds up the others.

Watchers implement `push_ready()` (may be served inline, without the database)
and `group_message(message)` (a coroutine handling any group message).
"""

from __future__ import annotations

import asyncio
import logging

from channels.layers import get_channel_layer

log = logging.getLogger("sundry.live")

_HUBS: "dict[tuple, Hub]" = {}


class Hub:
    def __init__(self, group: str):
        self.group = group
        self.watchers: dict = {}  # insertion-ordered set
        self.layer = get_channel_layer()
        self.ready = asyncio.get_running_loop().create_future()
        self.channel = None
        self.task = None

    async def start(self) -> None:
        try:
            self.channel = await self.layer.new_channel()
            await self.layer.group_add(self.group, self.channel)
            self.task = asyncio.ensure_future(self._listen())
            self.ready.set_result(None)
        except BaseException as exc:
            self.ready.set_exception(exc)
            raise

    async def stop(self) -> None:
        try:
            await self.ready  # a hub left while still starting stops once it has started
        except Exception:
            return
        if self.task is not None:
            self.task.cancel()
        if self.channel is not None:
            await self.layer.group_discard(self.group, self.channel)

    async def _listen(self) -> None:
        while True:
            try:
                message = await self.layer.receive(self.channel)
                await self.deliver(message)
            except asyncio.CancelledError:
                raise
            except Exception:  # a hub that died would leave its sockets on the 20 s version check alone
                log.exception("push hub for %s: a message failed; listening on", self.group)
                await asyncio.sleep(0.1)

    async def deliver(self, message: dict) -> None:
        for watcher in list(self.watchers):
            if watcher.push_ready():
                await _guarded(watcher, message)
            else:
                asyncio.ensure_future(_guarded(watcher, message))


async def _guarded(watcher, message) -> None:
    try:
        await watcher.group_message(message)
    except Exception:  # one broken socket must not stop the others' pushes
        log.warning("push to a watcher failed", exc_info=True)


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
    await asyncio.shield(hub.ready)


async def leave(group: str, watcher) -> None:
    key = (asyncio.get_running_loop(), group)
    hub = _HUBS.get(key)
    if hub is None or watcher not in hub.watchers:
        return
    del hub.watchers[watcher]
    if not hub.watchers:
        del _HUBS[key]  # a watcher joining from now on starts a new hub
        await hub.stop()
