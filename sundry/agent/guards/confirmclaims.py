"""Does a reply say the customer confirmed an action? Pure.

"The customer has confirmed the refund on <order>", "you agreed to cancel it",
"your approval of the return has been received", "thanks for confirming the
refund of 13.00 USD": each tells the customer (and anyone reading the ticket)
that a confirmation exists for that action. Confirmations are records — a card
the customer confirmed, by its button or a typed yes, or staff on their behalf
(`agent.cards`) — so the claim is judged on them (`replyclaims`, mode
`AGREED`): it stands only on a confirmed card for a call of its kind, on the
record and for the figure it names.

Asking for a confirmation claims none: a question ("Can you confirm the
refund?", "Have you confirmed it?"), a request ("Please confirm the refund"),
a condition or a future ("once you confirm, …", "if you have agreed to the
refund, …"), a negation ("you haven't confirmed it yet").

A request that points the customer at the card claims the card is there:
"Please confirm the refund on the card", "press Confirm to approve the
cancellation", "please use the confirmation card for the return"
(`requested_on_card`). It is read as that action pending (`replyclaims`: it
stands on an open card or hold for it, or on the action having run). A
request that names no card — "Please confirm the refund amount", "Can you
confirm the amount you want refunded?" — is left alone: the customer may
answer in the chat, the agent then makes the call whose card they confirm, and
asking first is what a careful agent does before every write.
"""

from __future__ import annotations

import re

AGREED = "agreed"

# The action a confirmation is of, as its object names it (`claimmodes`' kind words).
_ACTION = {
    "refund": r"refund\w*|reimburs\w*",
    "cancel": r"cancel\w*",
    "return": r"return(?:s|ing)?\b(?!\s+to\s+(?:your|the)\b)",
    "replace": r"replace\w*|exchang\w*",
}
# Up to four words between the verb and the action ("the full refund", "the 13.00 USD refund"), none of
# which starts a clause of its own: "you confirmed you want a refund" reports a wish, not a confirmation.
_OBJECT = (
    r"\s+(?:(?:the|your|their|a|an|this|its|our)\s+)?"
    r"(?:(?!(?:you|that|we|i|not|no|want|wanted|wish|would|to|if|whether)\b)[\w.,$€£-]+\s+){0,4}?"
    r"(?P<what>" + "|".join(f"(?:{p})" for p in _ACTION.values()) + r")"
)
_WHO = r"\b(?:you|the\s+customer|the\s+client|the\s+account\s+holder|the\s+cardholder)"
_ADV = r"(?:now\s+|already\s+|just\s+|successfully\s+|kindly\s+|also\s+|officially\s+|explicitly\s+)*"
_VERB = (
    r"(?:confirmed|agreed\s+to|approved|accepted|authori[sz]ed|consented\s+to|okayed|signed\s+off\s+on"
    r"|(?:gave|given)\s+(?:us\s+)?(?:the\s+|your\s+)?go-ahead\s+(?:for|to))"
)
_WHAT = "|".join(f"(?:{p})" for p in _ACTION.values())
_SHAPES = [
    re.compile(p, re.I)
    for p in (
        # "you (have) confirmed the refund", "the customer has agreed to cancel", "you've approved the return"
        _WHO + r"(?:'ve|'s|\s+have|\s+has|\s+had)?\s+" + _ADV + _VERB + _OBJECT,
        # "thanks for confirming the refund", "thank you for agreeing to the cancellation"
        r"\bthanks?(?:\s+you)?\s+(?:so\s+much\s+|very\s+much\s+)?for\s+(?:confirming|agreeing\s+to|approving"
        r"|accepting|authori[sz]ing|okaying|your\s+(?:confirmation|approval|agreement|consent|go-ahead)\s+(?:of|for|to))"
        + _OBJECT,
        # "your confirmation of the refund was received", "the customer's approval of the cancellation is recorded"
        r"\b(?:your|the\s+customer's|the\s+client's|their)\s+(?:confirmation|approval|agreement|consent|acceptance"
        r"|authori[sz]ation|go-ahead)\s+(?:of|for|to)"
        + _OBJECT
        + r"(?:[^.!?]|\.\d){0,60}?\b(?:has|have|was|were|is|are)\s+(?:now\s+|been\s+)*(?:received|recorded|noted"
        r"|registered|logged|in|through|on\s+file)\b",
        # "the refund was confirmed by you", "the cancellation has been approved by the customer"
        r"(?P<what>" + _WHAT + r")(?:[^.!?]|\.\d){0,50}?\b(?:has|have|was|were)\s+(?:now\s+|already\s+)?"
        r"(?:been\s+)?(?:confirmed|approved|accepted|authori[sz]ed|agreed)\s+by\s+(?:you|the\s+customer|the\s+client)\b",
    )
]
# A confirmation to come or under a condition is none yet: "once you've confirmed the refund, …".
_NOT_YET = re.compile(
    r"\b(?:if|once|unless|until|whether|when|whenever|after|before|as\s+soon\s+as|not|never|no)\b[^,;:.!?]*$", re.I
)


def confirmed_actions(sentence: str) -> list[str]:
    """The kinds of action (refund, cancel, return, replace) a statement says the customer confirmed."""
    s = sentence.strip()
    if not s or s.endswith("?"):
        return []
    out = []
    for m in (m for shape in _SHAPES for m in shape.finditer(s)):
        if _NOT_YET.search(s[: m.start()]):
            continue
        what = m.group("what")
        out += [kind for kind, pattern in _ACTION.items() if re.fullmatch(f"(?:{pattern})", what, re.I)]
    return list(dict.fromkeys(out))


# The card or its button, named as where the customer confirms — not a payment card ("your card",
# "the card ending in 1234", "a gift card").
_NOT_PAYMENT = r"(?!\s+(?:ending|number|on\s+file|details|you|that|which|used|balance))"
_CARD = re.compile(
    r"\bconfirmation\s+(?:card|button|prompt)\b"
    r"|\b(?:on|in|using|via|from|through)\s+the\s+card\b"
    + _NOT_PAYMENT
    + r"|\b(?:check|see|review|use|open|look\s+at|find)\s+the\s+card\b"
    + _NOT_PAYMENT
    + r"|\bthe\s+card\s+(?:below|above|shown|on\s+(?:this|the|your)\s+page|on\s+(?:the\s+)?screen)\b"
    r"|\b(?:confirm|approve|accept|yes)\s+button\b|\bthe\s+button\b"
    r"|\b(?:press|click|tap|hit|select)(?:ing)?\s+(?:on\s+)?(?:the\s+)?[\"'\u201c]?(?:confirm|approve|accept|yes)\b",
    re.I,
)
# A request: "please …", an imperative at the sentence's start, "can you …".
_REQUEST = re.compile(
    r"^\W*(?:(?:so|now|then|ok|okay|great|alright|next)\W+)?(?:(?:please|kindly|just|simply)\s+)*(?:confirm|approve"
    r"|accept|authori[sz]e|press|click|tap|hit|select|use|check|review|open|look\s+at|go\s+to)\b"
    r"|\bplease\b|\b(?:can|could|would|will)\s+you\s+(?:please\s+)?(?:confirm|approve|accept|authori[sz]e|press"
    r"|click|tap|hit|select|use|check|review|open)\b",
    re.I,
)
_NO_CARD = re.compile(r"\b(?:no|not|never|without|if|once|when|whenever|after)\b|n't\b", re.I)


def requested_on_card(sentence: str) -> list[str]:
    """The kinds of action (refund, cancel, return, replace) a request asks the customer to confirm on
    the card or its button, telling them a card for it is there."""
    s = sentence.strip()
    card = _CARD.search(s)
    if card is None or not _REQUEST.search(s) or _NO_CARD.search(s[: card.start()]):
        return []
    return [kind for kind, pattern in _ACTION.items() if re.search(r"\b(?:" + pattern + r")", s, re.I)]
