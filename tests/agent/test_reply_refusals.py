"""A reply that is nothing but a refusal of help answers nothing: asked again, then held, and the hand-off answers.

Issue 26: Qwen2.5-Coder-0.5B answered "where is my order" and "refund please" with "I apologize, but I
can't assist with that." five times, calling no tool; the customer was left with nothing and staff were
never told. The rule (`guards/refusals.py`) reads the whole reply as such a refusal or not. The refusals
are generated (openers × "but" or not × subject, modal and negation × verbs and objects ×
punctuation), so are the look-alikes that must post: the same refusals with a reason, an alternative or
a question after them, refusals that name what is refused ("I can't share another customer's
details."), what the customer can't do, offers and questions of help. Through the real loop with the
scripted model: asked again with the reason, then held — the customer reads Sundry's hand-off, the ticket
is flagged, the desk shows the model's words as held. The τ²-bench replies of a strong model (beside the
checkout when present): none read as a bare refusal.
"""

from __future__ import annotations

import html
import itertools
import json
from types import SimpleNamespace

import pytest
from django.test import Client

from sundry.agent import answer, handoff
from sundry.agent.guards import callguards, provisional, refusals, replycheck
from sundry.agent.guards.callguards import GuardInput
from sundry.agent.provider.gateway import Gateway
from sundry.agent.provider.scripted import ScriptedModel
from sundry.agent.streaming import ReplyStream
from sundry.context.lanes import TurnData
from sundry.desk.lifecycle import ticket_create
from sundry.evals import scorecard
from sundry.portal.selectors import customer_turns
from sundry.tickets.attention import reasons
from sundry.tickets.models import Ticket, Turn
from sundry.tooling.messages import Message, ModelRequest, ModelResponse, ToolCall
from sundry.tooling.tools import REGISTRY
from tests.agent import recorded
from tests.agent.claimcase import run_scripted
from tests.factories import CustomerFactory, TicketClassFactory, paid_order

ORDER = "SU-26675"

# The issue's sentence, and the brief's own examples.
ISSUE = "I apologize, but I can't assist with that."
EXAMPLES = [
    ISSUE,
    "I'm sorry, but I can't help with that.",
    "Sorry, I cannot assist with this request.",
    "I am unable to help with that.",
    "Unfortunately, I can't do that.",
]

# --- the grammar of a bare refusal ---------------------------------------------------------------------------

# An apology or regret before the refusal, and how it joins it ("but" or not).
APOLOGIES = ["I'm sorry", "Sorry", "I apologize", "My apologies", "We're really sorry"]
APOLOGY_JOINS = [", but ", ", ", ". "]
REGRETS = ["Unfortunately", "I'm afraid", "Regrettably"]
REGRET_JOINS = [", ", " "]
# Subject, modal and negation.
NOT_ABLE = [
    "I can't",
    "I cannot",
    "I can not",
    "I can’t",
    "I am unable to",
    "I'm not able to",
    "I won't be able to",
    "I couldn't",
    "We're unable to",
    "we are not able to",
    "I'm not in a position to",
]
# Verbs of helping itself, each with the objects it takes: a pronoun, "this request", nothing.
WITH_VERBS = ["help", "assist", "support"]
WITH_OBJECTS = ["", " you", " with that", " you with this", " with this request"]
DIRECT_VERBS = ["do", "process", "handle"]
DIRECT_OBJECTS = [" that", " this request", " it", " that for you"]
TAILS = ["", " right now", " at this time"]
# The general offer a refusal often ends on: it leaves the request itself as unanswered.
CLOSINGS = [
    "If you have any other questions, feel free to ask.",
    "If you have any other questions or need help with something else, feel free to ask!",
    "Is there anything else I can help you with?",
    "Let me know if there's anything else I can help with.",
    "How else can I help you today?",
]
PUNCT = [".", "!", ""]


def _cap(s: str) -> str:
    return s[0].upper() + s[1:]


def _lower_first(s: str) -> str:
    return s if s.startswith("I ") or s.startswith("I'") or s.startswith("I’") else s[0].lower() + s[1:]


def cores() -> list[str]:
    """Subject, negation, verb and object: "I can't help with that"."""
    out = []
    for neg in NOT_ABLE:
        out += [f"{neg} {v}{o}" for v, o in itertools.product(WITH_VERBS, WITH_OBJECTS)]
        out += [f"{neg} {v}{o}" for v, o in itertools.product(DIRECT_VERBS, DIRECT_OBJECTS)]
    return out


def openers() -> list[str]:
    out = [""]
    out += [a + j for a, j in itertools.product(APOLOGIES, APOLOGY_JOINS)]
    out += [r + j for r, j in itertools.product(REGRETS, REGRET_JOINS)]
    return out


def positives() -> list[str]:
    out = []
    for opener, core, punct in itertools.product(openers(), cores(), PUNCT):
        core = _cap(core) if not opener or opener.endswith(". ") else _lower_first(core)
        out.append(f"{opener}{core}{punct}")
    # Time phrases, other joins, greetings and closing courtesies, over a stride of the cores.
    for core in cores()[::7]:
        out += [f"Sorry, {_lower_first(core)}{t}." for t in TAILS[1:]]
        out += [
            f"I'm sorry — {_lower_first(core)}.",
            f"I am sorry; {_lower_first(core)}.",
            f"Hi there, I'm sorry but {_lower_first(core)}.",
            f"Hello! {_cap(core)}.",
            f"{_cap(core)}, sorry.",
            f"{_cap(core)}. I apologize for any inconvenience.",
            f"I'm sorry, {_lower_first(core)}. Thank you for understanding.",
            f'"{_cap(core)}."',
        ]
        out += [f"I'm sorry, but {_lower_first(core)}. {closing}" for closing in CLOSINGS]
    out += [
        "That's not something I can help with.",
        "This isn't something we can assist with.",
        "I must decline this request.",
        "I'm afraid I'll have to decline.",
        "I'm sorry, I don't think I can help with that.",
        "I'm sorry for any inconvenience, but I can't assist with this request.",
    ]
    return list(dict.fromkeys(out))


POSITIVES = positives()

# --- look-alikes that must post ------------------------------------------------------------------------------

# A refusal with a reason, an alternative or a question after it: an answer of sorts.
REASONS = [
    ", because the order has already shipped.",
    " as the order has already shipped.",
    " — the parcel is already with the carrier.",
    " since returns close 30 days after delivery.",
]
ALTERNATIVES = [
    ", but I can start a return for you.",
    ". However, I can start a return for you.",
    ", but our team can; I've asked them to contact you.",
    ". You can cancel it yourself from your account page.",
    ". Please contact the carrier on 0800 123 456.",
]
QUESTIONS = [
    ". Could you tell me your order number?",
    ". Which order is it about?",
    " until I know which order you mean — could you give me its number?",
]
# A refusal that names what it refuses, or says what was not found: information.
NAMED = [
    "I can't cancel a shipped order, but I can start a return for you.",
    "I can't share another customer's details.",
    "I can't find that order — could you check the number?",
    f"I'm sorry, but I can't see a refund on order {ORDER}.",
    "Unfortunately, I can't change the delivery address once a parcel has shipped.",
    "Sorry, I cannot refund an order that has not been paid.",
    "I'm unable to locate an order with that number.",
    "I can't process a refund for more than the order total.",
    "I'm sorry, but I can't help with that order.",
    "We can't ship to PO boxes.",
    "I can't open attachments, so I've asked a member of staff to look.",
]
# The customer's or another's inability, not ours: "you can't …", "the carrier can't …".
OTHERS = ["You can't", "You cannot", "You won't be able to", "They can't", "The carrier can't", "It can't"]
# Offers and questions of help: the same verbs, not refused.
ABLE = ["I can", "I'm able to", "I'd be happy to", "We can", "I will", "Let me"]
QUESTIONS_OF_HELP = [
    *CLOSINGS,
    "Is there anything else I can help with?",
    "Can I help with anything else?",
    "What can I help you with today?",
    "Can't I help with that?",
    "Is there anything I can't help with?",
    "How can I assist you?",
]
# Other sentences that start or sound like one.
SOUNDS_LIKE = [
    "I can't wait to help you!",
    "I can't thank you enough for your patience.",
    "I can't help but notice your order shipped today.",
    "I'm sorry for the delay.",
    "Sorry to hear that.",
    "I'm sorry!",
    "Unfortunately the parcel is late.",
    "Nothing I can't help with!",
    "I couldn't agree more.",
    "I can't say for sure yet, but the carrier expects it Monday.",
]


def look_alikes() -> list[str]:
    out = []
    stride = cores()[::5]
    for core, end in itertools.product(stride, REASONS + ALTERNATIVES + QUESTIONS):
        out += [f"{_cap(core)}{end}", f"I'm sorry, but {_lower_first(core)}{end}"]
    for who, core in itertools.product(OTHERS, stride):
        verb = core.split(" ", 2)[-1] if core.startswith(("I can't ", "We can't ", "I cannot ", "I can not ")) else ""
        if verb:
            out += [f"{who} {verb}.", f"Sorry, {_lower_first(who)} {verb}."]
    for able, v, o in itertools.product(ABLE, WITH_VERBS + DIRECT_VERBS, [" with that", " that", " this request"]):
        if (o == " with that") == (v in WITH_VERBS):
            out.append(f"{able} {v}{o}.")
    out += NAMED + QUESTIONS_OF_HELP + SOUNDS_LIKE
    return list(dict.fromkeys(out))


LOOK_ALIKES = look_alikes()


def check(text, **kw):
    return replycheck.check_reply(text, known=replycheck.known_identifiers([ORDER]), **kw)


def held_as_refusal(text) -> bool:
    first, second = check(text), check(text, retried=True)
    return (
        first.action == replycheck.RETRY
        and first.reasons == [replycheck.BARE_REFUSAL]
        and second.action == replycheck.HOLD
        and second.reasons == [replycheck.BARE_REFUSAL]
    )


# --- pure ----------------------------------------------------------------------------------------------------


def test_the_issues_sentence_and_the_examples_are_asked_again_then_held():
    for text in EXAMPLES:
        assert held_as_refusal(text), text
    prompt = check(ISSUE).prompt
    assert "only refused to help" in prompt and "tools" in prompt


def test_every_generated_bare_refusal_is_asked_again_then_held():
    """Every one asked again; every tenth also held on the second try (the same reading, `retried` only
    turns the re-ask into a hold)."""
    missed = [t for t in POSITIVES if check(t).reasons != [replycheck.BARE_REFUSAL]]
    missed += [t for t in POSITIVES[::10] if not held_as_refusal(t)]
    print(f"bare refusals asked again: {len(POSITIVES) - len(missed)}/{len(POSITIVES)}")
    assert len(POSITIVES) > 10000 and missed == [], missed[:10]


def test_every_generated_look_alike_posts():
    flagged = [t for t in LOOK_ALIKES if check(t).action != replycheck.POST]
    print(f"look-alikes posted: {len(LOOK_ALIKES) - len(flagged)}/{len(LOOK_ALIKES)}")
    assert len(LOOK_ALIKES) > 500 and flagged == [], [(t, check(t).reasons) for t in flagged[:10]]


def test_the_named_refusals_of_the_brief_post_unchanged():
    for text in NAMED[:3]:
        verdict = check(text)
        assert verdict.action == replycheck.POST and verdict.text == text


def test_a_long_reply_is_never_read():
    assert not refusals.bare("I'm sorry, but I can't help with that. " * 10)
    assert not refusals.bare("") and not refusals.bare("   ")


def test_negative_control_with_the_reading_off_the_generated_refusals_post(monkeypatch):
    monkeypatch.setattr(refusals, "bare", lambda text: False)
    posted = [t for t in [*POSITIVES, *EXAMPLES] if check(t).action == replycheck.POST]
    print(f"with the reading off, bare refusals posted: {len(posted)}/{len(POSITIVES) + len(EXAMPLES)}")
    assert len(posted) == len(POSITIVES) + len(EXAMPLES)


def _stream_judge():
    stream = ReplyStream(0)
    request = ModelRequest(model="scripted", messages=[Message(role="user", content=f"Where is {ORDER}?")])
    turns = [TurnData(number=1, author="customer", kind="message", text=f"Where is {ORDER}?")]
    model = ScriptedModel([ModelResponse(text="Hi.")])
    answer.obtain(Gateway(override=model), request, model="scripted", turns=turns, stream=stream)
    return stream.sentence_ok


# Sentences that may open a bare refusal on their own, and what may follow them.
LEAD_INS = ["I'm sorry. ", "Hi there! ", "Hello! I'm sorry. ", "My apologies. ", "Sorry! "]


def test_the_stream_never_shows_a_bare_refusal_nor_its_apology_alone():
    """The stream's per-sentence judge asks the whole reply check, and a greeting or apology alone waits for
    the sentence after it: nothing of a bare refusal is shown, so nothing of it is kept as shown text."""
    ok = _stream_judge()
    for text in EXAMPLES + POSITIVES[::50]:
        assert provisional.shown(text, known={ORDER}, final=True, sentence_ok=ok) == "", text
    for lead, text in itertools.product(LEAD_INS, EXAMPLES):
        assert provisional.shown(lead + text, known={ORDER}, final=True, sentence_ok=ok) == "", lead + text
    good = f"Your order {ORDER} has shipped."
    for lead in LEAD_INS:
        assert provisional.shown(lead + good, known={ORDER}, final=True, sentence_ok=ok) == (lead + good).strip()
        assert provisional.shown(lead + "Your ord", known={ORDER}, final=False, sentence_ok=ok) == ""
        # A finished reply that is only the greeting or apology shows, as it would be posted.
        assert provisional.shown(lead, known={ORDER}, final=True, sentence_ok=ok) == lead.strip()


def test_negative_control_without_the_wait_the_apology_shows_alone(monkeypatch):
    monkeypatch.setattr(refusals, "lead_in", lambda text: False)
    ok = _stream_judge()
    shown = [provisional.shown(lead + ISSUE, known={ORDER}, final=True, sentence_ok=ok) for lead in LEAD_INS]
    print(f"without the wait, apologies shown before a bare refusal: {sum(bool(s) for s in shown)}/{len(LEAD_INS)}")
    assert shown == [lead.strip() for lead in LEAD_INS]


def test_no_real_agent_reply_of_the_tau2_traces_is_a_bare_refusal():
    """Replies a strong model wrote to simulated customers (τ²-bench, beside the checkout when present)."""
    replies = [text for _domain, text in recorded.replies()]
    flagged = [t for t in replies if refusals.bare(t)]
    print(f"real agent replies read as bare refusals: {len(flagged)}/{len(replies)}")
    assert len(replies) > 800 and flagged == [], flagged[:5]


def test_the_recorded_refusals_of_the_traces_are_all_reasoned_and_pass():
    """The traces' refusals all say why or what else: each opens like one and is not read."""
    traces = recorded.traces()
    refusing = []
    for path in sorted(traces.glob("*.json")):
        data = json.loads(path.read_text())
        for sim in data.get("simulations", data) if isinstance(data, dict) else data:
            for m in sim.get("messages") or []:
                text = (m.get("content") or "").replace("’", "'")
                if m.get("role") == "assistant" and ("I can't" in text or "unable to" in text or "I cannot" in text):
                    refusing.append(m["content"])
    print(f"real replies that refuse something: {len(refusing)}, read as bare: 0 expected")
    assert refusing and not any(refusals.bare(t) for t in refusing)


# --- through the loop ----------------------------------------------------------------------------------------


@pytest.fixture
def case(django_user_model):
    user = django_user_model.objects.create_user("dana", password="pw")
    staff = django_user_model.objects.create_user("sam", password="pw", is_staff=True)
    customer = CustomerFactory(user=user)
    paid_order(customer=customer, number=ORDER, prices=(4000,))
    ticket = ticket_create(customer=customer.person, ticket_class=TicketClassFactory(approval_rules={}), subject="Hi")
    page, desk = Client(), Client()
    page.force_login(user)
    desk.force_login(staff)
    return {"ticket": ticket, "page": page, "desk": desk}


_run = run_scripted


def _said(case) -> list[str]:
    return [t.text for t in customer_turns(case["ticket"]) if t.author != Turn.Author.CUSTOMER]


def _page(case, which: str) -> str:
    url = f"/help/tickets/{case['ticket'].pk}/" if which == "page" else f"/desk/tickets/{case['ticket'].pk}/"
    return html.unescape(case[which].get(url).content.decode())


REFUSAL = ModelResponse(text=ISSUE)
FINAL = ModelResponse(text=f"Your order {ORDER} is on its way; it should reach you on Monday.")


@pytest.mark.django_db
def test_through_the_loop_it_is_asked_again_and_the_second_answer_posted(case):
    model = _run(case, f"Where is my order {ORDER}?", REFUSAL, FINAL)
    assert model.requests[1].messages[-1].content.endswith(replycheck.BARE_REFUSAL_PROMPT)
    assert _said(case) == [FINAL.text]
    assert ISSUE not in _page(case, "page")


@pytest.mark.django_db
def test_through_the_loop_said_again_it_is_held_the_customer_reads_the_hand_off_and_staff_the_refusal(case):
    _run(case, f"Where is my order {ORDER}?", REFUSAL, REFUSAL)
    notice = Turn.objects.get(ticket=case["ticket"], kind=Turn.Kind.ERROR, payload__has_key="held_reply")
    assert notice.payload["reply_check"]["reasons"] == ["bare_refusal"] and notice.payload["held_reply"] == ISSUE
    assert _said(case) == [handoff.TEXT]
    assert ISSUE not in _page(case, "page")
    ticket = Ticket.objects.get(pk=case["ticket"].pk)
    assert "Reply held for staff: bare_refusal" in reasons(ticket.attention)
    desk = _page(case, "desk")
    assert ISSUE in desk and "bare_refusal" in desk and "passed your message to our team" in desk


@pytest.mark.django_db
def test_the_issues_five_refusals_each_get_an_answer_and_none_is_posted(case):
    """Issue 26's ticket: five plain requests, each refused twice. The customer reads the hand-off, then the
    short line for each later message; never the refusal."""
    for said in [
        f"Where is my order {ORDER}?",
        "It never arrived, I want a refund please.",
        "What are my options?",
        "When will I see the money?",
        f"What about {ORDER}?",
    ]:
        _run(case, said, REFUSAL, REFUSAL)
    assert _said(case) == [handoff.TEXT] + [handoff.STILL_WITH_TEAM] * 4
    assert Turn.objects.filter(ticket=case["ticket"], payload__has_key="held_reply").count() == 5
    read = scorecard.read_by_customers(case["ticket"].pk)
    assert read["unanswered"] == 0 and read["handed_off"] == 5


@pytest.mark.django_db
def test_a_refusal_with_an_alternative_is_posted_through_the_loop(case):
    text = "I can't cancel a shipped order, but I can start a return for you."
    _run(case, f"Cancel {ORDER} please.", ModelResponse(text=text))
    assert _said(case) == [text]


@pytest.mark.django_db
def test_a_bare_refusal_written_with_calls_is_held_and_the_calls_run(case):
    """Words with calls are checked once, never asked again (`answer.SAY_WITH_CALLS`): held, no hand-off (the
    run goes on), and the answer after the call is what the customer reads."""
    lookup = ModelResponse(
        text="Sorry, I can't help with that.",
        tool_calls=[ToolCall(id="c1", name="get_order", arguments={"order_number": ORDER})],
    )
    _run(case, f"Where is my order {ORDER}?", lookup, FINAL)
    notice = Turn.objects.get(ticket=case["ticket"], kind=Turn.Kind.ERROR, payload__has_key="held_reply")
    assert notice.payload["reply_check"]["reasons"] == ["bare_refusal"]
    assert _said(case) == [FINAL.text]


@pytest.mark.django_db
def test_negative_control_with_the_reading_off_the_loop_posts_the_refusal(case, monkeypatch):
    monkeypatch.setattr(refusals, "bare", lambda text: False)
    _run(case, f"Where is my order {ORDER}?", REFUSAL, REFUSAL)
    assert _said(case) == [ISSUE]
    assert not Turn.objects.filter(ticket=case["ticket"], payload__has_key="held_reply").exists()
    assert ISSUE in _page(case, "page")


# --- through the reply tool ----------------------------------------------------------------------------------
# Real-model run 19 sent "Sorry, I can't help with that." twice through `reply_to_customer`, which the reply
# check never reads: the call guards read a tool's customer text for a bare refusal as the check reads a reply.

REPLY_TOOL = REGISTRY["reply_to_customer"]


def _refused_as_tool_text(text) -> bool:
    verdict = callguards._check_bare_refusal(GuardInput(tool=REPLY_TOOL, arguments={}), SimpleNamespace(message=text))
    return verdict is not None and verdict.guard == replycheck.BARE_REFUSAL and verdict.details["field"] == "message"


def test_every_generated_bare_refusal_is_refused_as_a_reply_tools_text_and_every_look_alike_sent():
    missed = [t for t in POSITIVES[::5] if not _refused_as_tool_text(t)]
    flagged = [t for t in LOOK_ALIKES if _refused_as_tool_text(t)]
    print(f"as reply_to_customer text: {len(POSITIVES[::5]) - len(missed)} refused, {len(flagged)} look-alikes refused")
    assert not missed and not flagged, (missed[:5], flagged[:5])
    assert _refused_as_tool_text("Sorry, I can't help with that.")


def test_negative_control_with_the_tool_reading_off_no_bare_refusal_is_refused(monkeypatch):
    monkeypatch.setattr(callguards, "BARE_REFUSAL_IN_CUSTOMER_TEXT", False)
    assert not [t for t in POSITIVES[::5] if _refused_as_tool_text(t)]


RUN_19 = "Sorry, I can't help with that."


def _tool_reply(text) -> ModelResponse:
    return ModelResponse(tool_calls=[ToolCall(id="r1", name="reply_to_customer", arguments={"message": text})])


@pytest.mark.django_db
def test_run_19s_refusal_through_the_reply_tool_never_reaches_the_customer(case):
    model = _run(case, f"Where is {ORDER}? Has the refund gone through?", _tool_reply(RUN_19), FINAL)
    rejection = Turn.objects.get(ticket=case["ticket"], kind=Turn.Kind.REJECTION)
    assert rejection.payload["guard"] == replycheck.BARE_REFUSAL and len(model.requests) == 2
    assert _said(case) == [FINAL.text]
    assert RUN_19 not in _page(case, "page")


@pytest.mark.django_db
def test_negative_control_through_the_loop_the_tools_refusal_is_sent(case, monkeypatch):
    monkeypatch.setattr(callguards, "BARE_REFUSAL_IN_CUSTOMER_TEXT", False)
    _run(case, f"Where is {ORDER}? Has the refund gone through?", _tool_reply(RUN_19), FINAL)
    assert RUN_19 in _said(case)
