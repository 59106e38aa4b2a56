"""When a run must stop instead of looping: the same failing call again and again.

Pure: the ticket's turns (as the step read them) and a call, in; a count out.
"""

from __future__ import annotations

import json

from sundry.context.lanes import TurnData

# The third identical failing call ends the run with an attention flag.
REPEAT_LIMIT = 3
_FAILED = ("rejection", "error")


def _same(a, b) -> bool:
    return json.dumps(a, sort_keys=True, default=str) == json.dumps(b, sort_keys=True, default=str)


def earlier_failures(turns: list[TurnData], name: str, arguments) -> int:
    """How many times a call with this tool and these arguments was rejected or failed, counted back
    to the last customer message or staff note (new input gives the model a fresh start)."""
    n = 0
    for t in reversed(turns):
        if (t.author == "customer" and t.kind == "message") or t.kind == "note":
            break
        p = t.payload or {}
        if t.kind in _FAILED and p.get("name") == name and _same(p.get("arguments", {}), arguments):
            n += 1
    return n
