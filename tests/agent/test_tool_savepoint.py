"""A tool's own writes roll back when it fails, though its savepoint is never released.

`calls._undone_if_it_fails` runs an in-process tool under a savepoint of the step's transaction
and leaves the release to the transaction's COMMIT (one round trip fewer a call). These tests
run on a transactional database, so the step's transaction is a real BEGIN … COMMIT: a tool
that writes and then fails — by its own error, a bug, or a statement the database refuses —
leaves none of its writes, and the step still commits its turns; a tool that succeeds keeps
its writes. Negative control: with the rollback to the savepoint skipped, the first four fail
(the write stays; the refused statement leaves the step's transaction unable to commit).
"""

from __future__ import annotations

import pytest
from django.db import transaction

from sundry.agent.loop import agent_run
from sundry.agent.models import AgentStep
from sundry.agent.provider.gateway import Gateway
from sundry.agent.provider.scripted import ScriptedModel
from sundry.agent.services import customer_message_post
from sundry.desk.lifecycle import ticket_create
from sundry.shop.models import Product
from sundry.tickets.models import Turn
from sundry.tooling.messages import ModelResponse, ToolCall
from sundry.tooling.tools import REGISTRY, ToolError
from tests.factories import CustomerFactory, TicketClassFactory, paid_order

pytestmark = pytest.mark.django_db(transaction=True)

RENAMED = "Renamed by the failing tool"


@pytest.fixture
def case():
    customer = CustomerFactory()
    order = paid_order(customer=customer, number="SU-10480", prices=(6000,))
    product = Product.objects.get(pk=order.items.get().product_id)
    ticket = ticket_create(customer=customer.person, ticket_class=TicketClassFactory(approval_rules={}), subject="Hi")
    customer_message_post(ticket=ticket, text="Where is order SU-10480?", wake=False)
    return {"ticket": ticket, "product": product}


def run_with(case, monkeypatch, tool_run):
    """One lookup whose tool is `tool_run`, then a reply; the product's name and the call's result turn after."""
    real = REGISTRY["get_order"].run
    monkeypatch.setattr(REGISTRY["get_order"], "run", lambda ctx, args: tool_run(ctx, args, real))
    call = ModelResponse(tool_calls=[ToolCall(id="c1", name="get_order", arguments={"order_number": "SU-10480"})])
    assert agent_run(case["ticket"].pk, gateway=Gateway(override=ScriptedModel([call, ModelResponse(text="Ok.")])))
    after = Turn.objects.filter(ticket=case["ticket"]).order_by("number")
    answered = after.filter(payload__call_id="c1").exclude(kind=Turn.Kind.TOOL_CALL).get()
    assert after.last().text == "Ok."  # the step after it committed its reply
    assert AgentStep.objects.filter(ticket=case["ticket"]).count() == 2
    return Product.objects.get(pk=case["product"].pk).name, answered


def rename(product):
    Product.objects.filter(pk=product.pk).update(name=RENAMED)


def test_a_tool_that_raises_its_error_after_writing_leaves_no_write(case, monkeypatch):
    def tool(ctx, args, real):
        rename(case["product"])
        raise ToolError("the order service said no")

    name, answered = run_with(case, monkeypatch, tool)
    assert name != RENAMED
    assert answered.kind == Turn.Kind.TOOL_RESULT and answered.payload["ok"] is False


def test_a_tool_that_breaks_after_writing_leaves_no_write(case, monkeypatch):
    def tool(ctx, args, real):
        rename(case["product"])
        raise RuntimeError("a bug in the tool")

    name, answered = run_with(case, monkeypatch, tool)
    assert name != RENAMED
    assert answered.kind == Turn.Kind.ERROR and answered.payload["quarantined"] is True


def test_a_statement_the_database_refuses_leaves_no_write_and_the_step_commits(case, monkeypatch):
    def tool(ctx, args, real):
        rename(case["product"])
        # A duplicate SKU: PostgreSQL aborts the transaction until it rolls back to a savepoint.
        Product.objects.create(sku=case["product"].sku, name="again", price_cents=1)

    name, answered = run_with(case, monkeypatch, tool)
    assert name != RENAMED
    assert answered.kind == Turn.Kind.ERROR and "IntegrityError" in answered.text


def test_a_tool_that_swallows_a_failed_inner_transaction_leaves_no_write(case, monkeypatch):
    """As `atomic()` does: a failure caught inside the tool still marks its transaction for rollback."""

    def tool(ctx, args, real):
        rename(case["product"])
        try:
            with transaction.atomic(savepoint=False):
                Product.objects.create(sku=case["product"].sku, name="again", price_cents=1)
        except Exception:  # noqa: BLE001 — the tool's own mistake, swallowed
            pass
        return real(ctx, args)

    name, _ = run_with(case, monkeypatch, tool)
    assert name != RENAMED


def test_a_tool_that_succeeds_keeps_its_writes(case, monkeypatch):
    def tool(ctx, args, real):
        rename(case["product"])
        return real(ctx, args)

    name, answered = run_with(case, monkeypatch, tool)
    assert name == RENAMED  # the savepoint never released by itself: the COMMIT kept what it held
    assert answered.kind == Turn.Kind.TOOL_RESULT and answered.payload["ok"] is True
