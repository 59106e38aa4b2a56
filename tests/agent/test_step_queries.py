"""How many database round trips a step costs, held so it cannot creep back (issue 28: a step on
the common path in at most ten).

Counted on a transactional database, as a worker runs: the step's transaction is a real
BEGIN … COMMIT, not a savepoint inside the test's, and its after-commit push runs.
`tests/querystages.py` names the module that sent each statement when a bound fails.
"""

from __future__ import annotations

import pytest
from django.db import connection

from sundry.agent import calibration, loop
from sundry.agent.loop import agent_run
from sundry.agent.provider.gateway import CallLimits, Gateway
from sundry.agent.provider.scripted import ScriptedModel
from sundry.agent.services import customer_message_post
from sundry.context import selectors
from sundry.context.selectors import lane_snapshot
from sundry.desk.lifecycle import ticket_create
from sundry.tickets.models import Ticket
from sundry.tooling.messages import ModelResponse, ToolCall
from tests.agent.test_gateway import no_internet  # noqa: F401  (a fixture)
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


def run_counting_steps(ticket, responses, monkeypatch, *, gateway=None):
    """Run the agent over `responses` (scripted; or the `gateway`'s model, taking `responses` steps: a
    count); the whole run's count and each step's own."""
    marks, real_step = [], loop.agent_step

    def marked(*args, **kwargs):
        start = len(counted.statements), counted.commits
        try:
            return real_step(*args, **kwargs)
        finally:
            marks.append((start, (len(counted.statements), counted.commits)))

    monkeypatch.setattr(loop, "agent_step", marked)
    if gateway is None:
        gateway, responses = Gateway(override=ScriptedModel(responses)), len(responses)
    with count_queries() as counted:
        assert agent_run(ticket.pk, gateway=gateway) == responses
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


def test_a_plain_reply_run_takes_four_statements(ticket, monkeypatch):
    """Claim with the load of what awaits (and the customer's notice preference, `loop.LOAD_ALSO`) in
    one round trip (`claims.claim_and_read`), lanes with the claims check's cards and holds, the reply in
    one statement — the bump with the claim check, the turn and the step's record (`step._reply_at_once`),
    no transaction round it —, let go with the outbox settled: 4 statements, 4 round trips; the step
    after the model's answer, one.
    Negative controls: with the claim and the load sent apart (`claims._one_trip` false) 5 and 5; with
    the reply's turn and the step's record written apart in the step's transaction (`_reply_at_once`
    returning None: the path every other step takes) 5 statements and 7 round trips, the reply step 5;
    at 801fa09 6 and 8; with the preference read apart too (6d00ccd) 7 and 9; at 21a61db 10 statements
    and 12 round trips; before that bound, 27 statements (29 round trips), as issue 28 counted."""
    counted, (step,) = run_counting_steps(ticket, [ModelResponse(text="On its way.")], monkeypatch)
    assert len(counted.statements) <= 4, counted.report()
    assert counted.round_trips <= 4, counted.report()  # no BEGIN and COMMIT: no transaction
    assert step.round_trips <= 2, step.report()  # lanes, and the reply with its record
    assert not [m for m, _ in counted.statements if m.startswith("portal/")], counted.report()
    assert not counted.matching(r"FOR UPDATE|agent_confirmation\" \w+ FROM|^\(SELECT"), counted.report()
    assert Ticket.objects.get(pk=ticket.pk).agent_wake_turn is None


def shop_reads(counted) -> int:
    return len([m for m, _ in counted.statements if m.startswith("shop/")])


def test_a_lookup_step_takes_at_most_ten_round_trips(ticket, monkeypatch):
    """The lookup step alone, beside the shop's own six reads of the order: lanes (with cards and
    holds), (BEGIN) the call's turn (its bump, the claim check), the tool's savepoint (released by
    the COMMIT), the result's turn (its bump, which the harvest's writes ride on), the ledger's
    read and its one upsert (the call's own IDs marked used in it), money, step record, (COMMIT):
    8 statements, 10 round trips.
    Negative control: at 21a61db the same step took 18 statements and 20 round trips beside the
    shop's (a separate cards-and-holds read, a locking read, each bump apart from its insert, a
    RELEASE SAVEPOINT, the harvest's own bump, a ledger touch and an update per kind of change);
    the whole run (both steps, claim to let go) 35 statements and 39 round trips with the shop's;
    before that, 30 statements for the step and 64 (68 round trips) for the run, as issue 28 counted."""
    counted, (found, replied) = run_counting_steps(ticket, [lookup(), ModelResponse(text="Found it.")], monkeypatch)
    shop = shop_reads(found)
    assert shop == 6, found.report()
    assert len(found.statements) - shop <= 8, found.report()
    assert found.round_trips - shop <= 10, found.report()  # the bound for a step
    assert not found.matching("RELEASE SAVEPOINT|FOR UPDATE"), found.report()
    ledger = [sql for m, sql in found.statements if m == "context/services.py" and "context_ledgerentry" in sql]
    assert len(ledger) == 2 and "ON CONFLICT" in ledger[1], found.report()  # its read and its upsert
    assert replied.round_trips <= 2, replied.report()  # 5 with the reply and its record apart
    assert len(counted.statements) - shop <= 13, counted.report()  # the run: both steps, claim to let go
    assert counted.round_trips - shop <= 15, counted.report()  # 15 and 19 at 801fa09


def test_a_streamed_lookup_then_reply_counts_the_records_read_beside_each_call(monkeypatch, no_internet):  # noqa: F811
    """The common path with a network model: each step's call streams, and the records its reply
    would be judged on are read beside it over the step's connection (`recordstates.Ahead`, counted
    here as `shop/records.py`). That read is one statement an order: the lookup step takes the
    scripted model's ten round trips (`test_a_lookup_step_takes_at_most_ten_round_trips`) and that
    one beside the shop's own reads, the reply step its five and that one.
    Negative control: with the order's state read a statement at a time (`_state_rows_each`, the
    reads it replaced) the run takes 41 round trips, not 27, the reply step 13, not 6, and the lookup
    step 24, not 17 (with the shop's own six reads and the lookup's turn, savepoint and harvest)."""
    from tests.agent.sse import Streamed, StreamingServer, ToolChunk

    customer = CustomerFactory()
    paid_order(customer=customer, number="SU-10480", prices=(6000, 4000))
    tclass = TicketClassFactory(approval_rules={}, working_model="openai-compatible:streamer")
    ticket = ticket_create(customer=customer.person, ticket_class=tclass, subject="Where is it")
    customer_message_post(ticket=ticket, text="Where is order SU-10480?", wake=False)

    def script(path, body):
        if not any(m["role"] == "tool" for m in body["messages"]):
            return Streamed(chunks=[ToolChunk("c1", "get_order", '{"order_number": "SU-10480"}')])
        return Streamed(chunks=["Your order SU-10480 ", "was placed and is paid."])

    server = StreamingServer(script)
    monkeypatch.setenv("SUNDRY_OPENAI_COMPAT_BASE_URL", server.url + "/v1")
    calibration.applied_factor(tclass.working_model)  # read once a minute a process: as a busy worker has it
    try:
        counted, (found, replied) = run_counting_steps(
            ticket, 2, monkeypatch, gateway=Gateway(limits=CallLimits(max_retries=0))
        )
    finally:
        server.close()
    records = [m for m, _ in counted.statements if m == "shop/records.py"]
    assert len(records) == 2, counted.report()  # one a call: the order the ticket names
    assert len(server.requests) == 2 and all(r["body"]["stream"] for r in server.requests)
    shop = len([m for m, _ in found.statements if m.startswith("shop/") and m != "shop/records.py"])
    assert found.round_trips - shop <= 11, found.report()  # the ten of the scripted model's, and the records
    assert replied.round_trips <= 3, replied.report()  # two, and the records (6 with the reply apart)
    assert Ticket.objects.get(pk=ticket.pk).last_turn_number >= 4
