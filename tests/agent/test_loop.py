"""The guarded step loop, end to end through the database, with a scripted model."""

from __future__ import annotations

import pytest

from sundry.agent.loop import agent_run
from sundry.agent.models import AgentStep, Confirmation, HeldAction
from sundry.agent.provider.gateway import Gateway, ModelCallError
from sundry.agent.provider.scripted import ScriptedModel
from sundry.agent.services import customer_message_post
from sundry.context.models import ActionTaken, LedgerEntry, PinnedRule, Summary
from sundry.desk.lifecycle import ticket_create
from sundry.shop.models import Contact, Product, Refund
from sundry.tickets.models import Turn
from sundry.tickets.services import turn_append
from sundry.tooling.messages import ModelResponse, ToolCall
from tests.factories import CustomerFactory, TicketClassFactory, customer_confirms, paid_order

pytestmark = pytest.mark.django_db


def call(name, _id="c1", **arguments):
    return ModelResponse(tool_calls=[ToolCall(id=_id, name=name, arguments=arguments)])


def reply(text="Done."):
    return ModelResponse(text=text)


@pytest.fixture
def shop():
    customer = CustomerFactory()
    # Two real orders one character apart: a mutation of one names the other
    # (another customer's, so the refund would land on someone else's order).
    first = paid_order(customer=customer, number="SU-10480", prices=(6000, 4000))
    # What the customer calls it: the consent guard matches their words against the ledger's description.
    Product.objects.filter(pk=first.items.order_by("pk").first().product_id).update(name="Countertop Blender 1200W")
    second = paid_order(customer=CustomerFactory(), number="SU-10481", prices=(5000,))
    tclass = TicketClassFactory(approval_rules={})
    ticket = ticket_create(customer=customer.person, ticket_class=tclass, subject="Broken blender")
    return {"customer": customer, "first": first, "second": second, "ticket": ticket}


def run(ticket, *steps):
    model = ScriptedModel(list(steps))
    agent_run(ticket.pk, gateway=Gateway(override=model))
    return model


def turns(ticket, **filters):
    return list(Turn.objects.filter(ticket=ticket, **filters).order_by("number"))


def test_order_id_from_tool_result_enters_ledger_and_a_one_char_mutation_is_rejected(shop):
    ticket = shop["ticket"]
    customer_message_post(ticket=ticket, text="My blender arrived broken, can I get some money back?")
    run(
        ticket,
        call("search_orders", customer_id=shop["customer"].customer_id),
        call("get_order", order_number="SU-10480"),
        # One character off: SU-10481 is a real order, never shown to the model.
        call("issue_refund", order_number="SU-10481", amount="10.00", currency="USD", reason="damaged"),
        call("issue_refund", order_number="SU-10480", amount="10.00", currency="USD", reason="damaged"),
        reply("Please confirm the refund on the card."),
    )
    # The mutated call was refused before any card; the verbatim one waits on the only card.
    [card] = Confirmation.objects.filter(ticket=ticket)
    assert card.arguments["order_number"] == "SU-10480" and card.status == Confirmation.Status.PENDING
    assert not Refund.objects.exists()
    customer_confirms(ticket)  # the customer asked for money back and presses Confirm
    entry = LedgerEntry.objects.get(ticket=ticket, value="SU-10480")
    assert entry.verified and entry.role.startswith("order") and entry.source == "search_orders"
    rejection = turns(ticket, kind=Turn.Kind.REJECTION)
    assert len(rejection) == 1
    assert rejection[0].payload["guard"] == "mutation"
    assert rejection[0].payload["details"]["mutation_of"] == "SU-10480"
    # The mutated refund never ran; the verbatim one did, once.
    assert not Refund.objects.filter(order=shop["second"]).exists()
    assert Refund.objects.filter(order=shop["first"], amount_cents=1000).count() == 1
    assert ActionTaken.objects.get(ticket=ticket).target == "SU-10480"


def test_customer_typed_order_number_is_unverified_until_a_lookup_returns_it(shop):
    ticket = shop["ticket"]
    customer_message_post(ticket=ticket, text="Where is SU-10480?")
    entry = LedgerEntry.objects.get(ticket=ticket, value="SU-10480")
    assert entry.verified is False
    model = run(
        ticket,
        call("issue_refund", order_number="SU-10480", amount="5.00", currency="USD", reason="late"),
        call("get_order", _id="c2", order_number="SU-10480"),
        reply("Found it."),
    )
    assert turns(ticket, kind=Turn.Kind.REJECTION)[0].payload["guard"] == "unverified_id"
    entry.refresh_from_db()
    assert entry.verified is True
    # The model saw the entry marked unverified in its first request.
    ledger_block = next(m.content for m in model.requests[0].messages if m.lane == "ledger")
    assert "SU-10480" in ledger_block and "UNVERIFIED" in ledger_block


def _refund_40(shop):
    ticket = shop["ticket"]
    customer_message_post(ticket=ticket, text="The table leg from SU-10480 is scratched; I'll keep it for 40 off.")
    run(
        ticket,
        call("get_order", order_number="SU-10480"),
        call("issue_refund", _id="c2", order_number="SU-10480", amount="40.00", currency="USD", reason="scratched leg"),
        reply("Please confirm the refund of 40.00 USD on the card."),
    )
    [card] = customer_confirms(ticket)  # the customer asked for the 40 off and presses Confirm
    assert card.outcome == "executed"
    run(ticket, reply("I've refunded 40.00 USD."))
    return ticket


def _compact_everything(ticket):
    """What compaction does to the request: the old turns are replaced by a summary."""
    Summary.objects.create(
        ticket=ticket,
        covers_through_turn=ticket.turns.count(),
        fields={},
        text="The customer reported a scratched [order].",
    )


@pytest.mark.parametrize("reason", ["scratched leg", "the leg is scratched"])
def test_refund_removed_from_the_request_is_still_known_and_not_repeated(shop, reason):
    ticket = _refund_40(shop)
    _compact_everything(ticket)
    customer_message_post(ticket=ticket, text="About the scratched leg again: I want my 40 back.")
    model = run(
        ticket,
        call("issue_refund", _id="r2", order_number="SU-10480", amount="40.00", currency="USD", reason=reason),
        reply("A colleague needs to approve that."),
    )
    request = model.requests[0]
    conversation = " ".join(m.content for m in request.messages if m.lane is None)
    assert "refund_id" not in conversation  # the refund's turns are gone from the request …
    state = next(m.content for m in request.messages if m.lane == "state")
    assert "issue_refund" in state and "40.00 USD" in state  # … but the state lane carries it
    assert Refund.objects.filter(order=shop["first"]).count() == 1
    if reason == "scratched leg":
        # The very call the customer confirmed, which ran: the model reads that it is done (its card's record).
        assert not HeldAction.objects.filter(ticket=ticket).exists()
        result = Turn.objects.get(ticket=ticket, kind=Turn.Kind.TOOL_RESULT, payload__call_id="r2")
        assert result.payload["answered"] == "done" and "is done" in result.text
    else:
        # The same refund in other words is a repeat (the state lane's action): held for staff, not executed.
        held = HeldAction.objects.get(ticket=ticket)
        assert held.status == "pending" and held.tool == "issue_refund"
    # A repeat goes to staff, not onto a card the customer could confirm.
    assert not Confirmation.objects.filter(ticket=ticket, status=Confirmation.Status.PENDING).exists()


def test_refund_above_what_remains_is_refused(shop):
    ticket = _refund_40(shop)
    _compact_everything(ticket)
    customer_message_post(ticket=ticket, text="Actually refund the rest plus a bit.")
    run(
        ticket,
        call("issue_refund", _id="r3", order_number="SU-10480", amount="61.00", currency="USD", reason="goodwill"),
        reply("Sorry, I can refund at most 60.00 USD."),
    )
    rejection = turns(ticket, kind=Turn.Kind.REJECTION)[-1]
    assert rejection.payload["guard"] == "refund_limit"
    assert Refund.objects.filter(order=shop["first"]).count() == 1


def test_phone_only_stated_in_passing_at_turn_4_blocks_send_email_at_turn_30(shop):
    ticket = shop["ticket"]
    for text in ("Hi there.", "It's about a blender.", "It arrived last week."):
        turn_append(ticket=ticket, author="customer", text=text)
    stated = "Phone only, never email."
    turn = customer_message_post(ticket=ticket, text=f"Anyway. {stated} The lid is cracked.")
    assert turn.number == 4
    candidate = PinnedRule.objects.get(ticket=ticket)
    assert candidate.text == stated and candidate.status == "candidate" and candidate.turn == 4
    run(ticket, call("pin_constraint", text=stated), reply("Noted."))
    rule = PinnedRule.objects.get(ticket=ticket)
    # The model's pin adds no authority: the customer's flagged sentence stays a candidate, enforced.
    assert rule.status == "candidate" and rule.turn == 4 and rule.text == stated
    assert rule.enforcement == {"block_tools": ["send_email"]}
    while ticket.last_turn_number < 29:
        turn_append(ticket=ticket, author="customer", text="More details about the lid.")
        turn_append(ticket=ticket, author="agent", text="Thanks, noted.")
    customer_message_post(ticket=ticket, text="Please send me a written confirmation.")
    model = run(
        ticket,
        call("send_email", _id="e1", customer_id=shop["customer"].customer_id, subject="Confirmation", body="..."),
        reply("We can call you instead, if that suits you."),
    )
    rules_block = next(m.content for m in model.requests[0].messages if m.lane == "rules")
    assert stated in rules_block
    # Still a candidate (the customer's own words, unconfirmed): the email is not sent; it waits on a card
    # that quotes the customer's rule from turn 4, so they read what they said before anything goes out.
    assert not Contact.objects.exists()
    card = Confirmation.objects.get(ticket=ticket, tool="send_email")
    assert card.status == Confirmation.Status.PENDING and card.turn >= 30
    assert [(r["text"], r["turn"]) for r in card.card["rules"]] == [(stated, 4)]
    # Once staff confirm the rule, the same call is refused outright, at turn 30 or later.
    PinnedRule.objects.filter(pk=rule.pk).update(status="active")
    customer_message_post(ticket=ticket, text="Please just email it.")
    run(
        ticket,
        call("send_email", _id="e2", customer_id=shop["customer"].customer_id, subject="Confirmation", body="..."),
        reply("We can call you instead, if that suits you."),
    )
    rejection = turns(ticket, kind=Turn.Kind.REJECTION)[-1]
    assert rejection.number >= 30
    assert rejection.payload["guard"] == "rule" and stated in rejection.text
    assert not Contact.objects.exists()


def test_malformed_output_and_unknown_tools_become_turns_the_model_can_correct(shop):
    ticket = shop["ticket"]
    customer_message_post(ticket=ticket, text="Where is my stuff?")
    model = run(
        ticket,
        ModelResponse(tool_calls=[ToolCall(id="bad", name="get_order", arguments='{"order_number": ')]),
        call("teleport_parcel", _id="u1", where="home"),
        call("get_order", _id="w1", order_number=12345),
        reply("Could you tell me your order number?"),
    )
    rejections = turns(ticket, kind=Turn.Kind.REJECTION)
    assert [r.payload["guard"] for r in rejections] == ["schema", "schema"]
    unknown = turns(ticket, kind=Turn.Kind.ERROR)
    assert "Unknown tool 'teleport_parcel'" in unknown[0].text
    # The model saw each error as the result of its own call.
    last = model.requests[-1]
    tool_msgs = [m for m in last.messages if m.role == "tool"]
    assert {m.tool_call_id for m in tool_msgs} == {"bad", "u1", "w1"}
    assert turns(ticket, author="agent", kind="message")[-1].text.startswith("Could you")


def test_a_failed_model_call_is_surfaced_to_staff_and_cleared_by_a_later_answer(shop):
    # The gateway's call retries inside itself (the provider SDK, honouring Retry-After): the
    # step calls it once, and a failure it gives up on ends the run with a flag for staff.
    ticket = shop["ticket"]
    customer_message_post(ticket=ticket, text="Hello?")
    model = run(ticket, ModelCallError("HTTP 503 from provider", retryable=True))
    assert len(model.requests) == 1
    error = turns(ticket, kind=Turn.Kind.ERROR)[-1]
    assert "could not be reached" in error.text
    ticket.refresh_from_db()
    assert ticket.attention.startswith("Model unavailable")
    assert AgentStep.objects.get(ticket=ticket).outcome == "model_error"

    # The model answers the customer's next message: the flag's cause is gone, and so is the flag.
    customer_message_post(ticket=ticket, text="Anyone there?")
    run(ticket, reply("Yes, sorry for the wait. How can I help?"))
    ticket.refresh_from_db()
    assert ticket.attention == ""


def test_a_model_failure_never_overwrites_another_flag_nor_clears_it(shop):
    from sundry.tickets.models import Ticket

    ticket = shop["ticket"]
    Ticket.objects.filter(pk=ticket.pk).update(attention="Compaction breaker: 3 compactions in a row failed")
    customer_message_post(ticket=ticket, text="Hello?")
    run(ticket, ModelCallError("HTTP 503 from provider", retryable=True))
    ticket.refresh_from_db()
    assert ticket.attention.startswith("Compaction breaker")
    customer_message_post(ticket=ticket, text="Anyone there?")
    run(ticket, reply("Yes, how can I help?"))
    ticket.refresh_from_db()
    assert ticket.attention.startswith("Compaction breaker")


def test_tool_result_failing_its_schema_is_quarantined_not_harvested(shop, monkeypatch):
    from sundry.tooling.tools import REGISTRY

    tool = REGISTRY["get_order"]
    monkeypatch.setattr(tool, "run", lambda ctx, args: {"order_number": "SU-99999", "unexpected": True})
    ticket = shop["ticket"]
    customer_message_post(ticket=ticket, text="Check my order please.")
    run(
        ticket,
        call("search_orders", customer_id=shop["customer"].customer_id),
        call("get_order", _id="g1", order_number="SU-10480"),
        reply("Checking."),
    )
    quarantined = turns(ticket, kind=Turn.Kind.ERROR)[-1]
    assert quarantined.payload["quarantined"] is True
    assert not LedgerEntry.objects.filter(ticket=ticket, value="SU-99999").exists()


def test_each_step_records_request_tokens_per_lane(shop):
    ticket = shop["ticket"]
    customer_message_post(ticket=ticket, text="Hello")
    run(ticket, reply("Hi! How can I help?"))
    step = AgentStep.objects.get(ticket=ticket)
    lanes = step.lane_tokens["lanes"]
    assert set(lanes) >= {"system", "rules", "ledger", "state", "summary", "recent"}
    assert step.request_tokens > sum(lanes.values()) - 1 and step.is_resolution


def test_a_server_that_reuses_call_ids_never_shows_an_old_result_as_a_new_calls(shop):
    # Some OpenAI-compatible servers number calls per response: every call is "call_0".
    ticket = shop["ticket"]
    later = paid_order(customer=shop["customer"], number="SU-10490", prices=(2500,))
    customer_message_post(ticket=ticket, text="Where are SU-10480 and SU-10490?")
    model = run(
        ticket,
        call("get_order", _id="call_0", order_number="SU-10480"),
        call("get_order", _id="call_0", order_number="SU-10490"),
        ModelResponse(tool_calls=[ToolCall(id="", name="get_order", arguments={"order_number": "SU-10480"})]),
        reply("Both found."),
    )
    stored = [c["id"] for t in turns(ticket, kind=Turn.Kind.TOOL_CALL) for c in t.payload["calls"]]
    assert stored == ["call_0", "call_0-2", "call"]
    # In the last request each call is followed by its own result, and nothing is a "later result".
    last = model.requests[-1].messages
    pairs = {m.tool_call_id: m.content for m in last if m.role == "tool"}
    assert later.number in pairs["call_0-2"] and later.number not in pairs["call_0"]
    assert "SU-10480" in pairs["call"]
    assert not any("later result" in (m.content or "") for m in last)
    assert [t.payload["call_id"] for t in turns(ticket, kind=Turn.Kind.TOOL_RESULT)] == stored


def test_one_call_emitted_twice_in_a_response_runs_once_and_is_not_held(shop):
    ticket = shop["ticket"]
    customer_message_post(ticket=ticket, text="The blender from SU-10480 is broken; 10 back please.")
    refund = dict(order_number="SU-10480", amount="10.00", currency="USD", reason="damaged")
    model = run(
        ticket,
        call("get_order", order_number="SU-10480"),
        ModelResponse(
            tool_calls=[
                ToolCall(id="a", name="issue_refund", arguments=refund),
                ToolCall(id="b", name="issue_refund", arguments=dict(reversed(refund.items()))),
            ]
        ),
        reply("Please confirm the refund on the card."),
    )
    # One card for the one call: the duplicate is answered, not proposed a second time.
    [card] = customer_confirms(ticket)  # the customer asked for the 10 back and presses Confirm
    assert card.call_id == "a" and card.outcome == "executed"
    assert Refund.objects.filter(order=shop["first"]).count() == 1
    assert not HeldAction.objects.filter(ticket=ticket).exists()  # nothing left for staff to clear
    [dup] = turns(ticket, kind=Turn.Kind.REJECTION)
    assert dup.payload["guard"] == "duplicate" and dup.payload["call_id"] == "b"
    assert dup.payload["details"] == {"duplicate_of": "a"}
    tool_msgs = {m.tool_call_id: m.content for m in model.requests[-1].messages if m.role == "tool"}
    assert "awaiting_customer_confirmation" in tool_msgs["a"] and "(guard: duplicate)" in tool_msgs["b"]
    # After the confirmation the agent reads the confirmed call's result: the one refund that ran.
    after = run(ticket, reply("Refunded 10.00 USD."))
    tool_msgs = {m.tool_call_id: m.content for m in after.requests[-1].messages if m.role == "tool"}
    assert "refund_id" in tool_msgs["a-confirmed"]


def test_the_same_tool_with_other_arguments_in_one_response_runs_each(shop):
    ticket = shop["ticket"]
    paid_order(customer=shop["customer"], number="SU-10490", prices=(2500,))
    customer_message_post(ticket=ticket, text="Where are SU-10480 and SU-10490?")
    run(
        ticket,
        ModelResponse(
            tool_calls=[
                ToolCall(id="a", name="get_order", arguments={"order_number": "SU-10480"}),
                ToolCall(id="b", name="get_order", arguments={"order_number": "SU-10490"}),
            ]
        ),
        reply("Found both."),
    )
    results = turns(ticket, kind=Turn.Kind.TOOL_RESULT)
    assert [(t.payload["call_id"], t.payload["ok"]) for t in results] == [("a", True), ("b", True)]
    assert not turns(ticket, kind=Turn.Kind.REJECTION)
