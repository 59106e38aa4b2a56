"""An action promised as the object of another verb. Pure.

`claimmodes` reads a promise said with the action's own verb ("I'll refund …",
"the refund will be recorded") and with a few verbs of setting it up ("I'll
process the refund"). A reply as often names the action as the object of some
other verb, ourselves the subject: "We will record the refund in the state",
"I'm processing your cancellation", "I'll get the replacement sent out", "let me
put the return through". Such a sentence promises the action (`promised_kinds`;
judged like every promise: on a card or hold for it, or on its having run) when

- its subject is us, in the future ("I'll", "we will", "I am going to", "I
  shall", "let me") or at work on it now ("I'm processing", "we are now
  arranging"), not negated;
- its verb is not one that leaves the action undone (`_NOT_DOING`): looking at
  it, asking or telling about it, passing it on, or undoing it — "I'll check the
  refund", "I'll explain the return", "I'll escalate the refund", "I'll cancel
  the return";
- its object's head noun is the action: "the refund", "your full refund", "the
  upgrade of your flight" — not "the refund amount you mentioned", "the return
  policy" or "your preference for a refund" (heads "amount", "policy",
  "preference"). A head is the last word before the noun phrase ends: at
  punctuation, a word of the closed classes (`_END`: prepositions,
  conjunctions, pronouns, adverbs of time) or a participle ("the replacement
  sent out").

The verbs are told apart by the short list of those that leave the action
undone, not by a list of those that do it: a model names an action's doing in
more ways than a list holds ("record", "log", "lodge", "kick off", "get … sent
out"). Over the 882 τ²-bench replies both lists read the same 10 sentences, each
a promise; on the generated wordings a list of 53 doing verbs missed one in ten.

The action nouns are the six kinds' (`claimmodes.KIND_NOUNS`; an e-mail only as
"an e-mail": "your e-mail", "the e-mail on file" are the customer's address) and each declared
write's verb as a noun ("upgrade", "top-up", "suspension": `claimverbs`), with a
noun the write acts on beside it ("your flight upgrade", "the suspension of your
line") or, where every noun of that verb is done by the same tools, without one.
"""

from __future__ import annotations

import re
from functools import lru_cache

from sundry.agent.guards import claimmodes, claimverbs

# Us, and when: the future, or at work on it now.
_WILL = (
    r"\b(?:i|we)(?:'ll|\s+will|\s+shall|(?:'m|\s+am|'re|\s+are)\s+(?:going|about)\s+to)\s+"
    r"|\blet\s+(?:me|us)\s+"
)
_NOW = r"\b(?:i|we)(?:'m|\s+am|'re|\s+are)\s+"
_LEAD = (
    r"(?:(?:now|then|also|just|immediately|promptly|personally|first|right\s+away|currently|already"
    r"|go\s+ahead\s+and|[a-z]+ly)\s+)*"
)
_DET = r"(?:the|your|a|an|that|this|its|their|our)"
# A verb, the person it is done for, and a particle of a phrasal verb ("put through", "take care of").
_PARTICLE = (
    r"(?:care\s+of|ahead\s+with|forward\s+with|on\s+with|through\s+with|up\s+on|back\s+on|in\s+on|out\s+about"
    r"|with|of|on|about|regarding|concerning|into|through|up|out|over|for|at|after|to|in|off|down|around)"
)
_VERB = r"(?P<verb>(?!" + _DET + r"\b)[a-z][a-z-]*)(?:\s+(?:you|us|him|her|them))?(?:\s+(?P<part>" + _PARTICLE + r"))?"
# Where a noun phrase ends: punctuation, a word of a closed class, a participle, a figure or an ID.
_END_WORDS = (
    r"in|on|for|of|to|with|from|at|by|into|through|via|under|within|over|across|after|before|once|as|when"
    r"|whenever|while|until|unless|so|and|or|but|if|because|since|that|which|who|now|today|tomorrow|tonight"
    r"|right|straight|immediately|shortly|soon|asap|too|also|then|first|here|there|back|out|up|off|away|you"
    r"|it|me|us|them|please|promptly|directly|accordingly|instead|pending|per|according|against|toward|towards"
    r"|is|are|was|were|will|would|should|can|could|may|might|has|have|had|being|be|been|next|later"
    r"|along|together|without|upon|just|again|manually|properly|correctly|accurately"
)
_END = (
    r"(?=\s*(?:[.!?,;:()\u2014\u2013\"]|\s-\s|$)|\s+(?:" + _END_WORDS + r")\b|\s+[a-z]+ed\b"
    r"|\s+(?:sent|done|made|put|set|paid|taken|given|gotten|got|shown|seen|through|going|moving|under\s*way)\b"
    r"|\s+\S*\d)"
)
# A word inside the noun phrase before its head ("full", "15.00", "flight"): no determiner or closed-class word.
_MOD = r"(?:(?!(?:" + _END_WORDS + r"|" + _DET + r")\b)[\w.,$€£'-]+\s+)"
# Verbs that leave the action undone: looking, asking, telling, waiting, passing on, undoing it.
_NOT_DOING = frozenset(
    """
    check double-check recheck review explain ask tell confirm reconfirm verify see find investigate research
    clarify discuss describe outline detail summarise summarize walk go consider assess evaluate examine inspect
    monitor track follow keep update let know share mention calculate estimate quote determine search need want
    like wait await expect hope help understand appreciate acknowledge regret apologise apologize read repeat
    remind answer reach contact escalate forward pass refer transfer hand flag report cancel reverse withdraw
    undo void reject decline deny refuse stop block pause delay postpone revoke retract drop remove dispute
    query question chase look pull bring show
    """.split()
)
# Of those, a verb that does carry the action out with its particle: "go ahead with", "follow through with".
_DOING_PHRASES = frozenset({("go", "ahead with"), ("go", "through with"), ("follow", "through with")})
# A particle that makes any verb one of talking about the action: "reach out about", "write to you regarding".
_ABOUT = frozenset({"about", "out about", "regarding", "concerning", "into"})


def _base_of(word: str, progressive: bool) -> set[str]:
    """The bases a verb form may be of ("processing" → process, processe; "putting" → put)."""
    word = word.lower()
    if not progressive:
        return {word}
    if not word.endswith("ing") or len(word) < 5:
        return set()
    stem = word[:-3]
    out = {stem, stem + "e"}
    if len(stem) > 2 and stem[-1] == stem[-2]:
        out.add(stem[:-1])  # putting → put
    return out


def _doing(verb: str, part: str | None, progressive: bool) -> bool:
    bases = _base_of(verb, progressive)
    if not bases:
        return False  # "I'm sorry the refund …": no verb at work
    part = re.sub(r"\s+", " ", part or "").lower()
    if part in _ABOUT:
        return False
    if any((b, part) in _DOING_PHRASES for b in bases):
        return True
    return not bases & _NOT_DOING


def _noun(pattern: str) -> str:
    return r"(?:" + pattern + r")"


_NOUNS = {kind: _noun(p) for kind, p in claimmodes.KIND_NOUNS.items()}
_EMAIL = r"e-?mails?"  # only after a/an: "your e-mail", "the e-mail on file" are the customer's address


# --- each declared write's verb as a noun ------------------------------------------------------

# Nouns made from verbs by a suffix English does not make by rule alone.
_NOMINAL = {"suspend": "suspension", "resume": "resumption", "restore": "restoration", "add": "addition"}


def nominals(base: str) -> set[str]:
    """What a verb's doing is called as a noun: the base itself ("upgrade", "top up", "top-up"), and
    its -ation ("activation", "modification") or the irregular noun ("suspension")."""
    out = {base}
    if " " in base:
        out.add(base.replace(" ", "-"))
    if base in _NOMINAL:
        out.add(_NOMINAL[base])
    elif base.endswith("ate"):
        out.add(base[:-1] + "ion")
    elif base.endswith("ify"):
        out.add(base[:-1] + "ication")
    return out


@lru_cache(maxsize=64)
def _declared(vocab: claimverbs.Vocabulary) -> tuple:
    """(the nominal's pattern, the verb, and the kind when the verb needs no noun to say it) per verb."""
    out = []
    for verb in vocab.verbs:
        tool_sets = set(verb.tools_by_noun.values())
        alone = verb.kind(sorted(verb.tools_by_noun)[0]) if len(tool_sets) == 1 else None
        names = sorted(nominals(verb.base), key=len, reverse=True)
        out.append((r"(?:" + "|".join(re.escape(n).replace(r"\ ", r"\s+") for n in names) + r")", verb, alone))
    return tuple(out)


def _own_kind(head: str, phrase: str, after: str, verb: claimverbs.Verb, alone: str | None) -> str | None:
    """The declared kind a nominal head is of: a noun the write acts on before it in its phrase ("your
    flight upgrade") or right after it ("… of your flight", "… to your reservation"); else, where every
    noun of the verb is one tool's and the head is a noun made from the verb ("the suspension"), that
    kind. A verb's bare base needs its noun ("the top-up" does not): "the issue", "the change" are as often
    no action at all."""
    nouns = sorted(verb.tools_by_noun, key=len, reverse=True)
    said = r"(?:" + "|".join(re.escape(n).replace(r"\ ", r"\s+") + r"s?" for n in nouns) + r")"
    m = re.search(r"\b(?P<n>" + said + r")\s+$", phrase, re.I) or re.match(
        r"\s+(?:of|to|for|on)\s+(?:" + _DET + r"\s+)?(?:[\w-]+\s+){0,2}?(?P<n>" + said + r")\b", after, re.I
    )
    if m:
        return verb.kind(verb._noun_of(m.group("n")))
    return alone if re.sub(r"\s+", " ", head.lower()) != verb.base else None


# --- the reading --------------------------------------------------------------------------------


def _heads(vocab: claimverbs.Vocabulary) -> list[tuple[str, str | None, tuple | None]]:
    """(the head's pattern, the six kinds' kind or None, the declared verb and its lone kind or None)."""
    out: list[tuple[str, str | None, tuple | None]] = [(p, kind, None) for kind, p in _NOUNS.items()]
    out.append((_EMAIL, claimmodes.EMAIL, None))
    out += [(p, None, (verb, alone)) for p, verb, alone in (_declared(vocab) if vocab else ())]
    return out


def _phrase(heads) -> re.Pattern:
    alternatives = "|".join(f"(?P<h{i}>{p})" for i, (p, _k, _d) in enumerate(heads))
    return re.compile(r"(?P<det>" + _DET + r")\s+(?P<mods>" + _MOD + r"{0,3}?)(?:" + alternatives + r")\b" + _END, re.I)


@lru_cache(maxsize=64)
def _compiled(vocab: claimverbs.Vocabulary) -> tuple:
    heads = _heads(vocab)
    return heads, _phrase(heads)


_STARTS = (
    re.compile(r"(?:" + _WILL + r")" + _LEAD + r"(?:be\s+)?" + _VERB + r"\s+", re.I),
    re.compile(_NOW + _LEAD + _VERB + r"\s+", re.I),
)
# Another verb of the same subject: "I'll cancel the order and process the refund".
_AND = re.compile(r"\band\s+" + _LEAD + _VERB + r"\s+", re.I)
_ALSO = re.compile(r"\s*,?\s*(?:and|or|as\s+well\s+as|plus)\s+(?:also\s+)?", re.I)
# Where the subject's clause ends: a new clause, or another subject ("… and you'll receive").
_CLAUSE_END = re.compile(
    r"[;:]|,\s+(?!and\b)|\bbut\b|\b(?:you|they|it|he|she|this|that)(?:'ll|'re|'s|'ve|\s+(?:will|can|may|should"
    r"|would|are|is|was|were|have|has|need|must|get|receive))\b",
    re.I,
)


def _objects(sentence: str, at: int, phrase: re.Pattern, heads) -> list[tuple[re.Match, int]]:
    """The action noun phrases that start at `at`, with any joined to them ("the refund and the return")."""
    out = []
    while True:
        m = phrase.match(sentence, at)
        if m is None:
            return out
        hit = next(i for i in range(len(heads)) if m.group(f"h{i}") is not None)
        out.append((m, hit))
        joined = _ALSO.match(sentence, m.end())
        if joined is None:
            return out
        at = joined.end()


def promised_kinds(sentence: str, vocab: claimverbs.Vocabulary = claimverbs.EMPTY) -> list[str]:
    """The kinds of action `sentence` promises as the object of our verb (see the module docstring)."""
    if not re.search(r"\b(?:i|we|let)\b", sentence, re.I):
        return []
    heads, phrase = _compiled(vocab)
    out: list[str] = []
    for progressive, start in enumerate(_STARTS):
        for m in start.finditer(sentence):
            verbs = [(m, m.end())]
            # The subject's other verbs in the clause: "… and process the refund".
            clause = _CLAUSE_END.search(sentence, m.end())
            stop = clause.start() if clause else len(sentence)
            verbs += [(j, j.end()) for j in _AND.finditer(sentence, m.end()) if j.start() < stop]
            for v, at in verbs:
                if not _doing(v.group("verb"), v.group("part"), bool(progressive)):
                    continue
                for obj, hit in _objects(sentence, at, phrase, heads):
                    _pattern, kind, declared = heads[hit]
                    if kind == claimmodes.EMAIL and obj.group("det").lower() not in ("a", "an"):
                        continue
                    if declared is not None:
                        kind = _own_kind(obj.group(f"h{hit}"), obj.group("mods"), sentence[obj.end() :], *declared)
                    if kind is not None:
                        out.append(kind)
    return list(dict.fromkeys(out))
