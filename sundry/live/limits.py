"""How many sockets one user, and the whole web process, may hold open.

Counted per web process: what one user's sockets can exhaust (file
descriptors, memory, the event loop) belongs to the process serving them.
Read from settings at each connect, so a change takes effect for new sockets.
"""

from __future__ import annotations

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
