"""What a sentence says of an action besides "it is done": pending, refused, to come, or not done. Pure.

`replyclaims` reads "done" statements; this module reads the other four ways a
reply speaks of an action, each of which the ticket's own state can contradict:

- pending: "your refund is being processed", "I've put through a request for a
  return", "I've sent you a card to confirm cancelling …" — something is under
  way (a card awaiting the customer, a hold awaiting staff) or already ran;
- future: "you will receive 15.00 USD on …", "I'll cancel it once you confirm",
  "the full amount will be refunded to your card" — a promise, which stands on
  an open card or hold for it, or on an action that ran (or whose declared
  consequence it is: a cancellation that refunds);
- refused: "staff declined the refund", "the cancellation was rejected" — stands
  only on a card the customer declined or a hold staff rejected (or that was
  refused on re-check);
- denied: "No, nothing was cancelled", "no refund has been made on …" — a
  "no" about a past action, contradicted when the actions lane shows it ran.

A sixth way is an offer: "I can refund 48.99 USD on <order> now", "I'm able
to cancel it for you", "would you like me to book a return?", "if you'd like,
I'll e-mail you the label" (`offer_rest`, `offered_kinds`). It promises nothing
done, but it tells the customer the action is open to them, which the
ticket's state can contradict: a rule forbids it, it was declined, it is done
already, or its card names another figure. A question that offers nothing
claims nothing; nor does a future about the customer's own doing ("you will
need to return the item").
"""

from __future__ import annotations

import re

PENDING, FUTURE, REFUSED, DENIED, OFFER = "pending", "future", "refused", "denied", "offer"

REFUND, CANCEL, RETURN, REPLACE, EMAIL, PHONE = "refund", "cancel", "return", "replace", "email", "phone"

# Money going back to where it came from is a refund, whatever the verb ("returned to your card").
_BACK_TO = (
    r"\b(?:returned|go(?:es)?\s+back|sent\s+back|credited(?:\s+back)?|back)\s+to\s+(?:your|the)\s+"
    r"(?:original\s+)?(?:[\w-]+\s+){0,2}?(?:card|account|payment|method|wallet|bank|paypal|balance)\b"
)
_KIND_WORDS = {
    REFUND: re.compile(r"\brefund\w*|\bmoney\s+back\b|\breimburs\w*|\bcredited\b|" + _BACK_TO, re.I),
    CANCEL: re.compile(r"\bcancel\w*", re.I),
    RETURN: re.compile(r"\breturn(?:s|ed|ing)?\b(?!\s+to\s+(?:your|the)\b)", re.I),
    REPLACE: re.compile(r"\breplace\w*|\bexchang\w*", re.I),
}
# A contact is promised only by us, in so many words: "I'll e-mail you", "we will call you". After a
# determiner "e-mail" is a noun: "I'll use the e-mail on file" promises none ("I'll send an e-mail":
# `objectpromises`).
_WE_WILL = (
    r"\b(?:i|we)(?:'ll|\s+will|\s+shall|(?:\s+am|'m|\s+are|'re)\s+going\s+to)\s+"
    r"(?:(?!(?:the|your|a|an|that|this|its|their|our|my)\b)\w+\s+){0,2}?"
)
_CONTACT_FUTURE = {
    EMAIL: re.compile(_WE_WILL + r"(?:e-?mail\b|send\s+you\s+(?:an?\s+|the\s+)?(?:\w+\s+)?e-?mail)", re.I),
    PHONE: re.compile(_WE_WILL + r"(?:call|phone|ring)\s+you\b", re.I),
}
# "You will receive 15.00 USD", "you'll get your money back": money to the customer is a refund.
_RECEIVE = re.compile(r"\byou(?:'ll|\s+will)\s+(?:\w+\s+){0,2}?(?:receive|get|see)\b", re.I)

_QUESTION_OFFER = re.compile(
    r"\b(?:would\s+you\s+like|do\s+you\s+want|shall\s+i|should\s+i|if\s+you(?:'d|\s+would)?\s+(?:like|want|wish|prefer)"
    r"|if\s+you\s+(?:decide|choose)|if\s+(?:so|yes)|let\s+me\s+know\s+if)\b",
    re.I,
)
# A future that counts: "will" not followed by what the customer must do, or a negation.
_FUTURE = re.compile(r"\b(?:will|shall)\b|'ll\b|\bgoing\s+to\b", re.I)
_NOT_A_PROMISE = re.compile(
    r"\s*(?:not|never|need|needs|have\s+to|has\s+to|want|like|be\s+able|be\s+unable|require|also\s+need|only\s+be"
    r"\s+able|first\s+need)\b",
    re.I,
)
# Bookkeeping verbs: what they say is on record. A request on record is under way ("your refund request has
# been recorded", "I've logged your cancellation request", "I've recorded your refund"); the action
# itself on record is done ("your refund has been recorded": `replyclaims`).
_RECORDED = r"recorded|registered|logged|noted|entered|filed|received"
_REQUEST = (
    r"\b(?:refund|cancell?ation|return|exchange|replacement)s?\s+requests?\b"
    r"|\brequests?\s+(?:for|to)\s+(?:a\s+|an\s+|the\s+|your\s+)?(?:[\w-]+\s+){0,2}?"
    r"(?:refund|cancell?ation|cancel|return|exchange|replacement|replace)\w*\b"
)
_PENDING = re.compile(
    r"\b(?:refund|cancell?ation|return|exchange|replacement|request)s?\b(?:\s+request)?(?:[^.!?]|\.\d){0,80}?"
    r"\s(?:is|are|has\s+been|have\s+been|was|were)\s+(?:now\s+|currently\s+|still\s+|successfully\s+)?"
    r"(?:being\s+processed|being\s+reviewed|in\s+progress|pending|awaiting|waiting|under\s+review|submitted|requested"
    r"|put\s+through|escalated|forwarded|sent\s+(?:to\s+\w+\s+)?for\s+(?:\w+\s+)?approval|on\s+hold)\b"
    r"|"
    + _REQUEST
    + r"(?:[^.!?]|\.\d){0,60}?\s(?:is|are|has\s+been|have\s+been|was|were)\s+(?:now\s+|successfully\s+)?"
    r"(?:" + _RECORDED + r")\b"
    r"|\b(?:i|we)(?:'ve|\s+have)?\s+(?:now\s+|just\s+|already\s+)?(?:put\s+through|submitted|raised|requested|escalated"
    r"|filed|sent|forwarded|opened|" + _RECORDED + r")\s+(?:you\s+)?(?:a|an|the|your)\s+(?:[\w-]+\s+){0,4}?"
    r"(?:refund|cancell?ation|return|exchange|replacement)(?:\s+request|\s+for\s+approval)?\b"
    r"|\b(?:i|we)(?:'ve|\s+have)?\s+(?:now\s+|just\s+)?(?:sent|shown|opened|put)\s+(?:you\s+)?(?:a|the)\s+"
    r"(?:confirmation\s+)?card\b"
    r"|\b(?:is|are)\s+(?:now\s+)?(?:awaiting|waiting\s+for|pending)\s+(?:your\s+confirmation|confirmation|approval"
    r"|(?:staff|team|manager|supervisor)(?:'s)?\s+approval|a\s+(?:staff\s+)?decision)\b"
    r"|\bpending\s+(?:staff\s+|your\s+|manager\s+)?(?:approval|confirmation|review)\b",
    re.I,
)
_REFUSED = re.compile(
    r"\b(?:was|were|has\s+been|have\s+been|had\s+been|got|been)\s+(?:\w+\s+)?(?:declined|rejected|refused|denied"
    r"|turned\s+down|not\s+approved)\b"
    r"|\b(?:staff|team|colleague|colleagues|manager|supervisor|approver|reviewer|you)\s+(?:\w+\s+)?(?:declined|rejected"
    r"|refused|denied|turned\s+down|did\s+not\s+approve|didn't\s+approve)\b",
    re.I,
)
# "Not" next to a done form: "has not been cancelled", "no refund has been made", "I haven't issued any refund".
# "No other items were modified", "nothing else was cancelled" deny the rest, not what was done.
_NEGATION = re.compile(
    r"\b(?:not|never)\b|\b(?:nothing|none)\b(?!\s+(?:else|of\s+the\s+other)\b)|n't\b|\bno\b(?!\s+(?:longer"
    r"|action|need|further|additional|extra|other|more|problem|worries|charge|cost|fees?|price|difference"
    r"|changes?)\b)",
    re.I,
)
_CONDITIONAL = re.compile(
    r"\b(?:will|would|could|can|may|might|must|should|shall|if|unless|once|until|whether"
    r"|able|unable|eligible|cannot)\b|'ll\b",
    re.I,
)


# A promise names its action in the future verb itself ("will be refunded", "I'll cancel"), as the
# subject the future is said of ("the refund will go to your card"), or as what we will proceed with
# ("I'll proceed with your return"); "I'll explain the return process" or "you will receive an e-mail
# on how to return it" promise no return.
_FUT = r"(?:will|shall|'ll|(?:am|is|are)\s+going\s+to)\s+(?:now\s+|then\s+|also\s+|immediately\s+|automatically\s+)?"
_VERB = {
    REFUND: r"refund(?:ed)?|credit(?:ed)?|reimburse[d]?",
    CANCEL: r"cancel(?:l?ed)?",
    RETURN: r"return(?:ed)?(?!\s+to\s+(?:your|the)\b)",
    REPLACE: r"replace[d]?|exchange[d]?|swap(?:ped)?",
}
_NOUN = {
    REFUND: r"refunds?|reimbursement|price\s+difference|difference|full\s+amount|amount|money|balance|\$[\d.,]+",
    CANCEL: r"cancell?ations?|(?:order|reservation|booking|subscription)s?",
    RETURN: r"returns?",
    REPLACE: r"replacements?|exchanges?",
}
# What each kind's doing is called as a noun (also read by `objectpromises`).
KIND_NOUNS = {
    REFUND: r"refunds?",
    CANCEL: r"cancell?ations?",
    RETURN: r"returns?",
    REPLACE: r"replacements?|exchanges?",
}
_PROCEED = (
    r"\b(?:i|we)\s*" + _FUT + r"(?:go\s+ahead(?:\s+and)?(?:\s+with)?|proceed(?:\s+with)?|process|submit|complete"
    r"|place|issue|initiate|arrange|book|start|request|send|ship|put\s+through|finali[sz]e)\s+(?:the\s+|your\s+|a\s+|an\s+"
    r"|this\s+|that\s+)?(?:[\w-]+\s+){0,3}?(?:"
)
_SPAN = r"(?:[^.!?]|\.\d)"  # within one sentence; a decimal point (74.12) does not end it


def _promised(kind: str, sentence: str) -> bool:
    if re.search(
        _FUT
        + r"(?:"
        + _SPAN
        + r"{0,40}?\band\s+(?:then\s+)?)?(?:be\s+)?(?:fully\s+|partially\s+)?(?:"
        + _VERB[kind]
        + r")\b",
        sentence,
        re.I,
    ):
        return not _NOT_OURS.search(sentence) or kind != RETURN
    if re.search(_PROCEED + KIND_NOUNS[kind] + r")\b", sentence, re.I):
        return True
    subject = re.search(
        r"(?:^|\b)(?:" + _NOUN[kind] + r")\b" + _SPAN + r"{0,40}?\b(?:will|shall)\s+(?!not\b|never\b|need|have\b"
        r"|help|let|allow|depend|require|take\s+effect)|(?:" + _NOUN[kind] + r")'ll\b",
        sentence,
        re.I,
    )
    if subject is None:
        return False
    if kind == REFUND and not re.search(r"refund|credit(?!\s+card)|reimburs|" + _BACK_TO, sentence, re.I):
        return False  # "the amount will be charged" is no refund
    if kind == CANCEL and not re.search(r"cancel", sentence, re.I):
        return False
    return True


# What the customer does is no promise of ours: "you'll need to return it", "once you return the item".
_NOT_OURS = re.compile(r"\byou\s+(?:will\s+|'ll\s+)?(?:need\s+to\s+|have\s+to\s+|can\s+)?return\b", re.I)


def kinds_in(sentence: str, mode: str, *, has_amount) -> list[str]:
    """The kinds of action the sentence speaks of, in `mode`. `has_amount`: whether the sentence
    names a sum of money (the caller's reading of amounts, which builds on this module)."""
    if mode == FUTURE:
        out = [kind for kind in _VERB if _promised(kind, sentence)]
        if (
            REFUND not in out
            and _RECEIVE.search(sentence)
            and (_has_money(sentence, has_amount) or _KIND_WORDS[REFUND].search(sentence))
        ):
            out.append(REFUND)
        return out + [kind for kind, pattern in _CONTACT_FUTURE.items() if pattern.search(sentence)]
    out = [kind for kind, pattern in _KIND_WORDS.items() if pattern.search(sentence)]
    if REFUND not in out and mode == PENDING and _RECEIVE.search(sentence) and _has_money(sentence, has_amount):
        out.append(REFUND)
    return out


def _has_money(sentence: str, has_amount) -> bool:
    return has_amount(sentence) or bool(re.search(r"\bmoney\b|\bfull\s+amount\b", sentence, re.I))


def _promises(sentence: str) -> bool:
    return any(
        not _NOT_A_PROMISE.match(sentence, m.end()) and not sentence[m.start() :].lower().startswith("won")
        for m in _FUTURE.finditer(sentence)
    )


_CLAUSE = re.compile(r"[,;:\u2014]|\b(?:and|but|so|because|as|while)\b", re.I)


_QUOTED = re.compile(r"\u201c[^\u201d]{0,80}\u201d|\"[^\"]{0,80}\"")


def _denies(sentence: str, done) -> bool:
    """A clause with a negation that, the negation taken out, states the action done (`done`: reads a
    done statement): "no refund has been made" → "refund has been made"."""
    if _CONDITIONAL.search(sentence):
        return False
    # A quoted phrase is not the reply's own negation: 'you're seeing "No Service"'.
    for clause in _CLAUSE.split(_QUOTED.sub(" ", sentence)):
        if _NEGATION.search(clause):
            plain = re.sub(r"\s+", " ", _NEGATION.sub("", clause)).strip()
            if plain and done(plain):
                return True
    return False


def mode_of(sentence: str, done) -> str | None:
    """PENDING, FUTURE, REFUSED or DENIED for a statement of one of those (None: a plain statement, or an
    offer, a question, a condition of the customer's). `done` reads a done statement (`replyclaims`)."""
    s = sentence.strip()
    if not s or s.endswith("?") or _QUESTION_OFFER.search(s):
        return None
    if _REFUSED.search(s):
        return REFUSED
    if _PENDING.search(s):
        return PENDING
    if _promises(s):
        return FUTURE
    if _denies(s, done):
        return DENIED
    return None


def asks_or_offers(sentence: str) -> bool:
    """Whether the sentence asks the customer's wish or makes what follows depend on it ("would you like
    …", "if you'd like, I'll …"): it promises nothing."""
    return bool(_QUESTION_OFFER.search(sentence))


# A bare yes or no to the customer's question about an action is read by `bareclaims.answered`.


# "I can …", "I'm able to …", "would you like me to …", "shall I …", "if you'd like, I'll …": what follows
# is offered. "I can't", "I cannot", "I'm unable to" are not ("can" is not followed by "'t" or "not").
_OFFER = re.compile(
    r"\b(?:i|we)(?:\s+can(?!'t|not)|\s+could(?!n't)|(?:\s+am|'m|\s+are|'re)\s+(?:able|happy|glad|ready)\s+to"
    r"|(?:'d|\s+would)\s+be\s+(?:happy|glad|able)\s+to)(?=\s)"
    r"|\b(?:would|do)\s+you\s+(?:like|want)\s+(?:me|us)\s+to(?=\s)"
    r"|\b(?:shall|should|can|may)\s+(?:i|we)(?=\s)"
    r"|\bif\s+(?:you(?:'d|\s+would)?\s+(?:like|want|wish|prefer)|so|yes)\b" + _SPAN + r"*?\b(?:i|we)"
    r"(?:'ll|\s+will|\s+can|\s+could|\s+shall)(?=\s)",
    re.I,
)
_LEAD = r"\s*(?:(?:also|now|just|then|only|certainly|definitely|quickly|go\s+ahead\s+and|proceed\s+to)\s+)*"
_BASE = {
    REFUND: r"refund|credit|reimburse|give\s+you\s+(?:your\s+)?money\s+back",
    CANCEL: r"cancel",
    RETURN: r"return(?!\s+to\s+(?:your|the)\b)",
    REPLACE: r"replace|exchange|swap",
    EMAIL: r"e-?mail|send\s+you\s+(?:an?\s+|the\s+)?(?:[\w-]+\s+)?e-?mail",
    PHONE: r"call|phone|ring",
}
_SET_UP = (
    r"(?:process|issue|book|arrange|start|request|send|ship|put\s+through|initiate|offer|set\s+up|place|open"
    r"|submit|create|proceed\s+with|go\s+ahead\s+with)\s+(?:you\s+)?(?:a|an|the|your|this|that)?\s*(?:[\w-]+\s+){0,3}?"
)


def offer_rest(sentence: str) -> str | None:
    """What a sentence offers to do ("refund 48.99 USD on …" of "I can refund 48.99 USD on …"), or None."""
    m = _OFFER.search(sentence)
    return sentence[m.end() :] if m else None


def offered_kinds(rest: str) -> list[str]:
    """The kinds of action an offer's words start with: "refund …", "cancel it", "book a return",
    "e-mail you the label", "call you". Kinds in other words ("look into the refund") are not offered."""
    out = [kind for kind, verb in _BASE.items() if re.match(_LEAD + r"(?:" + verb + r")\b", rest, re.I)]
    out += [
        kind
        for kind, noun in KIND_NOUNS.items()
        if kind not in out and re.match(_LEAD + _SET_UP + r"(?:" + noun + r")\b", rest, re.I)
    ]
    return out
