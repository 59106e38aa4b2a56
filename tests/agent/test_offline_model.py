"""The offline model works the demo shop's cases from the request alone.

Requests are built by hand with the real renderers, and tool results with the
real result models, so a drift in either format breaks these tests.
"""

from __future__ import annotations

import inspect
import json
from datetime import date, datetime, timezone

import pytest

import sundry.context.tools  # noqa: F401  (registers pin_constraint, label_entity)
import sundry.shop.tools  # noqa: F401  (registers the shop tools)
from sundry.context import render
from sundry.context.lanes import ActionData, LedgerData, MoneyData, RuleData, SummaryData
from sundry.core.tokens import count_message_tokens
from sundry.shop import offline
from sundry.shop import tools as st
from sundry.shop.offline import STAFF_FOLLOW_UP, OfflineModel
from sundry.tooling.messages import Message, ModelRequest, ModelResponse, ToolCall, ToolSpec
from sundry.tooling.tools import REGISTRY

CUSTOMER = "cus_7k2m9p4q"
ORDER, OTHER = "SU-20481", "SU-20418"
TRACKING = "1ZA8F3K2Q9X7M4N5"
ALL_SPECS = [ToolSpec(**tool.spec()) for tool in REGISTRY.values()]
# Most tests follow the shop actions alone: without record_fact and request_staff_follow_up in the
# request the model records no facts and flags nothing. The tests that offer them cover those.
SPECS = [spec for spec in ALL_SPECS if spec.name not in ("record_fact", "request_staff_follow_up")]
CUSTOMER_ENTRY = LedgerData("customer", CUSTOMER, "customer", True, 1, 1)


def ledger_order(verified: bool, role: str = "order") -> LedgerData:
    return LedgerData(role, ORDER, "order", verified, 2, 2)


def build(
    *conversation: Message, rules=(), ledger=(CUSTOMER_ENTRY,), actions=(), money=(), summary=None, tools=SPECS
) -> ModelRequest:
    blocks = [
        ("system", render.render_system_prompt("Be brief.")),
        ("rules", render.render_rules(list(rules))),
        ("ledger", render.render_ledger(list(ledger))),
        ("state", render.render_state([], list(actions), list(money))),
        ("summary", render.render_summary(summary)),
    ]
    messages = [render.lane_message(lane, text) for lane, text in blocks if text]
    return ModelRequest(model="offline", messages=messages + list(conversation), tools=list(tools))


def customer(text: str) -> Message:
    return Message(role="user", content=text)


def feed(request: ModelRequest, response: ModelResponse, result) -> ModelRequest:
    """What the loop does: append the model's call and the tool's result."""
    (call,) = response.tool_calls
    content = result if isinstance(result, str) else result.model_dump_json()
    return request.model_copy(
        update={
            "messages": request.messages
            + [
                Message(role="assistant", content=response.text or "", tool_calls=[call]),
                Message(role="tool", content=content, tool_call_id=call.id, tool_name=call.name),
            ]
        }
    )


def order_result(number=ORDER, paid=12000, refunded=0, tracking=TRACKING, product="Vortex Blender"):
    return st.OrderResult(
        order_number=number,
        customer_id=CUSTOMER,
        status="shipped",
        placed_on=date(2025, 3, 1),
        currency="USD",
        total_cents=paid,
        items=[st.ItemOut(item_id="itm_b1e2n3d4", sku="SKU-BL001", product=product, quantity=1, unit_price_cents=paid)],
        payments=[
            st.PaymentOut(
                payment_id="pay_q1w2e3r4",
                payment_method_id="pm_v1s2a3x4",
                method="Visa ending 4242",
                status="captured",
                amount_cents=paid,
            )
        ],
        parcels=[st.ParcelOut(tracking_number=tracking, carrier="UPS", status="in_transit")] if tracking else [],
        refunds=[],
        returns=[],
        paid_cents=paid,
        refunded_cents=refunded,
        refundable_cents=paid - refunded,
        refundable=f"{(paid - refunded) / 100:.2f}",
    )


def search_result(*orders: tuple[str, str]):
    return st.SearchOrdersResult(
        customer_id=CUSTOMER,
        query=None,
        total_matches=len(orders),
        orders=[
            st.OrderSummary(
                order_number=n,
                status="shipped",
                placed_on=date(2025, 3, 1),
                total_cents=2500,
                currency="USD",
                items=[name],
            )
            for n, name in orders
        ],
    )


def refund_result(amount_cents=12000):
    return st.RefundResult(
        refund_id="rfd_9x8c7v6b",
        order_number=ORDER,
        payment_id="pay_q1w2e3r4",
        amount=f"{amount_cents / 100:.2f}",
        amount_cents=amount_cents,
        currency="USD",
        status="issued",
        refunded_cents=amount_cents,
        refundable_cents=12000 - amount_cents,
    )


def only_call(response: ModelResponse) -> ToolCall:
    assert response.text is None and len(response.tool_calls) == 1, response
    return response.tool_calls[0]


model = OfflineModel()


# --- tracking --------------------------------------------------------------------------


def test_unverified_order_is_looked_up_before_anything_else():
    req = build(
        customer(f"Where is my order {ORDER}?"), ledger=[CUSTOMER_ENTRY, ledger_order(False, "order_mentioned")]
    )
    call = only_call(model.complete(req))
    assert (call.name, call.arguments) == ("get_order", {"order_number": ORDER})


def test_tracks_with_the_number_from_the_result_then_reports_status():
    req = build(customer(f"Where is my order {ORDER}?"), ledger=[CUSTOMER_ENTRY, ledger_order(False)])
    req = feed(req, model.complete(req), order_result())
    call = only_call(model.complete(req))
    assert (call.name, call.arguments) == ("track_parcel", {"tracking_number": TRACKING})

    tracked = st.TrackParcelResult(
        tracking_number=TRACKING,
        order_number=ORDER,
        carrier="UPS",
        status="out_for_delivery",
        events=[
            st.TrackingEventOut(
                at=datetime(2025, 3, 3, tzinfo=timezone.utc), location="Leeds depot", description="Out for delivery"
            )
        ],
    )
    req = feed(req, model.complete(req), tracked)
    answer = model.complete(req)
    assert not answer.tool_calls
    assert ORDER in answer.text and "out for delivery" in answer.text and "Leeds depot" in answer.text


def test_order_not_shipped_has_no_tracking_call():
    req = build(customer(f"Where is {ORDER}?"), ledger=[CUSTOMER_ENTRY, ledger_order(False)])
    req = feed(req, model.complete(req), order_result(tracking=None))
    answer = model.complete(req)
    assert not answer.tool_calls and "no tracking number" in answer.text


# --- finding the order without guessing ------------------------------------------------


def test_unknown_order_searches_with_the_customer_id_from_the_ledger():
    req = build(customer("Hi, where is my parcel? It's been a week."))
    call = only_call(model.complete(req))
    assert (call.name, call.arguments) == ("search_orders", {"customer_id": CUSTOMER})


def test_several_matches_ask_which_one_and_never_guess():
    req = build(customer("Where is my parcel?"))
    req = feed(req, model.complete(req), search_result((ORDER, "Vortex Blender"), (OTHER, "Steel Kettle")))
    answer = model.complete(req)
    assert not answer.tool_calls
    assert all(s in answer.text for s in (ORDER, OTHER, "Vortex Blender", "Steel Kettle")) and "?" in answer.text


def test_product_words_pick_the_order_from_the_search_result():
    req = build(customer("Where is my kettle?"))
    req = feed(req, model.complete(req), search_result((ORDER, "Vortex Blender"), (OTHER, "Steel Kettle")))
    call = only_call(model.complete(req))
    assert (call.name, call.arguments) == ("get_order", {"order_number": OTHER})


def test_no_customer_id_and_no_order_asks_instead_of_inventing():
    answer = model.complete(build(customer("Where is my parcel?"), ledger=[]))
    assert not answer.tool_calls and "order number" in answer.text


def test_ledger_role_names_the_order_the_customer_means():
    ledger = [CUSTOMER_ENTRY, ledger_order(True, "damaged_order"), LedgerData("order_2", OTHER, "order", True, 3, 3)]
    req = build(customer("Can you refund the damaged one please?"), ledger=ledger)
    call = only_call(model.complete(req))
    assert (call.name, call.arguments) == ("get_order", {"order_number": ORDER})


# --- refunds ---------------------------------------------------------------------------


def test_refund_end_to_end_at_the_request_level():
    req = build(
        customer(f"My blender from {ORDER} arrived broken. I want my money back."),
        ledger=[CUSTOMER_ENTRY, ledger_order(False, "order_mentioned")],
    )
    first = model.complete(req)
    assert only_call(first).name == "get_order"
    req = feed(req, first, order_result())
    second = model.complete(req)
    call = only_call(second)
    assert call.name == "issue_refund"
    assert call.arguments == {
        "order_number": ORDER,
        "amount": "120.00",
        "currency": "USD",
        "reason": "item arrived damaged",
    }
    # The arguments validate against the real tool's schema.
    st.IssueRefundArgs.model_validate(call.arguments)
    req = feed(req, second, refund_result())
    answer = model.complete(req)
    assert not answer.tool_calls
    assert ORDER in answer.text and "120.00 USD" in answer.text and "rfd_9x8c7v6b" in answer.text


def test_explicit_amount_in_customer_text_is_used():
    req = build(
        customer(f"The table leg on {ORDER} is scratched; please refund $40."),
        ledger=[CUSTOMER_ENTRY, ledger_order(True)],
        money=[MoneyData(ORDER, "USD", 12000, 0)],
    )
    call = only_call(model.complete(req))
    assert call.name == "issue_refund" and call.arguments["amount"] == "40.00"


def test_refundable_amount_comes_from_the_state_money_block():
    req = build(
        customer(f"Please refund {ORDER}."),
        ledger=[CUSTOMER_ENTRY, ledger_order(True)],
        money=[MoneyData(ORDER, "USD", 12000, 4000)],
    )
    call = only_call(model.complete(req))
    assert (call.name, call.arguments["amount"], call.arguments["currency"]) == ("issue_refund", "80.00", "USD")


def test_refund_already_in_state_is_not_repeated_but_is_once_the_context_loses_it():
    refund = ActionData(
        tool="issue_refund",
        target=ORDER,
        turn=6,
        idempotency_key="t7-c1",
        reversible=False,
        amount_cents=4000,
        currency="USD",
    )
    ask = customer(f"About the scratched leg on {ORDER} again — I want a refund.")
    ledger = [CUSTOMER_ENTRY, ledger_order(True)]
    money = [MoneyData(ORDER, "USD", 12000, 4000)]
    kept = model.complete(build(ask, ledger=ledger, actions=[refund], money=money))
    assert not kept.tool_calls and "already" in kept.text and "40.00 USD" in kept.text
    # Same ticket, but the action survives only as prose in a summary: the model
    # has nothing structured to read, and (like a real model) refunds again.
    lost = model.complete(
        build(ask, ledger=ledger, money=money, summary=SummaryData(14, "Customer reported a scratched leg on [order]."))
    )
    assert only_call(lost).name == "issue_refund"


# --- rules -----------------------------------------------------------------------------


def test_constraint_in_customer_message_is_pinned_verbatim_first():
    text = f"Phone only, never email me. Where is {ORDER}?"
    call = only_call(model.complete(build(customer(text), ledger=[CUSTOMER_ENTRY, ledger_order(False)])))
    assert (call.name, call.arguments) == ("pin_constraint", {"text": "Phone only, never email me.", "scope": "ticket"})
    pinned = RuleData(1, "Phone only, never email me.", 3, enforcement={"block_tools": ["send_email"]})
    req = build(customer(text), rules=[pinned], ledger=[CUSTOMER_ENTRY, ledger_order(False)])
    assert only_call(model.complete(req)).name == "get_order"


def test_ordinary_negative_sentence_is_not_pinned():
    req = build(customer(f"It never arrived. Where is {ORDER}?"), ledger=[CUSTOMER_ENTRY, ledger_order(False)])
    assert only_call(model.complete(req)).name == "get_order"


def _refunded_and_asked_for_confirmation(rules):
    req = build(
        customer(f"Please refund {ORDER} and send me a confirmation."),
        rules=rules,
        ledger=[CUSTOMER_ENTRY, ledger_order(True)],
        money=[MoneyData(ORDER, "USD", 12000, 0)],
    )
    first = model.complete(req)
    assert only_call(first).name == "issue_refund"
    return model.complete(feed(req, first, refund_result()))


def test_phone_only_rule_means_phone_call_never_email():
    rule = RuleData(1, "Phone only, never email me.", 2, enforcement={"block_tools": ["send_email"]})
    call = only_call(_refunded_and_asked_for_confirmation([rule]))
    assert call.name == "log_phone_call" and call.arguments["customer_id"] == CUSTOMER
    assert "120.00 USD" in call.arguments["summary"]
    # Without the rule the same request confirms by email: the rule is what changed it.
    assert only_call(_refunded_and_asked_for_confirmation([])).name == "send_email"


def test_rule_text_alone_blocks_email_even_without_structured_check():
    rule = RuleData(1, "Do not email me, ever.", 2)
    assert only_call(_refunded_and_asked_for_confirmation([rule])).name == "log_phone_call"


def test_no_replacement_rule_is_respected():
    rule = RuleData(1, "I don't want a replacement.", 2, enforcement={"block_tools": ["offer_replacement"]})
    req = build(
        customer(f"Can you send a replacement for {ORDER}?"), rules=[rule], ledger=[CUSTOMER_ENTRY, ledger_order(True)]
    )
    answer = model.complete(
        feed(
            req,
            ModelResponse(tool_calls=[ToolCall(id="x", name="get_order", arguments={"order_number": ORDER})]),
            order_result(),
        )
    )
    assert not answer.tool_calls and "replacement" in answer.text


# --- errors and loops ------------------------------------------------------------------


def _failed(req, name, args, content, call_id):
    return req.model_copy(
        update={
            "messages": req.messages
            + [
                Message(role="assistant", tool_calls=[ToolCall(id=call_id, name=name, arguments=args)]),
                Message(role="tool", content=content, tool_call_id=call_id, tool_name=name),
            ]
        }
    )


def test_after_an_id_error_it_searches_instead_of_retrying_the_same_id():
    req = build(customer(f"Where is {OTHER}?"))
    req = _failed(req, "get_order", {"order_number": OTHER}, f"ERROR: no order {OTHER} exists", "e1")
    call = only_call(model.complete(req))
    assert (call.name, call.arguments) == ("search_orders", {"customer_id": CUSTOMER})
    req = feed(req, model.complete(req), search_result((ORDER, "Vortex Blender")))
    answer = model.complete(req)
    assert not answer.tool_calls and f"couldn't find order {OTHER}" in answer.text and ORDER in answer.text


def test_guard_rejection_on_an_action_triggers_a_fresh_lookup():
    req = build(
        customer(f"Refund {ORDER} please."),
        ledger=[CUSTOMER_ENTRY, ledger_order(True)],
        money=[MoneyData(ORDER, "USD", 12000, 0)],
    )
    args = {"order_number": ORDER, "amount": "120.00", "currency": "USD", "reason": "customer requested a refund"}
    req = _failed(req, "issue_refund", args, "ERROR (guard: id): order_number is not in the ID ledger", "r1")
    assert only_call(model.complete(req)).arguments == {"order_number": ORDER}  # get_order, not the same refund


def test_a_call_that_failed_twice_is_handed_to_staff():
    req = build(
        customer(f"Refund {ORDER} please."),
        ledger=[CUSTOMER_ENTRY, ledger_order(True)],
        money=[MoneyData(ORDER, "USD", 12000, 0)],
    )
    args = {"order_number": ORDER, "amount": "120.00", "currency": "USD", "reason": "customer requested a refund"}
    req = _failed(req, "issue_refund", args, "ERROR: payment provider unavailable", "r1")
    req = feed(
        req,
        ModelResponse(tool_calls=[ToolCall(id="g1", name="get_order", arguments={"order_number": ORDER})]),
        order_result(),
    )
    retry = only_call(model.complete(req))
    assert retry.name == "issue_refund" and retry.arguments == args  # one retry after a fresh lookup
    req = _failed(req, "issue_refund", args, "ERROR: payment provider unavailable", "r2")
    answer = model.complete(req)
    assert not answer.tool_calls and answer.text == STAFF_FOLLOW_UP


# --- properties ------------------------------------------------------------------------


def test_deterministic_and_labelled_offline():
    req = build(customer(f"Where is my order {ORDER}?"), ledger=[CUSTOMER_ENTRY, ledger_order(False)])
    a, b = OfflineModel().complete(req), OfflineModel().complete(req.model_copy(deep=True))
    assert a.model_dump() == b.model_dump()
    assert a.offline is True and a.model == "offline"
    assert a.tool_calls[0].id.startswith("off_")
    assert a.usage.input_tokens == count_message_tokens(req.messages, "offline") and a.usage.output_tokens > 0


def test_uses_the_argument_names_the_tool_schema_declares():
    spec = ToolSpec(name="get_order", description="", parameters={"type": "object", "properties": {"order": {}}})
    req = build(customer(f"Where is {ORDER}?"), ledger=[CUSTOMER_ENTRY, ledger_order(False)], tools=[spec])
    assert only_call(model.complete(req)).arguments == {"order": ORDER}


@pytest.mark.parametrize("needle", ["objects.", "models import", "django"])
def test_reads_only_the_request_never_the_database(needle):
    assert needle not in inspect.getsource(offline)


def test_structured_rule_blocks_any_tool_it_names():
    rule = RuleData(1, "Keep the order going whatever happens.", 2, enforcement={"block_tools": ["cancel_order"]})
    answer = model.complete(
        build(customer(f"Cancel {ORDER} now."), rules=[rule], ledger=[CUSTOMER_ENTRY, ledger_order(True)])
    )
    assert not answer.tool_calls and rule.text in answer.text
    # Without the rule the cancellation goes ahead: the order's figures first (nothing in the money lane).
    assert (
        only_call(
            model.complete(build(customer(f"Cancel {ORDER} now."), ledger=[CUSTOMER_ENTRY, ledger_order(True)]))
        ).name
        == "get_order"
    )


@pytest.mark.parametrize(
    "text, intent",
    [
        ("Where is my parcel?", "track"),
        ("It never arrived, I want my money back", "refund"),
        ("Can I send it back?", "return"),
        ("Please cancel it", "cancel"),
        ("Can I get a replacement?", "replace"),
        ("I don't want a replacement, just refund me", "refund"),
        ("I do not want a replacement", None),
        ("What orders do I have?", "list"),
        ("OK. Can you tell me what else I ordered recently?", "list"),
        ("What did I order last month?", "list"),
        ("Hi, I have a few problems with my recent orders.", None),  # a preamble, not a request to list
        ("Hello there", None),
    ],
)
def test_intent_from_the_customer_words(text, intent):
    assert offline.intent_of(text) == intent


# --- questions about actions are not requests for them ----------------------------------------

FRYER, GRINDER = "SU-25386", "SU-27531"
REFUND_40 = ActionData(
    tool="issue_refund",
    target=FRYER,
    turn=9,
    idempotency_key="k-fryer",
    reversible=False,
    amount_cents=4000,
    currency="USD",
)


def fryer_ledger(described: bool):
    """The ledger after compaction: IDs only, or (with descriptions) what each order holds."""
    fryer = LedgerData("order", FRYER, "order", True, 2, 9, note="Air Fryer 5.5L ×1, delivered" if described else "")
    grinder = LedgerData(
        "order_2", GRINDER, "order", True, 5, 12, note="USB-C Charger 65W ×1, shipped" if described else ""
    )
    return [CUSTOMER_ENTRY, fryer, grinder]


MONEY_BOTH = [MoneyData(FRYER, "USD", 12999, 4000), MoneyData(GRINDER, "USD", 4499, 0)]


@pytest.mark.parametrize(
    "text, kind",
    [
        ("Is the refund for the air fryer done?", "refund"),
        ("has my cancellation gone through?", "cancel"),
        ("Is the refund for the grinder approved yet?", "refund"),
        ("Did you refund SU-25386?", "refund"),
        ("Where is my refund?", "refund"),
        ("Any news on my return?", "return"),
        ("Is my order cancelled?", "cancel"),
        ("Can I have a refund on SU-40110?", None),
        ("Is it possible to get a refund for the lamp?", None),
        ("Please refund 25.00 USD on the lamp order.", None),
        ("Has my parcel arrived?", None),
    ],
)
def test_status_questions_are_told_from_requests(text, kind):
    assert offline.words.status_question(text) == kind


def test_a_status_question_after_compaction_is_answered_from_the_actions_lane_by_product_name():
    req = build(
        customer("Is the refund for the air fryer done?"),
        ledger=fryer_ledger(True),
        actions=[REFUND_40],
        money=MONEY_BOTH,
        summary=SummaryData(30, "Several orders were discussed."),
    )
    answer = model.complete(req)
    assert not answer.tool_calls
    assert FRYER in answer.text and "40.00 USD" in answer.text and answer.text.startswith("Yes")
    assert GRINDER not in answer.text


def test_a_status_question_never_moves_money_even_when_nothing_links_the_product():
    # No descriptions, no tool results: the model may look the product up, never refund.
    req = build(
        customer("Is the refund for the air fryer done?"),
        ledger=fryer_ledger(False),
        actions=[REFUND_40],
        money=MONEY_BOTH,
        summary=SummaryData(30, "Several orders were discussed."),
    )
    first = model.complete(req)
    call = only_call(first)
    assert (call.name, call.arguments) == ("search_orders", {"customer_id": CUSTOMER, "query": "air fryer"})
    req = feed(req, first, search_result((FRYER, "Air Fryer 5.5L")))
    answer = model.complete(req)
    assert not answer.tool_calls and FRYER in answer.text and "40.00 USD" in answer.text


def test_a_status_question_about_something_not_done_says_so_and_offers_instead_of_acting():
    req = build(
        customer("Is the refund for the grinder approved yet?"),
        ledger=fryer_ledger(False),
        actions=[REFUND_40],
        money=MONEY_BOTH,
    )
    req = feed(req, model.complete(req), search_result((GRINDER, "Burr Coffee Grinder")))
    answer = model.complete(req)
    assert not answer.tool_calls
    assert answer.text.startswith("No") and GRINDER in answer.text and "?" in answer.text


def test_a_held_refund_is_reported_as_waiting_for_staff():
    args = {"order_number": ORDER, "amount": "120.00", "currency": "USD", "reason": "item arrived damaged"}
    req = build(
        customer(f"Refund {ORDER} please."),
        ledger=[CUSTOMER_ENTRY, ledger_order(True)],
        money=[MoneyData(ORDER, "USD", 12000, 0)],
    )
    req = _failed(
        req,
        "issue_refund",
        args,
        json.dumps({"held_for_staff_approval": True, "reason": "needs staff approval; the call is held."}),
        "h1",
    )
    req = req.model_copy(
        update={
            "messages": req.messages
            + [
                Message(role="assistant", content=offline.HELD_REPLY),
                customer(f"Is the refund on {ORDER} approved yet?"),
            ]
        }
    )
    answer = model.complete(req)
    assert not answer.tool_calls and "waiting for staff approval" in answer.text


def test_cancellation_status_from_the_actions_lane():
    cancel = ActionData(
        tool="cancel_order",
        target=ORDER,
        turn=4,
        idempotency_key="k-c",
        reversible=False,
        amount_cents=289900,
        currency="INR",
    )
    req = build(
        customer("has my cancellation gone through?"), ledger=[CUSTOMER_ENTRY, ledger_order(True)], actions=[cancel]
    )
    answer = model.complete(req)
    assert not answer.tool_calls and ORDER in answer.text and "2899.00 INR" in answer.text


# --- a second partial refund ------------------------------------------------------------------


def test_refund_another_amount_is_a_new_partial_refund_not_a_duplicate():
    ledger = fryer_ledger(True)
    ask = customer("Please refund another 10.00 USD on the air fryer order.")
    call = only_call(model.complete(build(ask, ledger=ledger, actions=[REFUND_40], money=MONEY_BOTH)))
    assert call.name == "issue_refund"
    assert (call.arguments["order_number"], call.arguments["amount"], call.arguments["currency"]) == (
        FRYER,
        "10.00",
        "USD",
    )
    # The same request without an amount is taken as the earlier refund asked again.
    again = model.complete(
        build(customer("Can I have a refund on the air fryer?"), ledger=ledger, actions=[REFUND_40], money=MONEY_BOTH)
    )
    assert not again.tool_calls and "already" in again.text and "40.00 USD" in again.text


def test_a_refund_asked_on_a_cancelled_order_is_answered_from_the_cancellation():
    cancel = ActionData(
        tool="cancel_order",
        target=ORDER,
        turn=4,
        idempotency_key="k-c",
        reversible=False,
        amount_cents=289900,
        currency="INR",
    )
    answer = model.complete(
        build(
            customer(f"I'd like a refund on {ORDER}."),
            ledger=[CUSTOMER_ENTRY, ledger_order(True)],
            actions=[cancel],
            money=[MoneyData(ORDER, "INR", 289900, 289900)],
        )
    )
    assert not answer.tool_calls and "cancelled" in answer.text and "2899.00 INR" in answer.text


# --- orders named by product ------------------------------------------------------------------


def test_the_ledger_description_maps_a_product_to_its_order():
    req = build(
        customer("Please refund 25.00 USD on the charger, it stopped working."),
        ledger=fryer_ledger(True),
        money=MONEY_BOTH,
    )
    call = only_call(model.complete(req))
    assert call.name == "issue_refund" and call.arguments["order_number"] == GRINDER


def test_a_product_nothing_in_the_request_names_is_searched_never_guessed():
    # One order in view, but the customer names another product: look it up, never act on the one in view.
    req = build(customer("I want to return the desk lamp."), ledger=[CUSTOMER_ENTRY, ledger_order(True)])
    call = only_call(model.complete(req))
    assert (call.name, call.arguments) == ("search_orders", {"customer_id": CUSTOMER, "query": "desk lamp"})


# --- constraints, facts, the opener -----------------------------------------------------------


def test_a_stated_constraint_is_pinned_recorded_and_acknowledged_never_the_opener():
    history = [
        customer(f"My air fryer from {ORDER} arrived cracked."),
        Message(role="assistant", content="I'm sorry the item arrived damaged. Would you like a refund?"),
    ]
    text = "please never email me, phone only"
    req = build(*history, customer(text), ledger=[CUSTOMER_ENTRY, ledger_order(True)], tools=ALL_SPECS)
    first = model.complete(req)
    assert only_call(first).name == "pin_constraint" and only_call(first).arguments["text"] == text
    req = feed(req, first, st_pin(text))
    second = model.complete(req)
    assert only_call(second).arguments == {"name": "contact_preference", "value": "phone", "stated_by_customer": True}
    req = feed(req, second, '{"name": "contact_preference", "value": "phone", "source": "customer"}')
    answer = model.complete(req)
    # Acknowledged, then the question still open is asked again; never the opener.
    assert not answer.tool_calls and answer.text.startswith("Understood — we'll only contact you by phone. ")
    assert "Would you like a refund" in answer.text and "Thanks for getting in touch" not in answer.text
    # Stated with nothing pending, the acknowledgement is the whole answer.
    alone = build(
        customer(f"Where is {ORDER}?"),
        Message(role="assistant", content="It is in transit."),
        customer(text),
        ledger=[CUSTOMER_ENTRY, ledger_order(True)],
        tools=ALL_SPECS,
    )
    alone = feed(
        feed(alone, model.complete(alone), st_pin(text)),
        model.complete(feed(alone, model.complete(alone), st_pin(text))),
        '{"name": "contact_preference", "value": "phone", "source": "customer"}',
    )
    assert model.complete(alone).text == "Understood — we'll only contact you by phone."


def st_pin(text):
    return json.dumps({"pinned": text, "scope": "ticket", "blocks_tools": ["send_email"]})


def test_mid_case_an_unplaced_message_never_gets_the_opener():
    history = [customer(f"Where is {ORDER}?"), Message(role="assistant", content="It is in transit.")]
    answer = model.complete(
        build(*history, customer("It has been a long week"), ledger=[CUSTOMER_ENTRY, ledger_order(True)])
    )
    assert not answer.tool_calls and "Thanks for getting in touch" not in answer.text
    # When the customer can be reached is a constraint: pinned, then acknowledged — never the opener.
    req = build(*history, customer("I only check my phone after 6pm"), ledger=[CUSTOMER_ENTRY, ledger_order(True)])
    pinned = model.complete(req)
    assert [c.name for c in pinned.tool_calls] == ["pin_constraint"]
    said = model.complete(feed(req, pinned, st_pin("I only check my phone after 6pm")))
    assert said.text.startswith("Understood") and "6pm" in said.text
    # At the very start of a case the opener is still right.
    assert model.complete(build(customer("Hello there"))).text == offline.CLARIFY


def test_issue_and_requested_remedy_are_recorded_before_acting():
    req = build(
        customer(f"The blender from {ORDER} arrived cracked. Please refund $40."),
        ledger=[CUSTOMER_ENTRY, ledger_order(True)],
        money=[MoneyData(ORDER, "USD", 12000, 0)],
        tools=ALL_SPECS,
    )
    first = model.complete(req)
    facts = {c.arguments["name"]: c.arguments["value"] for c in first.tool_calls}
    assert all(c.name == "record_fact" for c in first.tool_calls)
    assert facts == {
        "issue": f"Item arrived damaged — order {ORDER}",
        "resolution": "refund",
        "amount": "40.00 USD",
        "order_number": ORDER,
    }
    for c in first.tool_calls:
        st.__dict__  # the values validate as the state fields do
        from sundry.context.statefields import validate_field

        validate_field(c.arguments["name"], c.arguments["value"])
    req = req.model_copy(
        update={
            "messages": req.messages
            + [Message(role="assistant", tool_calls=first.tool_calls)]
            + [
                Message(
                    role="tool",
                    content=json.dumps({"name": c.arguments["name"], "value": c.arguments["value"], "source": "model"}),
                    tool_call_id=c.id,
                    tool_name="record_fact",
                )
                for c in first.tool_calls
            ]
        }
    )
    call = only_call(model.complete(req))
    assert call.name == "issue_refund" and call.arguments["amount"] == "40.00"


# --- lists, lost parcels, follow-up -----------------------------------------------------------


def test_orders_are_listed_in_at_most_five_lines_and_the_rest_counted():
    orders = [(f"SU-2{i:04d}", f"Product {i}") for i in range(20)]
    req = build(customer("What else did I order?"))
    first = model.complete(req)
    assert only_call(first).arguments == {"customer_id": CUSTOMER, "limit": 5}
    result = search_result(*orders).model_copy(update={"total_matches": 20})
    answer = model.complete(feed(req, first, result))
    lines = answer.text.splitlines()
    assert len([line for line in lines if line.startswith("- ")]) == 5 and "and 15 more" in answer.text
    assert "SU-20004" in answer.text and "SU-20005" not in answer.text


def test_a_lost_parcel_gets_the_remedies_the_shop_allows():
    req = build(
        customer(f"My parcel for {ORDER} never arrived."),
        ledger=[CUSTOMER_ENTRY, ledger_order(True)],
        money=[MoneyData(ORDER, "USD", 12000, 0)],
    )
    req = feed(req, model.complete(req), order_result())
    lost = st.TrackParcelResult(tracking_number=TRACKING, order_number=ORDER, carrier="UPS", status="lost", events=[])
    req = feed(req, model.complete(req), lost)
    answer = model.complete(req)
    assert not answer.tool_calls
    assert "lost" in answer.text and "replacement" in answer.text and "refund of 120.00 USD" in answer.text
    # With a rule against replacements, only the refund is offered.
    rule = RuleData(1, "No replacements.", 1, enforcement={"block_tools": ["offer_replacement"]})
    ruled = req.model_copy(
        update={
            "messages": [
                m if render.lane_of(m) != "rules" else render.lane_message("rules", render.render_rules([rule]))
                for m in req.messages
            ]
        }
    )
    text = model.complete(ruled).text
    assert "replacement" not in text and "refund of 120.00 USD" in text


FOLLOW_UP_SPEC = next(spec for spec in ALL_SPECS if spec.name == "request_staff_follow_up")


def test_a_promise_of_staff_follow_up_flags_the_ticket_first_when_the_tool_is_offered():
    req = build(
        customer(f"Refund {ORDER} please."),
        ledger=[CUSTOMER_ENTRY, ledger_order(True)],
        money=[MoneyData(ORDER, "USD", 12000, 0)],
        tools=SPECS + [FOLLOW_UP_SPEC],
    )
    args = {"order_number": ORDER, "amount": "120.00", "currency": "USD", "reason": "customer requested a refund"}
    for cid in ("r1", "r2"):
        req = _failed(req, "issue_refund", args, "ERROR: payment provider unavailable", cid)
    flag = only_call(model.complete(req))
    assert flag.name == "request_staff_follow_up" and "payment provider unavailable" in flag.arguments["reason"]
    REGISTRY["request_staff_follow_up"].args_model.model_validate(flag.arguments)  # within the tool's 160 characters
    req = feed(req, ModelResponse(tool_calls=[flag]), '{"flagged": true}')
    answer = model.complete(req)
    assert not answer.tool_calls and answer.text == STAFF_FOLLOW_UP


# --- after a staff take-over ------------------------------------------------------------------


def test_after_a_hand_back_the_question_asked_during_the_take_over_is_answered():
    req = build(
        customer(f"Where is {ORDER}?"),
        Message(role="assistant", content=render.STAFF_REPLY_PREFIX + "Let me check with the warehouse."),
        Message(role="user", content=render.SYSTEM_EVENT_PREFIX + "sam handed the ticket back to the agent."),
        ledger=[CUSTOMER_ENTRY, ledger_order(True)],
    )
    req = feed(req, model.complete(req), order_result())
    call = only_call(model.complete(req))
    assert (call.name, call.arguments) == ("track_parcel", {"tracking_number": TRACKING})
