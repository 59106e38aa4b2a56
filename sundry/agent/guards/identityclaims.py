"""Does a reply say what kind of thing an identifier is? Pure.

"<ref> is the customer ID for the order …", "Your tracking number is <ref>",
"Order number: <ref>", "(item ID: <ref>)": each tells the customer what an
identifier is, which the ticket's records can check. The ID ledger keeps each
value with its kind (the declared field a tool result held it in), the money
lane's records are of the domain's owner kind, and the domain's ID formats say
what an ID of each kind looks like. Such a statement is a claim (`replyclaims`,
mode STATED, kind `IDENTITY`) and it is false when the ledger (or the money
lane) says the ID is of another kind; for an ID they do not hold, when its
format is another kind's and not the kind said (a kind with no declared format
is judged on the ledger alone). An ID the request never showed is the
identifier check's (`replycheck`), not judged here.

What a reply calls each kind comes from the domain (`nouns_of`): the kind's own
name ("payment_method": "payment method"), the names of the declared fields that
hold an ID of it ("tracking_number": "tracking number", "user_id": "user"), and
the words its declaration adds (`Domain.id_nouns`: "account" for a customer ID),
each with or without an identifier word after it ("ID", "number", "reference").

A kind is read only where the sentence asserts it:

- "<ID> is (the|a|your …) <kind> …" and "<ID> refers to …", the ID the subject
  (not "the refund for <ID> is the …");
- "(the|your …) <kind> [for|of …] is <ID>";
- a label: "Order number: <ID>", "(item ID: <ID>)", "- **Reservation ID:** <ID>".

Not a mention ("your order <ID> is on its way", "the tracking number for <ID>"),
a question, a condition, a request to confirm, the customer's words said back or
anything in quotation marks (`statusclaims.said_as_so`, `before_is_so`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from sundry.agent.guards import statusclaims

IDENTITY = "identity"

# Words that follow a kind's name to make it an identifier's: "order number", "customer ID".
_SUFFIX = frozenset("id ids identifier identifiers number numbers no num reference references ref code codes".split())
# Closed-class words: a noun phrase ends before one ("the order you placed", "the customer ID for …").
_STOP = (
    r"for|of|to|from|in|on|at|with|by|about|into|via|per|as|than|after|before|within|without|under|over"
    r"|you|your|yours|we|our|us|i|my|me|he|she|him|her|they|them|their|it|its|this|that|these|those|the|a|an"
    r"|which|who|whom|whose|where|when|what|how|why|and|or|but|nor|so|because|since|while|if|unless|until"
    r"|whether|then|is|was|are|were|be|been|being|am|has|have|had|do|does|did|will|would|can|could|should"
    r"|may|might|must|shall|not|no|also|just|only|now|still|already|currently|actually|indeed|here|there"
    r"|please"
)
_WORD = r"(?!(?:" + _STOP + r")\b)[A-Za-z][A-Za-z'\u2019-]*"
_SPAN = r"(?P<span>(?:" + _WORD + r"\s+){0,4}" + _WORD + r")"
_DET = r"(?:the|a|an|your|our|its|their|this|that)"
_ADV = r"(?:(?:also|actually|indeed|still|just|now|currently|in\s+fact)\s+)*"
_ID = r"(?P<id>#?[A-Za-z0-9](?:[\w-]*[A-Za-z0-9])?)(?![\w-]|\.\d)"
_SHAPES = [
    re.compile(p, re.I)
    for p in (
        # "<ref> is the customer ID for the order …", "<ref> refers to your parcel"
        r"(?<![\w#-])" + _ID + r"\s+(?:is|was|refers\s+to)\s+" + _ADV + _DET + r"\s+" + _SPAN,
        # "your tracking number is <ref>", "the customer ID for the order is <ref>"
        r"\b"
        + _DET
        + r"\s+"
        + _SPAN
        # what it is of, not a clause of its own ("the return for the item whose ID is <ref>")
        + r"(?:\s+(?:for|of|on|in|with)\s+(?:(?!\b(?:whose|which|who|that|where|is|was|are|were)\b)[^.!?;:\n]){1,60}?)?"
        + r"\s+(?:is|was)\s+"
        + _ADV
        # the value, not "is 3 days late": a clause's end or a closed-class word after it
        + r"[*\"\u201c]?"
        + _ID
        + r"(?=[*\"\u201d]?(?:\s*[.,;:!?()\n\u2013\u2014]|\s*$|\s+(?:"
        + _STOP
        + r")\b))",
        # "Order number: <ref>", "(item ID: <ref>)", "- **Reservation ID:** <ref>"
        r"(?:^|[\n(\[,;]|(?<![\w])[-*\u2022]\s)\s*[*_]*" + _SPAN + r"[*_]*\s*:[*_\s]*" + _ID,
    )
]
# What comes before the ID leaves it the object of something else: "the refund for (order) <ID> is …".
_OBJECT = re.compile(
    r"\b(?:for|of|on|to|from|in|with|about|at|by|than|as|under|against)\s+(?:(?:the|your|an?|this|that)\s+)?"
    r"(?:[A-Za-z][\w'-]*\s+){0,2}$",
    re.I,
)
# A request to check, not a statement: "please confirm that <ID> is your order number".
_ASKED = re.compile(
    r"\b(?:confirm|verify|check|double-check|make\s+sure|ensure|let\s+(?:me|us)\s+know|tell\s+(?:me|us)|ask)\b", re.I
)
# Words after a kind's name that leave it the head: "the order placed on …", "the order containing …".
_PARTICIPLE = re.compile(r"\w+(?:ed|ing)$")


@dataclass(frozen=True)
class Identity:
    """What a sentence says an identifier is: `value` as written, the words it calls it, the kinds they name."""

    value: str
    said: str
    kinds: frozenset[str]


@dataclass(frozen=True)
class Nouns:
    """A domain's names for its ID kinds (phrase → kinds) and its ID formats (kind → pattern)."""

    phrases: dict[str, frozenset[str]] = field(default_factory=dict)
    patterns: dict[str, re.Pattern] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.phrases)

    def named(self, words: list[str]) -> tuple[str, frozenset[str]]:
        """(the phrase, the kinds it names) at the end of `words` (the longest that names any), or ("", ∅)."""
        for k in range(min(len(words), 5), 0, -1):
            tail = words[-k:]
            stems = [tail[:-1]] if tail[-1] in _SUFFIX else []
            stems.append(tail)
            for stem in stems:
                if not stem:
                    continue
                for last in dict.fromkeys([stem[-1], stem[-1].removesuffix("s"), stem[-1].removesuffix("es")]):
                    kinds = self.phrases.get(" ".join([*stem[:-1], last]))
                    if kinds:
                        return " ".join(tail), kinds
        return "", frozenset()

    def shapes(self, value: str) -> set[str]:
        """The kinds whose declared format `value` has."""
        return {k for k, rx in self.patterns.items() if rx.fullmatch(value)}


EMPTY = Nouns()


def _field_name(path: str) -> str:
    """The last named step of a declared path ("parcels[].tracking_number": "tracking_number")."""
    steps = [s for s in path.replace("[]", ".").split(".") if s and s not in ("~", "*")]
    return steps[-1] if steps else ""


def nouns_of(domain) -> Nouns:
    """The domain's names for its ID kinds: each kind's name, the names of the declared fields that hold one,
    and its declared `id_nouns`; less any identifier word at the end ("booking_ref": "booking")."""
    phrases: dict[str, set[str]] = {}

    def add(kind: str, name: str) -> None:
        words = name.lower().replace("_", " ").split()
        while words and words[-1] in _SUFFIX:
            words.pop()
        if words:
            phrases.setdefault(" ".join(words), set()).add(kind)

    kinds = set(domain.id_patterns)
    for tool in domain.tools.values():
        for path, kind in [*tool.args.items(), *tool.results.items()]:
            if not re.fullmatch(r"[a-z][a-z0-9_]*", kind or "") or kind == "id":
                continue  # a kind read from the value's shape ("*") says no name
            kinds.add(kind)
            add(kind, _field_name(path))
    for kind in kinds:
        add(kind, kind)
    for kind, words in (getattr(domain, "id_nouns", None) or {}).items():
        for word in words:
            add(kind, word)
    patterns = {}
    for kind, pattern in domain.id_patterns.items():
        try:
            patterns[kind] = re.compile(pattern)
        except re.error:
            continue  # the domain's own check names it
    return Nouns({p: frozenset(k) for p, k in phrases.items()}, patterns)


def _kinds_said(span: str, nouns: Nouns) -> tuple[str, frozenset[str]]:
    """The kind a noun phrase ends in ("customer ID", "most recent order", "order placed"), or ("", ∅)."""
    words = span.lower().replace("\u2019", "'").split()
    while len(words) > 1 and _PARTICIPLE.fullmatch(words[-1]):
        words.pop()
    if words and words[-1].endswith("'s"):
        return "", frozenset()
    return nouns.named(words)


def _an_id(value: str, nouns: Nouns) -> bool:
    return any(c.isdigit() for c in value) or bool(nouns.shapes(value))


def statements(sentence: str, nouns: Nouns) -> list[Identity]:
    """What the sentence asserts its identifiers are, in the domain's words (`nouns`)."""
    if not nouns:
        return []
    s = statusclaims.said_as_so(sentence)
    if not s:
        return []
    out = []
    for i, shape in enumerate(_SHAPES):
        for m in shape.finditer(s):
            value = m.group("id")
            if not _an_id(value, nouns):
                continue
            at = m.start("id") if i == 0 else m.start()
            before = s[:at]
            if not statusclaims.before_is_so(s, at) or _ASKED.search(before):
                continue
            if statusclaims.not_so(s[m.start() : m.end()]):
                continue
            if i == 0 and _OBJECT.search(before):
                continue
            said, kinds = _kinds_said(m.group("span"), nouns)
            if kinds:
                out.append(Identity(value, said, kinds))
    return list(dict.fromkeys(out))


def _label(kinds) -> str:
    names = sorted(k.replace("_", " ") for k in kinds)
    return " or ".join(f"{'an' if n[:1] in 'aeiou' else 'a'} {n}" for n in names)


def fault(st: Identity, ledger=(), money=(), owner_kind: str = "order", nouns: Nouns = EMPTY) -> str:
    """Why what the sentence says the ID is, is not so ("" when it is, or nothing says what it is).
    `ledger`: `LedgerData`; `money`: `MoneyData` (its records are of `owner_kind`)."""
    value = st.value
    plain = value.lstrip("#").upper()
    known = {e.kind for e in ledger if e.value == value}
    known = known or {e.kind for e in ledger if e.value.lstrip("#").upper() == plain}
    known -= {"", "id", "*"}
    if not known and any(m.order.lstrip("#").upper() == plain for m in money):
        known = {owner_kind}
    if known:
        return "" if known & st.kinds else f"the ledger shows {value} is {_label(known)}, not {_label(st.kinds)}"
    shaped = nouns.shapes(value)
    if not shaped or shaped & st.kinds or any(k not in nouns.patterns for k in st.kinds):
        return ""
    return f"{value} has the format of {_label(shaped)}, not {_label(st.kinds)}"
