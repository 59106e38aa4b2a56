"""Which ID a customer's message corrects, and to what. Pure.

"Wrong number, it's SU-1010" points an earlier ledger entry at the value meant
instead. Nothing here grants anything: a correction only makes a later *write*
on the old value wait for the customer's confirmation on a card naming both
(agent.guards), and the ledger line says which value replaced which. So the
reading may err on the side of seeing a correction: a false one costs a card, a
missed one leaves things as they were before corrections existed.

A message corrects when it brings an ID the ledger has not seen, of a kind it
has, and either
- names one earlier ID of that kind next to a correction word ("not SU-1001 but
  SU-1010", "SU-1010 instead of SU-1001"), or
- says a correction word without naming the old one ("sorry, wrong number: it's
  SU-1010"): then the entry of that kind in play most recently is the one meant,
  unless the message adds rather than replaces ("also", "another", "second").
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# Words that say "what I gave before was wrong". Whole words, any case.
_CUES = re.compile(
    r"\b(?:wrong|typo|mistyped|misspelt|misspelled|mistake|mistaken|meant|i\s+mean|correction|corrected|"
    r"correct\s+(?:one|number|order|id|reference)|actually|instead|should\s+(?:be|have\s+been|read)|"
    r"not\s+that\s+one|scratch\s+that|my\s+bad|oops|whoops|incorrect|misread|swapped|mixed\s+up|mix-up|"
    r"right\s+(?:one|number|order))\b",
    re.IGNORECASE,
)
# Words that say "and one more": a new ID beside the old one, not instead of it.
_ADDS = re.compile(
    r"\b(?:also|another|second|other|too|as\s+well|in\s+addition|additionally|plus|both|separate|one\s+more|"
    r"two|and\s+(?:my|the|order))\b",
    re.IGNORECASE,
)

# Words that say the new one replaces the old even beside an "and" or "two".
_REPLACES = re.compile(r"\b(?:instead|rather\s+than|in\s+place\s+of)\b", re.IGNORECASE)


@dataclass(frozen=True)
class Known:
    """An ID the ledger held before the message."""

    value: str
    kind: str
    last_used_turn: int
    superseded: bool = False


@dataclass(frozen=True)
class Correction:
    old: str
    new: str
    kind: str


def _new_ids(found: list[tuple[str, str]], known: dict[str, Known]) -> list[tuple[str, str]]:
    return [(v, k) for v, k in dict.fromkeys(found) if v not in known]


def plan(text: str, found: list[tuple[str, str]], known: list[Known]) -> list[Correction]:
    """The corrections `text` makes. `found`: (value, kind) of the IDs in it; `known`: the ledger before it."""
    by_value = {k.value: k for k in known}
    negated = any(
        re.search(rf"\bnot\s+(?:\S+\s+)?#?{re.escape(v)}(?![\w-])", text or "", re.IGNORECASE)
        for v, _ in found
        if v in by_value
    )  # "it's SU-1010, not SU-1001"
    if not (negated or _CUES.search(text or "")):
        return []
    new = _new_ids(found, by_value)
    if not new:
        return []
    adds = bool(_ADDS.search(text)) and not (negated or _REPLACES.search(text))
    mentioned = [by_value[v] for v, _ in dict.fromkeys(found) if v in by_value]
    out: list[Correction] = []
    for value, kind in new:
        if sum(1 for _, k in new if k == kind) > 1:
            continue  # two new IDs of one kind: which replaces what is not for code to guess
        named = [k for k in mentioned if k.kind == kind and not k.superseded]
        if adds:
            continue
        if len(named) == 1:
            out.append(Correction(named[0].value, value, kind))
            continue
        if named:
            continue
        in_play = sorted(
            (k for k in known if k.kind == kind and not k.superseded), key=lambda k: k.last_used_turn, reverse=True
        )
        if in_play and (len(in_play) == 1 or in_play[0].last_used_turn > in_play[1].last_used_turn):
            out.append(Correction(in_play[0].value, value, kind))
    return out
