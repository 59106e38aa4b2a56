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
refund?", "Have you confirmed it?"), a request ("Please confirm the refund on
the card"), a condition or a future ("once you confirm, …", "if you have
agreed to the refund, …"), a negation ("you haven't confirmed it yet").
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
