"""The plain-SQL helpers the agent step's hot path uses (sundry.core.sql)."""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.db import IntegrityError, connection, transaction
from django.test.utils import CaptureQueriesContext

from sundry.agent.models import AgentStep
from sundry.core import sql
from sundry.tickets.models import Ticket, Turn
from sundry.tickets.services import ticket_create, turn_append
from tests.factories import CustomerFactory, TicketClassFactory
from tests.pgtrace import wire

pytestmark = pytest.mark.django_db

on_postgresql = pytest.mark.skipif(connection.vendor != "postgresql",
                                   reason="pipelines, prepared statements and commits that skip the disk wait are PostgreSQL's")


@pytest.fixture
def ticket():
    return ticket_create(customer=CustomerFactory(), ticket_class=TicketClassFactory(), subject="Plain SQL")


def test_run_returns_each_statements_rows_in_order_and_none_for_writes(ticket):
    t, c = sql.table(Ticket), sql.column
    results = sql.run([
        (f"SELECT {c(Ticket, 'subject')} FROM {t} WHERE {c(Ticket, 'id')} = %s", [ticket.pk]),
        (f"UPDATE {t} SET {c(Ticket, 'attention')} = %s WHERE {c(Ticket, 'id')} = %s", ["Look", ticket.pk]),
        (f"SELECT {c(Ticket, 'attention')} FROM {t} WHERE {c(Ticket, 'id')} = %s", [ticket.pk]),
        (f"SELECT {c(Ticket, 'id')} FROM {t} WHERE {c(Ticket, 'id')} = %s", [ticket.pk + 999]),
    ])
    assert results == [[("Plain SQL",)], None, [("Look",)], []]


@on_postgresql
def test_a_group_of_statements_is_one_round_trip_and_one_query_log_entry(ticket):
    t, c = sql.table(Ticket), sql.column
    group = [(f"SELECT {n} + %s", [n]) for n in range(5)]
    group.append((f"UPDATE {t} SET {c(Ticket, 'attention')} = %s WHERE {c(Ticket, 'id')} = %s", ["Look", ticket.pk]))
    with CaptureQueriesContext(connection) as queries, wire(connection) as sent:
        results = sql.run(group)
    assert results == [[(2 * n,)] for n in range(5)] + [None]
    assert sent.round_trips == 1 and len(queries) == 1
    with wire(connection) as sent:  # the same, one statement at a time
        for statement in group:
            sql.run([statement])
    assert sent.round_trips == len(group)


@on_postgresql
def test_statements_sent_often_are_parsed_once_then_run_prepared(ticket):
    group = [(f"SELECT {sql.column(Ticket, 'version')} FROM {sql.table(Ticket)} WHERE id = %s", [ticket.pk]),
             ("SELECT %s::int * 2", [21])]
    threshold = connection.connection.prepare_threshold
    assert threshold is not None  # settings turn it on for PostgreSQL
    for _ in range(threshold + 1):
        sql.run(group)
    with wire(connection) as sent:
        assert sql.run(group)[1] == [(42,)]
    assert sent.sent("Bind") and not sent.sent("Parse")  # bound to statements prepared earlier


@on_postgresql
def test_a_failing_statement_fails_its_group_as_django_errors_and_leaves_nothing_behind(ticket):
    t, c = sql.table(Ticket), sql.column
    with pytest.raises(IntegrityError), transaction.atomic():
        sql.run([(f"UPDATE {t} SET {c(Ticket, 'attention')} = %s WHERE {c(Ticket, 'id')} = %s", ["Changed", ticket.pk]),
                 (f"UPDATE {t} SET {c(Ticket, 'subject')} = NULL WHERE {c(Ticket, 'id')} = %s",
                  [ticket.pk])])  # a NOT NULL violation
    assert Ticket.objects.get(pk=ticket.pk).attention == ""
    assert sql.run([("SELECT 1", [])]) == [[(1,)]]


def test_execute_wrappers_see_each_group_once_with_its_statements_and_parameters(ticket):
    seen = []

    def wrapper(execute, sql_text, params, many, context):
        seen.append((sql_text, list(params), context["connection"].alias))
        return execute(sql_text, params, many, context)

    with connection.execute_wrapper(wrapper):
        assert sql.run([("SELECT %s", [1]), ("SELECT %s", [2])]) == [[(1,)], [(2,)]]
    if connection.vendor == "postgresql":  # one group, one round trip
        assert seen == [("SELECT %s; SELECT %s", [1, 2], "default")]
    else:  # one by one, through Django's own cursor
        assert seen == [("SELECT %s", [1], "default"), ("SELECT %s", [2], "default")]


def test_insert_instance_saves_what_the_orm_would(ticket):
    step = sql.insert_instance(AgentStep(ticket=ticket, number=7, model="m", request_tokens=10,
                                         lane_tokens={"lanes": {"rules": 3}}, cost_usd=Decimal("0.001250"),
                                         outcome=AgentStep.Outcome.REPLY))
    assert step.pk and not step._state.adding
    stored = AgentStep.objects.get(pk=step.pk)
    assert (stored.lane_tokens, stored.cost_usd, stored.number) == ({"lanes": {"rules": 3}}, Decimal("0.001250"), 7)
    assert stored.created_at is not None  # auto_now_add, as save() would set it


def test_turn_append_numbers_from_the_counter_in_one_statement_group(ticket):
    first = turn_append(ticket=ticket, author=Turn.Author.CUSTOMER, text="Where is SU-10480?")
    second = turn_append(ticket=ticket, author=Turn.Author.AGENT, text="On its way.", payload={"k": [1]})
    assert (first.number, second.number) == (1, 2)
    row = Ticket.objects.get(pk=ticket.pk)
    assert row.last_turn_number == 2 and row.version == ticket.version
    stored = Turn.objects.get(pk=second.pk)
    assert (stored.number, stored.payload, stored.tokens) == (2, {"k": [1]}, second.tokens) and stored.tokens > 0


@on_postgresql
@pytest.mark.django_db(transaction=True)  # outside a test transaction: as the worker runs it
def test_a_lease_write_skips_the_disk_wait_only_for_its_own_group(ticket):
    setting = "SELECT current_setting('synchronous_commit')"
    assert sql.run([(setting, [])], durable=False) == [[("off",)]]
    assert sql.run([(setting, [])]) == [[("on",)]]  # back on for the next group
    with transaction.atomic():  # inside a transaction it would cover the whole transaction: never
        assert sql.run([(setting, [])], durable=False) == [[("on",)]]
