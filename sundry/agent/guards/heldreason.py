"""What people read of why a call was held: the guard's reason without what it tells the model.

A hold's reason is written for the model, which reads it as the call's result: why the call was
held, then what to do next ("Do not retry it; tell the customer it is awaiting approval."). Staff
deciding the hold read the why alone. Every hold the guards make starts its directions to the
model with `TO_MODEL` (tests/tickets/test_card_wording.py reads guards.py to hold them to it).
"""

from __future__ import annotations

import re

TO_MODEL = "Do not retry it"

# "…; the call is held." / "… . The call is held.": the card says it is held already.
_HELD = re.compile(r"\s*(?:;\s*the call is held|\.\s*the call is held)\.?\s*$", re.IGNORECASE)


def for_people(reason: str) -> str:
    """The reason up to its directions to the model, as one or more whole sentences."""
    why = (reason or "").split(TO_MODEL, 1)[0].strip()
    why = _HELD.sub("", why).rstrip(" ;,:")
    return why + ("" if not why or why.endswith((".", "!", "?", "…")) else ".")
