"""How many sockets one user, and the whole web process, may hold open.

Counted per web process: what one user's sockets can exhaust (file
descriptors, memory, the event loop) belongs to the process serving them.
Read from settings at each connect, so a change takes effect for new sockets.
"""

from __future__ import annotations

import json
from collections import Counter

from django.conf import settings

# Close codes a refused socket gets, after it was accepted so the browser sees them.
CLOSE_TOO_MANY_FOR_USER = 4429  # like HTTP 429; the page stops retrying and says why
CLOSE_TRY_AGAIN_LATER = 1013  # RFC 6455 "try again later": the page reconnects with backoff

_open: Counter = Counter()  # user id → open sockets in this process
_total = 0


def admit(user_id: int) -> int | None:
    """Count a new socket of this user; the close code if it is one too many, else None."""
    global _total
    if _total >= settings.LIVE_MAX_SOCKETS_PER_PROCESS:
        return CLOSE_TRY_AGAIN_LATER
    if _open[user_id] >= settings.LIVE_MAX_SOCKETS_PER_USER:
        return CLOSE_TOO_MANY_FOR_USER
    _open[user_id] += 1
    _total += 1
    return None


def release(user_id: int) -> None:
    """A socket admitted for this user closed."""
    global _total
    _open[user_id] -= 1
    if _open[user_id] <= 0:
        del _open[user_id]
    _total -= 1


def open_sockets(user_id: int | None = None) -> int:
    return _total if user_id is None else _open.get(user_id, 0)


# --- what a page may send -------------------------------------------------------------------------

# The page sends two small requests ({"type": "resync"}, {"type": "sync", "version": N}).
# Anything longer or deeper is not from it; it is refused before it is parsed, so a
# 10,000-deep or megabyte frame costs a length check and one pass, never the parser's recursion.
MAX_FRAME_CHARS = 1024
MAX_FRAME_DEPTH = 4
CLOSE_FRAME_INVALID = 1007  # RFC 6455: data inconsistent with the message's type
CLOSE_FRAME_TOO_BIG = 1009  # RFC 6455: message too big to process


class FrameRefused(ValueError):
    def __init__(self, code: int, reason: str):
        super().__init__(reason)
        self.code = code


def _depth(text: str) -> int:
    """The deepest nesting of objects and arrays in JSON text, strings skipped."""
    depth = deepest = 0
    in_string = escaped = False
    for ch in text:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif ch in "]}":
            depth -= 1
    return deepest


def parse_frame(text: str | None, data: bytes | None = None) -> dict:
    """A page's request as a dict with a string `type`; FrameRefused with a close code and a reason."""
    if data is not None and text is None:
        raise FrameRefused(CLOSE_FRAME_INVALID, "Binary frames are not accepted; send JSON text.")
    text = text or ""
    if len(text) > MAX_FRAME_CHARS:
        raise FrameRefused(CLOSE_FRAME_TOO_BIG, f"Frames are at most {MAX_FRAME_CHARS} characters.")
    if _depth(text) > MAX_FRAME_DEPTH:
        raise FrameRefused(CLOSE_FRAME_INVALID, f"Frames nest at most {MAX_FRAME_DEPTH} levels deep.")
    try:
        message = json.loads(text, parse_constant=_no_constant)
    except ValueError as exc:
        raise FrameRefused(CLOSE_FRAME_INVALID, f"Frames are JSON objects: {str(exc)[:80]}.") from None
    if not isinstance(message, dict) or not isinstance(message.get("type"), str):
        raise FrameRefused(CLOSE_FRAME_INVALID, 'Frames are JSON objects with a "type" string.')
    return message


def _no_constant(name: str):
    raise ValueError(f"{name} is not JSON")
