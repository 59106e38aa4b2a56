"""Tell watchers a ticket changed, after the change commits.

The database is the truth: a push only carries the ticket's version and a
hint; clients that miss one resync from a full snapshot.

Pushes are sent from synchronous code (views, the agent loop, Celery tasks).
On the Redis pub/sub layer a group message is one PUBLISH, so it is sent with
a plain pooled Redis client — no event loop and no new connection per push.
Any other layer gets the message through its own `group_send`.
"""

from __future__ import annotations

import logging
import threading

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.conf import settings
from django.db import transaction

from sundry.tickets.models import Ticket

log = logging.getLogger("sundry.live")

PUBSUB_BACKEND = "sundry.live.layer.ProcessFanoutChannelLayer"


def staff_group(ticket_id: int) -> str:
    return f"ticket-{ticket_id}-staff"


def customer_group(ticket_id: int) -> str:
    return f"ticket-{ticket_id}-customer"


def user_group(user_id: int) -> str:
    """Every socket a user has open, whatever it watches: logout closes them all."""
    return f"user-{user_id}"


# --- sending ---------------------------------------------------------------------------------

_clients: dict[str, object] = {}
_clients_lock = threading.Lock()


def _redis_for(host: dict):
    """One pooled client per Redis host per process (redis-py re-opens its pool after a fork)."""
    import redis

    address = host["address"]
    with _clients_lock:
        client = _clients.get(address)
        if client is None:
            # A push must never hang the request or task that made the change: bounded connects and reads.
            options = {"socket_connect_timeout": 2.0, "socket_timeout": 5.0}
            options.update({k: v for k, v in host.items() if k in ("socket_timeout", "socket_connect_timeout")})
            client = _clients[address] = redis.Redis.from_url(address, **options)
        return client


def _publish(layer, groups: list[str], message: dict) -> None:
    """What `RedisPubSubChannelLayer.group_send` does, for each group, in one round trip per host."""
    from channels_redis.utils import _consistent_hash, decode_hosts

    config = settings.CHANNEL_LAYERS["default"].get("CONFIG", {})
    hosts = decode_hosts(config.get("hosts"))
    prefix = config.get("prefix", "asgi")
    data = layer.serialize(message)
    by_host: dict[int, list[str]] = {}
    for group in groups:
        channel = f"{prefix}__group__{group}"  # the layer's own name for a group's channel
        by_host.setdefault(_consistent_hash(channel, len(hosts)), []).append(channel)
    for index, channels in by_host.items():
        pipe = _redis_for(hosts[index]).pipeline(transaction=False)
        for channel in channels:
            pipe.publish(channel, data)
        pipe.execute()


def group_send(groups: list[str], message: dict) -> None:
    """Send one message to several groups from synchronous code. A lost push is repaired by resync."""
    layer = get_channel_layer()
    if layer is None:
        return
    try:
        if settings.CHANNEL_LAYERS["default"]["BACKEND"] == PUBSUB_BACKEND:
            _publish(layer, groups, message)
        else:
            for group in groups:
                async_to_sync(layer.group_send)(group, message)
    except Exception:
        log.warning("push to %s failed", ", ".join(groups), exc_info=True)


# --- what is sent ------------------------------------------------------------------------------


def _push(ticket_id: int, version: int | None = None) -> None:
    if version is None:
        version = Ticket.objects.filter(pk=ticket_id).values_list("version", flat=True).first()
        if version is None:
            return
    group_send([staff_group(ticket_id), customer_group(ticket_id)],
               {"type": "ticket.changed", "ticket": ticket_id, "version": version})


def ticket_changed(ticket_id: int) -> None:
    """Push the ticket's version once the current transaction commits.

    A transaction that changes a ticket many times (an agent step: call turn,
    result turn, ledger, money) pushes it once: the push reads the version
    after the commit. If the savepoint that queued the push rolls back, the push
    goes with it; the page's periodic version check repairs that rare case.
    """
    conn = transaction.get_connection()
    if conn.in_atomic_block and any(getattr(f, "pushes_ticket", None) == ticket_id for _, f, _ in conn.run_on_commit):
        return

    def push() -> None:
        _push(ticket_id)

    push.pushes_ticket = ticket_id
    transaction.on_commit(push)


def user_sockets_close(user_id: int) -> None:
    """Close every open socket of this user (called at logout)."""
    group_send([user_group(user_id)], {"type": "session.ended"})


def access_changed(*, user_ids=(), customer_tickets=(), tickets=()) -> None:
    """After commit, make these sockets re-read who may watch what: a user's sockets,
    the customer sockets of some tickets, or every socket of some tickets."""
    groups = [user_group(u) for u in user_ids if u]
    groups += [customer_group(t) for t in customer_tickets if t]
    for t in tickets:
        groups += [staff_group(t), customer_group(t)]
    if groups:
        transaction.on_commit(lambda: group_send(groups, {"type": "access.changed"}))
