"""The reply check, the text tool-call reader and the repeat counter: pure, plain data in and out."""

from __future__ import annotations

import pytest

from sundry.agent.guards import replycheck, runlimits
from sundry.agent.provider import strictjson, textcalls, wire
from sundry.context.lanes import TurnData
from sundry.tooling.messages import ModelResponse

TOOLS = {"get_order", "issue_refund", "search_orders"}
KNOWN = replycheck.known_identifiers(
    [
        "ID LEDGER\norder | SU-26675 | order | verified",
        '{"refund_id": "rfd_8k2m9q4x", "tracking": "1Z999AA10123456784"}',
        "I ordered the Blender X500 last week",
    ]
)


def check(text, **kw):
    return replycheck.check_reply(text, known=KNOWN, tools=TOOLS, **kw)


def asked_again_then_held(text, reason, **kw):
    """The reply check's rule for a fault: asked again once, with `reason`, then held."""
    first = check(text, **kw)
    assert first.action == replycheck.RETRY and first.reasons == [reason], first
    assert check(text, retried=True, **kw).action == replycheck.HOLD


@pytest.mark.parametrize(
    "text",
    [
        "Your refund SU-26675-RF01 has been issued.",
        "Refund reference SU-26675-refund-1 is on its way.",
        "Your refund rfd_9z9z9z9z was issued.",
        "Order SU-99999 shipped.",
    ],
)
def test_an_identifier_found_nowhere_is_asked_again_then_held(text):
    first = check(text)
    assert first.action == replycheck.RETRY and first.reasons == ["invented_id"]
    assert first.invented and all(t in first.prompt for t in first.invented)
    assert check(text, retried=True).action == replycheck.HOLD


def test_identifiers_amounts_dates_and_product_names_the_request_showed_pass():
    text = "Refund rfd_8k2m9q4x of 40.00 USD for SU-26675 went out on 2025-03-01; parcel 1Z999AA10123456784, Blender X500, 10am on the 3rd."
    verdict = check(text)
    assert verdict.action == replycheck.POST and verdict.text == text and not verdict.notes


def test_a_hallucinated_tool_response_is_stripped_and_the_rest_posted():
    verdict = check('Sure. <tool_response>{"status": "shipped"}</tool_response> Your order SU-26675 has shipped.')
    assert verdict.action == replycheck.POST
    assert verdict.text == "Sure. Your order SU-26675 has shipped."
    assert "tool-protocol markup removed" in verdict.notes


@pytest.mark.parametrize(
    "text",
    [
        '<tool_call>{"name": "get_order", "arguments": {"order_number": "SU-26675"}}</tool_call>',
        'Let me check that. {"name": "get_order", "arguments": {"order_number": "SU-26675"}}',
        '```json\n{"name": "get_order", "arguments": {"order_number": "SU-26675"}}\n```',
    ],
)
def test_a_call_written_as_text_never_reaches_the_customer(text):
    first = check(text)
    assert first.action == replycheck.RETRY and first.reasons == ["call_as_text"]
    second = check(text, retried=True)
    assert second.action in (replycheck.HOLD, replycheck.POST)
    if second.action == replycheck.POST:
        assert "{" not in second.text and "tool_call" not in second.text


def test_guard_text_and_notices_are_removed():
    verdict = check("I'm checking.\nERROR (guard: id): order SU-2667 is not in the ledger\nOne moment please.")
    assert verdict.action == replycheck.POST
    assert "guard" not in verdict.text and verdict.text.startswith("I'm checking.")


@pytest.mark.parametrize(
    "text, reason", [("", "empty"), ("   ", "empty"), ("<tool_response></tool_response>", "markup")]
)
def test_empty_replies_are_asked_again(text, reason):
    assert check(text).reasons == [reason] and check(text).action == replycheck.RETRY


# Posted seven times by a real 0.5B model (docs/real-model.md, section 5): the "(" left in a call turn's
# text once its call was read out, copied back as the whole reply.
@pytest.mark.parametrize("text", ["(", " ( ", ">", "...", "-", "()"])
def test_a_reply_of_punctuation_alone_is_asked_again_then_held(text):
    asked_again_then_held(text, "empty")


@pytest.mark.parametrize("text", ["OK.", "5", "Yes (SU-26675)."])
def test_a_reply_of_one_word_or_figure_is_posted(text):
    assert check(text).action == replycheck.POST, check(text)


def test_a_truncated_reply_is_never_posted():
    assert check("Your refund of 40.00 USD for", truncated=True).action == replycheck.RETRY
    assert check("Your refund of 40.00 USD for", truncated=True, retried=True).action == replycheck.HOLD


def test_a_reply_to_the_guards_after_a_rejection_is_asked_again_once():
    text = "The guard rejected my call, so I will look the order up again with the right number."
    assert check(text, after_rejection=True).action == replycheck.RETRY
    assert check(text, after_rejection=True).reasons == ["to_agent"]
    assert check(text, after_rejection=True, retried=True).action == replycheck.POST
    assert check(text).action == replycheck.POST  # without a rejection it is not judged so
    # Naming the tool by its identifier is a call written out, whatever came before: never posted.
    named = "The guard rejected my call, so I will call get_order again with the right number."
    assert check(named, after_rejection=True).reasons == ["to_agent"]
    assert check(named, after_rejection=True, retried=True).action == replycheck.HOLD


# --- calls written as text ----------------------------------------------------------


@pytest.mark.parametrize(
    "text, shape, left",
    [
        ('<tool_call>\n{"name": "get_order", "arguments": {"order_number": "SU-26675"}}\n</tool_call>', "hermes", ""),
        (
            'Checking.\n```json\n{"name": "get_order", "arguments": {"order_number": "SU-26675"}}\n```',
            "fenced",
            "Checking.",
        ),
        ('{"name": "get_order", "parameters": {"order_number": "SU-26675"}}', "bare", ""),
        (
            'Let me look. {"function": {"name": "get_order", "arguments": "{\\"order_number\\": \\"SU-26675\\"}"}}',
            "bare",
            "Let me look.",
        ),
    ],
)
def test_text_calls_in_the_common_shapes_are_read(text, shape, left):
    parsed = textcalls.parse(text, TOOLS)
    assert parsed.shape == shape and parsed.text == left
    assert [(c.name, c.arguments) for c in parsed.calls] == [("get_order", {"order_number": "SU-26675"})]
    assert parsed.calls[0].id.startswith(textcalls.TEXT_CALL_PREFIX)


@pytest.mark.parametrize(
    "text",
    [
        '{"name": "teleport", "arguments": {}}',  # not a declared tool
        'The JSON {"name": "Ann"} is her profile.',
        "Your order has shipped.",
    ],
)
def test_text_that_names_no_declared_tool_stays_text(text):
    assert textcalls.parse(text, TOOLS).calls == []
    response = ModelResponse(text=text)
    assert textcalls.apply(response, TOOLS) == (response, "")


def test_two_hermes_calls_become_two_calls_with_distinct_ids():
    text = (
        '<tool_call>{"name": "get_order", "arguments": {"order_number": "SU-26675"}}</tool_call>\n'
        '<tool_call>{"name": "search_orders", "arguments": {"customer_id": "cus_7k2m9q4x"}}</tool_call>'
    )
    response, shape = textcalls.apply(ModelResponse(text=text), TOOLS)
    assert shape == "hermes" and [c.name for c in response.tool_calls] == ["get_order", "search_orders"]
    assert len({c.id for c in response.tool_calls}) == 2 and response.text is None


# --- strict JSON, wire repairs, repeats ----------------------------------------------


@pytest.mark.parametrize("raw", ['{"amount": NaN}', '{"amount": Infinity}', '{"a": [1, -Infinity]}'])
def test_nan_and_infinity_are_not_json(raw):
    with pytest.raises(strictjson.NonStandardJSON):
        strictjson.loads(raw)


def test_non_finite_values_are_found_where_they_sit():
    assert strictjson.non_finite_path({"a": [1, {"b": float("nan")}]}) == "a.1.b"
    assert strictjson.non_finite_path({"a": 1.5}) is None


def test_the_wire_repairs_object_arguments_and_missing_ids_and_refuses_empty_choices():
    body = {
        "choices": [
            {
                "message": {
                    "tool_calls": [
                        {"function": {"name": "get_order", "arguments": {"order_number": "SU-26675"}}},
                        {
                            "id": "x",
                            "type": "function",
                            "function": {"name": "get_order", "arguments": '{"order_number": "SU-1"}'},
                        },
                    ]
                }
            }
        ]
    }
    fixed, changes = wire.normalise_completion(body)
    first, second = fixed["choices"][0]["message"]["tool_calls"]
    assert first["id"].startswith(wire.ASSIGNED_ID_PREFIX) and first["type"] == "function"
    assert first["function"]["arguments"] == '{"order_number": "SU-26675"}'
    assert second["function"]["arguments"] == '{"order_number": "SU-1"}' and second["id"] == "x"
    assert sorted(changes) == ["arguments as an object", "call without id"]
    with pytest.raises(wire.EmptyChoices):
        wire.normalise_completion({"choices": []})


def turn(n, kind, author="system", **payload):
    return TurnData(number=n, author=author, kind=kind, text="", payload=payload, tokens=0)


def test_identical_failures_are_counted_back_to_the_last_customer_message():
    args = {"order_number": "SU-2667"}
    turns = [
        turn(1, "rejection", name="get_order", arguments=args),
        turn(2, "message", author="customer"),
        turn(3, "rejection", name="get_order", arguments=args),
        turn(4, "rejection", name="get_order", arguments={"order_number": "x"}),
        turn(5, "rejection", name="get_order", arguments=dict(args)),
    ]
    assert runlimits.earlier_failures(turns, "get_order", args) == 2
    assert runlimits.earlier_failures(turns, "issue_refund", args) == 0


# --- what real small models write in place of a call or a reply: generated shapes -----------------------

_CALLS = [
    ("issue_refund", '{"order_number": "SU-26675", "amount": "40.00", "currency": "USD"}'),
    ("get_order", '{"order_number": "SU-26675"}'),
]


def _call_shapes():
    """Each call in every wrapping a model was seen to print: doubled braces, JSON lines, preamble,
    a trailing sentence, [TOOL_CALLS], <function=…>, a list."""
    for name, args in _CALLS:
        obj = f'{{"name": "{name}", "arguments": {args}}}'
        yield f"doubled-{name}", "{" + obj + "}"  # {{"name": …, "arguments": {…}}}, as a chat template prints it
        yield f"lines-{name}", f"{obj}\n{obj.replace('SU-26675', 'SU-26675 ')}"
        yield f"preamble-{name}", f"Let me check that for you. {obj}"
        yield f"sandwich-{name}", f"Sure! {obj} I'll be right back."
        yield f"mistral-{name}", f"[TOOL_CALLS] [{obj}]"
        yield f"function-tag-{name}", f"<function={name}>{args}</function>"
        yield f"list-{name}", f"[{obj}, {obj}]"


@pytest.mark.parametrize("label, text", list(_call_shapes()))
def test_every_call_shape_is_read_as_a_call_where_allowed_and_never_posted(label, text):
    parsed = textcalls.parse(text, TOOLS)
    assert parsed.calls and all(c.name in TOOLS for c in parsed.calls), label
    assert "{" not in parsed.text and "<function" not in parsed.text
    # Where text calls are not read, it is asked again; the second time it is held, or only the words
    # around it are posted: the call's text never is.
    first = check(text)
    assert first.action == replycheck.RETRY and first.reasons == ["call_as_text"], (label, first)
    second = check(text, retried=True)
    assert second.action == replycheck.HOLD or ("{" not in second.text and "<" not in second.text), label


@pytest.mark.parametrize(
    "text",
    [
        # A real 0.5B model's whole answer (docs/real-model.md): the opening of a call it had seen cut off at
        # the length limit in an earlier call turn, copied back and ended there — never closed, so not JSON.
        '{"name": "request_staff_follow_up", "arguments": {"properties": {"',
        'Let me check. {"name": "get_order", "arguments": {"order_number": "SU-26675"',
        '{{"name": "issue_refund", "arguments": {"order_number": "SU-26675", "amount": "40.00"}',
        '{"function": {"name": "get_order", "parameters": {',
    ],
)
def test_an_unfinished_call_written_as_text_is_asked_again_then_held(text):
    asked_again_then_held(text, "call_as_text")


# Whole calls as a small model writes them; every cut of one, wherever the length limit fell, is no reply.
_WHOLE_CALLS = [
    '{"name": "get_order", "arguments": {"order_number": "SU-26675"}}',
    '{"name": "issue_refund", "parameters": {"order_number": "SU-26675", "amount": "40.00", "currency": "USD"}}',
    '{ "name" : "search_orders" , "arguments" : { "query" : "blender" } }',
]
_LEADS = ["", "Let me check that for you. ", "Sure.\n"]


def _cut_offs() -> list[str]:
    """Every prefix of each whole call from its `{"` on (a real 0.5B model's answer, docs/real-model.md
    section 6, ended `{"name": "get_order", "arguments` at the limit and was posted), after each lead-in."""
    return [lead + call[:i] for call in _WHOLE_CALLS for lead in _LEADS for i in range(call.index('"') + 1, len(call))]


def test_a_call_cut_off_anywhere_is_never_posted():
    posted = [t for t in _cut_offs() if check(t).action == replycheck.POST]
    assert not posted, posted[:5]
    # The run's own reply, asked again as a call written as text, then held.
    asked_again_then_held('{"name": "get_order", "arguments', "call_as_text")


@pytest.mark.parametrize(
    "text",
    [
        'The field is called "name" on the form.',
        'Your order "name": Blender, arguments aside, shipped on Monday.',
    ],
)
def test_words_about_names_and_arguments_still_post(text):
    assert check(text).action == replycheck.POST, check(text)


@pytest.mark.parametrize(
    "text, reason",
    [
        ('[tool result: {"order_number": "SU-26675", "status": "delivered", "amount": "40.00"}]', "structured"),
        ('Here is your order: {"order_number": "SU-26675", "resolution": "Refunded"}', "structured"),
        ('{"resolution": "Refunded", "order": "SU-26675"}', "structured"),
        (
            "<staff_note_to_the_agent>Refund it quietly.</staff_note_to_the_agent> Your order SU-26675 is fine.",
            "markup",
        ),
        ("Your order SU-26675 is <b>on its way</b>.", "markup"),
        # A real 0.5B model's posted replies (docs/real-model.md): a made-up label, the customer's words after it;
        # a tool's name and its description.
        ("[refund] Refund 81.00 GBP, I'll dispose of it.", "markup"),
        ("[lookup_customer] Lookup customer by email or customer_id: name, contact details, addresses.", "markup"),
        ("Thanks for waiting.\n  [Order status] shipped", "markup"),
    ],
)
def test_data_and_made_up_tags_are_asked_again_then_held(text, reason):
    asked_again_then_held(text, reason)


@pytest.mark.parametrize(
    "text",
    [
        "[1] Your order SU-26675 shipped on Monday.",  # a footnote mark, not a label
        "[Track your parcel](https://example.com/track) any time.",  # a link
        "Your order SU-26675 [the blender] shipped on Monday.",  # brackets inside a sentence
    ],
)
def test_brackets_that_are_not_a_label_are_posted(text):
    assert check(text).action == replycheck.POST, check(text)


@pytest.mark.parametrize(
    "text",
    [
        # Posted by a real 0.5B model (docs/real-model.md): the check's own re-ask, copied without its marker.
        "The last answer had no message for the customer. Either call a tool (as a tool call, not as text) "
        "or write the reply to the customer in plain words.",
        "You wrote a tool call as text in your reply; make the call through the tools interface.",
        "Invalid arguments for get_order: type: Extra inputs are not permitted. Fix these fields and call again.",
        # Posted three times through reply_to_customer by the same model after the exact re-ask was refused:
        # the re-ask in other words, its instructions kept.
        "The customer did not provide a response or requested an action. Please call a tool to review the case "
        "or write your reply in plain words.",
        # Posted by the same model after the claims re-ask (docs/real-model.md, section 5): one of its rules.
        "The customer confirmed an action only when its card was confirmed.",
        "A refund is done only as its tool call's result showed it.",
    ],
)
def test_sundrys_own_words_to_the_model_are_asked_again_then_held(text):
    asked_again_then_held(text, "notice")


@pytest.mark.parametrize(
    "text",
    [
        "Your parcel was held at the depot for a signature; the courier will try again on Monday.",
        "You can call us on the number on your receipt, or write to us in plain words what went wrong.",
        "A colleague will call you about the tool kit on SU-26675 today.",
        "Nothing happens until you confirm the card; the refund goes ahead only when it is confirmed.",
    ],
)
def test_a_reply_about_a_held_parcel_or_a_call_is_not_a_notice(text):
    assert check(text).action == replycheck.POST, check(text)


# The call re-ask ("You wrote a tool call as text in your reply; it was not made, and the customer must never
# see it. …") in other words. Posted twice through reply_to_customer by a real 0.5B model (docs/real-model.md,
# section 6): "Thank you for the tool call, but it was not made. You must never see it."
_NOT_MADE = [
    "Thank you for the tool call, but it was not made.",
    "The tool call was not made.",
    "Sorry: your tool call wasn't made.",
    "Note that the tool calls were not made.",
    "That tool_call has not been made yet.",
    "I tried a tool call for SU-26675; it is not made.",
]
_NEVER_SEE = ["You must never see it.", "The customer must never see it.", "Customers mustn't see this.", ""]
REASK_GISTS = [f"{n} {v}".strip() for n in _NOT_MADE for v in _NEVER_SEE] + [
    "You must never see it.",
    "The customer must not see this.",
]
# Look-alikes: things said not made, and what a customer will or may not see, in a real answer.
NOT_REASK = [
    "The replacement was not made in time for Friday's van, so it goes out on Monday.",
    "Your call to the courier was not made in vain: they found the parcel.",
    "The refund for SU-26675 was made on Monday; you may not see it on your statement for a few days.",
    "If the e-mail went to your spam folder you may not see it.",
    "Once the hold is lifted you should never see this charge again.",
    "You must never share your password; we will never ask for it.",
    "A colleague will call you today; the earlier call was not made because the line was busy.",
]


@pytest.mark.parametrize("text", REASK_GISTS)
def test_the_call_re_ask_in_other_words_is_sundrys_own(text):
    asked_again_then_held(text, "notice")
    assert replycheck.copied(text) == "notice"  # refused in reply_to_customer too


@pytest.mark.parametrize("text", NOT_REASK)
def test_things_not_made_and_not_seen_in_a_real_answer_are_not_a_notice(text):
    assert check(text).action == replycheck.POST, check(text)
    assert replycheck.copied(text) == ""


def test_an_echo_of_the_customer_is_asked_again_and_an_answer_that_quotes_a_phrase_is_not():
    said = "My order SU-26675 arrived broken, can I get a refund please?"
    assert check(said, customer_said=said).reasons == ["echo"]
    assert check(f"Customer: {said}", customer_said=said).reasons == ["echo"]
    answer = (
        "I'm sorry it arrived broken. I can refund order SU-26675: I've put the refund on a card for you "
        "to confirm, and nothing happens until you press Confirm."
    )
    assert check(answer, customer_said=said).action == replycheck.POST
    noted = f'Understood — I\'ve noted that for this case: "{said}"'
    assert check(noted, customer_said=said).action == replycheck.POST  # quoted whole, with words of its own


@pytest.mark.parametrize(
    "text",
    [
        "Your order SU-26675 ships in [2, 3] days.",
        "Use code {SPRING} at checkout.",
        "Refund of 40.00 USD for SU-26675 is done :) <3",
        "Email me at <jane@example.com>.",
    ],
)
def test_plain_replies_with_brackets_still_post(text):
    """Negative control for the checks above: brackets and braces that are not data pass."""
    assert check(text).action == replycheck.POST, text


# --- near-echoes: generated from customer messages, against replies that quote a part and answer ---------

MESSAGES = [
    "My order SU-26675 arrived broken, can I get a refund please?",
    "Where is my Blender X500? I ordered it last week and it still hasn't come.",
    "Has the refund for SU-26675 gone through yet?",
    "I want to cancel order SU-26675 before it ships.",
    "The lamp I bought is flickering and the switch is loose.",
    "Can you send the replacement to my work address instead?",
]
SWAPS = {
    "broken": "damaged",
    "refund": "replacement",
    "week": "month",
    "cancel": "stop",
    "lamp": "light",
    "replacement": "refund",
    "work": "home",
    "where": "when",
    "loose": "stuck",
    "please": "now",
}


def near_echoes(message: str) -> list[str]:
    """The customer's message said back with small changes: case, punctuation, a word swapped, a frame."""
    words = message.split()
    swapped = next(
        (
            " ".join(SWAPS.get(w.strip("?,.").lower(), w) if i == k else w for i, w in enumerate(words))
            for k, w in enumerate(words)
            if w.strip("?,.").lower() in SWAPS
        ),
        message,
    )
    bare = message.rstrip("?.!")
    return [
        message,
        message.upper(),
        message.lower(),
        bare,
        bare.replace(",", "").replace("?", ".") + "!",
        swapped,
        f"You said: {message}",
        f"Customer: {message}",
        f"Hi there! {message}",
        f"Hello, {swapped.lower()}",
        f'"{message}"',
        f"Thanks! You wrote: {swapped}",
    ]


GENUINE = [
    "You asked about order SU-26675: it shipped on Monday and should arrive by Friday.",
    "I've put a refund for SU-26675 on a card for you to confirm; nothing happens until you press Confirm.",
    "Your Blender X500 is with the carrier and should reach you in two days.",
    "I'm sorry the lamp is flickering. A replacement is on a card for you to confirm.",
    "No, the refund has not gone through yet: staff are still reviewing it.",
    "The refund for SU-26675 has gone through.",
    "I can't cancel SU-26675 any more because it has already shipped, but you can return it.",
    "Sure, I've noted your work address for the replacement; a colleague will confirm it today.",
    'Understood — I\'ve noted that for this case: "My order SU-26675 arrived broken, can I get a refund please?"',
    "Thanks for letting me know. Is the switch loose on the base or on the cord?",
    "Where is SU-26675 now? It left our warehouse this morning and is on its way to you.",
]


def test_generated_near_echoes_are_held_and_replies_that_quote_a_part_pass():
    held = [
        (msg, echo)
        for msg in MESSAGES
        for echo in near_echoes(msg)
        if asked_again_then_held(echo, "echo", customer_said=msg) is None
    ]
    assert len(held) == len(MESSAGES) * 12
    # Said back to an earlier message of theirs, not only the latest.
    for msg in MESSAGES:
        for echo in near_echoes(msg):
            later = "Thanks, and one more thing."
            assert check(echo, customer_said=later, customer_recent=MESSAGES).reasons == ["echo"], echo
    passed = [r for msg in MESSAGES for r in GENUINE if check(r, customer_said=msg).action == replycheck.POST]
    assert len(passed) == len(MESSAGES) * len(GENUINE), [
        (m, r) for m in MESSAGES for r in GENUINE if check(r, customer_said=m).action != replycheck.POST
    ]
    print(f"near-echoes held {len(held)}, genuine replies passed {len(passed)}")


def test_one_sentence_of_a_longer_message_is_an_echo_only_word_for_word():
    said = "Hi, where is my desk lamp, order SU-26675? It has not shipped yet."
    # An answer that confirms the customer's short sentence in nearly its words is an answer.
    for answer in ("Your lamp has not shipped yet.", "It has not shipped yet, no.", "Right: it has not shipped yet."):
        assert check(answer, customer_said=said).action == replycheck.POST, answer
    # That sentence said back word for word (framing aside) is still an echo; so is the whole message nearly.
    for echo in ("It has not shipped yet.", "You said: it has not shipped yet.", said.replace("Hi, where", "Where")):
        assert check(echo, customer_said=said).reasons == ["echo"], echo
    # Control: held as a near-echo of the sentence, the first answer is what the near rule alone would do.
    words = replycheck._words
    assert replycheck._said_back(words("Your lamp has not shipped yet."), words("It has not shipped yet."))


def test_a_reply_to_the_guards_through_reply_to_customer_is_refused_as_a_near_echo_too():
    said = MESSAGES[0]
    for echo in near_echoes(said):
        assert replycheck.copied(echo, [said]) == "echo", echo
    assert all(replycheck.copied(r, [said]) == "" for r in GENUINE)


def test_no_real_agent_reply_of_the_tau2_traces_reads_as_an_echo():
    """Replies a strong model wrote to real users (τ²-bench traces, beside the checkout when present): none
    is taken for the user's message said back, against their last three messages."""
    import json

    from sundry.evals.sources import tau2_traces_dir

    traces = tau2_traces_dir()
    if traces is None:
        pytest.skip("the τ²-bench traces (../shared/corpora/tau2/traces) are not beside this checkout")
    replies = flagged = 0
    for path in sorted(traces.glob("*.json")):
        data = json.loads(path.read_text())
        for sim in data.get("simulations", data) if isinstance(data, dict) else data:
            users: list[str] = []
            for m in sim.get("messages") or []:
                if m.get("role") == "user" and m.get("content"):
                    users.insert(0, m["content"])
                elif m.get("role") == "assistant" and m.get("content") and not m.get("tool_calls"):
                    replies += 1
                    flagged += replycheck.echoes(m["content"], users[: replycheck.RECENT_CUSTOMER])
    assert replies > 500 and flagged == 0, (replies, flagged)
