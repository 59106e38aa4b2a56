"""Internal-only text in a request, and whether outgoing text quotes it. Pure.

Internal: the values of state fields staff keep from the customer
(`customer_visible=False`, such as `internal_note`) and staff notes to the
agent. A reply, an email or an offer that quotes them goes to staff, never to
the customer. "Quotes" means, after folding case and punctuation:

- a run of `LONG_RUN` consecutive words of one internal text (all of it, when
  it is shorter but at least `SHORT_RUN` words), a run the customer-facing
  text of the request does not also hold; or
- a run of `SHORT_RUN` words holding at least `DISTINCTIVE` words that appear
  nowhere customer-facing ("under fraud review", "chargeback history on").

Customer-facing: the customer's messages, staff replies, tool results and the
customer-visible state. A staff note's sentences that tell the agent what to
say to the customer ("Tell them the parcel ships Monday") are meant for the
customer and are not counted, unless they say not to ("don't tell them …").
"""

from __future__ import annotations

import re
from dataclasses import dataclass

LONG_RUN = 6
SHORT_RUN = 3
DISTINCTIVE = 2

_WORD = re.compile(r"[a-z0-9]+(?:['\-][a-z0-9]+)*")
_SENTENCE = re.compile(r"[^.!?\n]+[.!?]*")
# A staff note sentence that hands the agent words for the customer; negated, it is a warning instead.
_FOR_CUSTOMER = re.compile(
    r"\b(?:tell|let|inform|assure|promise|reply|answer|explain|say|write|offer)\b[^.!?\n]{0,40}?"
    r"\b(?:customer|them|him|her|they|client)\b|\b(?:tell|say|reply|answer|write)\b\s+(?:that|with)\b",
    re.I,
)
_NEGATED = re.compile(
    r"\b(?:don'?t|do\s+not|never|not|no|without|avoid|nor)\b[^.!?\n]{0,20}?"
    r"\b(?:tell|let|inform|say|mention|reveal|share|reply|answer|write|offer)\b",
    re.I,
)
_COMMON = frozenset(
    """
    a an and are as at be been but by can could did do does for from had has have he her him his i if in into is it
    its me my no not of on or our she so that the their them they this to up us was we were what when which who will
    with would you your yes all any also just only than then there these those very
""".split()
)


def words(text: str) -> list[str]:
    return _WORD.findall((text or "").lower().replace("\u2019", "'"))


def _grams(ws: list[str], n: int) -> set[tuple[str, ...]]:
    return {tuple(ws[i : i + n]) for i in range(len(ws) - n + 1)} if n > 0 else set()


@dataclass(frozen=True)
class Source:
    """One internal text: what it is (for staff: "internal note", "staff note, turn 7") and its words."""

    label: str
    words: tuple[str, ...]


@dataclass(frozen=True)
class InternalText:
    sources: tuple[Source, ...] = ()
    public_words: frozenset[str] = frozenset()
    public_grams: frozenset[tuple[str, ...]] = frozenset()  # every run of 3 to LONG_RUN public words

    def __bool__(self) -> bool:
        return bool(self.sources)


@dataclass(frozen=True)
class Quote:
    label: str
    text: str  # the run quoted, as words


def for_staff_only(note: str) -> str:
    """A staff note without the sentences that hand the agent words for the customer."""
    kept = [s for s in _SENTENCE.findall(note or "") if not _FOR_CUSTOMER.search(s) or _NEGATED.search(s)]
    return " ".join(kept)


def gather(*, internal: list[tuple[str, str]], public: list[str]) -> InternalText:
    """`internal`: (label, text) pairs; `public`: customer-facing texts of the request."""
    sources = tuple(Source(label, tuple(ws)) for label, text in internal if len(ws := words(text)) >= SHORT_RUN)
    if not sources:
        return InternalText()
    public_words, grams = set(), set()
    for text in public:
        ws = words(text)
        public_words.update(ws)
        for n in range(SHORT_RUN, LONG_RUN + 1):
            grams |= _grams(ws, n)
    return InternalText(sources, frozenset(public_words), frozenset(grams))


def _distinctive(word: str, internal: InternalText) -> bool:
    return len(word) >= 3 and word not in _COMMON and word not in internal.public_words and not word.isdigit()


def quotes(text: str, internal: InternalText) -> list[Quote]:
    """The internal texts `text` quotes (one quote per source, the longest run found)."""
    if not internal:
        return []
    out = []
    reply = words(text)
    for source in internal.sources:
        n = min(LONG_RUN, len(source.words))
        found = None
        long_runs = (_grams(list(source.words), n) & _grams(reply, n)) - internal.public_grams
        if long_runs:
            found = sorted(long_runs)[0]
        else:
            short = {
                g
                for g in _grams(list(source.words), SHORT_RUN)
                if sum(_distinctive(w, internal) for w in g) >= DISTINCTIVE
            }
            hits = short & _grams(reply, SHORT_RUN)
            found = sorted(hits)[0] if hits else None
        if found:
            out.append(Quote(source.label, " ".join(found)))
    return out


def describe(found: list[Quote]) -> str:
    """For staff: which internal texts a held text quotes."""
    return "; ".join(f'the {q.label} ("…{q.text}…")' for q in found)
