"""The consent guard: an irreversible action runs without staff only when it was asked for. Pure.

A refund, cancellation, return or replacement (a tool's `consent_action`) may
run on an entity when, in what the request showed the model, the customer (or
staff, in a note) asked for *that action* on *that entity* — naming it by ID
or by words of its ledger description ("the air fryer") — and nothing has
carried that request out since; or when a confirmed state field says so (the
resolution wanted, on the confirmed order). A request naming nothing ("refund
40.00 USD please") is about the entity the customer last named, or, when no
message in the request names one (it was compacted away), the order in state. Otherwise the call is held for
staff with a plain reason. A question about an action ("is the refund done?")
is not a request for one; "don't refund it" withdraws one; "refund all my
orders" is for staff to decide order by order.

Works on words, not a model: it errs towards holding, which costs a staff
click, never money.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

# What each consent action is called, and the words that ask for it (typos are caught by edit distance).
ACTIONS = {
    "refund": ("refund", "refunded", "refunds", "refunding", "reimburse", "reimbursed", "reimbursement"),
    "cancel": ("cancel", "cancelled", "canceled", "cancellation", "cancelling", "canceling"),
    "return": ("return", "returned", "returning", "returns"),
    "replace": ("replace", "replaced", "replacement", "replacing", "exchange", "exchanged", "swap"),
}
NOUN = {"refund": "refund", "cancel": "cancellation", "return": "return", "replace": "replacement"}
_PHRASES = {
    "refund": re.compile(r"\b(?:money|cash)\s+back\b|\bpay\s+me\s+back\b|\bcredit\s+(?:it\s+|me\s+)?back\b", re.I),
    "cancel": re.compile(r"\bcall\s+(?:it\s+)?off\b|\bdon'?t\s+(?:ship|send)\s+it\b", re.I),
    "return": re.compile(r"\b(?:send|ship|take|give)\s+(?:it|them|this|that|these)\s+back\b", re.I),
    "replace": re.compile(r"\b(?:a\s+)?new\s+one\b|\banother\s+one\b", re.I),
}

# An amount asked for back or off ("I'd like 40 USD back", "I'll keep it for 40 off"): a refund asked for.
_AMOUNT_ASK = re.compile(
    r"(?:[$€£₹]\s*)?\b\d+(?:[.,]\d+)?\s*(?:usd|inr|eur|gbp|dollars?|euros?|pounds?|rupees?|bucks)?"
    r"\s+(?:back|off)\b",
    re.I,
)
# A full stop between digits ("40.00") or inside an ID ends no sentence.
_SENTENCES = re.compile(r"(?:[^.!?\n]|\.(?=\w))+[.!?]*")
_WORD = re.compile(r"[a-z0-9][a-z0-9'\-]*")
_NEGATION = re.compile(
    r"\b(?:don'?t|dont|do\s+not|never|no|not|no\s+longer|without|rather\s+than|than|instead\s+of|stop|hold\s+off(?:\s+on)?|"
    r"forget(?:\s+about)?)\s+(?:\w+\s+){0,2}?$",
    re.I,
)
_NEVER_MIND = re.compile(r"\bnever\s*mind\b|\bchanged?\s+my\s+mind\b|\bforget\s+(?:it|about)\b", re.I)
# "I'd also like", "I really need", "I do want": an adverb between the person and the wish.
_ADVERB = r"(?:(?:also|really|just|still|now|actually|then|do|honestly|simply|additionally|further|definitely)\s+)?"
_REQUEST_CUE = re.compile(
    r"\b(?:please|pls|plz|kindly|can\s+you|could\s+you|would\s+you|will\s+you|can\s+i|could\s+i|may\s+i|"
    rf"can\s+we|i\s+{_ADVERB}want|i\s+wanna|i'?d\s+{_ADVERB}like|i\s+would\s+{_ADVERB}like|i\s+{_ADVERB}need|"
    r"i'?m\s+asking|i\s+ask|i\s+request|"
    r"i'?m\s+requesting|i\s+wish|i'?d\s+prefer|i\s+prefer|i'?d\s+rather|i\s+would\s+rather|want\s+to|like\s+to|"
    r"go\s+ahead|let'?s|i'?ll\s+take|"
    r"is\s+it\s+possible|would\s+it\s+be\s+possible|make\s+sure|just|another)\b",
    re.I,
)
_STATUS_OPEN = re.compile(
    r"^\s*(?:and\s+|so\s+|but\s+|also\s+|hi,?\s+|hello,?\s+)?(?:is|was|has|have|had|did|does|do|were|are|when|where|what|what'?s|how|any|why)\b",
    re.I,
)
_STATUS_WORDS = re.compile(
    r"\b(?:done|through|processed|issued|approved|complete[d]?|finished|gone|went|arrived|received|sent|started|"
    r"happened|yet|already|status|update|progress|news|showing|show\s+up|pending|been|where|when)\b",
    re.I,
)
_PAST_STATEMENT = re.compile(
    r"\b(?:got|received|saw|see|seen|noticed|thanks?\s+for)\b[^.?!]*\b(?:refund|cancell?ation|return|replacement)\b"
    r"|\b(?:was|were|been|already|got)\s+(?:\w+\s+){0,2}(?:refunded|cancell?ed|returned|replaced|issued|processed|done)\b",
    re.I,
)
_BLANKET = re.compile(
    r"\b(?:all|every|each|both)\s+(?:of\s+)?(?:my|the|these|those|our)?\s*(?:orders?|items?|purchases?|things?)\b"
    r"|\beverything\b",
    re.I,
)
_CORRECTION = re.compile(
    r"\bi\s+meant\b|\bmeant\s+to\s+(?:say|write|type)\b|\bsorry,?\s+(?:it'?s|it\s+is|that'?s|that\s+should\s+be)\b"
    r"|\b(?:it|that)\s+should\s+(?:be|have\s+been)\b|\bwrong\s+(?:order\s+)?number\b",
    re.I,
)
# "Yes, a replacement of the pan.": an answer to "would you like a replacement?" asks for it.
_AFFIRM = frozenset({"yes", "yeah", "yep", "yup", "sure", "ok", "okay", "alright"})
_FILLER = frozenset({"a", "an", "the", "please", "pls", "then", "just"})
_ID_TOKEN = re.compile(r"\b[A-Za-z]{1,5}[-_]?[A-Za-z0-9]*\d[A-Za-z0-9\-_]*\b")
# Words of a description that say nothing about which thing it is (currency codes included: a
# refund's description names its amount).
_GENERIC = frozenset(
    """
    a an and the of for with in on to by set pack pair pairs pc pcs piece pieces panels panel large small medium mini
    pro plus max black white grey gray blue red green double single new order item items parcel payment refund return
    issued delivered placed shipped cancelled canceled in_transit processing pending requested captured lost delayed
    replacement offered cm mm m l w kg usd eur gbp inr
""".split()
)


@dataclass(frozen=True)
class Said:
    """One message in the request: who said it (customer or staff), at which turn, what."""

    author: str
    turn: int
    text: str


@dataclass(frozen=True)
class Entity:
    """A ledger entry the consent guard can match words against."""

    value: str
    kind: str
    description: str = ""
    of: str = ""  # the order it belongs to (an item's, a parcel's)


@dataclass(frozen=True)
class Done:
    """An action already carried out: which consent action, on which target, at which turn."""

    action: str
    target: str
    turn: int


@dataclass(frozen=True)
class ConsentVerdict:
    ok: bool
    reason: str = ""
    evidence: str = ""  # what gave consent: "customer turn 7", "staff note turn 9", "confirmed state"
    details: dict = field(default_factory=dict)


def said_from(rows) -> tuple[Said, ...]:
    """(author, turn, text) rows, as `context.assembly.said_in` gives them."""
    return tuple(Said(author, turn, text) for author, turn, text in rows)


def state_from(fields, domain) -> dict[str, tuple[str, bool]]:
    """State fields (anything with name, value, confirmed) as the guard takes them: by the consent
    role the domain declares for them (`StateFieldDecl.consent`: "action", "target")."""
    roles = {f.name: f.consent for f in domain.state_fields if f.consent}
    return {roles[f.name]: (f.value, bool(f.confirmed)) for f in fields if f.name in roles}


# --- words ---------------------------------------------------------------------------------


def _close(a: str, b: str) -> bool:
    """At most one insert, delete, substitution or swap of neighbours."""
    if a == b:
        return True
    la, lb = len(a), len(b)
    if abs(la - lb) > 1:
        return False
    if la == lb:
        diff = [i for i in range(la) if a[i] != b[i]]
        return len(diff) == 1 or (
            len(diff) == 2 and diff[1] == diff[0] + 1 and a[diff[0]] == b[diff[1]] and a[diff[1]] == b[diff[0]]
        )
    if la < lb:
        a, b = b, a
    i = next((k for k in range(len(b)) if a[k] != b[k]), len(b))
    return a[i + 1 :] == b[i:]


def _stem(word: str) -> str:
    for suffix in ("'s", "es", "s"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            return word[: -len(suffix)]
    return word


def _words(text: str) -> list[str]:
    return _WORD.findall((text or "").lower().replace("\u2019", "'"))


def _action_word(word: str, action: str) -> bool:
    forms = ACTIONS[action]
    if word in forms:
        return True
    # A typo of the action word ("refnd", "cancle", "replacment"), never of a short word.
    return len(word) >= 5 and any(len(f) >= 6 and _close(word, f) for f in forms)


def _mentions(sentence: str, action: str) -> int | None:
    """Where in the sentence the action is named (character offset), or None."""
    low = sentence.lower().replace("\u2019", "'")
    for m in _WORD.finditer(low):
        if _action_word(m.group(0), action):
            return m.start()
    m = _PHRASES[action].search(low) or (_AMOUNT_ASK.search(low) if action == "refund" else None)
    return m.start() if m else None


def _distinctive(description: str) -> set[str]:
    """The words that pick a thing out: product words, not statuses, sizes or filler."""
    what = (description or "").split(" · ")[0]
    return {
        _stem(w)
        for w in _words(what)
        if len(w) >= 3
        and w not in _GENERIC
        and not re.fullmatch(r"[\d.,x×\-\"']+[a-z]{0,3}", w)
        and not re.fullmatch(r"[a-z]+[-_]\d{3,}", w)
    }  # an ID ("su-25386") is matched as an ID, not as a word


def _matched(words: list[str], entity: Entity) -> set[str]:
    """The entity's product words the words name."""
    return {
        w
        for w in _distinctive(entity.description)
        if any(_stem(x) == w or (len(w) >= 5 and _close(_stem(x), w)) for x in words)
    }


def _score(words: list[str], entity: Entity) -> float:
    """How strongly the words describe the entity: a point per product word (half for short ones)."""
    return sum(1.0 if len(w) >= 4 else 0.5 for w in _matched(words, entity))


# --- what a sentence does ------------------------------------------------------------------------


def sentence_kind(sentence: str, action: str) -> str | None:
    """'request', 'status', 'negated' or 'mention' for a sentence naming the action; None if it does not."""
    at = _mentions(sentence, action)
    if at is None:
        return None
    low = sentence.lower().replace("\u2019", "'")
    before = low[:at]
    if _NEVER_MIND.search(low) or _NEGATION.search(before):
        return "negated"
    question = low.rstrip().endswith("?")
    asks = bool(_REQUEST_CUE.search(low))
    if _PAST_STATEMENT.search(low) and not re.search(r"\b(?:another|again|more|second|new)\b", low):
        return "status"
    if _STATUS_OPEN.search(low) and not asks:
        return "status"
    if question and _STATUS_WORDS.search(low) and not asks:
        return "status"
    if asks or (action == "refund" and _AMOUNT_ASK.search(low)):
        return "request"
    # An imperative: the sentence opens with the action ("Refund the air fryer order.", "cancel AB-1").
    first = _words(low)[:2]
    if first and (
        _action_word(first[0], action)
        or (
            first[0] in ("pls", "please", "just", "now", "ok", "okay")
            and len(first) > 1
            and _action_word(first[1], action)
        )
    ):
        return "request"
    said = _words(low)
    if said and said[0] in _AFFIRM and not _STATUS_WORDS.search(low):
        lead = next((i for i, w in enumerate(said[1:4], 1) if _action_word(w, action)), None)
        if lead is not None and all(w in _FILLER for w in said[1:lead]):
            return "request"
    if re.search(
        r"\b(?:i'?m|i\s+am)\s+(?:returning|cancell?ing)\b|\b(?:refund|replace|cancel|return)\s+(?:me|it|them|this|that)\b",
        low,
    ):
        return "request"
    return "mention"


def sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENTENCES.findall(text or "") if s.strip()]


# --- the guard -------------------------------------------------------------------------------------


def _ids(sentence: str, patterns: tuple[str, ...]) -> tuple[set[str], set[str]]:
    """(IDs in a declared format, other ID-like tokens) of a sentence, upper-cased.

    A declared format is matched whole ('#W9300146', its '#' included), so the ID is the
    one named; only a token in no declared format may be a typo of one."""
    declared, spans = set(), []
    for pattern in patterns:
        for m in re.finditer(rf"(?<![0-9A-Za-z_-])(?:{pattern})(?![0-9A-Za-z_])", sentence):
            declared.add(m.group(0).upper())
            spans.append(m.span())
    loose = {
        m.group(0).upper().rstrip(".,")
        for m in _ID_TOKEN.finditer(sentence)
        if not any(a <= m.start() < b for a, b in spans)
    }
    return declared, loose


def _names(sentence: str, target: set[str], entities: list[Entity], patterns: tuple[str, ...] = ()) -> str:
    """'target', 'other', 'none' or 'all': which entity a sentence names, by ID or by description."""
    low = sentence.lower()
    if _BLANKET.search(low):
        return "all"
    declared, loose = _ids(sentence, patterns)
    values = {e.value.upper() for e in entities}
    upper_target = {t.upper() for t in target}
    if (declared | loose) & upper_target:
        return "target"
    for typed in loose - values:  # a typo of an ID: counts only if it is near the target alone
        near = {e.value.upper() for e in entities if _close(typed, e.value.upper())}
        if near and near <= upper_target:
            return "target"
    if declared or loose & values:  # a well-formed ID that is not the target names another entity
        return "other"
    words = _words(sentence)
    scores = {e.value: _score(words, e) for e in entities if e.description}
    best = max(scores.values(), default=0.0)
    if best <= 0:
        return "none"
    # Every entity a full product word names ("the air fryer and the lamp": both), else the best match;
    # one whose named words another's include is not meant ("USB-C cable" names the cable, not the
    # USB-C charger).
    top = {v for v, s in scores.items() if s >= 1.0} or {v for v, s in scores.items() if s == best}
    named = {e.value: _matched(words, e) for e in entities if e.value in top}
    top = {v for v in top if not any(named[v] < named[o] for o in top if o != v)}
    if top <= target:
        return "target"
    return "several" if top & target else "other"


def _related(target: set[str], entities: list[Entity]) -> set[str]:
    """The target and what belongs to it: an order's items and parcels, an item's order."""
    out = set(target)
    for e in entities:
        if e.of in target or (e.value in target and e.of):
            out |= {e.value, e.of} - {""}
    return out


def _describe(target: list[str], entities: list[Entity]) -> str:
    by_value = {e.value: e for e in entities}
    parts = []
    for t in target:
        d = by_value.get(t).description if t in by_value else ""
        parts.append(f"{t} ({d.split(' · ')[0]})" if d else t)
    return ", ".join(parts)


def check_consent(
    *,
    action: str,
    target: list[str],
    said: list[Said],
    entities: list[Entity],
    done: list[Done] = (),
    state: dict[str, tuple[str, bool]] | None = None,
    id_patterns: tuple[str, ...] = (),
) -> ConsentVerdict:
    """Whether the `action` on `target` (the call's entity IDs) was asked for and not yet carried out.

    `said`: the messages in the request, oldest first. `done`: actions already
    taken. `state`: consent role ("action", "target") → (value, confirmed), from `state_from`. `id_patterns`: the domain's ID
    formats; an ID written in one names exactly that entity, never a neighbour one edit away.
    """
    noun, on = NOUN[action], _describe(target, entities)
    targets = _related(set(target), entities)
    consumed_at = max((d.turn for d in done if d.action == action and d.target in targets), default=0)

    state = state or {}
    resolution, resolution_ok = state.get("action", ("", False))
    order, order_ok = state.get("target", ("", False))
    if (
        resolution_ok
        and order_ok
        and order in targets
        and resolution.strip().lower().startswith(NOUN[action][:6])
        and not consumed_at
    ):
        return ConsentVerdict(True, evidence="confirmed state: the remedy wanted and its target")

    last: tuple[str, Said, str] | None = None  # (kind, message, which entity) of the newest sentence that counts
    # Before anything the request's messages name, the case is about the order in state (it
    # outlives a compaction of the message that named it). Only context: the request itself
    # must still be in the request's messages.
    previous_names = ("target" if order in targets else "other") if order else "none"
    for message in said:
        parts = sentences(message.text)
        message_names = {_names(s, targets, entities, id_patterns) for s in parts} - {"none"}
        for s in parts:
            kind = sentence_kind(s, action)
            if (
                kind is None
                and last is not None
                and last[0] == "request"
                and last[1].author == message.author
                and _CORRECTION.search(s)
                and (names := _names(s, targets, entities, id_patterns)) in ("target", "other")
            ):
                # "Sorry, I meant AB-20240." right after a request: the same request, on the entity meant.
                last = ("request", message, names)
                continue
            if kind is None or kind == "mention":
                continue
            names = _names(s, targets, entities, id_patterns)
            if names == "none":
                # "Please refund 40 USD." after "The air fryer arrived cracked.": the message's one
                # entity, else the one the customer last named (messages naming nothing, such as
                # "phone only", do not change what the conversation is about).
                context = message_names if message_names else {previous_names}
                names = context.pop() if len(context) == 1 else ("none" if not context else "several")
            last = (kind, message, names)
        if message.author == "customer":
            names_here = message_names - {"all"}
            if names_here:
                previous_names = names_here.pop() if len(names_here) == 1 else "several"

    if last is None:
        return ConsentVerdict(
            False,
            f"Nothing in the recent conversation asks for a {noun} on {on}. The call is held for staff.",
            details={"why": "not_asked"},
        )
    kind, message, names = last
    who = "staff" if message.author == "staff" else "the customer"
    if kind == "status":
        return ConsentVerdict(
            False,
            f"{who.capitalize()} asked whether a {noun} was done (turn {message.turn}); "
            f"nothing asked for a new one. The call is held for staff; answer from STATE.",
            details={"why": "status_question", "turn": message.turn},
        )
    if kind == "negated":
        return ConsentVerdict(
            False,
            f"{who.capitalize()} said not to go ahead with a {noun} (turn {message.turn}). The call is held for staff.",
            details={"why": "withdrawn", "turn": message.turn},
        )
    if names == "all":
        return ConsentVerdict(
            False,
            f"{who.capitalize()} asked for a {noun} on all their orders (turn "
            f"{message.turn}); staff decide each one. The call is held.",
            details={"why": "blanket", "turn": message.turn},
        )
    if names == "several":
        return ConsentVerdict(
            False,
            f"{who.capitalize()} asked for a {noun} (turn {message.turn}) in words that fit "
            f"more than one order. The call is held for staff; ask which order they mean.",
            details={"why": "ambiguous", "turn": message.turn},
        )
    if names != "target":
        return ConsentVerdict(
            False,
            f"{who.capitalize()} asked for a {noun} (turn {message.turn}), but not on {on}. "
            f"The call is held for staff; check which order they mean.",
            details={"why": "other_entity", "turn": message.turn},
        )
    if message.turn <= consumed_at:
        return ConsentVerdict(
            False,
            f"The {noun} {who} asked for at turn {message.turn} was already carried out at "
            f"turn {consumed_at}; nothing asked for another. The call is held for staff.",
            details={"why": "already_done", "turn": message.turn, "done_turn": consumed_at},
        )
    evidence = f"{'staff note' if message.author == 'staff' else 'customer message'} turn {message.turn}"
    return ConsentVerdict(True, evidence=evidence, details={"turn": message.turn})
