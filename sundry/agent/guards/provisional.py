"""What of a reply still being written may be shown before the reply check has read it. Pure.

A streamed reply reaches the customer page and the desk as provisional text,
replaced by the stored turn once the step commits (or taken away if the check
holds the reply). The check (`replycheck`, `replyclaims`) runs on the whole
reply; meanwhile text is released a sentence at a time, each sentence only once
it is complete and passes what the check would ask of it:

- no tool protocol or JSON of any kind (`<`, `{`, `[`, a code fence) — a
  customer reply has no use for them, and a call written as text starts with
  one — nor Sundry's own notices ("ERROR (guard: …"): the text is cut before
  their first character, and the words before the cut show only up to their
  last complete sentence ("…by calling the" never shows on its own);
- no identifier the request never showed (an invented refund reference);
- whatever else the caller's `sentence_ok` judges (a claim that an action was
  done which the records do not show, a quote of internal-only text) — given
  the text up to the sentence's end, not the sentence alone: "It's done." is a
  claim of the action an earlier sentence named, and "Yes." answers the
  customer's question only as the reply's own sentence, so each prefix is judged
  as the final check would judge a reply that ended there.

A sentence is complete when it ends in . ! or ? followed by a space, or at a
line break; the last one once the model has finished. A full stop the next word
goes on from in lower case (an abbreviation: "e.g. arrived") ends none, nor
does one inside a bracket the sentence opened. The first failing
sentence ends what is shown: a sentence the final check would hold never
reaches a screen. A greeting or apology alone ("Hi there!", "I'm sorry.") is
shown with the sentence after it, or at the end of a finished reply: it may
open a bare refusal (`refusals`), and shown alone it would be kept as the
reply while the refusal after it is held — the customer reading "I'm sorry."
and no hand-off. A sentence that leaves the text up to it unfinished — one
ending in a colon ("…you can follow these steps:"), a heading, a list's empty
item or label alone (`unfinished`) — is shown with what it introduces, judged
with it, or not at all: the customer never reads a list announced and not given,
and what was shown can be kept as the reply.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from sundry.agent.guards import refusals, unfinished
from sundry.agent.guards.replycheck import id_tokens

# The first character of markup, JSON, a fence or a bracketed notice; or a guard's error text.
_PROTOCOL = re.compile(r"[<{\[`]|ERROR \(|\|>")
# The end of a sentence: closing punctuation before whitespace, or a line break.
_END = re.compile(r"[.!?]+[\"')\]]*(?=\s)|\n")
# The tests' control: show the unended words before a cut as the reply's last sentence (as it once was).
SHOW_CUT_FRAGMENT = False
# The tests' control: every full stop before a space ends a sentence, "e.g." and "(e.g." too (as it once was).
SPLIT_AT_EVERY_STOP = False
# A list item's number ("1."), which ends no sentence of its own.
_LIST_NUMBER = re.compile(r"\d{1,2}[.)]")


def _ends_here(text: str, start: int, m: re.Match, *, more: bool) -> bool | None:
    """Whether the punctuation `m` ends the sentence begun at `start`; None while the text after it
    has not come yet. A full stop that the next word goes on from in lower case ("e.g. arrived",
    "approx. two days") is an abbreviation's, and no sentence ends inside a bracket it opened
    ("(e.g. arrived damaged)"): shown cut there, the customer would read a broken sentence, and
    judged cut there, the check would read the halves apart."""
    if m.group() == "\n" or SPLIT_AT_EVERY_STOP:
        return True
    if text.count("(", start, m.start()) > text.count(")", start, m.end()):
        return False
    if "." in m.group() and not any(c in m.group() for c in "!?"):
        after = text[m.end() :].lstrip(" \t")
        if after.startswith(("\n", "\r")):
            return True  # a line ends with it
        after = after.lstrip()
        if not after:
            return None if more else True  # the next word decides
        if after[0].islower():
            return False
    return True


def sentences(text: str, *, final: bool, cut: bool = False) -> list[str]:
    """The complete sentences of `text`, in order, each with its trailing space; the unfinished
    remainder too when `final`. `cut`: nothing more will be added to `text` (markup broke it off),
    though its remainder is no sentence."""
    out, start = [], 0
    for m in _END.finditer(text):
        ends = _ends_here(text, start, m, more=not (final or cut))
        if ends is None:
            break
        if ends:
            out.append(text[start : m.end()])
            start = m.end()
    if final and text[start:].strip():
        out.append(text[start:])
    return out


def shown(
    text: str,
    *,
    known: set[str] | frozenset[str] = frozenset(),
    final: bool = False,
    sentence_ok: Callable[[str], bool] | None = None,
    waits: Callable[[str], bool] | None = None,
) -> str:
    """The prefix of `text` that may be shown now (possibly empty). `waits(upto)`: the text so far must wait
    for a sentence after it (it is still the start of a reply sent before, which may be asked again); never
    shown if the reply ends so."""
    text = text or ""
    cut = _PROTOCOL.search(text)
    broken = cut is not None
    if broken:
        # Nothing after the cut counts, and what stands before it unended is a sentence the markup broke
        # off ("…by calling the `look_up_thing` function"), never a finished one: only whole sentences show.
        text, final = text[: cut.start()], SHOW_CUT_FRAGMENT

    def passes(sentence: str) -> bool:
        if id_tokens(sentence) - set(known):
            return False
        return sentence_ok is None or not sentence.strip() or sentence_ok((out + sentence).strip())

    out = mark = lead = intro = ""
    for sentence in sentences(text, final=final, cut=broken):
        if _LIST_NUMBER.fullmatch(sentence.strip()):
            mark += sentence  # "1." opens an item: shown with the item's sentence, never alone
            continue
        sentence, mark = mark + sentence, ""
        if refusals.lead_in(lead + sentence):
            lead += sentence  # "I'm sorry." may open a bare refusal: shown with what follows it
            continue
        sentence, lead = lead + sentence, ""
        if unfinished.ending(out + intro + sentence) or (waits is not None and waits(out + intro + sentence)):
            intro += sentence  # "…these steps:" is shown with the first of them, never alone
            continue
        sentence, intro = intro + sentence, ""
        if not passes(sentence):
            break
        out += sentence
    else:
        if final and lead and not intro and passes(lead):  # the whole reply ended on it
            out += lead
    return out.rstrip()
