"""A reply speaks to the customer, never about them. Pure.

Whatever a reply says, the customer reads it: every reply, and every tool text bound for
them (`reply_to_customer`'s message, an e-mail's body), is addressed to them. Text that
speaks of "the customer" as a person in the third person — "I don't have a reply for the
customer.", "Check the customer's order history.", "Customer wants a refund." — was written
for someone else (staff, Sundry, the model itself), whatever its wording. The reply check
asks for it again, then holds it, as it does Sundry's own words copied (`replycheck`); the
call guards refuse it in a tool's customer text.

Read as speaking of the customer: "the" or "this" before customer, client or user
(singular), its possessive always ("for the customer's protection" is a policy's wording
about someone, not to them: "for your protection"); and a sentence opening on the bare noun
and a verb ("Customer wants …", "Client asked …") or its possessive ("- User's order …").

Passes: the noun in a compound ("customer service", "the user ID", "the client portal",
"customer-facing", "the customer experience"); with another determiner ("a valued
customer", "your customer number", "our customer service team", "each user"); in the plural
("customers who order before noon"); after "that" ("note that user reviews are moderated", "I
couldn't find that user"); inside quotes (the customer's own words given back);
and, noun by noun, on a ticket whose customer speaks of someone of theirs by it ("my customer
never received it", "the user can't log in", "a client of ours"): there "the customer you
mentioned" is that person, and "your customer's parcel" passes anyway.
"""

from __future__ import annotations

import re

NOUNS = ("customer", "client", "user")
_NOUN = r"(?P<noun>customer|client|user)"
# The noun, singular, with its possessive or followed by neither a letter nor a hyphen ("customers",
# "customer-facing" are not it), and the word after it when one follows on the same line.
_HEAD = _NOUN + r"(?:(?P<poss>['’]s)\b|\b(?![-'’]))(?:[ \t]+(?P<next>[A-Za-z]+(?:-[A-Za-z]+)?))?"
# Not "that": as often a conjunction before a compound ("note that user reviews are moderated") or a record
# the customer named ("I couldn't find that user") as a person spoken of.
_DEFINITE = re.compile(r"\b(?:the|this)\s+" + _HEAD, re.I)
# A sentence, line or list item that opens on the bare noun and a verb: "Customer wants a refund.",
# "- User's card …". Not a label ("Customer:"), which frames a quote, nor a compound ("Customer reviews …").
_BARE = re.compile(
    r"(?:^|(?<=[.!?])[ \t]+)[ \t]*(?:[-*•][ \t]+)?(?P<noun>Customer|Client|User)"
    r"(?:(?P<poss>['’]s)\b|\b(?![-:'’]))(?:[ \t]+(?P<next>[A-Za-z]+(?:['’][a-z]+)?))?",
    re.M,
)
# What the bare noun's verb is: a past form ("Customer requested …") or one of these (a plural noun in -s
# reads the same as a verb, so only verbs a note about someone uses).
_BARE_VERB = re.compile(
    r"\w+ed$|(?:is|was|has|had|does|did|will|would|can|could|should|may|might|must|wants|needs|says|said|asks"
    r"|requests|reports|claims|confirms|states|thinks|believes|expects|prefers|agrees|agreed|paid|got|gets|sent"
    r"|wrote|called|already|also|still|just|never|now|then|only)(?:n['’]t)?$",
    re.I,
)
# Words the noun forms a compound with ("the customer portal", "the user ID"): what follows is named by them,
# the noun is not a person. Only forms that are not also a verb the customer could be the subject of
# ("the customer records …", "the customer reviews …" are sentences about them).
_COMPOUND = frozenset(
    "service services support care team teams desk centre center helpline hotline line chat id ids number "
    "account portal area page site name username profile record details data database info information base "
    "feedback relations success journey guide manual handbook documentation docs interface settings preferences "
    "permissions dashboard login panel menu screen tab view mode reference code app application hub loyalty "
    "program programme survey rep reps representative representatives agent agents advocate advocates form email "
    "e-mail address forum community group segment key token role level tier type category credentials "
    "password complaints contact charter terms review rating ratings story stories list file folder accounts profiles "
    "numbers records names".split()
)
# A document named for its reader: "the user's guide" is a compound too, though a possessive.
_DOCUMENT = frozenset({"guide", "manual", "handbook"})
# A noun by its ending ("the customer experience", "the user agreement", "the client relationship").
_NOUNISH = re.compile(r"(?:tion|sion|ment|ness|ship|ity|ance|ence|ism)$", re.I)
# Quoted text: the customer's own words given back, a name, a label — not the reply's own words.
_QUOTED = re.compile(r"\"[^\"\n]*\"|“[^”\n]*”|‘[^’\n]*’|(?<![\w'’])'[^'\n]*'(?![\w'’])")

# The customer's own words naming someone of theirs: "my customer", "our users", "the client", "another user",
# "a customer of ours" — with one word between at most ("my biggest client").
_THEIRS = re.compile(
    r"\b(?P<det>the|this|that|my|our|his|her|their|another|a|an)\s+(?:[a-z]+\s+)?"
    r"(?P<noun>customer|client|user)(?P<plural>s)?(?:['’]s?)?\b(?!-)(?:[ \t]+(?P<next>[A-Za-z]+(?:-[A-Za-z]+)?))?",
    re.I,
)
# … unless they are naming themselves: "I'm a loyal customer", "as a customer", "I am the customer who …".
_SELF = re.compile(r"(?:\b(?:am|im|been|be|being|as|are|was|were)|['’](?:m|re))\s+$", re.I)
_PLURAL_DETS = frozenset({"the", "my", "our", "his", "her", "their"})


def _compound(next_word: str | None) -> bool:
    word = (next_word or "").lower()
    return bool(word) and (word in _COMPOUND or bool(_NOUNISH.search(word)))


def _unquoted(text: str) -> str:
    return _QUOTED.sub('""', text or "")


def theirs(messages) -> frozenset[str]:
    """The nouns (customer, client, user) the customer's own messages use of someone else: a business
    writing about its customer, an administrator about a user. `messages`: their messages' texts."""
    out: set[str] = set()
    for text in messages or ():
        for m in _THEIRS.finditer(text or ""):
            det = m.group("det").lower()
            if m.group("plural") and det not in _PLURAL_DETS:
                continue
            if _compound(m.group("next")) or _SELF.search(text[: m.start()]):
                continue
            out.add(m.group("noun").lower())
    return frozenset(out)


def about_customer(text: str, customer_messages=()) -> list[str]:
    """The phrases of `text` that speak of the customer in the third person ("the customer", "the user's",
    "Customer wants" gives "Customer"), in order; none for a noun the customer's own messages use of
    someone of theirs (`theirs`). `customer_messages`: the texts of the customer's messages the request showed."""
    plain = _unquoted(text)
    found: list[tuple[int, str, str]] = []
    for pattern, bare in ((_DEFINITE, False), (_BARE, True)):
        for m in pattern.finditer(plain):
            if m.group("poss"):
                if (m.group("next") or "").lower() in _DOCUMENT:
                    continue
            elif _compound(m.group("next")) if not bare else not _BARE_VERB.match(m.group("next") or ""):
                continue
            start = m.start("noun") if bare else m.start()
            found.append((start, plain[start : m.end("poss") if m.group("poss") else m.end("noun")], m["noun"].lower()))
    if not found:
        return []
    spared = theirs(customer_messages)
    return [phrase for _at, phrase, noun in sorted(found) if noun not in spared]
