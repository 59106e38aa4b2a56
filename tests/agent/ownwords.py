"""What the reply check does with a generated wording of Sundry's own words, as the readings' tests ask of each.

A wording is asked again (for the reason expected), then held; refused as a tool's customer text
(`replycheck.copied`); and, when `counted` names one, tallied by the scorecard under it. `missed` lists the
wordings that fail any of these, with what went wrong.
"""

from __future__ import annotations

from collections.abc import Callable

from sundry.agent.guards import replycheck
from sundry.evals import scorecard


def missed(
    texts, *, known, reasons_ok: Callable[[list[str]], bool] = lambda r: r == ["notice"], counted: str = ""
) -> list[tuple]:
    out = []
    for text in texts:
        first = replycheck.check_reply(text, known=known)
        if first.action != replycheck.RETRY or not reasons_ok(first.reasons):
            out.append((text, first.action, first.reasons))
        elif replycheck.check_reply(text, known=known, retried=True).action != replycheck.HOLD:
            out.append((text, "not held"))
        elif replycheck.copied(text) != "notice":
            out.append((text, "sent by reply_to_customer"))
        elif counted and counted not in scorecard.not_for_customer(text):
            out.append((text, "not counted"))
    return out
