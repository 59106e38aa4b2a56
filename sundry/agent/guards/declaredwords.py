"""Where a customer-bound text carries a sentence of a declared tool's or parameter's description. Pure.

A description is Sundry's words to the model (`replycheck.declared_texts`). A small model
copies them as its reply, rarely whole: "Here are your options:\n\n1. Refund money on an
order to its original payment method. Irreversible." is the first two sentences of a
refund tool's description under a lead-in and a number. So each description is cut into
sentences, and a text carries one when

- one of its own sentences, with its lead-in ("Here are your options:", "You can:"), its
  list mark ("1.", "- ") and greeting words ("Sure,") taken off, is that sentence, word for
  word (case and punctuation aside): any sentence of `MIN_WORDS` words or more, or the
  description's first, whatever its length (what the tool is, named in the description's own
  words: "Cancel an order." is never a customer's answer on its own line); or
- that sentence, of `RUN_WORDS` words or more, runs word for word anywhere in it, whatever
  surrounds it ("Sure! Refund money on an order to its original payment method, as you asked").

A shorter sentence counts only on its own: "Why the order is cancelled." said alone is the
parameter's description, "I'll tell you why the order is cancelled" is a reply. A sentence of
one or two words that is not the first ("Irreversible.") is no copy on its own.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

# Three words make a sentence of a description ("Most orders to return, newest first." has six; the
# shortest are "ticket, customer or order" and "ISO currency code of the order."), and fewer than three
# said on their own line ("Irreversible.", "Order number.") is as often a customer's answer.
MIN_WORDS = 3
# Six words in a row of a description's sentence are its words wherever they stand; five are a reply's as often
# ("I can refund money on an order once you confirm": five of a refund tool's first sentence). None of the 882
# recorded τ²-bench replies carries a run of even four of its tools' sentences (tests/agent/test_declared_sentences.py).
RUN_WORDS = 6

_WORD = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")
# A description's sentence ends at . ! or ? before a space and a capital, a quote or a bracket ("e.g. 'x'" does not).
_DECLARED_END = re.compile(r"(?<!\be\.g)(?<!\bi\.e)(?<!\betc)[.!?]+(?=\s+[A-Z(\"'])")
# A reply's sentence ends at . ! or ? before a space, or at a line break.
_REPLY_END = re.compile(r"[.!?]+(?=\s)|\n")
# What opens a piece of a reply without being its words: a list mark, markdown, a lead-in before a colon.
_MARK = re.compile(r"^\s*(?:[-*+\u2022\u00b7\u2013\u2014>#]+|\(?\d{1,2}[.)]|\(?[a-h][.)])\s+|^\s*(?:\*\*|__)")
_LEAD = re.compile(r"^[^:\n]{1,60}:\s+(?=\S)")
# Words that only frame what follows ("Sure, …", "OK — …").
_FRAMING = frozenset(
    "sure ok okay yes well so certainly absolutely of course right great alright hi hello thanks".split()
)


def words(text: str) -> tuple[str, ...]:
    return tuple(_WORD.findall((text or "").lower().replace("\u2019", "'")))


@dataclass(frozen=True)
class Sentences:
    whole: frozenset[tuple[str, ...]]  # counted when a piece of the text is one of them
    runs: tuple[str, ...]  # counted anywhere in the text (joined words, space-padded)


@lru_cache(maxsize=64)
def sentences_of(declared: tuple[str, ...]) -> Sentences:
    """The sentences of the declared descriptions that count (see the module docstring)."""
    whole, runs = set(), []
    for text in declared:
        for i, piece in enumerate(_DECLARED_END.split(text or "")):
            ws = words(piece)
            if not ws or (len(ws) < MIN_WORDS and i > 0):
                continue
            whole.add(ws)
            if len(ws) >= RUN_WORDS:
                runs.append(f" {' '.join(ws)} ")
    return Sentences(frozenset(whole), tuple(dict.fromkeys(runs)))


def _pieces(text: str):
    start = 0
    for m in _REPLY_END.finditer(text):
        yield text[start : m.end()]
        start = m.end()
    yield text[start:]


def _readings(piece: str):
    """A piece's words as written, then with each list mark, lead-in and framing word taken off in turn."""
    before = None
    while before != piece:
        ws = words(piece)
        yield ws
        i = 0
        while i < len(ws) - 1 and ws[i] in _FRAMING:
            i += 1
            yield ws[i:]
        before, piece = piece, _LEAD.sub("", _MARK.sub("", piece), count=1)


def carried(text: str, declared) -> str:
    """The first declared sentence `text` carries (as its words joined), or ""."""
    found = sentences_of(tuple(declared or ()))
    if not found.whole:
        return ""
    for piece in _pieces(text or ""):
        for ws in _readings(piece):
            if ws in found.whole:
                return " ".join(ws)
    padded = f" {' '.join(words(text))} "
    return next((run.strip() for run in found.runs if run in padded), "")
