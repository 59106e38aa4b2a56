"""Tell watchers a ticket changed, after the change commits.

The database is the truth: a push only carries the ticket's version and a
hint; clients that miss one resync from a full snapshot.

Pushes are sent from synchronous code (views, the agent loop, Celery tasks)
through the channel layer's `group_send`; over Redis on the process's one push
loop (`sendloop`), which keeps its connection between pushes.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import hashlib
import logging

from asgiref.sync import async_to_sync
from channels.layers import InMemoryChannelLayer, get_channel_layer
from django.db import transaction

from sundry.tickets import sendloop
from sundry.tickets.models import Ticket

log = logging.getLogger("sundry.live")


def staff_group(ticket_id: int) -> str:
    return f"ticket-{ticket_id}-staff"


def customer_group(ticket_id: int) -> str:
    return f"ticket-{ticket_id}-customer"


# The desk's open queue pages: every ticket change reaches them (each page re-reads its own view).
QUEUE_GROUP = "desk-queue"


def user_group(user_id: int) -> str:
    """Every socket a user has open, whatever it watches: logout closes them all."""
    return f"user-{user_id}"


def session_tag(session_key: str) -> str:
    """Names a session in a group message without carrying its key through Redis."""
    return hashlib.blake2b(session_key.encode(), digest_size=12).hexdigest()


# --- sending ---------------------------------------------------------------------------------

# A push never holds its caller longer than this (Redis down: the page's version check repairs it).
SEND_TIMEOUT = 5.0


async def _send_all(layer, groups: list[str], message: dict) -> None:
    for group in groups:
        await layer.group_send(group, message)


def group_send(groups: list[str], message: dict) -> None:
    """Send one message to several groups from synchronous code. A lost push is repaired by resync."""
    layer = get_channel_layer()
    if layer is None:
        return
    try:
        if isinstance(layer, InMemoryChannelLayer):  # its queues belong to the loop that reads them
            async_to_sync(_send_all)(layer, groups, message)
        else:
            sendloop.run(_send_all(layer, groups, message), timeout=SEND_TIMEOUT)
    except Exception:
        log.warning("push to %s failed", ", ".join(groups), exc_info=True)


# --- what is sent ------------------------------------------------------------------------------


def _push(ticket_id: int, version: int | None = None) -> None:
    if version is None:
        version = Ticket.objects.filter(pk=ticket_id).values_list("version", flat=True).first()
        if version is None:
            return
    group_send(
        [staff_group(ticket_id), customer_group(ticket_id), QUEUE_GROUP],
        {"type": "ticket.changed", "ticket": ticket_id, "version": version},
    )


def ticket_changed(ticket_id: int, version: int | None = None) -> None:
    """Push the ticket's version once the current transaction commits.

    A transaction that changes a ticket many times (an agent step: call turn,
    result turn, ledger, money) pushes it once. `version`: the version the
    caller's write left (its UPDATE returned it); the push then sends the
    transaction's last such version rather than reading it again after the
    commit. A write that does not know it makes the push read it. If the
    savepoint that queued the push rolls back, the push goes with it; the
    page's periodic version check repairs that rare case.
    """
    queued = queued_push(ticket_id)
    if queued is not None:
        queued.version = version  # under the transaction's row lock, the latest write's (None: read it)
        return

    def push() -> None:
        _push(ticket_id, push.version)

    push.pushes_ticket, push.version = ticket_id, version
    transaction.on_commit(push)


def queued_push(ticket_id: int):
    """The push this transaction has queued for the ticket (so its writes already moved the
    version and hold the row lock), or None."""
    conn = transaction.get_connection()
    if not conn.in_atomic_block:
        return None
    return next((f for _, f, _ in conn.run_on_commit if getattr(f, "pushes_ticket", None) == ticket_id), None)


# --- a reply as it is written ------------------------------------------------------------------

# The group message type of a streamed reply (handled by the consumers' `reply_stream`): each
# carries the ticket, the stream (one per agent step), a sequence number, a state — "typing"
# before the first token, "text" with the provisional text so far, "done" once the step has
# committed, with the stored reply's turn number or None — and the text.
REPLY_STREAM = "reply.stream"


def reply_stream_message(
    ticket_id: int, stream: str, seq: int, state: str, text: str = "", turn: int | None = None
) -> dict:
    return {
        "type": REPLY_STREAM,
        "ticket": ticket_id,
        "stream": stream,
        "seq": seq,
        "state": state,
        "text": text,
        "turn": turn,
    }


# The streamed reply's messages are handed to the push loop and not waited for (False: each waited
# for, as before): the model call they are sent from goes on reading the reply meanwhile.
STREAM_UNAWAITED = True


async def areply_stream(
    ticket_id: int, message: dict, after: concurrent.futures.Future | None = None
) -> concurrent.futures.Future | None:
    """From a model call streaming on an event loop. Not after a commit: provisional text is
    not the database's; a lost one is replaced by the stored turn anyway.

    Sent on the process's push loop as every other push is sent (`group_send`), not on the calling
    loop: that loop belongs to the gateway's thread and outlives no call it could tidy up after
    (the channel layer keeps a connection per loop, flushed only when the loop is closed). Over
    Redis it is handed over and not waited for, sent once `after` (the stream's previous message)
    has gone, so a stream's messages leave in order; the returned future is this one's. The
    in-memory layer's queues belong to the loop that reads them: sent from a thread, waited for."""
    layer = get_channel_layer()
    if STREAM_UNAWAITED and layer is not None and not isinstance(layer, InMemoryChannelLayer):
        groups = [staff_group(ticket_id), customer_group(ticket_id)]
        return sendloop.submit(_in_turn(after, layer, groups, message))
    await asyncio.to_thread(reply_stream, ticket_id, message)
    return None


async def _in_turn(after: concurrent.futures.Future | None, layer, groups: list[str], message: dict) -> None:
    if after is not None:
        await asyncio.wait([asyncio.wrap_future(after)])  # how it ended is its own to log
    try:
        await asyncio.wait_for(_send_all(layer, groups, message), SEND_TIMEOUT)
    except Exception:
        log.warning("push to %s failed", ", ".join(groups), exc_info=True)


def sent_by(future: concurrent.futures.Future | None, timeout: float = SEND_TIMEOUT) -> None:
    """Wait until a message `areply_stream` handed over has gone (or failed, or `timeout` passed)."""
    if future is not None:
        concurrent.futures.wait([future], timeout)


def reply_stream(ticket_id: int, message: dict) -> None:
    """From synchronous code (the step's end)."""
    group_send([staff_group(ticket_id), customer_group(ticket_id)], message)


def ticket_created(ticket_id: int) -> None:
    """Tell the desk's open queues of a new ticket once it commits (nobody watches its own groups yet)."""
    transaction.on_commit(
        lambda: group_send([QUEUE_GROUP], {"type": "ticket.changed", "ticket": ticket_id, "version": 0})
    )


def user_sockets_close(user_id: int, session_key: str | None) -> None:
    """Close the sockets this user opened with this session (called at logout); the
    user's other sockets re-read their access (sessions elsewhere may still be valid)."""
    group_send(
        [user_group(user_id)], {"type": "session.ended", "session": session_tag(session_key) if session_key else None}
    )


def access_changed(*, user_ids=(), customer_tickets=(), tickets=()) -> None:
    """After commit, make these sockets re-read who may watch what: a user's sockets,
    the customer sockets of some tickets, or every socket of some tickets."""
    groups = [user_group(u) for u in user_ids if u]
    groups += [customer_group(t) for t in customer_tickets if t]
    for t in tickets:
        groups += [staff_group(t), customer_group(t)]
    if groups:
        transaction.on_commit(lambda: group_send(groups, {"type": "access.changed"}))
