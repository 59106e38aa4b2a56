"""A reply is addressed to the customer: one that speaks of them in the third person is asked again, then held.

Small models post text written for staff or for Sundry ("Sorry, but I don't have a reply for the
customer.", "Check the customer's order history …"), in words no list of Sundry's own wordings
holds. The rule (`guards/addressee.py`) reads the grammar instead: "the customer", "the client",
"the user" as a person, their possessive, a sentence opening on the bare noun. The sentences
are generated (frames × subjects × predicates), so are the look-alikes that must pass:
compounds ("customer service", "the user ID"), other determiners, plurals, quotes, and a
customer who speaks of someone of theirs ("my customer never received it"). Issue 26's forms
are generated the same way (determiners × adjectives × nouns × frames): an adjective before
the noun ("the affected customer"), "that" or "said" of the person ("Please ask that customer
to …"), a relative clause ("the customer who placed this order"); with their look-alikes
("the same customer service team", "I couldn't find that user", "the email client", "You're
the affected customer") and a control with those forms off.
Through the real loop with the scripted model: asked again with the reason, then held (the
customer gets Sundry's hand-off), never posted; through `reply_to_customer`, refused. The stream
never shows such a sentence. The τ²-bench replies of a strong model (beside the checkout when
present): none flagged.
"""

from __future__ import annotations

import itertools
import json
import re

import pytest

from sundry.agent import answer, handoff
from sundry.agent.guards import addressee, callguards, consent, provisional, replycheck
from sundry.agent.guards.callguards import GuardInput
from sundry.agent.loop import agent_run
from sundry.agent.provider.gateway import Gateway
from sundry.agent.provider.scripted import ScriptedModel
from sundry.agent.services import customer_message_post
from sundry.agent.streaming import ReplyStream
from sundry.context import internaltext
from sundry.context.lanes import TurnData
from sundry.portal.selectors import customer_turns
from sundry.tickets.models import Turn
from sundry.tooling.messages import Message, ModelRequest, ModelResponse
from sundry.tooling.tools import REGISTRY
from tests.agent import recorded
from tests.agent.claimcase import customer_reads, open_case, reply_via

ORDER = "SU-26675"

# The three sentences of the issue, as real small models posted them.
ISSUE = [
    "Sorry, but I don't have a reply for the customer.",
    "You can follow up with the customer to find out more about the order. If you need any information, you "
    "can record it in the state.",
    "Check the customer's order history for anything unusual. Open a new ticket with the customer.",
]


@pytest.fixture(autouse=True)
def _own_terms_off(monkeypatch):
    """The second issue sentence also names a section of Sundry's ("record it in the state"): its own words,
    read first (`ownterms`; tests/agent/test_internal_vocabulary.py holds it for that). Off here, so each
    sentence is judged for its addressee alone."""
    monkeypatch.setattr(replycheck.ownterms, "used", lambda text: "")


# --- the grammar of a reply about the customer ----------------------------------------------------------

SUBJECTS = ["the customer", "the client", "the user", "this customer", "this user", "the Customer"]
# The subject of a sentence: "{S} has asked for a refund."
PREDICATES = [
    "has asked for a refund on the order",
    "wants to know where the parcel is",
    "is waiting for the replacement",
    "was told the order shipped on Monday",
    "needs a new tracking number",
    "said the lamp arrived broken",
    "should be told about the delay",
    "can be offered a replacement",
]
# The object: "Please follow up with {s} about the delay."
OBJECT_FRAMES = [
    "Please follow up with {s} about the delay.",
    "You can let {s} know that the order shipped.",
    "I will inform {s} that the refund is pending.",
    "I don't have a reply for {s}.",
    "Open a new ticket with {s}.",
    "Ask {s} for the order number.",
    "Reach out to {s} by email if anything changes.",
    "There is nothing more to tell {s} today.",
]
# The possessive: "Check {s}'s order history."
POSSESSIVE_FRAMES = [
    "Check {s}'s order history.",
    "{S}'s parcel is delayed by two days.",
    "I have updated {s}’s delivery address.",
    "For {s}'s protection we never send card numbers by email.",  # decided: a policy's words about someone
]
# The bare noun opening a sentence, a line or a list item: staff-note style.
BARE = ["Customer", "Client", "User"]
BARE_PLACES = ["{x}", "Thanks for waiting. {x}", "Here is what I found:\n- {x}"]
BARE_PREDICATES = [
    "wants a refund for the lamp.",
    "asked about the delay twice.",
    "is waiting for a call back.",
    "hasn't replied since Monday.",
    "'s card was charged twice.",
]
# What comes before the sentence: nothing, or a sentence to the customer.
LEADS = ["", "Thanks for your patience. "]


def _cap(s: str) -> str:
    return s[0].upper() + s[1:]


def positives() -> list[str]:
    out = []
    for lead, s in itertools.product(LEADS, SUBJECTS):
        out += [f"{lead}{_cap(s)} {p}." for p in PREDICATES]
        out += [lead + f.format(s=s) for f in OBJECT_FRAMES]
        out += [lead + f.format(s=s, S=_cap(s)) for f in POSSESSIVE_FRAMES]
    for noun, place, pred in itertools.product(BARE, BARE_PLACES, BARE_PREDICATES):
        out.append(place.format(x=f"{noun}{pred}" if pred.startswith("'") else f"{noun} {pred}"))
    return list(dict.fromkeys(out))


POSITIVES = positives()

# --- look-alikes that speak to the customer ---------------------------------------------------------------

NOUNS = ["customer", "client", "user"]
# The noun in a compound: "Our customer service team will call you."
HEADS = ["service", "support", "care", "team", "portal", "ID", "number", "account", "guide", "experience", "agreement"]
COMPOUND_FRAMES = [
    "{D} {n} {h} will help you with that.",
    "You'll find it under {d} {n} {h}.",
    "I checked {d} {n} {h} for you.",
]
COMPOUND_DETS = ["the", "our", "your", "this"]
OTHER_FRAMES = [
    "As a valued {n}, you get free delivery on your next order.",
    "As our {n}, you can return it within 30 days.",
    "Every {n} gets a tracking number by email.",
    "Each {n} may hold one open return at a time.",
    "Your {n} number is printed on the invoice.",
    "{N}s who order before noon get next-day delivery.",
    "Many {n}s see this message when the parcel is held at the depot.",
    "Our {n}s tell us the new lamp is brighter.",
    "That order belongs to another {n}, so I can only help with yours.",
    "Our {n}-facing team will call you tomorrow.",
    'You wrote "the {n} never got the parcel", and I have checked it.',
    "You said “the {n} is always right”: fair enough.",
    "Your note says 'the {n} wants it by Friday', so I have asked for express delivery.",
    "{N} Service will call you tomorrow.",
    "{N} ID: shown on your account page.",
    "{N}: your message is below.",
    "{N} reviews are checked before they appear.",
    "{N} ratings help other shoppers choose.",
    "Please note that {n} reviews are moderated.",
    "I couldn't find that {n} in our records; could you check the email address?",
    "I couldn't find a {n} with that email address.",
    "Dear {N}, thank you for your patience.",
    "Step 3 of the {n}'s guide shows how to reset it.",
    "The {N}'s Manual that came with the lamp lists the bulb size.",
    "Your parcel is on its way.\n\nKind regards,\nThe {N} Support Team",
]


def look_alikes() -> list[str]:
    out = []
    for d, n, h, f in itertools.product(COMPOUND_DETS, NOUNS, HEADS, COMPOUND_FRAMES):
        out.append(f.format(D=_cap(d), d=d, n=n, h=h))
    for n, f in itertools.product(NOUNS, OTHER_FRAMES):
        out.append(f.format(n=n, N=_cap(n)))
    return list(dict.fromkeys(out))


LOOK_ALIKES = look_alikes()

# A customer who speaks of someone of theirs: a business, an administrator.
THEIRS_SAID = [
    "My {n} never received order SU-26675.",
    "Our {n}s keep asking where their parcels are.",
    "A {n} of ours says the lamp arrived broken.",
    "The {n} I ordered it for says it never came.",
    "One of my biggest {n}s is waiting for SU-26675.",
    "Another {n} of mine got the wrong colour.",
]
# … and the reply about that person, which then passes.
THEIRS_REPLIES = [
    "The {n} you mentioned will get the parcel on Monday.",
    "Your {n}'s parcel is on its way.",
    "I have arranged a replacement, so the {n} should have it by Friday.",
    "Please let the {n} know the new tracking number.",
]
# A customer naming themselves does not make "the customer" anyone else.
SELF_SAID = [
    "I'm a loyal {n} and my lamp arrived broken.",
    "I have been a {n} for years.",
    "As a {n}, I expected better.",
    "I am the {n} who ordered SU-26675.",
    "Your {n} service is slow.",
]


# --- the forms of issue 26: an adjective before the noun, "that" and "said", a relative clause -------------

# Adjectives of one person already in view, or of how they are: a person whatever the noun.
PERSONAL_ADJECTIVES = [
    "affected",
    "same",
    "original",
    "particular",
    "concerned",
    "aforementioned",
    "upset",
    "very same",
]
# Any other adjective makes "customer" a person too (it has no other sense); before "client" or "user" it is read
# as naming software or an account ("the email client", "the guest user"), decided below.
OTHER_ADJECTIVES = ["existing", "returning", "business", "Canadian", "VIP", "paying"]
STRONG = ["the", "this"]
WEAK = ["that", "said"]
# Relative clauses: the person who did something.
RELATIVES = ["who placed this order", "that contacted us yesterday", "whose parcel was lost", "who wrote in on Monday"]
# What a person does, said of them as "that customer …" too: "That customer has asked for a refund …".
WEAK_PREDICATES = [p for p in PREDICATES]
# The verbs of speaking to or giving someone, with "that customer" as the one spoken to.
WEAK_OBJECT_FRAMES = [f for f in OBJECT_FRAMES if "ticket with" not in f] + [
    "Please refund {s} in full.",
    "I have sent {s} a replacement.",
    "We should apologise to {s} for the delay.",
    "Could you get back to {s} tomorrow?",
]


def _phrases(det: str, noun: str, adjectives: list[str]) -> list[str]:
    return [f"{det} {a} {noun}" for a in adjectives]


def form_positives() -> list[str]:
    out = []
    for i, (det, noun) in enumerate(itertools.product(STRONG, NOUNS)):
        adjectives = PERSONAL_ADJECTIVES + (OTHER_ADJECTIVES if noun == "customer" else [])
        for j, s in enumerate(_phrases(det, noun, adjectives)):
            lead = LEADS[(i + j) % len(LEADS)]
            out += [f"{lead}{_cap(s)} {p}." for p in PREDICATES]
            out += [lead + f.format(s=s) for f in OBJECT_FRAMES]
            out += [lead + f.format(s=s, S=_cap(s)) for f in POSSESSIVE_FRAMES]
    for det, noun in itertools.product(WEAK, NOUNS):
        adjectives = [""] + PERSONAL_ADJECTIVES + (OTHER_ADJECTIVES if noun == "customer" else [])
        for s in (" ".join(f"{det} {a} {noun}".split()) for a in adjectives):
            out += [f"{_cap(s)} {p}." for p in WEAK_PREDICATES]
            out += [f.format(s=s) for f in WEAK_OBJECT_FRAMES]
    # A relative clause, after any of those determiners or none, with or without an adjective.
    for det, noun, adjective, rel in itertools.product(STRONG + WEAK, NOUNS, ["", "same", "affected"], RELATIVES):
        s = " ".join(f"{det} {adjective} {noun} {rel}".split())
        out += [f"{_cap(s)} wants a refund.", f"Please follow up with {s}."]
    for noun, rel in itertools.product(BARE, RELATIVES):
        out += [f"{noun} {rel} wants a refund.", f"Thanks for waiting. {noun} {rel} is still waiting."]
    # A note opening on an adjective and the bare noun: "Affected customer wants a refund."
    for adjective, noun, place, pred in itertools.product(
        ["affected", "same", "original", "upset"], NOUNS, BARE_PLACES, BARE_PREDICATES
    ):
        x = f"{_cap(adjective)} {noun}"
        out.append(place.format(x=f"{x}{pred}" if pred.startswith("'") else f"{x} {pred}"))
    return list(dict.fromkeys(out))


FORM_POSITIVES = form_positives()


def form_look_alikes() -> list[str]:
    out = []
    # The adjective and noun in a compound: "the same customer service team", "this original user ID".
    for d, a, n, h, f in itertools.product(STRONG, ["same", "affected", "original"], NOUNS, HEADS, COMPOUND_FRAMES):
        out.append(f.format(D=_cap(d), d=f"{d} {a}", n=n, h=h))
    for n, a in itertools.product(NOUNS, PERSONAL_ADJECTIVES):
        out += [
            # Another determiner, or the plural.
            f"Your {a} order has been refunded.",
            f"As a {a} {n}, you can ask for a refund at any time.",
            f"Any {a} {n} can ask for a refund within 30 days.",
            f"Each {a} {n} gets a new tracking number by email.",
            f"Our {a} {n}s will all get an email today.",
            f"The {a} {n}s will all get an email today.",
            # The customer's own words, quoted.
            f'You wrote "the {a} {n} never got the parcel", and I have checked it.',
            f"Your note says “this {a} {n} wants it by Friday”, so I have asked for express delivery.",
            # The reader named: not a third person.
            f"You're the {a} {n}, so the refund is yours to claim.",
            f"Since you are the {a} {n} who placed {ORDER}, only you can cancel it.",
            f"Are you the {a} {n} who wrote to us on Monday?",
            # "That" pointing at a record the customer named, or a conjunction before a compound.
            f"I couldn't find that {a} {n} in our records; could you check the email address?",
            f"Please note that {a} {n} accounts are reviewed once a month.",
        ]
    for n in NOUNS:
        out += [
            f"I couldn't find that {n} in our records.",
            f"That {n} has no orders on file.",
            f"That {n}'s account is locked, so I can't see its orders.",
            f"There is no account for that {n}, so nothing was charged.",
            f"The email address linked to that {n} is not one I can see.",
            f"We ask that {n} orders be placed before noon for same-day dispatch.",
            f"Please note that {n} requests are answered in order.",
            # "Said" as a verb.
            f"You said {n} support never called you back; I'm sorry about that.",
            f"The label said {n} service would collect it.",
            # Someone other than the reader, or a kind of person: "the other customer", "the average user".
            f"That order belongs to the other {n}, so I can only help with yours.",
            f"The parcel went to the wrong {n} at first; it is now on its way to you.",
            f"The next {n} to order gets the last lamp in stock.",
            f"The average {n} reads the manual before calling us.",
            f"The new {n} discount applies to your first order only.",
            f"I can't share the previous {n}'s details, but your order is fine.",
        ]
    # A word before "client" or "user" that names software or an account.
    for m, f in itertools.product(
        ["email", "web", "desktop", "mobile", "guest", "admin", "logged-in", "existing", "business", "paying"],
        ["Try restarting the {m} {n} and signing in again.", "I checked this {m} {n} for you: it is up to date."],
    ):
        out += [f.format(m=m, n=n) for n in ("client", "user")]
    return list(dict.fromkeys(out))


FORM_LOOK_ALIKES = form_look_alikes()

# A customer who speaks of someone of theirs: the forms of issue 26 about that person pass too.
THEIRS_FORM_REPLIES = [
    "The same {n} you mentioned will get the parcel on Monday.",
    "Please let the affected {n} know the new tracking number.",
    "Please ask that {n} to sign for the parcel.",
    "I have refunded the {n} who ordered it, so nothing more is needed.",
]
# A customer naming themselves with an adjective: "I'm the affected customer" spares nothing.
SELF_FORM_SAID = [
    "I'm the affected {n} and my parcel never came.",
    "I am the same {n} who wrote on Monday.",
    "As the original {n} on this account, I want a refund.",
]


def check(text, **kw):
    return replycheck.check_reply(text, known=replycheck.known_identifiers([ORDER]), **kw)


def held_as_about(text, **kw) -> bool:
    first, second = check(text, **kw), check(text, retried=True, **kw)
    return (
        first.action == replycheck.RETRY
        and first.reasons == ["about_customer"]
        and second.action == replycheck.HOLD
        and second.reasons == ["about_customer"]
    )


# --- pure -------------------------------------------------------------------------------------------------


def test_the_issues_sentences_are_asked_again_then_held():
    for text in ISSUE:
        assert held_as_about(text), text
        assert "third person" in check(text).prompt and '"you"' in check(text).prompt


def test_every_generated_reply_about_the_customer_is_asked_again_then_held():
    missed = [t for t in POSITIVES if not held_as_about(t)]
    print(f"replies about the customer held: {len(POSITIVES) - len(missed)}/{len(POSITIVES)}")
    assert missed == [], missed[:10]


def test_every_generated_look_alike_passes():
    flagged = [t for t in LOOK_ALIKES if check(t).action != replycheck.POST]
    print(f"look-alikes posted: {len(LOOK_ALIKES) - len(flagged)}/{len(LOOK_ALIKES)}")
    assert flagged == [], [(t, check(t).reasons) for t in flagged[:10]]


def test_a_customer_speaking_of_someone_of_theirs_spares_that_noun_and_only_that_one():
    passed = held = 0
    for n, said, reply in itertools.product(NOUNS, THEIRS_SAID, THEIRS_REPLIES):
        said_n = said.format(n=n)
        assert addressee.theirs([said_n]) == {n}, said_n
        verdict = check(reply.format(n=n), customer_said=said_n)
        assert verdict.action == replycheck.POST, (said_n, reply, verdict.reasons)
        passed += 1
        if not reply.startswith("Your"):  # another noun is still the customer: "my client" spares no "user"
            other = next(o for o in NOUNS if o != n)
            assert held_as_about(reply.format(n=other), customer_said=said_n), (said_n, other)
            held += 1
    # Said earlier on the ticket, not in the latest message: it counts (every message the request showed).
    earlier = check("The customer you mentioned will get it Monday.", customer_messages=["My customer never got it."])
    assert earlier.action == replycheck.POST
    print(f"replies about the customer's own third party posted: {passed}; the same with another noun held: {held}")


def test_negative_control_without_sparing_the_customers_own_third_party_is_held(monkeypatch):
    monkeypatch.setattr(addressee, "theirs", lambda messages: frozenset())
    replies = [
        (said.format(n=n), r.format(n=n)) for n, said, r in itertools.product(NOUNS, THEIRS_SAID, THEIRS_REPLIES)
    ]
    held = [r for said, r in replies if check(r, customer_said=said).action != replycheck.POST]
    mentioned = [r for _said, r in replies if not r.startswith("Your")]
    print(f"without sparing, replies about the customer's own third party held: {len(held)}/{len(replies)}")
    assert sorted(held) == sorted(mentioned)  # "Your customer's parcel" needs no sparing


def test_a_customer_naming_themselves_spares_nothing():
    for n, said in itertools.product(NOUNS, SELF_SAID):
        said_n = said.format(n=n)
        assert addressee.theirs([said_n]) == frozenset(), said_n
        assert held_as_about(f"Please follow up with the {n} about the delay.", customer_said=said_n), said_n


def test_every_generated_reply_of_the_forms_of_issue_26_is_asked_again_then_held():
    """An adjective before the noun ("the affected customer"), "that" or "said" of the person ("Please ask that
    customer to …"), a relative clause ("the customer who placed this order")."""
    missed = [t for t in FORM_POSITIVES if not held_as_about(t)]
    print(f"replies of the new forms held: {len(FORM_POSITIVES) - len(missed)}/{len(FORM_POSITIVES)}")
    assert missed == [], missed[:10]


def test_every_generated_look_alike_of_the_forms_of_issue_26_passes():
    flagged = [t for t in FORM_LOOK_ALIKES if check(t).action != replycheck.POST]
    print(f"look-alikes of the new forms posted: {len(FORM_LOOK_ALIKES) - len(flagged)}/{len(FORM_LOOK_ALIKES)}")
    assert flagged == [], [(t, addressee.about_customer(t)) for t in flagged[:10]]


def _forms_off(monkeypatch):
    """The reading as it was before issue 26: "the" or "this" right before the noun, no relative pronoun."""
    monkeypatch.setattr(addressee, "_DETERMINER", re.compile(r"\b(?P<det>the|this)\s+", re.I))
    monkeypatch.setattr(addressee, "_modifies", lambda mods, noun: not mods.split())
    monkeypatch.setattr(addressee, "_RELATIVE", frozenset())


def test_negative_control_with_the_new_forms_off_they_are_posted(monkeypatch):
    _forms_off(monkeypatch)
    posted = [t for t in FORM_POSITIVES if check(t).action == replycheck.POST]
    # "The customer who placed this order …" was read before: "the" or "this", the noun, no adjective.
    read_before = [
        t for t in FORM_POSITIVES if re.search(r"\b(?:the|this) (?:customer|client|user) (?:who|that|whose)\b", t, re.I)
    ]
    print(
        f"with the new forms off, replies of the new forms posted: {len(posted)}/{len(FORM_POSITIVES)} "
        f"({len(read_before)} others, 'the customer who …', held as before)"
    )
    assert sorted(posted) == sorted(set(FORM_POSITIVES) - set(read_before)) and read_before
    # … and the look-alikes of both grammars pass with them off as well: the new part flags none of them.
    assert all(check(t).action == replycheck.POST for t in FORM_LOOK_ALIKES + LOOK_ALIKES[::5])


def test_negative_control_without_naming_the_reader_you_are_the_customer_is_held(monkeypatch):
    """ "You're the affected customer" names the reader: it passes only for that reading."""
    monkeypatch.setattr(addressee, "_NAMING_SELF", re.compile(r"(?!)"))
    flagged = [t for t in FORM_LOOK_ALIKES if addressee.about_customer(t)]
    named = [t for t in FORM_LOOK_ALIKES if re.search(r"\b(?:you're|you are|are you) the\b", t, re.I)]
    print(f"without naming the reader, look-alikes of the new forms held: {len(flagged)}/{len(FORM_LOOK_ALIKES)}")
    assert sorted(flagged) == sorted(named) and named


def test_a_customer_speaking_of_someone_of_theirs_spares_the_new_forms_too():
    passed = held = 0
    for n, said, reply in itertools.product(NOUNS, THEIRS_SAID, THEIRS_FORM_REPLIES):
        said_n = said.format(n=n)
        verdict = check(reply.format(n=n), customer_said=said_n)
        assert verdict.action == replycheck.POST, (said_n, reply, verdict.reasons)
        passed += 1
        other = next(o for o in NOUNS if o != n)
        assert held_as_about(reply.format(n=other), customer_said=said_n), (said_n, other)
        held += 1
    print(f"new-form replies about the customer's own third party posted: {passed}; with another noun held: {held}")


def test_a_customer_naming_themselves_with_an_adjective_spares_nothing():
    for n, said in itertools.product(NOUNS, SELF_FORM_SAID):
        said_n = said.format(n=n)
        assert addressee.theirs([said_n]) == frozenset(), said_n
        assert held_as_about(f"Please follow up with the affected {n} about the delay.", customer_said=said_n)


def test_what_is_named_is_the_phrase_as_written():
    assert addressee.about_customer("Check the Customer's order. Customer wants a refund.") == [
        "the Customer's",
        "Customer",
    ]
    assert addressee.about_customer(
        "Ask that customer to call. The same client's parcel is late. Affected user wants it. "
        "User who wrote is waiting."
    ) == ["that customer", "The same client's", "Affected user", "User"]
    assert addressee.about_customer("Nothing here is about anyone.") == []


def test_a_staff_note_quoted_about_the_customer_is_held_at_once_as_internal_text():
    """Staff's notes speak of the customer; a reply quoting one is held without a second ask, as before."""
    note = "Chargeback history on this card: the customer gets no goodwill credits without a manager."
    internal = internaltext.gather(internal=[("staff note", note)], public=[])
    reply = f"Our notes say the customer gets no goodwill credits without a manager. Your order {ORDER} shipped."
    first = answer.held_if_internal(check(reply), internal)
    assert first.action == replycheck.HOLD and first.reasons == ["internal_text"]
    # Control: without the note it is only about the customer, and asked again.
    assert answer.held_if_internal(check(reply), internaltext.InternalText()).reasons == ["about_customer"]
    assert check(reply).action == replycheck.RETRY


def test_negative_control_with_the_check_off_the_generated_replies_are_posted(monkeypatch):
    monkeypatch.setattr(addressee, "about_customer", lambda text, customer_messages=(): [])
    posted = [t for t in [*POSITIVES, *ISSUE] if check(t).action == replycheck.POST]
    print(f"with the check off, replies about the customer posted: {len(posted)}/{len(POSITIVES) + len(ISSUE)}")
    assert len(posted) == len(POSITIVES) + len(ISSUE)


def test_the_stream_never_shows_a_sentence_about_the_customer():
    """The stream's per-sentence judge is the one `answer.obtain` gives it, which asks the whole reply check."""
    stream = ReplyStream(0)
    request = ModelRequest(model="scripted", messages=[Message(role="user", content=f"Where is {ORDER}?")])
    turns = [TurnData(number=1, author="customer", kind="message", text=f"Where is {ORDER}?")]
    model = ScriptedModel([ModelResponse(text=f"Your order {ORDER} has shipped.")])
    answer.obtain(Gateway(override=model), request, model="scripted", turns=turns, stream=stream)
    good = f"Your order {ORDER} has shipped. "
    for text in ISSUE + POSITIVES + FORM_POSITIVES[::20]:
        shown = provisional.shown(good + text, known={ORDER}, final=True, sentence_ok=stream.sentence_ok)
        assert shown.startswith(good.strip()) and not addressee.about_customer(shown), (text, shown)
    assert provisional.shown(
        f"Your order {ORDER} has shipped. Our customer service team will call you.",
        known={ORDER},
        final=True,
        sentence_ok=stream.sentence_ok,
    ).endswith("will call you.")


def test_negative_control_with_the_check_off_the_stream_shows_them(monkeypatch):
    monkeypatch.setattr(addressee, "about_customer", lambda text, customer_messages=(): [])
    stream = ReplyStream(0)
    request = ModelRequest(model="scripted", messages=[Message(role="user", content=f"Where is {ORDER}?")])
    model = ScriptedModel([ModelResponse(text=f"Your order {ORDER} has shipped.")])
    answer.obtain(Gateway(override=model), request, model="scripted", turns=[], stream=stream)
    shown = [provisional.shown(t, final=True, sentence_ok=stream.sentence_ok) for t in ISSUE + POSITIVES]
    assert sum(s == t for s, t in zip(shown, ISSUE + POSITIVES)) == len(ISSUE) + len(POSITIVES)


def test_no_real_agent_reply_of_the_tau2_traces_is_about_the_customer():
    """Replies a strong model wrote to real users (τ²-bench traces, beside the checkout when present): none
    speaks of the customer in the third person, with or without the users' own messages to spare a noun."""

    traces = recorded.traces()
    replies, flagged, flagged_alone = 0, [], []
    for path in sorted(traces.glob("*.json")):
        data = json.loads(path.read_text())
        for sim in data.get("simulations", data) if isinstance(data, dict) else data:
            users: list[str] = []
            for m in sim.get("messages") or []:
                if m.get("role") == "user" and m.get("content"):
                    users.append(m["content"])
                elif m.get("role") == "assistant" and m.get("content"):
                    replies += 1
                    if addressee.about_customer(m["content"], users):
                        flagged.append(m["content"])
                    if addressee.about_customer(m["content"]):
                        flagged_alone.append(m["content"])
    print(f"real agent replies flagged: {len(flagged)}/{replies} ({len(flagged_alone)} without the users' words)")
    assert replies > 800 and flagged == [] and flagged_alone == [], (flagged + flagged_alone)[:5]


def test_a_tools_customer_text_about_the_customer_is_refused_and_a_phone_calls_record_is_not():
    """The call guards read the declared customer text (an e-mail's subject and body, `reply_to_customer`'s
    message); a phone call's summary is a record of the customer, rightly about them."""
    said = (consent.Said("customer", 1, f"Where is {ORDER}?"),)

    def verdict(name, **args):
        tool = REGISTRY[name]
        return callguards._check_addressee(GuardInput(tool=tool, arguments=args, said=said), tool.args_model(**args))

    for text in ISSUE + POSITIVES[::10] + FORM_POSITIVES[::40]:
        refused = verdict("send_email", customer_id="C-1", subject="Your order", body=text)
        assert refused is not None and refused.guard == "about_customer" and refused.details["field"] == "body"
        assert verdict("reply_to_customer", message=text).guard == "about_customer"
        assert verdict("log_phone_call", customer_id="C-1", summary=text) is None
    for text in LOOK_ALIKES[::10] + FORM_LOOK_ALIKES[::10]:
        assert verdict("reply_to_customer", message=text) is None, text
    # The customer's own third party, said earlier on the ticket, spares the noun here too.
    theirs = (consent.Said("customer", 1, "My customer never received it."),)
    tool = REGISTRY["reply_to_customer"]
    args = {"message": "The customer you mentioned will get it on Monday."}
    assert (
        callguards._check_addressee(GuardInput(tool=tool, arguments=args, said=theirs), tool.args_model(**args)) is None
    )


# --- through the loop --------------------------------------------------------------------------------------


@pytest.fixture
def case(django_user_model):
    # No message yet: each test posts its own.
    return open_case(django_user_model, None, order=ORDER, subject="Hi", prices=(4000,))


def _run(case, said, *answers) -> ScriptedModel:
    customer_message_post(ticket=case["ticket"], text=said, wake=False)
    model = ScriptedModel(list(answers))
    agent_run(case["ticket"].pk, gateway=Gateway(override=model))
    return model


FINAL = f"Your order {ORDER} has shipped; it should reach you on Monday."


@pytest.mark.django_db
def test_through_the_loop_it_is_asked_again_and_the_second_answer_posted(case):
    model = _run(case, f"Where is {ORDER}?", reply_via("reply", ISSUE[0]), reply_via("reply", FINAL))
    reask = model.requests[1].messages[-1].content
    assert "third person" in reask and '"the customer"' in reask
    reads = customer_reads(case)
    assert FINAL in reads and "reply for the customer" not in reads


# Each issue sentence and words of it the customer must never read (free of apostrophes, which the page escapes).
NEVER_READ = list(zip(ISSUE, ["a reply for the customer", "follow up with the customer", "order history"]))


@pytest.mark.django_db
@pytest.mark.parametrize(("text", "never"), NEVER_READ)
def test_through_the_loop_it_is_held_when_said_again_and_never_posted(case, text, never):
    _run(case, f"Where is {ORDER}?", reply_via("reply", text), reply_via("reply", text))
    notice = Turn.objects.get(ticket=case["ticket"], kind=Turn.Kind.ERROR, payload__has_key="held_reply")
    assert notice.payload["reply_check"]["reasons"] == ["about_customer"]
    reads = customer_reads(case)
    assert never not in reads
    assert handoff.TEXT in " ".join(t.text for t in customer_turns(case["ticket"]))  # Sundry's hand-off instead


@pytest.mark.django_db
def test_through_reply_to_customer_it_is_refused_and_never_sent(case):
    _run(case, f"Where is {ORDER}?", reply_via("reply_to_customer", ISSUE[2]), reply_via("reply", FINAL))
    rejection = Turn.objects.filter(ticket=case["ticket"], kind=Turn.Kind.REJECTION).last()
    assert rejection.payload["guard"] == "about_customer"
    reads = customer_reads(case)
    assert "order history" not in reads and FINAL in reads


@pytest.mark.django_db
def test_through_the_loop_a_business_customer_reads_about_their_own_customer(case):
    reply = f"The customer you mentioned will get {ORDER} on Monday; your customer's tracking number is on the way."
    _run(case, f"My customer never received {ORDER}.", reply_via("reply", reply))
    assert reply in customer_reads(case)


@pytest.mark.django_db
@pytest.mark.parametrize("via", ["reply", "reply_to_customer"])
def test_negative_control_with_the_check_off_the_loop_posts_it(case, via, monkeypatch):
    monkeypatch.setattr(addressee, "about_customer", lambda text, customer_messages=(): [])
    _run(case, f"Where is {ORDER}?", reply_via(via, ISSUE[0]), reply_via("reply", FINAL))
    assert "reply for the customer" in customer_reads(case)
