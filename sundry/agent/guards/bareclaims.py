"""Claims of an action the sentence does not name, and which action they are about. Pure.

`replyclaims` reads a claim when the sentence names its action ("your refund has
been issued"). A reply just as often leaves the action out:

- done: "It's done.", "Done — all sorted.", "I've taken care of that for you.",
  "That has been processed.", "You're all set!";
- promised: "I'll do that now.", "Let me take care of it.", "It will be sorted today.";
- pending: "It's being processed.", "That is awaiting your confirmation.";
- denied: "It hasn't been done yet.";
- offered: "I can take care of that for you.";
- a bare yes or no to the customer's question about an action: "Did you upgrade my
  flight?" — "Yes, it has." (`answered`).

Such a phrase (`readings`) claims the action its own clause names ("the
cancellation is all sorted"); naming none ("it", "that", nothing at all) it
claims the action under discussion (`named_kinds`, searched nearest first): an
earlier sentence of the reply, then the customer's latest message ("Please
refund <order>"). Where neither names one the claim is of `ANY` action, which
`replyclaims` resolves to the open cards and holds, else judges against
whether anything was done on the ticket at all. What an action is called comes
from the six kinds' words and each write's own (`claimverbs.Vocabulary`), so a
question about any declared write is read, not only about refunds.

A status ("your order has been processed and shipped") names a record, not an
action: a phrase whose subject or object is a noun that names no action claims
nothing.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from sundry.agent.guards import claimverbs

ANY = "action"  # an action the reply does not name and nothing under discussion does
READY = "ready"  # the same, said ready rather than done ("you're all set"): of an open card's action only
DONE, PENDING, FUTURE, DENIED, OFFER = "done", "pending", "future", "denied", "offer"
REFUND, CANCEL, RETURN, REPLACE, EMAIL, PHONE = "refund", "cancel", "return", "replace", "email", "phone"

# What stands for the action without naming it: a pronoun, "your request", "everything".
_PRONOUN = (
    r"(?:it|that|this|everything|all\s+of\s+(?:it|that|this)|it\s+all|your\s+request|the\s+request|that\s+request)"
)
# What is said of a thing done, naming no action ("sorted", "taken care of").
# ("resolved", "fixed", "settled" are left out: "so it's resolved!" is as often the customer's own fix.)
_PART = (
    r"(?:done|sorted(?:\s+out)?|taken\s+care\s+of|handled|dealt\s+with|actioned|processed|completed?|finished"
    r"|gone\s+through|all\s+set)"
)
# Said of readiness rather than of a thing done ("you're all set", "good to go"): a claim only of an
# action under discussion or an open card's (`READY`), never of whatever was done on the ticket.
_WEAK = re.compile(r"\b(?:all\s+set|set|good\s+to\s+go|complete|finished)\W*$", re.I)
_ADV = r"(?:(?:now|already|just|all|successfully|fully|also|been|completely|finally)\s+)*"
_AUX = r"(?:'s|\s+is|\s+are|\s+has|\s+have|\s+was|\s+were)\s+"
_SUBJECT = r"(?P<s>\b[\w-]+(?:\s+[\w-]+){0,3}?)"
_WE = r"\b(?:i|we)(?:'ve|\s+have|'d|\s+had)?\s+(?:(?:now|just|already|successfully|also|gone\s+ahead\s+and)\s+)*"
_DID = (
    r"(?:done|did|took\s+care\s+of|taken\s+care\s+of|handled|dealt\s+with|sorted(?:\s+out)?|processed|completed"
    r"|actioned|finished|settled|resolved|fixed)"
)
_OBJECT = r"(?P<o>[\w-]+(?:\s+[\w-]+){0,3}?)"
# Where an object ends: the clause's end, or words of time and courtesy after it ("that for you now").
_END = (
    r"(?=[\s.!?\"')]*$|\s+(?:for\s+you|now|right\s+away|straight\s+away|today|shortly|immediately|at\s+once|already"
    r"|from\s+here|once|as\s+soon|when|after|first|too|as\s+well|yet|just\s+now)\b)"
)
# Read in this order: "I have done it" is ours, not a subject "I" that "has" something done.
_BARE_DONE = (
    re.compile(_WE + _DID + r"\s+" + _OBJECT + _END, re.I),
    re.compile(_WE + r"(?:got|gotten)\s+" + _OBJECT + r"\s+(?:done|sorted|taken\s+care\s+of|processed)\b", re.I),
    re.compile(r"\bit\s+(?:went|has\s+gone)\s+through\b", re.I),
    re.compile(_SUBJECT + _AUX + _ADV + _PART + r"\b", re.I),
)
# A clause that is only the claim: "Done!", "All sorted.", "You're all set.", "Consider it done."
_EXCLAIMED = re.compile(
    r"(?:(?:it's|that's|this\s+is|it\s+is|that\s+is|you're|you\s+are|everything(?:'s|\s+is))\s+)?(?:all\s+)?"
    r"(?:done|sorted|set|taken\s+care\s+of|good\s+to\s+go|complete|finished)(?:\s+now)?(?:\s+for\s+you)?"
    r"|consider\s+it\s+done",
    re.I,
)
_WILL = r"\b(?:i|we)(?:'ll|\s+will|\s+shall|(?:'m|\s+am|'re|\s+are)\s+going\s+to)\s+"
_LET_ME = r"\blet\s+(?:me|us)\s+"
_LEAD = r"(?:(?:now|then|also|just|immediately|go\s+ahead\s+and|get\s+(?:that|this|it)\s+)\s*)*"
_DO = r"(?:do|take\s+care\s+of|handle|deal\s+with|sort(?:\s+out)?|process|action|complete|finish|proceed\s+with|go\s+ahead\s+with)"
_BARE_PROMISE = (
    re.compile(r"(?:" + _WILL + r"|" + _LET_ME + r")" + _LEAD + _DO + r"\s+" + _OBJECT + _END, re.I),
    re.compile(
        r"(?:"
        + _WILL
        + r"|"
        + _LET_ME
        + r")(?:get|have)\s+"
        + _OBJECT
        + r"\s+(?:done|sorted|taken\s+care\s+of|processed)\b",
        re.I,
    ),
    re.compile(_WILL + r"(?:now\s+|then\s+)?(?P<o>)(?:proceed|go\s+ahead)[\s.!]*$", re.I),
    re.compile(
        _SUBJECT + r"(?:'ll|\s+will|\s+shall)\s+(?:now\s+|then\s+|also\s+)?be\s+(?:\w+\s+)?" + _PART + r"\b", re.I
    ),
)
_BARE_PENDING = re.compile(
    _SUBJECT + r"(?:'s|\s+is|\s+are|\s+has\s+been)\s+(?:(?:now|currently|still)\s+)*(?:being\s+(?:processed|handled"
    r"|taken\s+care\s+of|dealt\s+with|actioned)|in\s+progress|under\s*way|awaiting\s+(?:your\s+)?(?:confirmation"
    r"|approval)|pending\s+(?:your\s+|staff\s+|manager\s+)?(?:confirmation|approval))\b",
    re.I,
)
_BARE_OFFER = re.compile(r"\s*" + _LEAD + _DO + r"\s+" + _OBJECT + _END, re.I)
# A clause that sets a condition or a time, or describes how things usually go, states nothing done.
_CONDITION = re.compile(
    r"\b(?:will|would|could|can|shall|should|may|might|must|once|if|unless|until|whether|when|whenever|after"
    r"|before|as\s+soon\s+as|usually|normally|typically|generally|automatically|going\s+to|about\s+to|to\s+be"
    r"|able|unable|cannot)\b|'ll\b|'d\b",
    re.I,
)
_NEGATION = re.compile(r"\b(?:not|never)\b|n't\b|\bnothing\b|\bnone\b|\bno\b", re.I)
# "Go ahead and do it" is one doing, not two clauses.
_CLAUSE = re.compile(r"[,;:\u2014\u2013]|\s-\s|\b(?<!ahead\s)and\b|\b(?:but|so|because|as|while)\b", re.I)


# Every word a reading starts from: most sentences have none, and are read no further.
_ANY_WORD = re.compile(
    r"\b(?:done|did|do|sort\w*|take|taken|took|handl\w*|deal|dealt|action\w*|process\w*|complet\w*|finish\w*"
    r"|through|set|good\s+to\s+go|proceed|ahead|progress|under\s*way|await\w*|pending|fixed|resolved|settled)\b",
    re.I,
)


@dataclass(frozen=True)
class Reading:
    mode: str
    clause: str  # the clause it is in: the action it names, if any
    at: int  # where in the sentence the clause starts: what comes before may name the action
    unnamed: bool  # its subject or object stands for an action it does not name (a pronoun, nothing)
    weak: bool = False  # says something is ready, not done: of an action under discussion only


def _unnamed(said: str | None) -> bool:
    said = re.sub(r"\s+", " ", (said or "").strip().lower())
    said = re.sub(r"^(?:(?:and|so|but|then|well|now|ok|okay|great|good\s+news)\s+)+", "", said)
    return not said or bool(re.fullmatch(_PRONOUN + r"(?:\s+(?:now|too|as\s+well|for\s+you|already))?", said))


# A word after which a pronoun is part of a noun phrase ("your payment for this"), not the subject.
_BOUND = frozenset("for of in on with about to from by at the a an your my our their its".split())


def _unnamed_subject(m: re.Match) -> bool:
    """The subject before a verb: its last words count where what runs into them is not part of them
    ("Thanks for waiting it's done"; not "your payment for this")."""
    words = m.group("s").split()
    return any(
        _unnamed(" ".join(words[i:])) and (i == 0 or words[i - 1].lower() not in _BOUND) for i in range(len(words))
    )


def _clauses(sentence: str) -> list[tuple[int, str]]:
    out, start = [], 0
    for m in _CLAUSE.finditer(sentence):
        out.append((start, sentence[start : m.start()]))
        start = m.end()
    out.append((start, sentence[start:]))
    return [(at, c) for at, c in out if c.strip()]


def _done_in(clause: str) -> bool | None:
    """Whether the clause states an action done without naming it (True), naming it (False), or neither (None)."""
    plain = clause.strip().strip("!.?\"' ")
    if _EXCLAIMED.fullmatch(plain):
        return True
    for pattern in _BARE_DONE:
        m = pattern.search(clause)
        if m is not None:
            if "s" in m.groupdict() and m.group("s") is not None:
                return _unnamed_subject(m)
            return _unnamed(m.groupdict().get("o"))
    return None


def _promised_in(clause: str) -> bool | None:
    for pattern in _BARE_PROMISE:
        m = pattern.search(clause)
        if m is not None:
            if m.groupdict().get("s") is not None:
                return _unnamed_subject(m)
            return _unnamed(m.group("o"))
    return None


def readings(sentence: str, *, offer_rest: str | None = None, conditional: bool = False) -> list[Reading]:
    """Each clause of `sentence` that claims an action done, promised, pending, not done or offered in
    words that need not name it. `offer_rest`: what the sentence offers ("take care of that" of "I can
    take care of that"), if it is an offer; `conditional`: the sentence makes its promise depend on the
    customer's wish ("if you'd like, I'll do that") — an offer, not a promise."""
    if not _ANY_WORD.search(sentence):
        return []
    if offer_rest is not None:
        m = _BARE_OFFER.match(offer_rest)
        if m is None:
            return []
        return [Reading(OFFER, sentence, 0, _unnamed(m.group("o")))]
    out = []
    for at, clause in _clauses(sentence):
        pending = _BARE_PENDING.search(clause)
        if pending is not None and not _NEGATION.search(clause):
            out.append(Reading(PENDING, clause, at, _unnamed_subject(pending)))
            continue
        promised = _promised_in(clause)
        if promised is not None:
            if not conditional and not _NEGATION.search(clause):
                out.append(Reading(FUTURE, clause, at, promised))
            continue
        if _CONDITION.search(clause):
            continue
        if _NEGATION.search(clause):
            done = _done_in(re.sub(r"\s+", " ", _NEGATION.sub(" ", clause)))
            if done is not None:
                out.append(Reading(DENIED, clause, at, done))
            continue
        done = _done_in(clause)
        if done is not None:
            weak = bool(_WEAK.search(re.sub(r"\s+(?:now|for\s+you)\b", "", clause.strip())))
            out.append(Reading(DONE, clause, at, done, weak))
    return out


# --- what a text names --------------------------------------------------------------------------

_NAMED = {
    REFUND: re.compile(
        r"\brefund\w*|\bmoney\s+back\b|\breimburs\w*|\b(?:get|have|want)\s+(?:my\s+|the\s+)?[$€£]?\d[\d.,]*"
        r"(?:\s*[A-Z]{3})?\s+back\b",
        re.I,
    ),
    CANCEL: re.compile(r"\bcancel\w*", re.I),
    RETURN: re.compile(r"\breturn(?:s|ed|ing)?\b(?!\s+to\s+(?:you|your|the|my)\b)", re.I),
    REPLACE: re.compile(r"\breplace\w*|\bexchang\w*", re.I),
    # A contact as something done or asked for ("e-mail me", "sent you an e-mail"), not an e-mail that will come.
    EMAIL: re.compile(
        r"\be-?mail(?:ed)?\s+(?:me|you|us|it)\b|\bsen[dt]\s+(?:me|you)\s+(?:an?\s+|the\s+)?(?:[\w-]+\s+)?e-?mail\b",
        re.I,
    ),
    PHONE: re.compile(r"\b(?:call(?:ed)?|phone[d]?|r[ai]ng)\s+(?:me|you|us)\b|\bphone\s+call\b", re.I),
}
# "I don't want a refund", "rather than a replacement": an action the customer turns down is not asked for.
_UNWANTED = re.compile(
    r"(?:\b(?:don't|do\s+not|doesn't|does\s+not|never)\s+(?:want|need)|\binstead\s+of|\brather\s+than|\bnot)\s+"
    r"(?:an?\s+|the\s+|to\s+|any\s+)?$",
    re.I,
)


def named_kinds(text: str, vocab: claimverbs.Vocabulary = claimverbs.EMPTY) -> list[str]:
    """The kinds of action a text names in any way (a request, a question, a mention), by the six kinds'
    words and the domain's writes' own (`vocab`), leaving out one it turns down ("not a refund")."""
    six = [
        kind
        for kind, pattern in _NAMED.items()
        if any(not _UNWANTED.search(text[max(0, m.start() - 30) : m.start()]) for m in pattern.finditer(text))
    ]
    own = [k for k in vocab.mentioned(text) if not vocab.read_already(k, set(six))] if vocab else []
    return list(dict.fromkeys(six + own))


# --- a bare yes or no ---------------------------------------------------------------------------

# A yes or no that names no action answers the customer's question about one: "Did you refund
# <order>?" — "Yes, that's done." is a done-claim of a refund on that order; "No, it hasn't." denies it.
_BARE_ANSWER = re.compile(
    r"^\s*(?P<word>yes|yep|yeah|yup|no|nope)(?=\s*(?:[,.!;:\u2014\u2013-]|$)|\s+(?:it|i|we|that|this|they|all|it's"
    r"|that's|everything)\b)[^.!?]*",
    re.I,
)
_ASKED_DONE = re.compile(r"\b(?:did|has|have|had|was|were|is|are)\b[^?]*\?", re.I)
_ASKED_FUTURE = re.compile(r"\b(?:will|are\s+you\s+going\s+to|is\s+it\s+going\s+to)\b[^?]*\?", re.I)
# "Did you do it?", "Is that sorted?": a question about the action under discussion, naming none.
_ASKED_BARE = re.compile(
    r"\b(?:did|have|has|had|will)\s+(?:you|we)\s+(?:already\s+)?(?:do|done|sort(?:ed)?(?:\s+out)?|take\s+care\s+of"
    r"|taken\s+care\s+of|handle[d]?|deal\s+with|dealt\s+with|action(?:ed)?|process(?:ed)?)\s+" + _PRONOUN + r"\b"
    r"|\b(?:is|has|was|will)\s+" + _PRONOUN + r"\s+(?:been\s+|all\s+|now\s+|be\s+)*" + _PART + r"\b"
    r"|\bdid\s+(?:it|that|this)\s+go\s+through\b",
    re.I,
)


def answered(reply: str, question: str, vocab: claimverbs.Vocabulary = claimverbs.EMPTY) -> tuple | None:
    """(DONE, DENIED or FUTURE, the kinds asked about — [ANY] when the question names none but asks about
    the action under discussion —, the question) when the sentence `reply` opens with a bare yes or no
    to a question whether an action happened (or, for a yes, will); None otherwise (a reply that names
    the action itself is read as it stands)."""
    m = _BARE_ANSWER.match(reply or "")
    if m is None or not question or named_kinds(m.group(0), vocab):
        return None
    no = m.group("word").lower() in ("no", "nope")
    # "Are you going to …?" asks of the future though it opens like "Are you …?": the earliest form wins.
    forms = [(p.search(question), mode) for p, mode in ((_ASKED_FUTURE, FUTURE), (_ASKED_DONE, DENIED if no else DONE))]
    for asked, mode in sorted(((a, mode) for a, mode in forms if a is not None), key=lambda f: f[0].start()):
        if mode == FUTURE and no:
            return None  # "no" to "will you …?" promises nothing
        kinds = named_kinds(asked.group(0), vocab) or ([ANY] if _ASKED_BARE.search(asked.group(0)) else [])
        if kinds:
            return mode, kinds, asked.group(0)
    return None
