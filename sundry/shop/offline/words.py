"""How the offline model reads a customer's words: pure text classifiers, no request, no database.

Kept apart from the decisions in `offline` so each pattern can be tested on
sentences alone: a question about an action is not a request for one, a
stated contact preference is not a request at all, and "the air fryer" names
a product the model must map to an order before it acts.
"""

from __future__ import annotations

import re

# "Is the refund for the air fryer done?", "has my cancellation gone through?",
# "is the refund for the grinder approved yet?", "did you cancel it?", "any news on my return?"
_ASKS_ABOUT = re.compile(
    r"^(?:(?:so|and|ok|okay|hi|hello|also|um|just checking|quick question|sorry)[,:!]?\s+)*"
    r"(?:is|isn't|has|hasn't|have|haven't|did|didn't|was|were|are|any (?:news|update)s?\b)\b"
    r"|\bwhat(?:'s| is| has)? (?:the )?(?:status|state) of\b|\bwhat happened (?:to|with)\b"
    r"|\bwhere(?:'s| is) (?:my|the) (?:refund|return|replacement|cancellation)\b"
    r"|\b(?:any|an) (?:news|update)s? (?:on|about)\b",
    re.I,
)
# A request dressed as a question: "is it possible to refund…", "can you cancel…".
_ASKS_FOR = re.compile(
    r"\b(?:is it possible|is there (?:any )?way|are you able|would it be possible|can (?:you|i|we)|could (?:you|i|we)"
    r"|will you|would you|please|i want|i'?d like|i need)\b",
    re.I,
)
_DONE_WORDS = re.compile(
    r"\b(?:done|through|approved|processed|issued|complete|completed|finished|sorted|happened|gone|arrived|"
    r"received|booked|arranged|sent|yet|already|status|news|update|went|go through|been)\b|\?\s*$",
    re.I,
)
_ACTION_WORDS = [
    ("cancel", re.compile(r"(?<!-)\bcancel", re.I)),
    ("refund", re.compile(r"\brefund|\bmoney back\b|\breimburs", re.I)),
    ("return", re.compile(r"\breturn", re.I)),
    ("replace", re.compile(r"\breplacement|\bexchange", re.I)),
]


def status_question(text: str) -> str | None:
    """The action ("refund", "cancel", "return", "replace") a message asks the status of, or None.

    A message asking *whether* something was done never asks for it to be done.
    """
    t = " ".join((text or "").replace("’", "'").split())
    for sentence in re.findall(r"[^.!?]+[.!?]*", t):
        s = sentence.strip()
        if not _ASKS_ABOUT.search(s) or _ASKS_FOR.search(s) or not _DONE_WORDS.search(s):
            continue
        for kind, rx in _ACTION_WORDS:
            if rx.search(s):
                return kind
    return None


_PHONE = re.compile(
    r"\b(?:phone|calls?)\s+only\b|\bonly\s+(?:by\s+|via\s+|over the\s+)?(?:phone|call)|"
    r"\b(?:call|phone|ring) me (?:instead|only)\b",
    re.I,
)
_EMAIL = re.compile(r"\be-?mail\s+only\b|\bonly\s+(?:by\s+|via\s+)?e-?mail", re.I)
_CHAT = re.compile(r"\bchat\s+only\b|\bonly\s+(?:here|in (?:this|the) chat|by chat|via chat)\b", re.I)
_NO_EMAIL = re.compile(r"\b(?:never|don'?t|do not|no)\b[^.]{0,20}\be-?mail", re.I)
_NO_PHONE = re.compile(r"\b(?:never|don'?t|do not|no)\b[^.]{0,20}\b(?:call|phone|ring)", re.I)


def contact_preference(text: str) -> str | None:
    """phone, email or chat when the customer says how they want to be contacted, else None."""
    t = (text or "").replace("’", "'")
    if _PHONE.search(t):
        return "phone"
    if _EMAIL.search(t):
        return "email"
    if _CHAT.search(t):
        return "chat"
    return None


def acknowledgement(text: str) -> str:
    """A plain acknowledgement of a constraint the customer just stated."""
    t = (text or "").replace("’", "'")
    pref = contact_preference(t)
    if pref == "phone":
        return "Understood — we'll only contact you by phone."
    if pref == "email":
        return "Understood — we'll only contact you by email."
    if pref == "chat":
        return "Understood — we'll only contact you here in the chat."
    if _NO_EMAIL.search(t):
        return "Understood — we won't email you."
    if _NO_PHONE.search(t):
        return "Understood — we won't call you."
    if re.search(r"\breplace|\bexchange", t, re.I):
        return "Understood — no replacement."
    sentence = " ".join(t.split()).rstrip(".!")
    return f'Understood — I\'ve noted that for this case: "{sentence}".'


# Words after "the"/"my" that name no product: parts of the case, not things bought.
_NOT_PRODUCTS = frozenset(
    """
order orders item items thing things stuff one ones other others rest same first second third fourth fifth last
latest previous recent whole money amount refund refunds return returns cancellation replacement exchange parcel
parcels package packages delivery deliveries tracking box packaging courier driver account card payment payments
email phone number address details status update news problem issue case ticket reply message question
lot bit rest time way case damage order's help support agent staff team shop store website app price charge
week weeks day days month months year morning evening today yesterday tomorrow
original method way name mind wife husband son daughter friend mum mom dad partner kids family neighbour door
""".split()
)
_DETERMINER = re.compile(r"\b(?:the|my|that|this|those|these|our)\s+", re.I)
_STOP_AFTER = frozenset(
    """
is was are were has have had be been for from to on of in at with and or but that which who done yet already
arrived came come gone went please thanks thank you i you it its it's me we they order orders item items
approved processed issued complete completed through refunded cancelled returned replaced delivered shipped
lost broken damaged cracked missing late still again now too also only just back full entire whole total
""".split()
)


def product_phrase(text: str) -> str | None:
    """Words naming a product after "the"/"my" ("the air fryer" → "air fryer"), or None."""
    t = (text or "").replace("’", "'")
    for m in _DETERMINER.finditer(t):
        words = []
        clause = re.split(r"[,;:!?]|\.(?:\s|$)", t[m.end() :], maxsplit=1)[0]
        for w in re.findall(r"[a-z0-9][a-z0-9.'-]*", clause.lower())[:3]:
            w = w.strip(".,'-")
            if not w or w in _STOP_AFTER:
                break
            words.append(w)
        words = [w for w in words if w not in _NOT_PRODUCTS and not w.isdigit()]
        if words and any(len(w) >= 3 for w in words):
            return " ".join(words)
    return None


_ANOTHER = re.compile(r"\b(?:another|additional|further|more|extra|second|also)\b", re.I)


def asks_for_more(text: str) -> bool:
    """ "refund another 10.00 USD": a new partial refund, not the earlier one again."""
    return bool(_ANOTHER.search(text or ""))


# "Is it approved?", "Did that work?", "Has it gone through?": about the case's latest action, naming none.
_VAGUE_STATUS = re.compile(
    r"^(?:(?:so|and|ok|okay|also|great)[,!]?\s+)*(?:is|has|did|was|have)\s+(?:it|that|this|they|you)\b[^.!]*?"
    r"\b(?:approved|done|through|work(?:ed)?|processed|sorted|happened|gone|go|finished|complete[d]?|do it)\b",
    re.I,
)
_HOW_MUCH = re.compile(r"\bhow much\b", re.I)
_WHERE_MONEY_GOES = re.compile(
    r"\b(?:original|same|my)\s+(?:card|payment(?: method)?|account)\b|\bback to (?:my|the) (?:card|bank)\b", re.I
)
# "OK.", "Alright", "Bye.": nothing to do, nothing to ask about.
_ACK = re.compile(
    r"^(?:ok(?:ay)?|k|alright|all right|fine|got it|i see|cool|sure|noted|understood|right|"
    r"bye|goodbye|bye bye|see you|that's it|that is it|that's all|no,? that's all|nothing else)"
    r"(?:[,!.\s]+(?:then|thanks|bye|now))*[\s.!]*$",
    re.I,
)


def vague_status(text: str) -> bool:
    """A question whether "it" was done, naming no action: about the latest one."""
    t = " ".join((text or "").replace("’", "'").split())
    return t.endswith("?") and bool(_VAGUE_STATUS.search(t))


# "How many refunds have you made?", "list my cancellations", "what has been refunded so far?",
# "how much have you refunded in total?": the actions of one kind on this case, counted and listed.
_ACTION_NOUN = {
    "refund": r"refunds|refunded",
    "cancel": r"cancell?ations|cancell?ed",
    "return": r"returns|returned",
    "replace": r"replacements|replaced",
}
_ACTIONS_ASKED = {
    kind: re.compile(
        rf"\bhow many (?:\w+ ){{0,3}}?(?:{noun})\b"
        rf"|\bhow many (?:\w+ ){{0,2}}?(?:did|have|has) (?:you|we|the shop) (?:\w+ )?{kind}\b"
        rf"|\b(?:list|show me|tell me) (?:all )?(?:of )?(?:the |my |your )?(?:{noun})\b"
        rf"|\bwhat (?:{noun}) (?:have|did|were|has)\b"
        rf"|\bwhat (?:all )?(?:has|have) (?:you |been |we )?(?:{noun})\b"
        + (
            r"|\bhow much (?:have you |has been |did you |was |were you )?(?:refunded|refund(?:ed)? me|given back)"
            r"\b[^.?!]{0,20}\b(?:in total|so far|altogether|in all|overall)\b"
            if kind == "refund"
            else ""
        ),
        re.I,
    )
    for kind, noun in _ACTION_NOUN.items()
}


def actions_question(text: str) -> str | None:
    """The kind of action a question asks to have counted or listed ("refund", "cancel" …), or None."""
    t = " ".join((text or "").replace("’", "'").split())
    return next((kind for kind, pattern in _ACTIONS_ASKED.items() if pattern.search(t)), None)


def amount_question(text: str) -> bool:
    """ "How much was it?": the amount of what was done."""
    return bool(_HOW_MUCH.search(text or ""))


# "When will I see the money?", "how long does a refund take?": when a refund arrives.
_WHEN_MONEY = re.compile(
    r"\bwhen (?:will|do|would|should|can|does) (?:i|we|it) (?:see|get|receive|have|show|arrive)\b[^.?!]{0,20}"
    r"\b(?:money|refund|funds)\b|\bwhen (?:will|does) (?:the|my) (?:money|refund|funds)\b"
    r"|\bhow long (?:will|does|do|would) (?:the |a |my |it )?(?:refunds? )?(?:take|to arrive)\b",
    re.I,
)
# "What are my options?", "what can you do?": what the shop allows for the case at hand.
_OPTIONS = re.compile(
    r"\bwhat (?:are )?(?:my|the) options\b|\bwhat options\b|\bwhich options\b"
    r"|\bwhat (?:can|could) (?:you|i|we) (?:do|offer)\b|\bwhat (?:do|would) you (?:suggest|offer)\b"
    r"|^\s*what happened(?: to (?:it|them|my (?:parcel|package|order)))?\s*\??\s*$",
    re.I,
)
# "How long does approval take?": when staff decide a held request.
_APPROVAL_TIMING = re.compile(
    r"\bhow long\b[^.?!]{0,30}\bapprov|\bwhen will\b[^.?!]{0,30}\b(?:approve|decide|hear)\b", re.I
)


def money_timing(text: str) -> bool:
    """ "When will I see the money?": when a refund reaches the customer."""
    return bool(_WHEN_MONEY.search(text or ""))


def approval_timing(text: str) -> bool:
    """ "How long does approval take?": when a held request is decided."""
    return bool(_APPROVAL_TIMING.search(text or ""))


def options_question(text: str) -> bool:
    """ "What are my options?": the remedies open for the case, naming no action."""
    return bool(_OPTIONS.search(text or ""))


def where_money_goes(text: str) -> bool:
    """ "Does it go to my original card?": where a refund is paid."""
    return bool(_WHERE_MONEY_GOES.search(text or ""))


def small_talk(text: str) -> str | None:
    """A closing or an acknowledgement that asks nothing: "goodbye", "ack", or None."""
    t = " ".join((text or "").replace("’", "'").split())
    if not _ACK.match(t):
        return None
    return "goodbye" if re.search(r"\b(?:bye|goodbye|see you)\b", t, re.I) else "ack"
