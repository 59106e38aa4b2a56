"""What a tool sends the customer names only identifiers the request showed, and never a tool call's ID.

Real-model run 14: `reply_to_customer` posted "You have delivered damaged order, so we should call the
text-call-0-2's result instead." — `text-call-0-2` the ID Sundry's text-call reader gave one of the model's
calls. As a plain reply the reply check asks it again (`invented_id`); the call guards now read a tool's
customer text (`reply_to_customer`'s message, an e-mail's subject and body) the same way, on the same
identifiers (`answer.known_identifiers`), and refuse it. A call's ID, in any form Sundry or a provider gives
one, is never known, wherever the request showed it (`callids`).

A generated grammar of frames (the ID first, last, mid-sentence, in brackets, quoted, possessive, in a
list, after a label) × invented IDs (order-like, refund-like, tracking-like, and call IDs made by the code
that makes them) is refused; the same frames naming the ticket's and the ledger's IDs, or none, pass.
Through the agent loop the invented ones never reach the customer's page. Negative controls: the check
off (they are posted), call IDs counted as known (they leak). The real τ²-bench replies: how many would be
refused (none: the four measures once refused are read as measures, `measures`).
"""

from __future__ import annotations

import itertools
import json
import re
import secrets
import uuid
from types import SimpleNamespace

import pytest
from pydantic_ai import _utils as pydantic_ai_utils

from sundry.agent import answer, calls
from sundry.agent.guards import callguards, replycheck
from sundry.agent.guards.callguards import GuardInput
from sundry.agent.loop import agent_run
from sundry.agent.provider import callids, textcalls, wire
from sundry.agent.provider.gateway import Gateway
from sundry.agent.provider.scripted import ScriptedModel
from sundry.context import render
from sundry.context.lanes import TurnData
from sundry.tickets.models import Turn
from sundry.tooling.messages import Message, ModelRequest, ModelResponse, ToolCall
from sundry.tooling.tools import REGISTRY
from tests.agent import recorded
from tests.agent.claimcase import ORDER, customer_reads, open_case, reply_via

REPLY = REGISTRY["reply_to_customer"]
ITEM, SKU, TRACK, PAY = "itm_4k2m9q7x", "SKU-7Q2LM", "1Z999AA10123456784", "pay_8x2k4m1q9z"
RUN_14 = (
    "You have delivered damaged order, so we should call the text-call-0-2's result instead. "
    "Please provide the full message."
)


# --- call IDs, as the code makes them ----------------------------------------------------------------------


def made_call_ids() -> list[str]:
    """Call IDs made by the code that makes them: the text-call reader (three calls in one answer, the same
    answer again made unique in its request), the wire's for calls sent without one, the loop's for a call
    with none, pydantic-ai's; a held call approved and a card confirmed; and the providers' forms."""
    tools = {"get_order"}
    text = "\n".join(json.dumps({"name": "get_order", "arguments": {"order_number": f"SU-4100{n}"}}) for n in range(3))
    first = textcalls.parse(text, tools).calls
    request = ModelRequest(model="t", messages=[Message(role="assistant", content="", tool_calls=first)])
    again = calls.unique_call_ids(textcalls.parse(text, tools).calls, request)
    body = {
        "choices": [
            {"message": {"tool_calls": [{"function": {"name": "get_order", "arguments": {}}} for _ in range(2)]}}
            for _ in range(2)
        ]
    }
    assigned = [c["id"] for ch in wire.normalise_completion(body)[0]["choices"] for c in ch["message"]["tool_calls"]]
    unnamed = calls.unique_call_ids(
        [ToolCall(id="", name="get_order", arguments={})] * 2, ModelRequest(model="t", messages=[])
    )
    made = [c.id for c in first + again] + assigned + [c.id for c in unnamed]
    made += [pydantic_ai_utils.generate_tool_call_id()]
    made += [f"{again[0].id}{callids.APPROVED_SUFFIX}", f"{first[1].id}{callids.CONFIRMED_SUFFIX}"]
    alnum = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
    made += [
        "call_" + "".join(secrets.choice(alnum) for _ in range(24)),  # OpenAI's
        "toolu_01" + "".join(secrets.choice(alnum) for _ in range(22)),  # Anthropic's
        f"chatcmpl-tool-{uuid.uuid4().hex}",  # vLLM's
    ]
    return made


CALL_IDS = made_call_ids()


def test_the_code_makes_call_ids_of_the_forms_read_as_call_ids():
    assert {"text-call-0", "text-call-2", "text-call-0-2", "sundry-call-1-1", "call", "call-2"} <= set(CALL_IDS)
    assert callids.PYDANTIC_AI_PREFIX == pydantic_ai_utils.TOOL_CALL_ID_PREFIX
    # Every one that reads as an identifier is a call ID by its form ("call" alone is no identifier).
    tokens = [c for c in CALL_IDS if replycheck.id_tokens(c) == {c}]
    assert len(tokens) == len(CALL_IDS) - 1 and all(callids.generated(c) for c in tokens), tokens


def test_the_shops_ids_and_words_like_call_are_not_call_ids():
    look_alikes = [ORDER, ITEM, SKU, TRACK, PAY, "cus_8k2m9q4x", "rfd_9k2m4x7q", "ref_8k2m9q4x", "SU-41001-RF01"]
    look_alikes += ["recall_2024", "calls_5", "text-call", "call-back", "Call-2", "TEXT-CALL-0", "tool_01ab"]
    look_alikes += ["text-call-x", "text-call-0-", "sundry-call-1", "pyd_ai_XYZ", "calltext-0"]
    assert not [t for t in look_alikes if callids.generated(t)]


# --- what the request showed ---------------------------------------------------------------------------------


def _turn(n, author, kind, text="", **payload) -> TurnData:
    return TurnData(number=n, author=author, kind=kind, text=text, payload=payload)


def request_showing_call_ids() -> ModelRequest:
    """A request whose texts show call IDs where a model reads them: a later result's notice naming its call,
    a duplicate call's refusal, a summary that copied them, the customer pasting one, a tool result quoting one;
    and the ticket's order, the ledger's IDs and a tool result's."""
    result = json.dumps(
        {
            "order_number": ORDER,
            "status": "delivered",
            "items": [{"item_id": ITEM, "sku": SKU, "name": "LED Desk Lamp"}],
            "parcels": [{"tracking_number": TRACK}],
            "payments": [{"payment_id": PAY}],
        }
    )
    gets = [{"id": i, "name": "get_order", "arguments": {"order_number": ORDER}} for i in CALL_IDS[:3]]
    turns = [
        _turn(1, "customer", "message", f"The lamp on {ORDER} arrived broken, can I get 15.00 back?"),
        _turn(2, "agent", "tool_call", calls=gets),
        _turn(3, "tool", "tool_result", result, call_id=gets[0]["id"], name="get_order", ok=True),
        _turn(4, "system", "rejection", f"This get_order call repeats call {gets[0]['id']}.", call_id=gets[1]["id"]),
        _turn(5, "tool", "tool_result", json.dumps({"ref": CALL_IDS[9]}), call_id=gets[2]["id"], ok=True),
        _turn(6, "tool", "tool_result", result, call_id=gets[0]["id"], name="get_order", ok=True),  # a later result
        _turn(7, "customer", "message", f"Your page said {CALL_IDS[5]} and {CALL_IDS[-3]}, what are those?"),
    ]
    summary = "SUMMARY\n" + " ".join(f"Call {c} looked up {ORDER}." for c in CALL_IDS)
    ledger = f"{render.LEDGER_HEADING}\norder {ORDER} verified\nitem {ITEM} verified\nsku {SKU}\npayment {PAY}"
    messages = [render.lane_message("summary", summary), render.lane_message("ledger", ledger)]
    return ModelRequest(model="t", messages=messages + render.turns_to_messages(turns))


@pytest.fixture(scope="module")
def known() -> frozenset[str]:
    return frozenset(answer.known_identifiers(request_showing_call_ids()))


def test_no_call_id_the_request_showed_is_known_and_its_own_ids_are(known):
    request = request_showing_call_ids()
    shown = " ".join(m.content or "" for m in request.messages)
    assert "later result of an earlier get_order call: " in shown
    called = [c for c in CALL_IDS if replycheck.id_tokens(c) == {c}]
    assert not known & set(called)
    assert {ORDER, ITEM, SKU, TRACK, PAY} <= known


def _later_result_texts(monkeypatch, names_call: bool) -> list[str]:
    monkeypatch.setattr(render, "LATER_RESULT_NAMES_CALL", names_call)
    messages = request_showing_call_ids().messages
    return [m.content for m in messages if "later result" in (m.content or "")]


def test_a_later_results_notice_names_its_tool_not_its_call(monkeypatch):
    """Only the call's own pairing (the assistant message's calls and the tool message's ID) carries it:
    no text a model reads as prose does."""
    (notice,) = _later_result_texts(monkeypatch, names_call=False)
    assert notice.startswith("[system notice] later result of an earlier get_order call: [tool result")
    assert ORDER in notice and not [c for c in CALL_IDS if replycheck.id_tokens(c) == {c} and c in notice]


def test_negative_control_a_notice_naming_its_call_shows_the_id(monkeypatch):
    (notice,) = _later_result_texts(monkeypatch, names_call=True)
    assert f"get_order call ({CALL_IDS[0]}): " in notice


def test_negative_control_counted_as_any_text_the_call_ids_shown_are_known(monkeypatch):
    monkeypatch.setattr(answer, "CALL_IDS_UNKNOWN", False)
    leaked = set(answer.known_identifiers(request_showing_call_ids())) & set(CALL_IDS)
    print(f"call IDs known with the exclusion off: {len(leaked)} of {len(CALL_IDS) - 1}")
    assert leaked == {c for c in CALL_IDS if replycheck.id_tokens(c) == {c}}


def test_a_call_id_the_request_carries_in_any_form_is_not_known():
    """A server's bare random ID (llama.cpp's) has no form to read: the request's own calls name it."""
    bare = "Xk29sLq81mZpQ0vT7yB3nR4dWe5tY6uI"
    turns = [
        _turn(1, "agent", "tool_call", calls=[{"id": bare, "name": "get_order", "arguments": {}}]),
        _turn(2, "tool", "tool_result", "{}", call_id=bare, name="get_order", ok=True),
        _turn(3, "tool", "tool_result", "{}", call_id=bare, name="get_order", ok=True),
        _turn(4, "customer", "message", f"The page showed {bare}, what is it?"),
    ]
    request = ModelRequest(model="t", messages=render.turns_to_messages(turns))
    assert bare in " ".join(m.content for m in request.messages)
    assert bare not in answer.known_identifiers(request)


# --- the grammar ---------------------------------------------------------------------------------------------

# Where a reply puts an identifier: first, last, mid-sentence, in brackets, quoted, possessive, in a list,
# after a label, before a semicolon; run 14's own sentence.
FRAMES = [
    "{id} is the reference for your request.",
    "Your reference is {id}.",
    "I have noted {id}, and you will hear from us within two days.",
    "Please quote ({id}) if you write to us again.",
    'The reference "{id}" is now on your ticket.',
    "So we should look at {id}'s details instead.",
    "Here is what I found:\n- {id}\n- the lamp you ordered",
    "Reference: {id}",
    "You can follow it with {id}; it updates daily.",
    "You have delivered damaged order, so we should call the {id}'s result instead. Please provide the full message.",
]
# Identifiers no text of the request holds, by what they look like.
INVENTED = {
    "order": ["SU-41002", "SU-4100", "SU-410011", "ORD-88213", "48213-B", "W6750959"],
    "refund": ["SU-41001-RF01", "rfd_9k2m4x7q", "ref_8k2m9q4x", "RF-20481"],
    "tracking": ["1Z999AA10123456785", "JD014600003828", "TRK-5531209", "LP00123456789CN"],
    "call": [c for c in CALL_IDS if replycheck.id_tokens(c) == {c}],
}
# The ticket's order, the ledger's and a tool result's IDs; no identifier at all; facts that are not one.
KNOWN = [ORDER, ITEM, SKU, TRACK, PAY]
NO_ID = ["your order", "the lamp", "it", "the call we had", "our text", "24h", "3rd", "2026-08-10", "USD15.00"]

INVENTED_TEXTS = [(kind, f.format(id=i)) for kind, ids in INVENTED.items() for i in ids for f in FRAMES]
KNOWN_TEXTS = [f.format(id=i) for i in KNOWN + NO_ID for f in FRAMES]
KNOWN_TEXTS += [f"{a} {b}" for a, b in itertools.combinations([f.format(id=i) for i, f in zip(KNOWN, FRAMES)], 2)]


def _refused(text, known, tool=REPLY, field="message"):
    return callguards._check_invented(
        GuardInput(tool=tool, arguments={}, known=known), SimpleNamespace(**{field: text})
    )


def test_every_generated_invented_id_is_refused_with_a_reason_naming_it(known):
    refused = {kind: 0 for kind in INVENTED}
    for kind, text in INVENTED_TEXTS:
        verdict = _refused(text, known)
        assert verdict is not None and verdict.guard == "invented_id", text
        invented = verdict.details["invented"]
        assert verdict.details["field"] == "message" and all(t in verdict.reason for t in invented)
        assert ("one of your tool calls" in verdict.reason) == (kind == "call"), text
        refused[kind] += 1
    print(f"refused: {refused} of {len(INVENTED_TEXTS)}")
    assert sum(refused.values()) == len(INVENTED_TEXTS) > 300


def test_the_same_frames_with_known_ids_or_none_pass(known):
    passed = [t for t in KNOWN_TEXTS if _refused(t, known) is None]
    print(f"look-alikes passed: {len(passed)} of {len(KNOWN_TEXTS)}")
    assert len(passed) == len(KNOWN_TEXTS), [t for t in KNOWN_TEXTS if t not in passed][:5]


def test_the_call_guard_and_the_reply_check_read_the_same_identifiers(known):
    """Same identifiers known, same rules: a reply the check asks again for an invented ID is refused as a
    tool's text, naming the same IDs, and a look-alike passes both."""
    for _kind, text in INVENTED_TEXTS:
        verdict = replycheck.check_reply(text, known=known)
        assert verdict.reasons == ["invented_id"], (text, verdict.reasons)
        assert verdict.invented == _refused(text, known).details["invented"]
    assert not [t for t in KNOWN_TEXTS if "invented_id" in replycheck.check_reply(t, known=known).reasons]


def test_an_emails_subject_and_body_are_read_too(known):
    email = REGISTRY["send_email"]
    for field in email.customer_text:
        verdict = _refused(f"Your refund {INVENTED['refund'][0]} is on its way.", known, email, field)
        assert verdict.guard == "invented_id" and verdict.details["field"] == field
    assert _refused(f"About {ORDER}", known, email, "subject") is None


def test_a_call_judged_without_the_requests_ids_is_not_read():
    """The harness' replays judge IDs alone (no `known`): nothing is refused for it."""
    assert _refused(RUN_14, None) is None


def test_negative_control_with_the_check_off_every_invented_id_is_allowed(known, monkeypatch):
    monkeypatch.setattr(callguards, "IDS_IN_CUSTOMER_TEXT", False)
    allowed = [t for _, t in INVENTED_TEXTS if _refused(t, known) is None]
    print(f"invented IDs allowed with the check off: {len(allowed)} of {len(INVENTED_TEXTS)}")
    assert len(allowed) == len(INVENTED_TEXTS)


# --- through the agent loop -----------------------------------------------------------------------------------

# One message of each kind, in a frame of its own (the loop runs take a second each).
SAMPLE = [
    FRAMES[1].format(id=INVENTED["order"][0]),
    FRAMES[3].format(id=INVENTED["refund"][0]),
    FRAMES[7].format(id=INVENTED["tracking"][1]),
    RUN_14,
    FRAMES[6].format(id="text-call-3"),
    FRAMES[4].format(id=INVENTED["call"][-3]),  # OpenAI's form
]
LOOKUP = ModelResponse(tool_calls=[ToolCall(id="g1", name="get_order", arguments={"order_number": ORDER})])
AFTER = ModelResponse(text=f"Thanks for waiting. I have the details of {ORDER} here; a colleague will follow up.")
PLAIN = f"Thanks for your patience. I have the details of {ORDER} here; which item would you like help with?"


@pytest.fixture
def case(django_user_model):
    return _case(django_user_model)


def _case(users, n: int = 0) -> dict:
    order = ORDER if n == 0 else f"SU-6{n:04d}"
    text = f"The lamp on {order} arrived broken, can I get 15.00 back?"
    return open_case(users, text, order=order, subject="Refund", prices=(12999,), username=f"dana{n}")


def _after(case) -> ModelResponse:
    return ModelResponse(text=AFTER.text.replace(ORDER, case["order"].number))


def _run(case, text) -> ScriptedModel:
    order = case["order"].number
    lookup = ModelResponse(tool_calls=[ToolCall(id="g1", name="get_order", arguments={"order_number": order})])
    said = reply_via("reply_to_customer", text)
    model = ScriptedModel([lookup, said, said, _after(case)])
    agent_run(case["ticket"].pk, gateway=Gateway(override=model))
    return model


def _shown(text: str) -> str:
    return text.replace('"', "&quot;").replace("'", "&#x27;")


@pytest.mark.django_db
@pytest.mark.parametrize("text", SAMPLE, ids=[f"sample{n}" for n in range(len(SAMPLE))])  # one is a random call ID
def test_an_invented_id_never_reaches_the_customers_page(case, text):
    model = _run(case, text)
    reads = customer_reads(case)
    invented = replycheck.invented_ids(text, answer.known_identifiers(model.requests[1]))
    assert invented and not any(i in reads for i in invented), invented
    assert text.split("\n")[0] not in reads and _shown(text.split("\n")[0]) not in reads
    refusals = Turn.objects.filter(ticket=case["ticket"], kind=Turn.Kind.REJECTION)
    assert [r.payload["guard"] for r in refusals] == ["invented_id", "invented_id"]
    # The model read why, naming what it invented.
    assert all(i in (model.requests[2].messages[-1].content or "") for i in invented)
    assert AFTER.text in reads


@pytest.mark.django_db
def test_a_message_naming_the_tickets_and_the_results_ids_is_posted(case):
    def naming_the_item(request: ModelRequest) -> ModelResponse:
        item = re.search(r"itm_[0-9a-z]{8}", request.messages[-1].content).group(0)
        return reply_via("reply_to_customer", f"{PLAIN} The lamp is item {item}.")

    model = ScriptedModel([LOOKUP, naming_the_item])
    agent_run(case["ticket"].pk, gateway=Gateway(override=model))
    reads = customer_reads(case)
    assert PLAIN in reads and re.search(r"The lamp is item itm_[0-9a-z]{8}\.", reads)
    assert not Turn.objects.filter(ticket=case["ticket"], kind=Turn.Kind.REJECTION).exists()


@pytest.mark.django_db
def test_run_14_the_call_id_a_duplicate_refusal_named_is_refused_as_invented(case):
    """As in run 14: calls written as text, one answer's two equal calls made unique ("text-call-0-2") and
    the second refused as a duplicate naming the first; the model copies that ID into its reply."""
    ticket = case["ticket"]
    ticket.ticket_class.text_tool_calls = True
    ticket.ticket_class.save(update_fields=["text_tool_calls"])
    call = json.dumps({"name": "get_order", "arguments": {"order_number": ORDER}})
    said = reply_via("reply_to_customer", RUN_14)
    model = ScriptedModel([ModelResponse(text=call), ModelResponse(text=f"{call}\n{call}"), said, said, AFTER])
    agent_run(ticket.pk, gateway=Gateway(override=model))
    duplicate = Turn.objects.get(ticket=ticket, kind=Turn.Kind.REJECTION, payload__guard="duplicate")
    # The refusal describes the earlier call without its ID; the model's reply copies one all the same.
    assert duplicate.payload["details"] == {"duplicate_of": "text-call-0-2"}
    assert "text-call-0-2" not in duplicate.text and "repeats an earlier get_order call" in duplicate.text
    read = [m.content for r in model.requests for m in r.messages if m.role == "tool" and "duplicate" in m.content]
    assert read and not any("text-call-0-2" in content for content in read)
    refused = Turn.objects.filter(ticket=ticket, kind=Turn.Kind.REJECTION, payload__guard="invented_id")
    assert refused.count() == 2 and refused[0].payload["details"]["invented"] == ["text-call-0-2"]
    assert "text-call-0-2 is the ID of one of your tool calls" in refused[0].text
    reads = customer_reads(case)
    assert "text-call-0-2" not in reads and "damaged order" not in reads and AFTER.text in reads


@pytest.mark.django_db
def test_negative_control_with_the_check_off_the_invented_ids_are_posted(case, django_user_model, monkeypatch):
    monkeypatch.setattr(callguards, "IDS_IN_CUSTOMER_TEXT", False)
    posted = 0
    for n, text in enumerate(SAMPLE):
        one = case if n == 0 else _case(django_user_model, n)
        _run(one, text)
        first, reads = text.split("\n")[0], customer_reads(one)
        posted += first in reads or _shown(first) in reads
    print(f"posted with the check off: {posted} of {len(SAMPLE)}")
    assert posted == len(SAMPLE)


# --- real replies --------------------------------------------------------------------------------------------


def test_the_real_agent_replies_of_the_tau2_traces_as_reply_to_customer():
    """Replies a strong model wrote to real users (τ²-bench traces), each sent as `reply_to_customer`'s
    message on the identifiers its request showed (the conversation before it rendered as Sundry renders
    turns): how many are refused, and for what."""
    from sundry.evals.importers import tau2_results

    replies, refused, ids, call_ids = 0, [], 0, 0
    for path in sorted(recorded.traces().glob("*.json")):
        for ticket in tau2_results(path):
            turns = ticket.turn_data()
            for i, t in enumerate(turns):
                if t.kind == "tool_call":
                    made = [str(c.get("id")) for c in t.payload.get("calls") or []]
                    ids, call_ids = ids + len(made), call_ids + sum(map(callids.generated, made))
                if not (t.author == "agent" and t.kind == "message" and t.text.strip()):
                    continue
                replies += 1
                request = ModelRequest(model="t", messages=render.turns_to_messages(turns[:i]))
                verdict = _refused(t.text, frozenset(answer.known_identifiers(request)))
                if verdict is not None:
                    refused.append(verdict.details["invented"])
    print(f"real replies: {replies}, refused: {len(refused)} {refused}; call IDs read as such: {call_ids} of {ids}")
    assert replies > 800 and call_ids == ids > 600  # OpenAI's own
    # The four refused before were measures ("20-hour battery", "500-piece"), read as such since
    # (`measures`, tests/agent/test_measure_tokens.py).
    assert refused == [], refused


PASTED = "What does text-call-0 mean? It showed up next to my order."
NAMED = "text-call-0 is the lookup of your order, nothing more."


def _pasted(django_user_model):
    one = open_case(django_user_model, f"{PASTED} It is {ORDER}.", order=ORDER, subject="Refund", prices=(12999,))
    lookup = ModelResponse(tool_calls=[ToolCall(id="text-call-0", name="get_order", arguments={"order_number": ORDER})])
    said = reply_via("reply_to_customer", NAMED)
    agent_run(one["ticket"].pk, gateway=Gateway(override=ScriptedModel([lookup, said, said, _after(one)])))
    return one


@pytest.mark.django_db
def test_a_call_id_the_customer_pasted_is_still_not_theirs(django_user_model):
    one = _pasted(django_user_model)
    assert NAMED not in customer_reads(one)
    refused = Turn.objects.filter(ticket=one["ticket"], kind=Turn.Kind.REJECTION, payload__guard="invented_id")
    assert refused.count() == 2


@pytest.mark.django_db
def test_negative_control_counted_as_known_the_pasted_call_id_is_posted(django_user_model, monkeypatch):
    monkeypatch.setattr(answer, "CALL_IDS_UNKNOWN", False)
    assert NAMED in customer_reads(_pasted(django_user_model))
