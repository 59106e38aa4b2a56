"""`model_check`'s "not for the customer": posted agent replies in Sundry's own words, not addressed to the
customer or left unfinished, judged from the stored turns by the reply check's own readings
(`scorecard.not_for_customer`) — Sundry's names for its workings (`ownterms`), a declared tool's description
(`declaredwords`), the customer in the third person (`addressee`), a bare refusal (`refusals`), a tool's
identifier, an ending that introduces what never follows (`unfinished`; not for words posted with calls, which
the check lets end "Let me look that up:") — whichever code let the reply through."""

from __future__ import annotations

import itertools
from types import SimpleNamespace

import pytest

from sundry.agent.guards import replycheck
from sundry.evals import scorecard
from sundry.evals.importers import tau2_results
from sundry.tickets.models import Turn
from tests.agent import recorded
from tests.agent import test_reply_stand_ins as stand_ins
from tests.agent import test_reply_tool_names as tool_names
from tests.agent import test_sundry_words_copied as program_words
from tests.agent.test_declared_sentences import lookalikes as declared_look_alikes
from tests.agent.test_declared_sentences import positives as declared_positives
from tests.agent.test_internal_vocabulary import lookalikes as own_terms_look_alikes
from tests.agent.test_internal_vocabulary import positives as own_terms_positives
from tests.agent.test_reply_addressee import LOOK_ALIKES as ADDRESSEE_LOOK_ALIKES
from tests.agent.test_reply_addressee import POSITIVES as ADDRESSEE_POSITIVES
from tests.agent.test_reply_refusals import LOOK_ALIKES as REFUSAL_LOOK_ALIKES
from tests.agent.test_reply_refusals import POSITIVES as REFUSAL_POSITIVES
from tests.agent.test_reply_unfinished import LOOK_ALIKES as UNFINISHED_LOOK_ALIKES
from tests.agent.test_reply_unfinished import UNFINISHED as UNFINISHED_ENDINGS

ORDER = "SU-26675"
QUESTION = f"Hi, I have a question about my order {ORDER}."


def declared() -> tuple[str, ...]:
    """The descriptions a ticket of the test's class offers the model, as the scorecard reads them."""
    from sundry.agent.toolbox import toolbox_for
    from tests.factories import TicketClassFactory

    return replycheck.declared_texts(toolbox_for(TicketClassFactory.build(), listing=False).specs)


TOOL_NAMES = tool_names.TOOLS
TOOL_NAME_POSITIVES = tool_names._cases()


def kinds(texts) -> dict[str, list[str]]:
    """Each reading's generated wordings (the readings' own test grammars), by the reason the card tallies."""
    return {
        scorecard.OWN_TERMS: own_terms_positives(),
        scorecard.DECLARED_WORDS: declared_positives(texts)[::7],
        scorecard.ABOUT_CUSTOMER: ADDRESSEE_POSITIVES,
        scorecard.BARE_REFUSAL: REFUSAL_POSITIVES[::3],
        scorecard.TOOL_NAME: TOOL_NAME_POSITIVES,
        scorecard.UNFINISHED: [text for text, _kept in UNFINISHED_ENDINGS[::5]],
        scorecard.OWN_WORDS: stand_ins.positives()[::9],
        scorecard.PROGRAM_WORD: program_words._program_cases(),
    }


# Read with what Sundry told the model on the ticket, which these readings' wordings do not have: counted in
# tests/agent/test_sundry_words_copied.py.
READ_HERE = tuple(r for r in scorecard.NOT_FOR_CUSTOMER if r != scorecard.NOTICE_WORDS)


# Plain replies a customer should read: a greeting, an answer or a question about their request, a closing.
GREETINGS = ["", "Hi, ", "Hello! ", "Thanks for getting in touch. ", "Thank you for waiting. "]
BODIES = [
    f"Could you tell me which item on order {ORDER} you mean?",
    "Could you send me a photo of the damage?",
    "Which order is this about?",
    f"I'm looking at your order {ORDER} now.",
    "Our returns window is 30 days from delivery.",
    "You can change your delivery address from your account page.",
    "I understand how frustrating a late parcel is.",
    "I'd be happy to help with your return.",
    "Let me know which size you'd like instead.",
    "I'm sorry to hear the lamp arrived broken.",
]
CLOSINGS = ["", " Is there anything else I can help you with?", " Thanks for your patience."]


def plain_replies() -> list[str]:
    return [
        f"{g}{b[0].lower() + b[1:] if g.endswith(', ') else b}{c}"
        for g, b, c in itertools.product(GREETINGS, BODIES, CLOSINGS)
    ]


def _ticket(replies, *, customer=QUESTION):
    """A ticket where the customer asks and each reply in turn answers (posted past the checks, as an older
    build or a staff-approved release would have)."""
    from sundry.desk.lifecycle import ticket_create
    from sundry.tickets.services import turn_append
    from tests.factories import CustomerFactory, TicketClassFactory, paid_order

    person = CustomerFactory()
    paid_order(customer=person, number=ORDER, prices=(4000,))
    ticket = ticket_create(customer=person.person, ticket_class=TicketClassFactory(), subject="Help")
    for reply in replies:
        turn_append(ticket=ticket, author=Turn.Author.CUSTOMER, kind=Turn.Kind.MESSAGE, text=customer)
        turn_append(ticket=ticket, author=Turn.Author.AGENT, kind=Turn.Kind.MESSAGE, text=reply)
    return ticket


def _card(ticket) -> scorecard.Scorecard:
    """The card of one correct scenario run on `ticket`, its customers' reading judged from the stored turns."""
    run = SimpleNamespace(
        ticket_id=ticket.pk,
        forbidden=0,
        error="",
        judgement=SimpleNamespace(missing=[], forbidden=[], correct=True),
        facts=[],
    )
    return scorecard.collect("m", [SimpleNamespace(error="", runs={"triggered": run})])


# --- the readings, as the card calls them ---------------------------------------------------------------------


@pytest.mark.django_db
def test_each_readings_generated_wordings_are_tallied_under_it():
    texts = declared()
    missed, total = [], 0
    for reason, wordings in kinds(texts).items():
        for text in wordings:
            total += 1
            if reason not in scorecard.not_for_customer(text, declared=texts, tools=TOOL_NAMES):
                missed.append((reason, text))
    print(f"generated replies not for the customer: {total}, missed {len(missed)}")
    assert total > 1000 and not missed, missed[:5]


@pytest.mark.django_db
def test_each_readings_look_alikes_are_not_tallied_under_it():
    texts = declared()
    look_alikes = {
        scorecard.OWN_TERMS: own_terms_look_alikes(),
        scorecard.DECLARED_WORDS: declared_look_alikes(texts),
        scorecard.ABOUT_CUSTOMER: ADDRESSEE_LOOK_ALIKES,
        scorecard.BARE_REFUSAL: REFUSAL_LOOK_ALIKES,
        scorecard.UNFINISHED: UNFINISHED_LOOK_ALIKES,
        scorecard.OWN_WORDS: stand_ins.LOOK_ALIKES,
    }
    flagged = [
        (reason, t)
        for reason, ts in look_alikes.items()
        for t in ts
        if reason in scorecard.not_for_customer(t, declared=texts, tools=TOOL_NAMES)
    ]
    print(f"look-alikes: {sum(map(len, look_alikes.values()))}, tallied under their own reading: {len(flagged)}")
    assert not flagged, flagged[:5]


@pytest.mark.django_db
def test_generated_plain_replies_are_not_counted():
    texts = declared()
    replies = plain_replies()
    flagged = [
        (t, r)
        for t in replies
        if (r := scorecard.not_for_customer(t, declared=texts, customer_said=[QUESTION], tools=TOOL_NAMES))
    ]
    assert len(replies) == 150 and not flagged, flagged[:5]


# --- on the card ---------------------------------------------------------------------------------------------


def _one_of_each() -> list[str]:
    """For each reading, the first of its generated wordings that no other reading reads."""
    texts = declared()
    return [
        next(t for t in wordings if scorecard.not_for_customer(t, declared=texts, tools=TOOL_NAMES) == [reason])
        for reason, wordings in kinds(texts).items()
    ]


@pytest.mark.django_db
def test_posted_replies_of_each_kind_are_counted_by_reading_and_make_the_card_not_ready():
    replies = _one_of_each()
    ticket = _ticket([replies[0], "Could you send me a photo of the damage?", *replies[1:]])
    read = scorecard.read_by_customers(ticket.pk)
    assert read["not_for_customer"] == 8 and read["unanswered"] == 0
    assert read["not_for_customer_reasons"] == {reason: 1 for reason in READ_HERE}
    card = _card(ticket)
    assert card.not_for_customer == 8 and card.not_for_customer_reasons == read["not_for_customer_reasons"]
    assert (
        "8 not for the customer (own_terms 1, declared_words 1, about_customer 1, bare_refusal 1, tool_name 1, "
        "unfinished 1, own_words 1, program_word 1)" in scorecard.render(card)
    )
    assert scorecard.verdict(card) == (
        "NOT READY: customers read 8 replies in Sundry's own words, not addressed to them or left unfinished."
    )


@pytest.mark.django_db
def test_a_reply_of_two_kinds_is_one_reply_tallied_under_both():
    text = "Sorry, I can't help with that. The customer should contact the carrier."
    assert scorecard.not_for_customer(text) == [scorecard.ABOUT_CUSTOMER]  # a reason after it: no bare refusal
    text = "As per the rules you have pinned, the customer's refund is not possible."
    ticket = _ticket([text])
    read = scorecard.read_by_customers(ticket.pk)
    assert read["not_for_customer"] == 1
    assert read["not_for_customer_reasons"] == {scorecard.OWN_TERMS: 1, scorecard.ABOUT_CUSTOMER: 1}


@pytest.mark.django_db
def test_the_customers_own_third_party_spares_the_noun_and_the_hand_off_is_judged_apart():
    """ "The customer" of a customer who sells on (their own words, before the reply) is theirs; Sundry's
    hand-off after a held reply is code's words, never counted here."""
    from sundry.agent import handoff
    from sundry.context.render import HANDED_OFF
    from sundry.tickets.services import turn_append

    reply = "I've checked: the customer you mentioned will get the parcel tomorrow."
    assert scorecard.not_for_customer(reply) == [scorecard.ABOUT_CUSTOMER]
    ticket = _ticket([reply], customer="My customer says the parcel never arrived, can you check?")
    assert scorecard.read_by_customers(ticket.pk)["not_for_customer"] == 0
    turn_append(ticket=ticket, author=Turn.Author.CUSTOMER, kind=Turn.Kind.MESSAGE, text="Hello?")
    turn_append(
        ticket=ticket, author=Turn.Author.AGENT, kind=Turn.Kind.MESSAGE, text=handoff.TEXT, payload={"via": HANDED_OFF}
    )
    read = scorecard.read_by_customers(ticket.pk)
    assert read["not_for_customer"] == 0 and read["handed_off"] == 1


@pytest.mark.django_db
def test_a_ticket_of_plain_replies_reads_none_and_the_card_is_ready():
    ticket = _ticket(plain_replies()[::5])
    read = scorecard.read_by_customers(ticket.pk)
    assert read["not_for_customer"] == 0 and read["not_for_customer_reasons"] == {}
    card = _card(ticket)
    assert card.not_for_customer == 0 and "0 not for the customer," in scorecard.render(card)
    assert scorecard.verdict(card) == "READY on this evidence.", (read, scorecard.verdict(card))


@pytest.mark.django_db
def test_negative_control_with_the_count_off_the_same_ticket_reads_ready(monkeypatch):
    ticket = _ticket(_one_of_each())
    monkeypatch.setattr(scorecard, "not_for_customer", lambda text, **kw: [])
    card = _card(ticket)
    assert card.not_for_customer == 0 and scorecard.verdict(card) == "READY on this evidence."


@pytest.mark.django_db
def test_a_runners_read_from_before_the_figure_counts_none():
    """A run whose `read` the runner recorded before the figure existed (without its keys) counts none."""
    ticket = _ticket(_one_of_each())
    run = SimpleNamespace(
        ticket_id=ticket.pk,
        read={"false_claims": 0, "internal_shown": 0, "unanswered": 0},
        forbidden=0,
        error="",
        judgement=SimpleNamespace(missing=[], forbidden=[], correct=True),
        facts=[],
    )
    card = scorecard.collect("m", [SimpleNamespace(error="", runs={"triggered": run})])
    assert card.not_for_customer == 0 and card.not_for_customer_reasons == {}


@pytest.mark.django_db
def test_posted_unfinished_replies_are_counted_and_words_posted_with_calls_are_not():
    """Each generated unfinished ending posted as a reply counts; the same posted as the words written with
    calls (`via: with_calls`), which the check lets end introducing the calls, does not."""
    from sundry.context.render import SAID_WITH_CALLS

    endings = [text for text, _kept in UNFINISHED_ENDINGS[::60]]
    ticket = _ticket(endings)
    read = scorecard.read_by_customers(ticket.pk)
    print(
        f"posted unfinished replies counted: {read['not_for_customer_reasons'].get(scorecard.UNFINISHED, 0)}/{len(endings)}"
    )
    assert len(endings) > 100 and read["not_for_customer_reasons"].get(scorecard.UNFINISHED) == len(endings)
    # The same turns, as posted with calls.
    Turn.objects.filter(ticket=ticket, author=Turn.Author.AGENT).update(payload={"via": SAID_WITH_CALLS})
    assert scorecard.UNFINISHED not in scorecard.read_by_customers(ticket.pk)["not_for_customer_reasons"]


@pytest.mark.django_db
def test_negative_control_with_the_unfinished_reading_off_the_same_replies_are_not_counted(monkeypatch):
    from sundry.agent.guards import unfinished

    endings = [text for text, _kept in UNFINISHED_ENDINGS[::60]]
    ticket = _ticket(endings)
    monkeypatch.setattr(unfinished, "ending", lambda text: "")
    read = scorecard.read_by_customers(ticket.pk)
    print(f"with the reading off, unfinished replies counted: {read['not_for_customer']}/{len(endings)}")
    assert scorecard.UNFINISHED not in read["not_for_customer_reasons"]


# --- the recorded replies ------------------------------------------------------------------------------------


def test_the_recorded_replies_are_not_counted():
    """The 882 replies GPT-4.1 wrote to τ²-bench's simulated customers, each judged as the card judges a posted
    reply: with its domain's declared tools and the customer's messages before it."""
    counted, replies = [], 0
    for path in sorted(recorded.traces().glob("*.json")):
        domain = path.name.split("_")[1]
        texts = replycheck.declared_texts(recorded.tool_specs(domain))
        for ticket in tau2_results(path):
            said: list[str] = []
            for t in ticket.turns:
                if t.kind != "message" or not t.text.strip():
                    continue
                if t.author == "customer":
                    said.append(t.text)
                elif t.author == "agent":
                    replies += 1
                    if found := scorecard.not_for_customer(
                        t.text, declared=texts, customer_said=said, tools=TOOL_NAMES
                    ):
                        counted.append((found, t.text))
    print(f"recorded replies: {replies}, not for the customer: {len(counted)}")
    assert replies == 882 and not counted, counted[:3]
