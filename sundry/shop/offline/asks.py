"""Plain requests the offline model reads besides actions: pure text classifiers, no request, no database.

"What's the status of <order>?" and "what's in <order>?" ask about one order named by its
number; "what was the order number of the air fryer?" asks which order held a product;
"I'd like 15.00 USD back for the lamp" asks for an amount back. Each reading needs the
words that make it one (a status, a content, an order number, an amount wished back), so a
statement that merely shares a word ("I got 15 USD back, thanks") is not read as the request.
The order's number itself is recognised by the caller with the domain's ID patterns; here
an ID is any short word with a digit in it.
"""

from __future__ import annotations

import re

from sundry.shop.offline.words import product_phrase

# An order named by number: "order #…", "my order number …", or the number alone. Any word with a digit qualifies here.
_REF = (
    r"(?:(?:my|the|this|that|our)\s+)?(?:order\s+(?:(?:number|no\.?|num|#)\s*)?)?#?"
    r"(?:[a-z]{1,5}[-_]?)?\d[\w-]*"
)
_IS = r"(?:'s|\s+is|\s+was)"

_STATUS = re.compile(
    "|".join(
        [
            rf"\bstatus\s+(?:of|on|for)\s+{_REF}",
            rf"(?:^|\s){_REF}(?:'s)?\s+status\b",
            rf"\bhow{_IS}\s+{_REF}\s+(?:doing|going|coming along|getting on|looking)\b",
            rf"\bwhat{_IS}\s+(?:happening|going on|up)\s+with\s+{_REF}",
            rf"\b(?:news|updates?)\s+(?:on|about|for)\s+{_REF}",
            rf"\bwhere\s+does\s+{_REF}\s+stand\b",
            rf"\bwhat{_IS}\s+the\s+latest\s+(?:on|with|about)\s+{_REF}",
            rf"\bwhat\s+stage\s+is\s+{_REF}\s+at\b",
        ]
    ),
    re.I,
)

_CONTENTS = re.compile(
    "|".join(
        [
            rf"\bwhat(?:'s|\s+is|\s+was|\s+were)?\s+(?:exactly\s+)?(?:in|inside|included\s+in)\s+{_REF}",
            rf"\bwhat\s+exactly\s+(?:is|was|'s)\s+(?:in|inside)\s+{_REF}",
            rf"\bwhat\s+(?:exactly\s+)?(?:items?|products?|things?)\s+(?:are|were|is|was|did\s+(?:i|we)\s+(?:get|order|buy))"
            rf"\s+(?:in|on|inside)\s+{_REF}",
            rf"\bwhich\s+(?:items?|products?|things?)\s+(?:are|were|is|was)\s+(?:in|on|inside)\s+{_REF}",
            rf"\bwhat\s+did\s+(?:i|we)\s+(?:order|buy|get|purchase)\s+(?:in|with|on|under)\s+{_REF}",
            rf"\bwhat\s+does\s+{_REF}\s+(?:contain|include|hold|have in it)\b",
            rf"\b(?:list|show\s+me|tell\s+me|what\s+are|what\s+were)\s+(?:all\s+)?(?:the\s+)?(?:contents?|items?|products?)"
            rf"\s+(?:of|in|on)\s+{_REF}",
        ]
    ),
    re.I,
)

# Something asked for, not only mentioned: a wish, a request or an imperative to give.
_WISH = re.compile(
    r"\b(?:i'?d\s+(?:really\s+)?like|i\s+would\s+(?:really\s+)?like|i\s+(?:really\s+|just\s+)?(?:want|need)|"
    r"can\s+i\s+(?:get|have)|could\s+i\s+(?:get|have)|may\s+i\s+have|please|pls|"
    r"(?:can|could|would)\s+you\s+(?:please\s+)?(?:give|send|pay|refund)|give\s+me|send\s+me|refund\s+me|"
    r"i'?m\s+asking\s+for|i'?d\s+appreciate|(?:is\s+it|would\s+it\s+be)\s+possible\s+to\s+(?:get|have)|"
    r"if\s+(?:i|we)\s+(?:can|could)\s+(?:get|have))\b",
    re.I,
)
# A question whether it happened: "did you give me 15 USD back?", "was 10 EUR off applied?".
_ASKS_WHETHER = re.compile(
    r"^\s*(?:(?:and|so|but|hi|hello)[,\s]+)?(?:did|have|has|was|were|is(?!\s+it\s+possible)|when|why)\b", re.I
)
# In the words just before the amount: a past event or a refusal ("I got …", "don't give me …").
_NOT_A_WISH = re.compile(
    r"\b(?:i|we)\s+(?:got|received|paid|spent|already\s+got|was\s+given)\b"
    r"|\b(?:don'?t|do\s+not|never|no\s+need\s+to)\b",
    re.I,
)
# "I'd like to send 2 back": things sent back, not money.
_SENDS_BACK = re.compile(r"\b(?:send|ship|return|bring|take|post|mail)\s*$", re.I)
_AMOUNT_BACK = re.compile(
    r"(?:[$€£₹]\s?\d[\d,]*(?:\.\d{1,2})?|\b(?:usd|eur|gbp|inr)\s?\d[\d,]*(?:\.\d{1,2})?"
    r"|\b\d[\d,]*(?:\.\d{1,2})?(?:\s?(?:usd|eur|gbp|inr|dollars?|euros?|pounds?|rupees?))?)\s+(?:back|off)\b"
    # "back in March", "back then": a time, not money returned.
    r"(?!\s+(?:then|when|in\s+(?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec|\d{4}|the\s+day)))",
    re.I,
)
# The bare figure of "15 back" (no currency named): read with the order's currency.
BARE_AMOUNT_BACK = re.compile(r"(?<![\w.$€£₹-])(\d[\d,]*(?:\.\d{1,2})?)\s+(?:back|off)\b", re.I)

_ORDER_NO = r"order\s+(?:number|no\.?|#|id|reference|ref)s?"
_WHICH_ORDER = re.compile(
    "|".join(
        [
            rf"\b(?:what|which){_IS}?\s+(?:the\s+|my\s+)?{_ORDER_NO}(?:\s+(?:was|is))?\s+(?:of|for|with|on)\s+(?P<a>.+)",
            r"(?<!\bin\s)\b(?:what|which)\s+order(?:\s+number)?\s+(?:was|is|were|are|did|does|had|has|contained|contains|included"
            r"|includes|held|holds)\s+(?P<b>.+)",
            # "in what order" may ask for a sequence; "in which order" asks which one.
            r"\bin\s+which\s+order\s+(?:was|were|is|did\s+(?:i|we)\s+(?:buy|get|order|purchase))\s+(?P<c>.+)",
            rf"\b(?:tell\s+me|know|find|need|give\s+me|send\s+me|look\s+up|check|get|remind\s+me\s+of)\s+the\s+{_ORDER_NO}"
            rf"\s+(?:of|for|with|on)\s+(?P<d>.+)",
            rf"(?:^|[,:]\s*){_ORDER_NO}\s+(?:of|for)\s+(?P<e>.+)\?\s*$",
        ]
    ),
    re.I,
)
# First words of a phrase that name no product ("which order is this about?", "… was the cheapest?").
_NOT_A_THING = frozenset(
    """about it this that one ones these those them there here for you me we i
cheapest dearest biggest largest smallest newest oldest most least heaviest lightest best worst""".split()
)


def _norm(text: str) -> str:
    return " ".join((text or "").replace("’", "'").split())


def _sentences(text: str) -> list[str]:
    # A full stop inside a figure or an ID ("15.00", "5.5L") ends no sentence.
    return [s.strip() for s in re.findall(r"(?:[^.!?]|\.(?=\w))+[.!?]*", _norm(text)) if s.strip()]


def order_question(text: str) -> str | None:
    """ "status" or "contents" when a sentence asks about an order named by number, else None."""
    for s in _sentences(text):
        if _STATUS.search(s):
            return "status"
        if _CONTENTS.search(s):
            return "contents"
    return None


def amount_back(text: str) -> bool:
    """A sentence wishes an amount back ("I'd like 15.00 USD back for the lamp"), not that one was given."""
    for s in _sentences(text):
        m = _AMOUNT_BACK.search(s)
        if not m or not _WISH.search(s) or _ASKS_WHETHER.search(s):
            continue
        clause = re.split(r"[,;:]\s|\s[—–-]\s", s[: m.start()])[-1]
        if not _NOT_A_WISH.search(clause) and not _SENDS_BACK.search(clause):
            return True
    return False


def order_number_of(text: str) -> str | None:
    """The product a question asks the order number of ("… of the air fryer?" → "air fryer"), else None."""
    for s in _sentences(text):
        m = _WHICH_ORDER.search(s)
        if not m:
            continue
        rest = next(g for g in m.groups() if g)
        phrase = product_phrase(rest) or product_phrase(f"the {rest}")
        if phrase and phrase.split()[0] not in _NOT_A_THING:
            return phrase
    return None
