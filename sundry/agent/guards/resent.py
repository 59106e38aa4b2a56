"""A model reply already sent to another customer message: asked again once, and never a third copy.

Real-model run 19 posted one reply word for word to seven different customer messages. Whether a
repeat is junk or the right answer again ("Where is my parcel?", later "Is it still in transit?") is
not read from its words: the policy only counts. A plain reply that the check would post and that is
word for word (case and punctuation aside, `replycheck.repeats`) one the model already sent to a
customer message with other words is asked for again once, with a notice that it was already sent —
not quoting it (a small model copies back what it is shown, `render.held_notice`). Written again, it is
posted if the page shows it only once so far (the same answer to the same question is right), and held
— the customer gets Sundry's hand-off, as for any held reply — if the page shows it twice already.

Not judged: texts Sundry renders itself (its hand-off, the same every time by design), the offline
agent's replies (code's, the same when asked again: `answer.obtain` skips them), the words a model writes
with its calls (never asked for again: that would ask for the calls again), and a reply written after the
model's own calls for the customer's latest message (`Sent.acted`: it tells what they found — "Please
check the card." after each card, the same parcel looked up again). A model that calls a tool and then
writes the same reply escapes the policy; the scorecard still counts what reached the page.
"""

from __future__ import annotations

import dataclasses

from sundry.agent.guards import replycheck
from sundry.context.render import HANDED_OFF

# Off: a reply sent before is posted as any other and streams as it is written (the negative control;
# the scorecard still counts the copies that reached the page).
ASK_AGAIN = True
# Copies of one model reply the customer's page may show. The second needs the model to write it again
# when asked; a third is held.
MOST_COPIES = 2
# Off: a reply written after the model's own calls for the customer's latest message is judged as any other
# (the negative control of `Sent.acted`).
AFTER_CALLS_EXEMPT = True
REASON = "repeat"
NOTICE = (
    "Your last reply was word for word one already sent to the customer for an earlier message. It was not "
    "sent again. Answer the customer's latest message."
)


def _customer_message(t) -> bool:
    return t.author == "customer" and t.kind == "message"


def _model_replies(turns) -> list[tuple[str, str]]:
    """(reply, the words of the customer message it followed) for each model reply the customer read."""
    out, asked = [], ""
    for t in turns:
        if t.kind != "message":
            continue
        if _customer_message(t):
            asked = " ".join(replycheck.plain_words(t.text))
        elif t.author == "agent" and (t.text or "").strip():
            if (t.payload or {}).get("via") == HANDED_OFF:
                continue  # Sundry's own words, the same every time by design: not a model repeat
            out.append((t.text, asked))
    return out


@dataclasses.dataclass(frozen=True)
class Sent:
    """What the ticket's page shows of the model's replies (since the summary), for the policy."""

    others: list[str]  # replies to customer messages with other words than the latest's
    every: list[str]  # every model reply
    # The model called tools since the customer's latest message (a result, a card, a refusal came back):
    # its reply tells what that work found, which may well read as last time's ("Please check the card.",
    # the same parcel looked up again). The policy is for a model answering without doing anything.
    acted: bool = False

    @classmethod
    def of(cls, turns) -> Sent:
        replies = _model_replies(turns)
        last = next((i for i in range(len(turns) - 1, -1, -1) if _customer_message(turns[i])), -1)
        words = " ".join(replycheck.plain_words(turns[last].text)) if last >= 0 else ""
        acted = AFTER_CALLS_EXEMPT and any(t.kind == "tool_call" for t in turns[last + 1 :])
        return cls(others=[r for r, to in replies if to != words], every=[r for r, _ in replies], acted=acted)

    def copies(self, text: str) -> int:
        words = replycheck.plain_words(text)
        return sum(1 for r in self.every if replycheck.plain_words(r) == words)

    def again(self, text: str) -> bool:
        """`text` is a reply already sent to another message (`replycheck.repeats`), written without a call
        since the customer's latest message."""
        return not self.acted and replycheck.repeats(text, self.others)

    def so_far(self, text: str) -> bool:
        """`text`, the start of a streamed reply, is so far the start of a reply sent to another message:
        the stream waits to show it until it says something of its own (else it may be asked again)."""
        words = replycheck.plain_words(text)
        return (
            bool(words)
            and not self.acted
            and any(
                len(w := replycheck.plain_words(e)) >= replycheck.ECHO_MIN_WORDS and w[: len(words)] == words
                for e in self.others
            )
        )


def judged(verdict: replycheck.ReplyVerdict, sent: Sent, retried: bool) -> replycheck.ReplyVerdict:
    """A verdict to post a reply already sent to another message: the first answer is asked again; the
    answer asked again is posted as a second copy, held as a third."""
    if not ASK_AGAIN or verdict.action != replycheck.POST or not sent.again(verdict.text):
        return verdict
    if not retried:
        return dataclasses.replace(verdict, action=replycheck.RETRY, reasons=[REASON], prompt=NOTICE)
    if sent.copies(verdict.text) < MOST_COPIES:
        return verdict
    return dataclasses.replace(verdict, action=replycheck.HOLD, reasons=[REASON], prompt=NOTICE)


def only_repeat(verdict: replycheck.ReplyVerdict | None) -> bool:
    """The verdict asks again for nothing but a repeat."""
    return verdict is not None and verdict.action == replycheck.RETRY and verdict.reasons == [REASON]


def unasked(verdict: replycheck.ReplyVerdict, sent: Sent) -> None:
    """A first answer's repeat that could not be asked again (no time left in the step, the re-ask
    failed): posted while the page shows it only once, held from the third copy on."""
    if sent.copies(verdict.text) >= MOST_COPIES:
        verdict.action = replycheck.HOLD
    else:
        verdict.action, verdict.reasons, verdict.prompt = replycheck.POST, [], ""
