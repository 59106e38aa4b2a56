"""How many database round trips a step costs, held so it cannot creep back (issue 28).

Counted on a transactional database, as a worker runs: the step's transaction is a real
BEGIN … COMMIT, not a savepoint inside the test's, and its after-commit push runs.
`tests/querystages.py` names the module that sent each statement when a bound fails.
"""

from __future__ import annotations

import pytest
from django.db import connection

from sundry.agent import loop
from sundry.agent.loop import agent_run
from sundry.agent.provider.gateway import Gateway
from sundry.agent.provider.scripted import ScriptedModel
from sundry.agent.services import customer_message_post
from sundry.context import selectors
from sundry.context.selectors import lane_snapshot
from sundry.desk.lifecycle import ticket_create
from sundry.tickets.models import Ticket
from sundry.tooling.messages import ModelResponse, ToolCall
from tests.factories import CustomerFactory, TicketClassFactory, paid_order
from tests.querystages import count_queries

POSTGRES = connection.vendor == "postgresql"

# The bounds are PostgreSQL's (the deployed database); SQLite reads the lanes one by one.
pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(not POSTGRES, reason="the counts are PostgreSQL's"),
]


@pytest.fixture
def ticket():
    customer = CustomerFactory()
    paid_order(customer=customer, number="SU-10480", prices=(6000, 4000))
    ticket = ticket_create(
        customer=customer.person, ticket_class=TicketClassFactory(approval_rules={}), subject="Where is it"
    )
    customer_message_post(ticket=ticket, text="Where is order SU-10480?", wake=False)
    return ticket


def lookup():
    return ModelResponse(tool_calls=[ToolCall(id="c1", name="get_order", arguments={"order_number": "SU-10480"})])


def run_counting_steps(ticket, responses, monkeypatch):
    """Run the agent over `responses`; the whole run's count and each step's own."""
    marks, real_step = [], loop.agent_step

    def marked(*args, **kwargs):
        start = len(counted.statements), counted.commits
        try:
            return real_step(*args, **kwargs)
        finally:
            marks.append((start, (len(counted.statements), counted.commits)))

    monkeypatch.setattr(loop, "agent_step", marked)
    with count_queries() as counted:
        assert agent_run(ticket.pk, gateway=Gateway(override=ScriptedModel(responses))) == len(responses)
    steps = [counted.slice(a, b) for a, b in marks]
    return counted, steps


def test_the_lane_snapshot_is_one_statement(ticket):
    """Negative control: the per-lane read (`_rows_each`, the old way and SQLite's) takes 8
    statements for the same snapshot and fails the bound; it is counted here beside it."""
    agent_run(ticket.pk, gateway=Gateway(override=ScriptedModel([lookup(), ModelResponse(text="Found it.")])))
    loaded = Ticket.objects.select_related("ticket_class", "customer").get(pk=ticket.pk)
    with count_queries() as one:
        snap = lane_snapshot(loaded)
    assert one.round_trips == 1, one.report()
    assert snap.turns and snap.ledger and snap.money and snap.version == loaded.version
    with count_queries() as each:
        rows = selectors._rows_each(loaded.pk, True)
    assert len(each.statements) == 8 > 3
    assert rows["ledger"] and len(rows["turns"]) == len(snap.turns)


def test_a_plain_reply_run_takes_ten_statements(ticket, monkeypatch):
    """Claim, load with what awaits, lanes, the claims check's cards and holds, (BEGIN) lock,
    turn (bump and insert), the customer's notice preference, step record, (COMMIT), let go
    with the outbox settled: 10 statements.
    Negative control: before this bound the same run took 27 statements (29 round trips), as
    issue 28 counted; restoring any one removed read (the version read after commit, the SELECT
    after a bump, the separate settle, the input check after letting go) fails it."""
    counted, (step,) = run_counting_steps(ticket, [ModelResponse(text="On its way.")], monkeypatch)
    assert len(counted.statements) <= 10, counted.report()
    assert counted.round_trips <= 12, counted.report()  # with the step's BEGIN and COMMIT
    assert step.round_trips <= 9, step.report()  # before: 20
    assert Ticket.objects.get(pk=ticket.pk).agent_wake_turn is None


def test_a_lookup_step_takes_at_most_eighteen_statements(ticket, monkeypatch):
    """The lookup step alone (lanes, cards and holds, lock, call turn, the tool in its savepoint,
    result turn, harvest with its bump, money, step record): 18 statements beside the shop's
    own six reads of the order.
    Negative control: before, the same step took 30 statements beside the shop's (three
    bumps each followed by a SELECT, an 8-statement snapshot, the push's version read); the
    whole run took 64 statements and 68 round trips with the shop's, as issue 28 counted; 39 now."""
    counted, (found, replied) = run_counting_steps(ticket, [lookup(), ModelResponse(text="Found it.")], monkeypatch)
    shop = len([m for m, _ in found.statements if m.startswith("shop/")])
    assert shop == 6, found.report()
    assert len(found.statements) - shop <= 18, found.report()
    assert replied.round_trips <= 9, replied.report()
    assert counted.round_trips - shop <= 33, counted.report()  # the run: both steps, claim to let go
