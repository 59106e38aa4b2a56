"""A reply speaks to the customer, never about them. Pure.

Whatever a reply says, the customer reads it: every reply, and every tool text bound for
them (`reply_to_customer`'s message, an e-mail's body), is addressed to them. Text that
speaks of "the customer" as a person in the third person — "I don't have a reply for the
customer.", "Check the customer's order history.", "Customer wants a refund." — was written
for someone else (staff, Sundry, the model itself), whatever its wording. The reply check
asks for it again, then holds it, as it does Sundry's own words copied (`replycheck`); the
call guards refuse it in a tool's customer text.

Read as speaking of the customer: "the" or "this" before customer, client or user (singular), its possessive
always ("for the customer's protection" is a policy's wording about someone, not to them: "for your
protection"); with up to two adjectives between ("the affected customer", "this very same user") — before client
or user only adjectives of one person ("the same user", "the original client", "the upset user"), since another
word there mostly names software or an account ("the email client", "the guest user"); "that" or "said" (with or
without an adjective) only where the noun is a person: the subject of a verb of a person ("that customer wants
…", "said client has asked …"), the one spoken to or given something ("Please ask that customer to …", "follow
up with said client", "refund that customer") or before a relative clause ("that customer who contacted us");
and a sentence opening on the bare noun, or an adjective and the noun, and a verb, "who" or "that" ("Customer
wants …", "Affected client asked …", "Customer who placed this order …") or its possessive ("- User's order …").

Passes: the noun in a compound ("customer service", "the user ID", "the client portal", "customer-facing", "the
customer experience", "the same customer service team"); with another determiner ("a valued customer", "your
customer number", "our customer service team", "each user", "any affected user"); in the plural ("customers who
order before noon", "the affected customers"); after a word that sets someone apart from the reader or names a
kind of person ("the other customer", "the wrong client", "the average user", "the new customer discount");
after "I'm" or "you're" ("You're the affected customer, so …": the reader named, not a third person); after
"that" or "said" elsewhere, their possessive included ("note that user reviews are moderated", "I couldn't find
that user", "that user's account is locked": a conjunction, or a record the customer named; "you said customer
support …"); inside quotes (the customer's own words given back); and, noun by noun, on a ticket whose customer
speaks of someone of theirs by it ("my customer never received it", "the user can't log in", "a client of ours",
but not "I'm the affected customer"): there "the customer you mentioned" is that person, and "your customer's
parcel" passes anyway.
"""

from __future__ import annotations

import re

NOUNS = ("customer", "client", "user")
_NOUN = r"(?P<noun>customer|client|user)"
# The noun, singular, with its possessive or followed by neither a letter nor a hyphen ("customers",
# "customer-facing" are not it), and the word after it when one follows on the same line.
_HEAD = _NOUN + r"(?:(?P<poss>['’]s)\b|\b(?![-'’]))(?:[ \t]+(?P<next>[A-Za-z]+(?:-[A-Za-z]+)?))?"
# A determiner, then up to two words before the noun ("the affected customer", "this very same user"), which
# `_modifies` judges. Each determiner is read from where it stands, so "that the customer" is read at "the".
_DETERMINER = re.compile(r"\b(?P<det>the|this|that|said)\s+", re.I)
_AFTER_DETERMINER = re.compile(
    r"(?P<mods>(?:(?!(?:customer|client|user)s?\b)[A-Za-z]+(?:-[A-Za-z]+)*\s+){0,2})" + _HEAD, re.I
)
# "That" and "said" only read as speaking of someone in some places. "That" is as often a conjunction before
# a compound ("note that user reviews are moderated") or points at a record the customer named ("I couldn't
# find that user", "that user's account is locked"), and "said" is as often a verb ("you said customer
# service …"); the noun is a person spoken of only as the subject of a verb only a person is the subject of
# ("that customer wants …", "said client has asked …", "that user should be told …"), as the one a verb
# of speaking to or giving someone is done to ("Please ask that customer to …", "follow up with said
# client", "refund that customer"), or before a relative clause ("that customer who contacted us").
_WEAK = frozenset({"that", "said"})
_PERSON_VERB = (
    r"(?:ask|want|need|request|report|claim|complain|expect|prefer|agree|wait|repl(?:y|ie)|respond|call|contact"
    r"|mention|confirm|insist|demand|wish|hope|feel|think|believe|decide|choose|chose|order|pay|paid|buy|bought"
    r"|say|said|tell|told|write|wrote|written|spoke|spoken|speak|talk|inform|notif(?:y|ie)|remind|advise|offer"
    r"|give|gave|given|send|sent|refund|reimburse|compensate|thank|reassure|apologi[sz]e|explain|receive|like"
    r")(?:s|es|d|ed|ing|n)?"
)
_PERSON_PREDICATE = re.compile(
    r"[ \t]+(?P<aux>(?:has|have|had|is|was|will|would|should|can|could|may|might|must|did|does|do)(?:n['’]t)?[ \t]+"
    r"(?:(?:not|already|also|still|just|never|now|been|be|being)[ \t]+){0,2})?(?:(?:already|also|just)[ \t]+)?"
    r"(?P<verb>" + _PERSON_VERB + r")\b",
    re.I,
)
# Verbs whose -s form is also a plural noun: with no auxiliary before it, "that customer orders …" is as often
# a conjunction and a compound ("we ask that customer orders be …").
_NOUN_TOO = re.compile(
    r"(?:order|request|report|claim|call|refund|demand|contact|mention|offer|replie|pay|wait|hope|wishe|thank|like)s$",
    re.I,
)
_ADDRESSED_AFTER = re.compile(
    r"\b(?:(?:ask|tell|told|inform|notify|notifie|remind|advise|contact|e-?mail|call|phone|message|text|reassure"
    r"|thank|assure|offer|giv|gave|send|sent|refund|reimburse|compensate|let|letting|pay|paid)(?:s|es|e|en|d|ed|ing|n)?"
    r"|(?:repl(?:y|ie)|respond|writ|wrote|speak|spoke|talk|explain|apologi[sz]|reach(?:es|ed|ing)?"
    r"[ \t]+out|get(?:s|ting)?[ \t]+back|got[ \t]+back)\w*[ \t]+to"
    r"|(?:follow(?:s|ed|ing)?[ \t]+up|check(?:s|ed|ing)?|confirm(?:s|ed|ing)?|speak(?:s|ing)?|spoke|talk(?:s|ed|ing)?"
    r"|(?:be|get|getting|got|stay)[ \t]+in[ \t]+touch)[ \t]+with"
    r"|(?:reply|replies|answer|answers|message|messages|response|update|news|note|words?)[ \t]+for)[ \t]+$",
    re.I,
)
# A relative clause after the noun makes it a person ("the customer who placed this order", "that client
# that contacted us", "Customer who …").
_RELATIVE = frozenset({"who", "whom", "whose", "that"})
# … and not after "I am", "you're", "are you": naming the reader or the writer is not speaking of a third person
# ("You're the affected customer, so the refund is yours to claim.").
_NAMING_SELF = re.compile(
    r"(?:\b(?:I|you|we)[ \t]+(?:am|are|were|was|will[ \t]+be|have[ \t]+been)|\b(?:I|you|we)['’](?:m|re|ll[ \t]+be|ve"
    r"[ \t]+been)|\b(?:am|are|were)[ \t]+(?:I|you|we)|\b(?:im|youre))[ \t]+$",
    re.I,
)
# Words between the determiner and the noun that are not an adjective of one person: function words ("note
# that every user"), numbers, and words that set someone apart from the reader or name a kind of person ("the
# other customer", "the wrong client", "the average user", "the end user", "the new customer discount").
_NOT_MODIFIER = frozenset(
    "a an the this that these those my your our his her its their each every any all no some such which what "
    "whose whichever whatever either neither both few many more most several one two three is are was were be "
    "been am has have had do does did will would can could should may might must not and or but if so as of to in "
    "on at for with by from about than then when once while because since after before until unless where how why "
    "i you we they he she it me us them him other another different wrong right correct previous next new former "
    "first second third last latter future potential prospective hypothetical average typical ordinary general "
    "normal ideal standard end everyday generic".split()
)
# Before "client" or "user", a word that is not an adjective of a person mostly names software or an account
# ("the email client", "the web client", "the guest user", "the admin user", "the logged-in user"): only
# these, which point back at one person or say how they are, make the noun a person.
_PERSONAL = frozenset(
    "same very selfsame particular specific exact affected original concerned mentioned aforementioned "
    "above-mentioned abovementioned above said aforesaid relevant respective individual actual initial requesting "
    "reporting complaining upset angry unhappy irate frustrated disappointed annoyed confused worried "
    "dissatisfied anxious impatient elderly loyal long-time longtime long-standing longstanding valued".split()
)


def _modifies(mods: str, noun: str) -> bool:
    """Whether the words between the determiner and the noun leave it one person: adjectives of them."""
    for word in mods.lower().split():
        if word in _NOT_MODIFIER or (noun != "customer" and word not in _PERSONAL):
            return False
    return True


# A sentence, line or list item that opens on the bare noun, or an adjective and the noun, and a verb or a
# relative pronoun: "Customer wants a refund.", "- User's card …", "Affected client asked twice.", "Customer who placed
# this order …". Not a label ("Customer:"), which frames a quote, nor a compound ("Customer reviews …").
_BARE = re.compile(
    r"(?:^|(?<=[.!?])[ \t]+)[ \t]*(?:[-*•][ \t]+)?(?:(?P<mods>[A-Z][a-z]*(?:-[a-z]+)*)[ \t]+)?"
    r"(?P<noun>[Cc]ustomer|[Cc]lient|[Uu]ser)"
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
    "numbers records names discount discounts promo promotion promotions rewards".split()
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


def _definite(plain: str, m: re.Match) -> re.Match | None:
    """The determiner `m` and what follows it, when that speaks of one person in the third person."""
    det = m.group("det").lower()
    h = _AFTER_DETERMINER.match(plain, m.end())
    if not h or not _modifies(h.group("mods"), h.group("noun").lower()):
        return None
    following = (h.group("next") or "").lower()
    if h.group("poss"):
        return h if det not in _WEAK and following not in _DOCUMENT else None
    if _compound(following) or _NAMING_SELF.search(plain[: m.start()]):
        return None
    predicate = _PERSON_PREDICATE.match(plain, h.end("noun"))
    if predicate and not predicate.group("aux") and _NOUN_TOO.fullmatch(predicate.group("verb")):
        predicate = None
    if det not in _WEAK or following in _RELATIVE or predicate:
        return h
    # "That"/"said" as the one spoken to, unless a plural after it makes the noun a compound's ("ask that customer
    # orders be …").
    addressed = _ADDRESSED_AFTER.search(plain[: m.start()])
    return h if addressed and not (len(following) > 3 and following.endswith("s")) else None


def _bare(m: re.Match) -> bool:
    """Whether the bare noun `m` opening a sentence is a person spoken of: "Customer wants …"."""
    mods, noun = m.group("mods"), m.group("noun")
    if (mods and not _modifies(mods, noun.lower())) or (not mods and noun.islower()):
        return False
    if m.group("poss"):
        return True
    following = m.group("next") or ""
    return following.lower() in _RELATIVE or bool(_BARE_VERB.match(following))


def about_customer(text: str, customer_messages=()) -> list[str]:
    """The phrases of `text` that speak of the customer in the third person ("the customer", "the user's",
    "the affected client", "Customer wants" gives "Customer"), in order; none for a noun the customer's own
    messages use of someone of theirs (`theirs`). `customer_messages`: the texts of the customer's messages the
    request showed."""
    plain = _unquoted(text)
    found: list[tuple[int, str, str]] = []
    for m in _DETERMINER.finditer(plain):
        h = _definite(plain, m)
        if h:
            end = h.end("poss") if h.group("poss") else h.end("noun")
            found.append((m.start(), plain[m.start() : end], h.group("noun").lower()))
    for m in _BARE.finditer(plain):
        if _bare(m):
            start = m.start("mods") if m.group("mods") else m.start("noun")
            end = m.end("poss") if m.group("poss") else m.end("noun")
            found.append((start, plain[start:end], m.group("noun").lower()))
    if not found:
        return []
    spared = theirs(customer_messages)
    return [phrase for _at, phrase, noun in sorted(found) if noun not in spared]
