"""Attach stored files to a message turn, and tell the agent they arrived.

Files are written to storage before the message's transaction (no storage
call under the ticket's row lock) and removed again if the message is not
stored after all (a refusal, a failure, or a resend of a message already
stored). Inside the transaction the rows, the message turn's list of its
files (which the pages render) and one event turn are written together.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

from sundry.attachments import storage
from sundry.attachments.models import Attachment
from sundry.attachments.prepare import Prepared, human_size
from sundry.attachments.sniff import EXTENSIONS, LABELS
from sundry.tickets.models import Ticket, Turn
from sundry.tickets.services import turn_append

# The agent's own tool for handing something to people (sundry/agent/tools/follow_up.py).
FOLLOW_UP_TOOL = "request_staff_follow_up"


@dataclass
class Stored:
    prepared: Prepared
    key: str
    thumb_key: str = ""
    used: bool = False


@contextlib.contextmanager
def stored(ticket: Ticket, prepared: list[Prepared]):
    """Save the files; yield them; afterwards delete every one no row took (whatever happened)."""
    saved: list[Stored] = []
    try:
        for p in prepared:
            item = Stored(p, storage.save(storage.new_key(ticket.pk, EXTENSIONS[p.content_type]), p.data))
            saved.append(item)
            if p.thumb:
                item.thumb_key = storage.save(storage.new_key(ticket.pk, EXTENSIONS[p.thumb_type], "-thumb"), p.thumb)
        yield saved
    finally:
        storage.delete(k for s in saved if not s.used for k in (s.key, s.thumb_key))


def describe(a: Attachment) -> str:
    pixels = f", {a.width}×{a.height} pixels" if a.width else ""
    return f"“{a.name}” ({LABELS.get(a.content_type, a.content_type)}, {human_size(a.size)}{pixels})"


def agent_notice(turn: Turn, rows: list[Attachment]) -> str:
    """What the agent reads: that files came, what they are — never their content."""
    files = "; ".join(describe(a) for a in rows)
    count = "a file" if len(rows) == 1 else f"{len(rows)} files"
    if turn.author == Turn.Author.CUSTOMER:
        return (
            f"The customer attached {count} to their message (turn {turn.number}): {files}. You cannot see "
            f"what a file shows; do not guess or describe it. If it matters to the case (a photo of damage, "
            f"a receipt, a label), tell the customer a member of staff will look at it and call "
            f"{FOLLOW_UP_TOOL} naming the file."
        )
    return f"Staff attached {count} to their reply (turn {turn.number}): {files}. The customer can open it."


def attach(*, ticket: Ticket, turn: Turn, files: list[Stored], user_id: int | None = None) -> list[Attachment]:
    """In the caller's transaction, after `turn` (a message) was appended."""
    if not files:
        return []
    rows = []
    for s in files:
        p = s.prepared
        rows.append(
            Attachment.objects.create(
                ticket=ticket,
                turn=turn,
                uploaded_by_id=user_id,
                name=p.name,
                content_type=p.content_type,
                size=len(p.data),
                original_size=p.original_size,
                width=p.width,
                height=p.height,
                key=s.key,
                thumb_key=s.thumb_key,
                sha256=p.sha256,
            )
        )
    # The turn lists its files, so the conversation renders them without another query.
    turn.payload = {
        **(turn.payload or {}),
        "attachments": [
            {"id": a.pk, "name": a.name, "type": a.content_type, "size": human_size(a.size), "thumb": bool(a.thumb_key)}
            for a in rows
        ],
    }
    Turn.objects.filter(pk=turn.pk).update(payload=turn.payload)
    event = {"attachments_of": turn.number}
    if turn.payload.get("by"):
        event["by"] = turn.payload["by"]  # the desk shows who, as on the reply itself
    turn_append(ticket=ticket, author=turn.author, kind=Turn.Kind.EVENT, text=agent_notice(turn, rows), payload=event)
    for s in files:
        s.used = True
    return rows


def default_text(prepared: list[Prepared]) -> str:
    """A message with files and no words still says something in the conversation."""
    return "Attached " + ", ".join(p.name for p in prepared) + "."
