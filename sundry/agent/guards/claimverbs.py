"""How a reply speaks of a domain's writes, read from their declarations. Pure.

`replyclaims` knows six kinds of action by the words every desk uses for them
(refund, cancel, return, replace, e-mail, call). A domain has other writes: a
reservation is updated, a flight upgraded, a line suspended, a certificate
issued. Their words come from each write's declaration (`tooling.domain.ToolDecl`):

- the tool's name: its first word is the verb, the rest name what it acts on
  (`update_reservation_flights`: update; reservation, flight), with the kind of
  its target argument — only for a write that has none of the six kinds, whose
  words are read already;
- `claim_verbs` and `claim_nouns`: what the name does not say ("upgrade",
  "reschedule"; "cabin").

Each (verb, noun) pair a write declares is a kind of action ("upgrade flight"),
judged like the six: "your flight has been upgraded" stands on an
`update_reservation_flights` that ran, "I'll upgrade your flight once you
confirm" on its open card. A verb alone claims nothing ("I've updated you on
the status"): the sentence must name something the write acts on. Inflection
is English morphology (update → updated, send → sent), not a list of phrases.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

# Forms the regular rules get wrong (base → past participle).
_IRREGULAR = {
    "send": "sent",
    "make": "made",
    "pay": "paid",
    "put": "put",
    "set": "set",
    "give": "given",
    "take": "taken",
    "buy": "bought",
    "get": "got",
    "write": "written",
    "lay": "laid",
    "hold": "held",
    "rebuild": "rebuilt",
    "run": "run",
}
# Words in a tool's name that name nothing it acts on.
_FUNCTION_WORDS = frozenset("a an the to of for by with from on in at into all any new id ids".split())

_DETERMINER = r"(?:the|your|a|an|that|this|its|their|our|my)"
_SPAN = r"(?:[^.!?]|\.\d)"  # within one sentence; a decimal point does not end it
# A change told as one: "has been updated", "was suspended", "is now enabled". A bare "is enabled"
# describes a state a lookup may have reported ("roaming is already enabled"), not something done.
_ADV = r"(?:now\s+|already\s+|just\s+|successfully\s+|fully\s+|also\s+)*"
_DONE = (
    r"(?:(?:has|have|had)\s+"
    + _ADV
    + r"been\s+"
    + _ADV
    + r"|(?:was|were)\s+"
    + _ADV
    + r"|(?:is|are)\s+now\s+"
    + _ADV
    + r")"
)
# A promise of ours names the verb right after its future: "I'll upgrade", "will be upgraded", "we
# will then change"; "you can upgrade …, which will allow you to …" promises nothing. A determiner
# between them makes the verb a noun, the object of another verb ("I'll explain the upgrade options"):
# read by `objectpromises`, by its head and its verb.
_FUTURE = r"(?:\b(?:will|shall)|'ll|\bgoing\s+to)\s+(?:be\s+)?(?:(?!" + _DETERMINER + r"\b)[\w-]+\s+){0,2}?"
_WE = r"\b(?:i|we)(?:'ve|\s+have|\s+had)?\s+(?:now\s+|just\s+|already\s+|successfully\s+|gone\s+ahead\s+and\s+)*"


def _words(name: str) -> list[str]:
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", name)
    return [w.lower() for w in re.split(r"[\s_\-.]+", spaced) if w]


def _doubles(word: str) -> bool:
    """Whether a final consonant doubles before -ed/-ing (cancel → cancelled, log → logged)."""
    return len(word) >= 3 and word[-1] in "bdglmnprt" and word[-2] in "aeiou" and word[-3] not in "aeiou"


def participles(base: str) -> set[str]:
    head, _, rest = base.partition(" ")
    tail = f" {rest}" if rest else ""
    if head in _IRREGULAR:
        return {_IRREGULAR[head] + tail}
    if head.endswith("e"):
        forms = {head + "d"}
    elif head.endswith("y") and len(head) > 2 and head[-2] not in "aeiou":
        forms = {head[:-1] + "ied"}
    else:
        forms = {head + "ed"}
        if _doubles(head):
            forms.add(head + head[-1] + "ed")
    return {f + tail for f in forms}


def forms(base: str) -> set[str]:
    """Every form a sentence may use: base, -s, past participle, -ing (and the base as a noun: "upgrade")."""
    head, _, rest = base.partition(" ")
    tail = f" {rest}" if rest else ""
    stem = head[:-1] if head.endswith("e") and not head.endswith("ee") else head
    out = {head, head + ("es" if head.endswith(("s", "sh", "ch", "x")) else "s"), stem + "ing"}
    if _doubles(head):
        out.add(head + head[-1] + "ing")
    return {f + tail for f in out} | participles(base)


def _noun_pattern(noun: str) -> str:
    return re.escape(noun).replace(r"\ ", r"\s+") + r"(?:s|es)?"


def _alternation(words) -> str:
    return "|".join(sorted((re.escape(w).replace(r"\ ", r"\s+") for w in words), key=len, reverse=True))


def _singular(word: str) -> str:
    if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
        return word[:-1]
    return word


@dataclass(frozen=True)
class Verb:
    """One verb of the domain's writes and, per noun it acts on, the tools that do it. Each pattern
    finds the verb with what it acts on (group "n"): its object after it ("updated your reservation")
    or its subject before it ("your reservation has been updated")."""

    base: str
    tools_by_noun: dict  # noun -> frozenset of tool names
    done: tuple  # stated done: "has been upgraded", "I've suspended …"
    mention: tuple  # any form: "the upgrade of your flight is pending", "no flight was changed"
    promise: tuple  # a future right before the verb: "I'll upgrade …", "… will be upgraded"
    offered: re.Pattern  # the base verb first in what follows "I can …", then its object
    status: re.Pattern  # a participle in a record's description ("… · suspended")
    any_form: re.Pattern  # the verb in any form, alone

    def kind(self, noun: str) -> str:
        return f"{self.base} {noun}"

    def nouns(self, patterns, text: str) -> list[str]:
        return [self._noun_of(m.group("n")) for pattern in patterns for m in pattern.finditer(text)]

    def _noun_of(self, said: str) -> str:
        said = re.sub(r"\s+", " ", said.lower())
        for noun in self.tools_by_noun:
            if said == noun or said in (noun + "s", noun + "es"):
                return noun
        return said


class Vocabulary:
    """The domain's writes' claim words (see the module docstring)."""

    def __init__(self, verbs: tuple[Verb, ...], builtin: dict[str, frozenset[str]]):
        self.verbs = verbs
        self.builtin = builtin  # tool -> the six kinds it has (to leave a sentence they already read)
        self.kinds_by_tool: dict[str, set[str]] = {}
        self.tools_by_kind: dict[str, frozenset[str]] = {}
        self.status_by_kind: dict[str, re.Pattern] = {}
        for verb in verbs:
            for noun, tools in verb.tools_by_noun.items():
                kind = verb.kind(noun)
                self.tools_by_kind[kind] = tools
                self.status_by_kind[kind] = verb.status
                for tool in tools:
                    self.kinds_by_tool.setdefault(tool, set()).add(kind)

    def __bool__(self) -> bool:
        return bool(self.verbs)

    def _pairs(self, verb: Verb, nouns) -> list[str]:
        return [verb.kind(n) for n in dict.fromkeys(nouns) if n in verb.tools_by_noun]

    def _kinds(self, which: str, sentence: str) -> list[str]:
        out: list[str] = []
        for verb in self.verbs:
            # One search for the verb itself first: most sentences name none of the domain's verbs.
            if (verb.status if which == "done" else verb.any_form).search(sentence):
                out += self._pairs(verb, verb.nouns(getattr(verb, which), sentence))
        return list(dict.fromkeys(out))

    def done_kinds(self, sentence: str) -> list[str]:
        """Kinds the sentence states done: "your flight has been upgraded", "I've suspended the line"."""
        return self._kinds("done", sentence)

    def mentioned(self, sentence: str, *, promised: bool = False) -> list[str]:
        """Kinds a sentence in another mode speaks of (`promised`: in a promise, the promised verb)."""
        return self._kinds("promise" if promised else "mention", sentence)

    def offered(self, rest: str) -> list[str]:
        """Kinds offered by what follows "I can …": the verb first, then what it acts on."""
        out: list[str] = []
        for verb in self.verbs:
            m = verb.offered.match(rest)
            if m:
                out += self._pairs(verb, [verb._noun_of(m.group("n"))])
        return list(dict.fromkeys(out))

    def read_already(self, kind: str, builtin_kinds: set[str]) -> bool:
        """Whether a sentence's claim of one of the six kinds already covers this kind's tools."""
        return any(self.builtin.get(tool, frozenset()) & builtin_kinds for tool in self.tools_by_kind.get(kind, ()))


EMPTY = Vocabulary((), {})


def _key(decls: dict, builtin: dict[str, set[str]]) -> tuple:
    out = []
    for name, decl in sorted(decls.items()):
        if not getattr(decl, "write", False):
            continue
        target = getattr(decl, "target", None)
        target_kind = (getattr(decl, "args", {}) or {}).get(target, "") if target else ""
        out.append(
            (
                name,
                tuple(getattr(decl, "claim_verbs", []) or []),
                tuple(getattr(decl, "claim_nouns", []) or []),
                target_kind if re.fullmatch(r"[a-z]+(?: [a-z]+)?", target_kind or "") else "",
                tuple(sorted(builtin.get(name, ()))),
            )
        )
    return tuple(out)


def vocabulary(decls: dict, builtin: dict[str, set[str]]) -> Vocabulary:
    """The claim words of `decls` (tool name → declaration). `builtin`: tool → the six kinds it has."""
    return _vocabulary(_key(decls, builtin))


@lru_cache(maxsize=64)
def _vocabulary(key: tuple) -> Vocabulary:
    tools_by_verb: dict[str, dict[str, set[str]]] = {}
    builtin: dict[str, frozenset[str]] = {}
    for name, declared_verbs, declared_nouns, target_kind, has in key:
        builtin[name] = frozenset(has)
        words = _words(name)
        # A participle before another word describes it ("pending order", "delivered items"); a last
        # word is what the write acts on, whatever its ending ("roaming").
        nouns = {
            _singular(w)
            for i, w in enumerate(words[1:], 1)
            if w not in _FUNCTION_WORDS and (i == len(words) - 1 or not w.endswith(("ed", "ing")))
        }
        nouns |= {target_kind} if target_kind else set()
        nouns |= set(declared_nouns)
        verbs = set(declared_verbs) | ({words[0]} if words and not has else set())
        for verb in verbs:
            for noun in nouns - {verb}:
                tools_by_verb.setdefault(verb, {}).setdefault(noun, set()).add(name)
    verbs = []
    for base, by_noun in sorted(tools_by_verb.items()):
        nouns = r"(?P<n>" + "|".join(_noun_pattern(n) for n in sorted(by_noun, key=len, reverse=True)) + r")"
        part = r"(?:" + _alternation(participles(base)) + r")"
        every = r"(?:" + _alternation(forms(base)) + r")"
        before = r"\b" + nouns + r"\b" + _SPAN + r"{0,50}?\b"  # the subject, then the verb
        after = r"\b\s+(?:you\s+)?(?:[\w'-]+\s+){0,4}?" + nouns + r"\b"  # the verb, then its object
        verbs.append(
            Verb(
                base=base,
                tools_by_noun={n: frozenset(t) for n, t in by_noun.items()},
                done=(
                    re.compile(before + _DONE + part + r"\b", re.I),
                    re.compile(_WE + part + after, re.I),
                ),
                mention=(re.compile(before + every + r"\b", re.I), re.compile(r"\b" + every + after, re.I)),
                promise=(
                    re.compile(before + _FUTURE + every + r"\b", re.I),
                    re.compile(_FUTURE + every + after, re.I),
                ),
                offered=re.compile(
                    r"\s*(?:(?:also|now|just|then|only|certainly|definitely|quickly|go\s+ahead\s+and)\s+)*"
                    + _alternation({base})
                    + after,
                    re.I,
                ),
                status=re.compile(r"\b" + part + r"\b", re.I),
                any_form=re.compile(r"\b" + every + r"\b", re.I),
            )
        )
    return Vocabulary(tuple(verbs), builtin)
