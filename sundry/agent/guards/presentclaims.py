"""An action handed over in the sentence itself: "Here is your full refund for <order>:". Pure.

A presentative says the thing is given now: "Sure, here is your full refund for
<order>:", "Here's your 48.99 USD refund", "Attached is your return label",
"Here is your replacement". No verb says "done", yet the customer reads that they
have it — so `replyclaims` judges it as a done-claim of that kind, on the record and
for the figure it names: it stands only on an action of that kind that ran; an open
card or hold makes it no more given than nothing does.

So does an action named as done by whoever did it, inside a phrase about something
else: "here are the details of the refund we issued", "the replacement I sent".

What is handed over must be the action itself, not something about it: "here is your
order's status", "here is the refund policy", "here's your refund amount", "here's
what I found about your refund", "here is how to request a refund" present no refund.
"""

from __future__ import annotations

import re

REFUND, RETURN, REPLACE = "refund", "return", "replace"

# What is handed over, by kind: the action's own noun (money back is a refund; a label is a return's).
_GIVEN = {
    REFUND: r"refunds?|reimbursements?|(?:store\s+)?credit|money\s+back",
    RETURN: r"(?:prepaid\s+)?returns?(?:\s+shipping)?(?:\s+labels?|\s+authori[sz]ation|\s+slip)?|prepaid\s+(?:shipping\s+)?labels?",
    REPLACE: r"replacements?|exchanges?|replacement\s+(?:item|product|order|unit)s?",
}
# "here is", "here's", "attached is", "please find attached" … then whose: "your", "the", "a".
_HERE = (
    r"\b(?:here(?:'s|\s+is|\s+are|\s+comes)|(?:attached|enclosed|below)\s+(?:is|are)"
    r"|(?:please\s+)?find\s+(?:attached|below|enclosed))\s+(?:your|the|a|an)\s+"
)
# Words before the noun that only say which or how much: "full", "partial", "48.99 USD", "$20".
_WHICH = (
    r"(?:(?:full|partial|complete|whole|requested|promised|new|free|prepaid|final|agreed|[\d.,]+\s?[A-Z]{3}"
    r"|[$\u20ac\u00a3\u20b9]\s?[\d.,]+|[A-Z]{3}\s?[\d.,]+)\s+)*"
)
# After the noun: the sentence's end or what it is of, for or on — not another noun ("refund policy").
_ENDS = (
    r"(?=\s*(?:[.!:;,\u2014\u2013)]|$)|\s+(?:-\s|for|of|on|to|from|in|now|right|back|as|which|that)\b"
    r"|\s+you\s+(?:requested|asked\s+for|wanted|were\s+promised|were\s+owed)\b)"
)
# "the refund we issued", "the replacement (that) I sent": done by us, said in passing.
_BY_US = r"\s+(?:that\s+|which\s+)?(?:i|we)(?:'ve|\s+have|\s+had|'d)?\s+(?:just\s+|already\s+|now\s+)?"
_DID = r"(?:issued|processed|sent|made|initiated|completed|applied|arranged|booked|created|shipped|placed|credited)"
_CLAUSE_END = re.compile(r"[.!?](?!\d)|[:;\u2014]")
_CONDITION = re.compile(r"\b(?:if|once|when|after|unless|until|as\s+soon\s+as)\b", re.I)
_PRESENTED = {
    kind: re.compile(
        _HERE + _WHICH + r"(?:" + noun + r")" + _ENDS + r"|\b(?:" + noun + r")" + _BY_US + _DID + r"\b", re.I
    )
    for kind, noun in _GIVEN.items()
}


def kinds(sentence: str) -> list[str]:
    """The kinds of action `sentence` hands over now or names as done by us in passing (see the module
    docstring); none asked ("Here is your return label?") or under a condition ("once it's approved, here is …")."""
    s = (sentence or "").strip().replace("\u2019", "'")
    out = []
    for kind, pattern in _PRESENTED.items():
        m = pattern.search(s)
        if m is None or _CONDITION.search(s[: m.start()]):
            continue
        # Asked only if its own clause ends in "?" ("Here is your return label?"); "Here is your refund: anything
        # else?" hands it over, then asks something else.
        end = _CLAUSE_END.search(s, m.end())
        if end is None or end.group(0) != "?":
            out.append(kind)
    return out
