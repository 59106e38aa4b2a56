"""Sundry's names for its own workings, said to a customer. Pure.

The model reads its instructions in sections Sundry names (`render.HEADINGS`: the rules in
force, the ID ledger, the state, the summary of earlier turns), messages Sundry marks as its
own ("[system notice]"), and tools that keep those sections (`pin_constraint`, `record_fact`,
`label_entity`). A small model tells the customer about them: "As per the rules you have
pinned for this ticket, …", "look it up on the customer's order ledger", "record it in the
state". The customer has no ledger, pinned rules or state fields: such a reply speaks Sundry's
words, not theirs.

The terms are read from those texts (`terms`), never listed here, and count when used as
Sundry uses them:

- a section's name as its heading gives it, of two words or more ("rules in force", "ID
  ledger", "summary of earlier turns"), and the name inside a marker of Sundry's own messages
  ("system notice", "staff note to the agent", "tool result"): anywhere;
- a section's noun that is no everyday word (`EVERYDAY`: "ledger"): anywhere;
- a section's noun with a word its own texts set beside it — the first word after the noun in
  its heading and in what it shows when empty ("rules in force", "no rules pinned for this
  ticket"), the names of its parts (the state's "Fields:"), "lane" — a few words apart either
  way ("the rules you have pinned", "the state fields");
- the noun of the tool that keeps a section ("pin_constraint": constraint) and the section's
  own noun, with that tool's verb: right before it ("pinned constraints") or a few words after
  ("the rules you have pinned");
- "in the <noun>" at a clause's end, where Sundry's texts put a thing in that section so
  ("Record an established fact of this case in the state (…"): "I've recorded it in the state.".

A noun followed by "of" or "that" is ordinary English, whatever stands near it: "the state of
your parcel", "in the state of California", "the rules of our returns policy", "the state field
of your address", "our records state that …".
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from sundry.agent.guards import declaredwords
from sundry.agent.guards.claimverbs import forms
from sundry.context import render
from sundry.tooling.domain import GENERIC_PROMPT
from sundry.tooling.tools import REGISTRY

# Sections whose noun is an everyday word ("the state of your parcel", "our rules", "a summary of your
# order"): counted only as Sundry uses them. Any other section's noun is Sundry's wherever it stands.
EVERYDAY = frozenset({"system", "rules", "state", "summary"})
# How far apart a noun and its word may stand: "rules you have pinned" (two words between).
NEAR = 3
_FUNCTION = frozenset("in of for the a an to this that these and or by on at as with".split())
_WORD = re.compile(r"[a-z]+(?:_[a-z]+)*")
# Words between, or a heading's dash ("STATE — established facts").
_BETWEEN = r"(?:\s+(?:[\w'\u2019-]+|[\u2013\u2014])){0,%d}?\s+" % NEAR
_NOT_OF = r"(?!\s+(?:of|that)\b)"
_CLAUSE_END = r"(?=\s*(?:[.!?,;:)(\n]|$))"
_MARKER = re.compile(r"\[([^\]:]+)")


def _alt(words) -> str:
    return "|".join(sorted((re.escape(w).replace(r"\ ", r"\s+") for w in set(words) if w), key=len, reverse=True))


def _number(word: str) -> set[str]:
    """A noun and its other number (rule ↔ rules, field ↔ fields); a participle or a mass noun as it is."""
    if word.endswith(("ed", "ey")):
        return {word}
    if word.endswith("y"):
        return {word, word[:-1] + "ies"}
    return {word, word[:-1]} if word.endswith("s") and len(word) > 3 else {word, word + "s"}


def _after(noun: str, text: str) -> str:
    """The first word after `noun` in `text` that is not a function word ("force" of "RULES IN FORCE")."""
    ws = _WORD.findall((text or "").lower())
    for i, w in enumerate(ws):
        if w in _number(noun):
            return next((x for x in ws[i + 1 :] if x not in _FUNCTION), "")
    return ""


def _name(heading: str) -> str:
    """A heading's name: before its dash or bracket, without the scope every section has."""
    name = re.split(r"\s+[\u2014(]", heading, maxsplit=1)[0].lower()
    return re.sub(r"\s+for this ticket$", "", name).strip()


def _tools() -> tuple[tuple[str, str], ...]:
    """Sundry's own tools (those that change its sections, not a domain's records): name, description."""
    return tuple(sorted((t.name, t.description or "") for t in REGISTRY.values() if t.local))


@dataclass(frozen=True)
class Terms:
    names: re.Pattern
    patterns: tuple[re.Pattern, ...]

    def found(self, text: str) -> str:
        """The first term `text` uses as Sundry's, as written; "" for none."""
        text = (text or "").replace("\u2019", "'")
        hits = [m for p in (self.names, *self.patterns) if (m := p.search(text))]
        return min(hits, key=lambda m: m.start()).group(0) if hits else ""


def terms() -> Terms:
    """Sundry's terms as its texts now say them (the headings, markers, empty sections and own tools)."""
    return _terms(_tools())


@lru_cache(maxsize=8)
def _terms(tools: tuple[tuple[str, str], ...]) -> Terms:
    empty = {"rules": render.NO_RULES, "ledger": render.NO_IDS, "state": render.NO_STATE}
    parts = {"state": [v.split()[0].rstrip(":").lower() for v in render.STATE_SECTIONS.values()]}
    sources = [*render.HEADINGS.values(), *empty.values(), GENERIC_PROMPT, *(d for _, d in tools)]
    names = {n for n in map(_name, (h for lane, h in render.HEADINGS.items() if lane != "system")) if " " in n}
    names |= {
        m.strip().lower() for p in (*render.NOT_CUSTOMER_PREFIXES, render.DATA_HEADER) for m in _MARKER.findall(p)
    }
    patterns = []
    for lane, heading in render.HEADINGS.items():
        if lane == "system":
            continue  # its words are the markers' names
        nouns = _number(lane)
        if lane not in EVERYDAY:
            patterns.append(re.compile(r"\b(?:" + _alt(nouns) + r")\b", re.I))
            continue
        # A heading whose name is more than the noun is found by its name ("rules in force"): only a bare one
        # ("STATE — established facts") lends the word after it.
        named = " " in _name(heading)
        marks = {
            "" if named else _after(lane, heading),
            _after(lane, empty.get(lane, "")),
            *parts.get(lane, ()),
            "lane",
        }
        marks = {form for m in marks if m for form in _number(m)}
        noun = r"\b(?:" + _alt(nouns) + r")\b"
        mark = r"\b(?:" + _alt(marks) + r")\b"
        patterns.append(
            re.compile(noun + _NOT_OF + _BETWEEN + mark + _NOT_OF + r"|" + mark + _BETWEEN + noun + _NOT_OF, re.I)
        )
        # The tools that keep this section: their description's first sentence names it, as a noun ("Record a
        # rule …", "… in the state").
        for name, description in tools:
            first = re.split(r"(?<=[.!?])\s+(?=[A-Z])", description, maxsplit=1)[0]
            verb, _, thing = name.partition("_")
            if not thing or not re.search(r"\b(?:a|an|the)\s+(?:" + _alt(nouns) + r")\b", first, re.I):
                continue
            kept = r"\b(?:" + _alt(nouns | _number(thing.replace("_", " "))) + r")\b"
            said = r"\b(?:" + _alt(forms(verb)) + r")\b"
            done = r"\b(?:" + _alt({f for f in forms(verb) if f.endswith("ed") or f.endswith("t")}) + r")\b"
            patterns.append(re.compile(done + r"\s+" + kept + _NOT_OF + r"|" + kept + _NOT_OF + _BETWEEN + said, re.I))
        # "in the state (…": where Sundry's texts put a thing in this section, at a clause's end.
        if any(re.search(r"\bin\s+the\s+" + lane + r"\s*[(.,;:]", s, re.I) for s in sources):
            patterns.append(re.compile(r"\bin\s+the\s+" + lane + r"\b" + _CLAUSE_END, re.I))
    return Terms(re.compile(r"\b(?:" + _alt(names) + r")\b", re.I), tuple(patterns))


def section_texts() -> tuple[str, ...]:
    """What Sundry's sections say of themselves: their headings, what an empty one shows, the ledger's
    columns, a candidate rule's mark. A small model copies one whole as its reply ("STATE — established
    facts; they override the summary below if the two disagree"): read as `declaredwords` reads a tool's
    description, word for word whatever the punctuation, the case or a lead-in."""
    empty = (render.NO_RULES, render.NO_IDS, render.NO_STATE)
    return (*render.HEADINGS.values(), *empty, render.LEDGER_COLUMNS, render.UNCONFIRMED, render.UNCONFIRMED_CUSTOMER)


def used(text: str) -> str:
    """The first of Sundry's own terms `text` uses as Sundry does (see the module docstring), or a section's
    own text it carries (`section_texts`), or ""."""
    return terms().found(text) or declaredwords.carried(text, section_texts())
