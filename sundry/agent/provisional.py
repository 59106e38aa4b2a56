"""What of a reply still being written may be shown before the reply check has read it. Pure.

A streamed reply reaches the customer page and the desk as provisional text,
replaced by the stored turn once the step commits (or taken away if the check
holds the reply). The check (`replycheck`) only runs on the whole reply, so
what is shown meanwhile is cut conservatively, before the first sign of
anything the check would remove or hold:

- tool protocol or JSON of any kind (`<`, `{`, `[`, a code fence) — a customer
  reply has no use for them, and a call written as text starts with one;
- Sundry's own notices ("ERROR (guard: …");
- an identifier the request never showed (an invented refund reference);

and, until the reply is complete, the last word, which may still grow into one
of those.
"""

from __future__ import annotations

import re

from sundry.agent.replycheck import id_tokens

# The first character of markup, JSON, a fence or a bracketed notice; or a guard's error text.
_PROTOCOL = re.compile(r"[<{\[`]|ERROR \(|\|>")
_WORD = re.compile(r"\S+")


def shown(text: str, *, known: set[str] | frozenset[str] = frozenset(), final: bool = False) -> str:
    """The prefix of `text` that may be shown now (possibly empty)."""
    text = text or ""
    cut = _PROTOCOL.search(text)
    if cut is not None:
        text, final = text[:cut.start()], True  # nothing after the cut counts, complete or not
    if not final:
        # The last word may be unfinished (a half-typed order ID on its way to an invented reference).
        if text and not text[-1].isspace():
            text = text[:max(text.rfind(" "), text.rfind("\n")) + 1]
    for word in _WORD.finditer(text):
        if id_tokens(word.group(0)) - set(known):
            text = text[:word.start()]
            break
    return text.rstrip()
