"""Whether the page that sent a request holds an open live socket.

The page's script (static/sundry-live.js) sends `X-Sundry-Live: 1` on its htmx requests while its
socket is open. Such a page gets the panels a write changes in the push the commit sends, so a
view may answer it with the status line alone; a page without (the socket down or not yet open,
no JavaScript) is sent them back. A lost push is repaired by the page's sync within 20 s.
"""

from __future__ import annotations

LIVE_HEADER = "X-Sundry-Live"


def socket_is_live(request) -> bool:
    return request.headers.get(LIVE_HEADER) == "1"
