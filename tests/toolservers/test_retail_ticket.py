"""A retail ticket end to end over MCP: the example server as a real subprocess, a scripted model
through the real loop, the guards, the ledger, compaction, approvals and the desk.

The scripted model does exactly what it is told (the worst case); what must hold is
judged from the retail store itself (asked through the same server) and the lanes.
"""

from __future__ import annotations

import json

import pytest
from django.contrib.auth import get_user_model
from django.db import transaction
from django.test import Client

from sundry.agent import remote
from sundry.agent.loop import agent_run
from sundry.agent.models import Confirmation, HeldAction
from sundry.agent.provider.gateway import Gateway
from sundry.agent.provider.scripted import ScriptedModel
from sundry.agent.services import customer_message_post, held_action_decide
from sundry.compaction import summariser
from sundry.compaction.models import CompactionRun
from sundry.context.models import ActionTaken, LedgerEntry, Summary
from sundry.desk.lifecycle import ticket_create
from sundry.tickets.models import TicketClass, Turn
from sundry.tooling import mcp_client
from sundry.tooling.messages import ModelResponse, ToolCall
from sundry.toolservers import catalog
from tests.agent.test_outcomes_after_compaction import compact
from tests.factories import CustomerFactory, customer_confirms

# Transactional: a remote call must find no transaction open around it, as in a worker.
pytestmark = pytest.mark.django_db(transaction=True)

USER, EMAIL = "aarav_anderson_8794", "aarav.anderson9752@example.com"
ORDER, MUTANT = "#W4316152", "#W4316153"  # a delivered order of two tea kettles; one digit off
PRODUCT, KETTLE, STEEL_KETTLE, GIFT_CARD = "9832717871", "7292993796", "4238115171", "gift_card_7245904"
EXCHANGE = dict(item_ids=[KETTLE], new_item_ids=[STEEL_KETTLE], payment_method_id=GIFT_CARD)


def call(name, _id, **arguments):
    return ModelResponse(tool_calls=[ToolCall(id=_id, name=name, arguments=arguments)])


def run(ticket, *steps) -> ScriptedModel:
    model = ScriptedModel(list(steps))
    agent_run(ticket.pk, gateway=Gateway(override=model))
    assert model.remaining == 0, "the run stopped before the script's end"
    return model


def results(ticket, name):
    return [
        t
        for t in Turn.objects.filter(ticket=ticket, kind=Turn.Kind.TOOL_RESULT).order_by("number")
        if t.payload.get("name") == name
    ]


def rejections(ticket):
    return [t.payload for t in Turn.objects.filter(ticket=ticket, kind=Turn.Kind.REJECTION).order_by("number")]


def store_order(server, order_id):
    """The order as the retail store has it now, through the class's own connection to the server."""
    tool = catalog.class_tools(server.ticket_class).remote["get_order_details"]
    return mcp_client.connection(tool.connect).call("get_order_details", {"order_id": order_id}, 20).data


@pytest.fixture
def ticket(retail_server):
    customer = CustomerFactory(name="Aarav Anderson", email=EMAIL)
    return ticket_create(
        customer=customer.person, ticket_class=retail_server.ticket_class, subject="Tea kettle exchange"
    )


def test_a_retail_exchange_end_to_end_over_mcp(ticket, retail_server):
    # Compaction keeps only the last two turns: the lookups' results leave the request.
    TicketClass.objects.filter(pk=ticket.ticket_class_id).update(recent_turns_kept=2)
    ticket.ticket_class.refresh_from_db()
    customer_message_post(
        ticket=ticket,
        wake=False,
        text=(
            f"Hi, I'm Aarav Anderson ({EMAIL}). I'd like to exchange the tea kettle in order {ORDER} "
            "for the stainless steel one, paid from my gift card."
        ),
    )
    # The order number the customer typed is in the ledger, unverified (the declaration's format).
    typed = LedgerEntry.objects.get(ticket=ticket, value=ORDER)
    assert not typed.verified and typed.kind == "order"

    model = run(
        ticket,
        call("exchange_delivered_order_items", "x1", order_id=ORDER, **EXCHANGE),  # typed, not yet looked up
        call("find_user_id_by_email", "c1", email=EMAIL),
        call("get_user_details", "c2", user_id=USER),
        call("get_order_details", "c3", order_id=ORDER),
        call("get_product_details", "c4", product_id=PRODUCT),
        call("exchange_delivered_order_items", "x2", order_id=MUTANT, **EXCHANGE),  # one digit off
        call("exchange_delivered_order_items", "x3", order_id=ORDER, **EXCHANGE),
        ModelResponse(text=f"Please confirm the exchange of the kettle in {ORDER} on the card."),
    )

    # The model was offered the server's tools (and Sundry's lane tools), not the demo shop's.
    offered = {t.name for t in model.requests[0].tools}
    assert {"get_order_details", "exchange_delivered_order_items", "find_user_id_by_name_zip"} <= offered
    assert "pin_constraint" in offered and not {"issue_refund", "get_order", "lookup_customer"} & offered
    system = model.requests[0].messages[0]
    assert system.lane == "system" and "Authenticate the customer first" in system.content  # the file's prompt

    # The guard refused the customer's typed ID until a lookup returned it, and the one-digit mutation.
    refused = rejections(ticket)
    assert [(r["call_id"], r["guard"]) for r in refused] == [("x1", "unverified_id"), ("x2", "mutation")]
    assert refused[1]["details"]["mutation_of"] == ORDER
    # Each names the lookups the server's declaration file gives for an order (its lookup_hints).
    assert all("get_user_details or get_order_details" in r["reason"] for r in refused), refused

    # The ledger harvested, verified, every kind from the server's results by the declaration file.
    ledger = {e.value: e for e in LedgerEntry.objects.filter(ticket=ticket)}
    for value, kind in (
        (USER, "user"),
        (ORDER, "order"),
        (GIFT_CARD, "payment_method"),
        (KETTLE, "item"),
        (STEEL_KETTLE, "item"),
        (PRODUCT, "product"),
        ("#W3470184", "order"),
    ):
        assert ledger[value].verified and ledger[value].kind == kind, value
    assert ledger[ORDER].description.startswith("Tea Kettle")
    assert ledger[KETTLE].note == f"of {ORDER}"
    assert MUTANT not in ledger

    # The exchange is a card (the file declares it a "replace"): nothing reached the store until the
    # customer, who asked for it, confirms that exact card; then it ran once, on the real order, in the store.
    card = Confirmation.objects.get(ticket=ticket)
    assert (card.call_id, card.status) == ("x3", Confirmation.Status.PENDING)
    assert [e["id"] for e in card.card["entities"]] == [ORDER, KETTLE, STEEL_KETTLE, GIFT_CARD]
    assert results(ticket, "exchange_delivered_order_items")[-1].payload["confirmation"] == card.pk
    assert store_order(retail_server, ORDER)["status"] == "delivered"
    assert [c.outcome for c in customer_confirms(ticket)] == ["executed"]
    order = store_order(retail_server, ORDER)
    assert order["status"] == "exchange requested" and order["exchange_items"] == [KETTLE]
    assert order["exchange_new_items"] == [STEEL_KETTLE]
    action = ActionTaken.objects.get(ticket=ticket)
    assert (action.tool, action.target) == ("exchange_delivered_order_items", ORDER)

    # --- compaction, then the customer asks for a second exchange --------------------------------------
    compact(ticket)
    summary = Summary.objects.get(ticket=ticket)
    customer_message_post(
        ticket=ticket, wake=False, text=f"Could you exchange the other tea kettle in {ORDER} for the steel one as well?"
    )
    model = run(
        ticket,
        call("get_item_details", "c5", item_id=STEEL_KETTLE),
        call("exchange_delivered_order_items", "x4", order_id=ORDER, **EXCHANGE),
        ModelResponse(text="The second exchange is with a colleague for approval."),
    )
    request = model.requests[0]
    shown = "\n".join(m.content for m in request.messages)
    ledger_block = next(m.content for m in request.messages if m.lane == "ledger")
    # The earlier results are gone from the request; every ID the later calls use is in the ledger block.
    assert not any(m.role == "tool" for m in request.messages if summary.covers_through_turn >= min(m.turns or [10**6]))
    for value in (ORDER, STEEL_KETTLE, KETTLE, GIFT_CARD):
        assert value in ledger_block, value
    assert '"status": "delivered"' not in shown  # the old get_order_details result was compacted away
    # So the later calls passed the ID guard: the lookup ran. The second exchange is the very call the
    # customer confirmed and that ran: no card, no hold (an approval could only refuse it), and the model
    # reads that it is done.
    assert results(ticket, "get_item_details")[-1].payload["ok"] is True
    again = results(ticket, "exchange_delivered_order_items")[-1]
    assert (again.payload["call_id"], again.payload["answered"]) == ("x4", "done"), again.text
    assert not HeldAction.objects.filter(ticket=ticket).exists()
    assert not Confirmation.objects.filter(ticket=ticket, status=Confirmation.Status.PENDING).exists()
    assert [r["guard"] for r in rejections(ticket)] == ["unverified_id", "mutation"]  # nothing new refused
    staff = get_user_model().objects.create_user("ann", password="pw", is_staff=True)
    order = store_order(retail_server, ORDER)  # the store: one exchange request, as the customer confirmed it
    assert order["status"] == "exchange requested" and order["exchange_items"] == [KETTLE]
    assert ActionTaken.objects.filter(ticket=ticket).count() == 1

    # --- the desk shows the lanes ----------------------------------------------------------------------
    client = Client()
    client.force_login(staff)
    page = client.get(f"/desk/tickets/{ticket.pk}/").content.decode()
    for value in (USER, ORDER, GIFT_CARD, STEEL_KETTLE):
        assert value in page, value
    assert "exchange_delivered_order_items" in page


def test_a_remote_call_inside_a_transaction_is_refused(ticket, retail_server):
    """The check that keeps remote calls out of transactions can fail: inside one, nothing is sent."""
    tool = catalog.class_tools(retail_server.ticket_class).remote["get_order_details"]
    args = tool.args_model.model_validate({"order_id": ORDER})
    with pytest.raises(remote.InTransaction), transaction.atomic():
        remote.run_remote(ticket, tool, "c1", args, "key")
    assert not results(ticket, "get_order_details")


def test_arguments_are_checked_against_the_servers_schema(ticket, retail_server):
    customer_message_post(ticket=ticket, wake=False, text=f"It's {EMAIL}.")
    run(
        ticket,
        call("find_user_id_by_email", "c1", mail=EMAIL),
        call("find_user_id_by_email", "c2", email=EMAIL),
        ModelResponse(text="Found you."),
    )
    refused = rejections(ticket)
    assert [r["guard"] for r in refused] == ["schema"] and "'email' is a required property" in refused[0]["reason"]
    assert results(ticket, "find_user_id_by_email")[-1].text == USER


def test_a_tool_error_is_the_models_to_read_and_no_flag(ticket, retail_server):
    customer_message_post(ticket=ticket, wake=False, text=f"Cancel order {ORDER} please, my email is {EMAIL}.")
    run(
        ticket,
        call("find_user_id_by_email", "c1", email=EMAIL),
        call("get_user_details", "c2", user_id=USER),
        call("cancel_pending_order", "c3", order_id=ORDER, reason="no longer needed"),
        ModelResponse(text="Please confirm the cancellation on the card."),
    )
    # The customer asked, so they confirm the card; the store refuses the cancellation it runs.
    [card] = customer_confirms(ticket)
    result = results(ticket, "cancel_pending_order")[-1]
    assert result.payload["call_id"] == "c3-confirmed" and result.payload["server"] == "retail"
    assert result.payload["ok"] is False and "Non-pending order cannot be cancelled" in result.text
    assert card.outcome == "refused" and card.result_turn == result.number
    # The model reads the store's error as the confirmed call's result, and answers from it.
    model = run(ticket, ModelResponse(text="The store says that order can no longer be cancelled."))
    shown = [m for m in model.requests[0].messages if m.role == "tool"]
    assert any("Non-pending order cannot be cancelled" in m.content for m in shown), shown
    ticket.refresh_from_db()
    assert ticket.attention == "" and not ActionTaken.objects.filter(ticket=ticket).exists()
    assert json.loads(json.dumps(store_order(retail_server, ORDER)))["status"] == "delivered"


def test_a_class_rule_holds_a_remote_write_for_staff(ticket, retail_server):
    pending = "#W9300146"
    TicketClass.objects.filter(pk=ticket.ticket_class_id).update(approval_rules={"cancel_pending_order": {}})
    customer_message_post(
        ticket=ticket, wake=False, text=f"My email is {EMAIL}. Please cancel order {pending}, I no longer need it."
    )
    run(
        ticket,
        call("find_user_id_by_email", "c1", email=EMAIL),
        call("get_user_details", "c2", user_id=USER),
        call("cancel_pending_order", "c3", order_id=pending, reason="no longer needed"),
        ModelResponse(text="Please confirm the cancellation on the card."),
    )
    assert results(ticket, "cancel_pending_order")[0].payload["guard"] == "confirmation"
    assert not HeldAction.objects.filter(ticket=ticket).exists()
    # The customer confirms the card; the class's rule still holds the confirmed call for staff.
    [card] = customer_confirms(ticket)
    held = HeldAction.objects.get(ticket=ticket)
    assert card.outcome == "held" and held.call_id == "c3-confirmed"
    assert (
        held.tool == "cancel_pending_order"
        and results(ticket, "cancel_pending_order")[-1].payload["guard"] == "approval"
    )
    assert store_order(retail_server, pending)["status"] == "pending"
    staff = get_user_model().objects.create_user("ann", password="pw", is_staff=True)
    held_action_decide(held_id=held.pk, ticket=ticket, approve=True, user=staff, wake=False)
    held.refresh_from_db()
    assert held.status == HeldAction.Status.EXECUTED
    assert store_order(retail_server, pending)["status"] == "cancelled"
    assert ActionTaken.objects.get(ticket=ticket).target == pending


def test_the_servers_declared_cancellation_is_a_card_that_runs_once_when_confirmed(ticket, retail_server):
    """cancel_pending_order declares "consent": "cancel" (and "reversible": false) in the server's file: an
    obedient model's cancellation becomes a card written from the file's declarations, runs only when the
    customer confirms that card, and once: an equal call later is held as a repeat of the done action."""
    lamp = "#W9300146"  # the customer's one pending order: a desk lamp, 153.23 USD from their gift card
    customer_message_post(
        ticket=ticket,
        wake=False,
        text=f"Hi, I'm Aarav ({EMAIL}). Where is my desk lamp, order {lamp}? It has not shipped yet.",
    )
    run(
        ticket,
        call("find_user_id_by_email", "c1", email=EMAIL),
        call("get_user_details", "c2", user_id=USER),
        call("get_order_details", "c3", order_id=lamp),
        call("cancel_pending_order", "k1", order_id=lamp, reason="ordered by mistake"),  # nobody asked
        ModelResponse(text="Your lamp has not shipped yet."),
    )
    unasked = results(ticket, "cancel_pending_order")[-1]
    assert unasked.payload["guard"] == "confirmation" and json.loads(unasked.text)["awaiting_customer_confirmation"]
    first = Confirmation.objects.get(pk=unasked.payload["confirmation"])
    # Written from the file's declarations and the lanes: the order, what it is, the refund it moves.
    assert (first.card["title"], first.card["amount"], first.card["why"]) == (
        f"Cancel order {lamp}",
        "153.23 USD",
        "it moves money",
    )
    assert first.card["entities"] == [{"label": "Order", "id": lamp, "description": "Desk Lamp"}]
    assert store_order(retail_server, lamp)["status"] == "pending"

    # The customer's words alone run nothing: the model's new call is a new card, which retires the old one.
    customer_message_post(ticket=ticket, wake=False, text=f"Actually, please cancel order {lamp}, I no longer need it.")
    run(
        ticket,
        call("cancel_pending_order", "k2", order_id=lamp, reason="no longer needed"),
        ModelResponse(text="Please confirm the cancellation on the card."),
    )
    assert Confirmation.objects.get(pk=first.pk).status == Confirmation.Status.SUPERSEDED
    assert store_order(retail_server, lamp)["status"] == "pending"
    [card] = customer_confirms(ticket)
    assert (card.call_id, card.outcome) == ("k2", "executed")
    assert results(ticket, "cancel_pending_order")[-1].payload["ok"] is True
    assert store_order(retail_server, lamp)["status"] == "cancelled"
    assert ActionTaken.objects.get(ticket=ticket).target == lamp

    # A status question later, and the model cancels again: the very call confirmed reads as done (its
    # card's record); in other words, the done action (its target read from the server's declaration)
    # holds the repeat for staff; no card, nothing sent.
    customer_message_post(ticket=ticket, wake=False, text=f"Thanks! Is everything with {lamp} sorted now?")
    run(
        ticket,
        call("cancel_pending_order", "k3", order_id=lamp, reason="no longer needed"),
        call("cancel_pending_order", "k4", order_id=lamp, reason="not needed any more"),
        ModelResponse(text="Yes, it is cancelled."),
    )
    same = Turn.objects.get(ticket=ticket, kind=Turn.Kind.TOOL_RESULT, payload__call_id="k3")
    assert same.payload["answered"] == "done" and f"Cancel order {lamp} is done" in same.text, same.text
    again = results(ticket, "cancel_pending_order")[-1]
    assert again.payload["guard"] == "repeat", again.text
    assert f"already done for {lamp}" in json.loads(again.text)["reason"]
    assert not Confirmation.objects.filter(ticket=ticket, status=Confirmation.Status.PENDING).exists()
    assert ActionTaken.objects.filter(ticket=ticket).count() == 1
    assert HeldAction.objects.filter(ticket=ticket, status=HeldAction.Status.PENDING).count() == 1

    # The summariser's claim check reads the same declarations: "cancelled the order" is supported.
    staff = get_user_model().objects.create_user("ann", password="pw", is_staff=True)
    for held in HeldAction.objects.filter(ticket=ticket):  # compaction waits while a hold is pending
        held_action_decide(held_id=held.pk, ticket=ticket, approve=False, user=staff, wake=False)
    compact(ticket)
    ctx = summariser.ValidationContext.from_dict(CompactionRun.objects.get(ticket=ticket).validation_context)
    assert ctx.capabilities == {"cancel_pending_order": ["cancels"]}
    claim = summariser.SummaryFields(
        decisions=[],
        actions_taken=["Cancelled the order."],
        constraints_not_pinned=[],
        open_questions=[],
        narrative="About a lamp.",
    )
    assert summariser.unsupported_claims(claim, set(ctx.actions), None, ctx.capabilities) == []
    assert summariser.unsupported_claims(claim, set(ctx.actions), None)  # by the class's domain: unsupported


def test_compaction_counts_the_tool_schemas_the_model_is_sent(ticket, retail_server):
    """The request compaction measures (and records) is the one a step sends: the server's tools
    and prompt, not the class's in-process domain's."""
    TicketClass.objects.filter(pk=ticket.ticket_class_id).update(recent_turns_kept=2)
    ticket.ticket_class.refresh_from_db()
    customer_message_post(ticket=ticket, wake=False, text=f"My email is {EMAIL}. Where is my order {ORDER}?")
    model = run(
        ticket,
        call("find_user_id_by_email", "c1", email=EMAIL),
        call("get_order_details", "c2", order_id=ORDER),
        ModelResponse(text="It was delivered."),
    )
    sent = [t.model_dump() for t in model.requests[-1].tools]
    assert "get_order_details" in {t["name"] for t in sent}
    compact(ticket)
    done = CompactionRun.objects.get(ticket=ticket)
    for request in (done.request_before, done.request_after):
        assert request["tools"] == sent
        assert "Authenticate the customer first" in request["messages"][0]["content"]  # the file's prompt
    # tokens_before and tokens_after (and the trigger's figure) are counted from these same assembled requests.
