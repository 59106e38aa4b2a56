"""The channel layer Sundry runs on Redis: channels_redis's pub/sub layer, with
sockets' own channels kept in the process.

A push reaches a ticket's watchers through their group, which is one Redis
pub/sub subscription per web process; each process fans the message out to its
sockets in memory. Nothing in Sundry sends to one socket's channel directly, so
a socket's own channel needs no Redis subscription of its own: that saves a
SUBSCRIBE per connect and an UNSUBSCRIBE per disconnect, and the stock layer's
unsubscribe-on-cancel (which, with hundreds of sockets closing at once, loses
the race for its lock and logs a traceback per socket) never runs.

A `send()` to a channel of another process is therefore not delivered; groups
are the only cross-process path.
"""

from __future__ import annotations

import asyncio

from channels_redis.pubsub import RedisPubSubChannelLayer, RedisPubSubLoopLayer


class _LocalChannelsLoopLayer(RedisPubSubLoopLayer):
    async def _subscribe_to_channel(self, channel):
        self.channels[channel] = asyncio.Queue()

    async def receive(self, channel):
        queue = self.channels.get(channel)
        if queue is None:
            queue = self.channels[channel] = asyncio.Queue()
        try:
            message = await queue.get()
        except asyncio.CancelledError:
            # The consumer is ending; its channel ends with it (groups were left in disconnect).
            self.channels.pop(channel, None)
            raise
        return self.channel_layer.deserialize(message)


class ProcessFanoutChannelLayer(RedisPubSubChannelLayer):
    def _get_layer(self):
        loop = asyncio.get_running_loop()
        layer = self._layers.get(loop)
        if layer is None:
            from channels_redis.utils import _wrap_close

            layer = self._layers[loop] = _LocalChannelsLoopLayer(*self._args, **self._kwargs, channel_layer=self)
            _wrap_close(self, loop)
        return layer
