"""A step's reply as it is written, for the ticket's watchers (live event `reply.stream`).

The gateway calls `typing()` before a streamed request goes out and `written()`
with the text so far as it arrives; what is sent is only what `provisional`
allows before the reply check (whole sentences, each checked), at most every `MIN_INTERVAL` seconds (and the
whole allowed text once the model has finished). The step calls `finish()`
once it has committed: "done", with the stored reply's turn number when one
was posted (a reply, or the words written with tool calls), so the page swaps
the provisional text for the stored turn, or takes it away (a held reply, calls
with no words or held ones, an error).

Provisional text is never stored: the turn the step stores is the complete
reply after the check, pushed like any other change.
"""

from __future__ import annotations

import secrets
import time

from sundry.agent.guards import provisional
from sundry.tickets.events import areply_stream, reply_stream, reply_stream_message, sent_by

# Sends per second are bounded: a fast model writes dozens of tokens a second, and every
# watcher's page re-renders the text on each.
MIN_INTERVAL = 0.15


class ReplyStream:
    def __init__(self, ticket_id: int, *, min_interval: float = MIN_INTERVAL):
        self.ticket_id = ticket_id
        self.stream = secrets.token_hex(6)  # one per step: the page tells a new step's stream from the last
        self.min_interval = min_interval
        self.known: frozenset[str] = frozenset()  # identifiers the request showed (set by the caller)
        # Judges the text up to a sentence's end as the final check would (claims, internal text); set by
        # the caller.
        self.sentence_ok = None
        # Whether the text so far is still the start of a reply sent before, which the check may ask for
        # again: its sentences wait to show with one that moves on. Set by the caller.
        self.waits = None
        self._judged: dict[str, bool] = {}  # each prefix is judged once, however often the text grows
        self.started = False
        self.showed_text = False  # any text reached the watchers (not only "is writing…")
        self.withdrawn = False  # text they were shown was taken away by a new request's "is writing…"
        self.posted_turn: int | None = None  # set by the step when its reply is stored
        self.seq = 0
        self._shown = ""
        self._sent_at = 0.0
        self._last = None  # the last message handed to the push loop (`areply_stream`), not waited for

    def _message(self, state: str, text: str = "", turn: int | None = None) -> dict:
        self.seq += 1
        return reply_stream_message(self.ticket_id, self.stream, self.seq, state, text, turn)

    async def typing(self) -> None:
        """A request is going out (the first, or a re-ask): nothing written yet."""
        self.started = True
        self.withdrawn = self.withdrawn or bool(self._shown.strip())
        self._shown, self._sent_at = "", time.monotonic()
        self._last = await areply_stream(self.ticket_id, self._message("typing"), after=self._last)

    async def written(self, text: str, *, final: bool = False) -> None:
        shown = provisional.shown(text, known=self.known, final=final, sentence_ok=self._ok, waits=self.waits)
        if shown == self._shown:
            return
        now = time.monotonic()
        if not final and now - self._sent_at < self.min_interval:
            return
        self._shown, self._sent_at = shown, now
        self.showed_text = self.showed_text or bool(shown.strip())
        self._last = await areply_stream(self.ticket_id, self._message("text", shown), after=self._last)

    @property
    def shown_text(self) -> str:
        """The text the watchers were last sent (what their screens show now)."""
        return self._shown

    def _ok(self, upto: str) -> bool:
        if self.sentence_ok is None:
            return True
        if upto not in self._judged:
            self._judged[upto] = self.sentence_ok(upto)
        return self._judged[upto]

    def finish(self) -> None:
        """After the step's commit: the stored reply's turn, or None. Nothing if nothing streamed."""
        if self.started:
            sent_by(self._last)  # "done" after the text the watchers were sent
            reply_stream(self.ticket_id, self._message("done", turn=self.posted_turn))
