"""The PostgreSQL backend that sends BEGIN and savepoints with the next statement (sundry.core.postgresql).

Each test runs outside a test-case transaction (transaction=True), as the
worker does, so what is sent is exactly what production sends; round trips are
counted from libpq's own protocol trace.
"""

from __future__ import annotations

import psycopg
import pytest
from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.db.transaction import TransactionManagementError

from sundry.core import sql
from sundry.tickets.models import Ticket
from sundry.tickets.services import ticket_create
from tests.factories import CustomerFactory, TicketClassFactory
from tests.pgtrace import wire

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(connection.vendor != "postgresql", reason="the backend is PostgreSQL's"),
]


@pytest.fixture
def ticket():
    return ticket_create(customer=CustomerFactory(), ticket_class=TicketClassFactory(), subject="Backend")


def attention(ticket_id: int) -> str:
    """Read from a connection of its own: what others see, committed only."""
    db = settings.DATABASES["default"]
    with psycopg.connect(host=db["HOST"], port=db["PORT"] or 5432, user=db["USER"], dbname=connection.settings_dict["NAME"],
                         autocommit=True) as other:
        return other.execute(f"SELECT attention FROM {sql.table(Ticket)} WHERE id = %s", [ticket_id]).fetchone()[0]


def set_attention(ticket_id: int, text: str):
    return (f"UPDATE {sql.table(Ticket)} SET attention = %s WHERE id = %s", [text, ticket_id])


def test_the_settings_use_this_backend():
    assert settings.DATABASES["default"]["ENGINE"] == "sundry.core.postgresql"


def test_a_transaction_that_runs_nothing_sends_nothing(ticket):
    connection.ensure_connection()
    with wire(connection) as sent:
        with transaction.atomic():
            with transaction.atomic():
                pass
    assert sent.round_trips == 0


def test_begin_and_a_savepoint_go_with_the_group_that_follows(ticket):
    connection.ensure_connection()
    with wire(connection) as sent:
        with transaction.atomic():
            sql.run([set_attention(ticket.pk, "one")])
            with transaction.atomic():
                sql.run([set_attention(ticket.pk, "two")])
            sql.run([set_attention(ticket.pk, "three")])
    controls = [s.split()[0] for s in sent.statements() if s.split()[0] in ("BEGIN", "SAVEPOINT", "RELEASE", "COMMIT")]
    assert controls == ["BEGIN", "SAVEPOINT", "RELEASE", "COMMIT"]
    # BEGIN with the first group, SAVEPOINT with the second, RELEASE with the third, then COMMIT.
    assert sent.round_trips == 4
    assert attention(ticket.pk) == "three"


def test_a_rolled_back_transaction_leaves_nothing_even_with_begin_sent_in_a_pipeline(ticket):
    with pytest.raises(RuntimeError), transaction.atomic():
        sql.run([set_attention(ticket.pk, "gone")])
        Ticket.objects.filter(pk=ticket.pk).update(subject="gone too")
        raise RuntimeError
    ticket.refresh_from_db()
    assert ticket.attention == "" and ticket.subject == "Backend"
    assert attention(ticket.pk) == ""


def test_a_failed_savepoint_rolls_back_only_its_own_work(ticket):
    with transaction.atomic():
        sql.run([set_attention(ticket.pk, "kept")])
        with pytest.raises(IntegrityError), transaction.atomic():
            Ticket.objects.filter(pk=ticket.pk).update(subject="undone")
            Ticket.objects.create(pk=ticket.pk, customer=ticket.customer, ticket_class=ticket.ticket_class, subject="dup")
        # The transaction goes on after the savepoint's rollback.
        sql.run([set_attention(ticket.pk, "kept, and more")])
    ticket.refresh_from_db()
    assert (ticket.attention, ticket.subject) == ("kept, and more", "Backend")


def test_a_savepoint_rolled_back_before_anything_ran_costs_nothing_and_undoes_nothing(ticket):
    connection.ensure_connection()
    with transaction.atomic():
        sql.run([set_attention(ticket.pk, "before")])
        with wire(connection) as sent:
            with pytest.raises(ValueError), transaction.atomic():
                raise ValueError
        assert sent.round_trips == 0
    assert attention(ticket.pk) == "before"


def test_orm_queries_send_what_is_pending_first_and_run_inside_the_transaction(ticket):
    with transaction.atomic():
        Ticket.objects.filter(pk=ticket.pk).update(attention="inside")
        # Seen by this transaction (named cursor: iterator), not yet by anyone else.
        assert [t.attention for t in Ticket.objects.filter(pk=ticket.pk).iterator(chunk_size=10)] == ["inside"]
        assert attention(ticket.pk) == ""
    assert attention(ticket.pk) == "inside"


def test_a_group_marked_last_carries_the_commit_and_the_hooks_still_run(ticket):
    connection.ensure_connection()
    ran = []
    with wire(connection) as sent:
        with transaction.atomic():
            transaction.on_commit(lambda: ran.append("hook"))
            sql.run([set_attention(ticket.pk, "early")], commit=True)
            assert attention(ticket.pk) == "early"  # committed before the block ends
            assert ran == []
    assert ran == ["hook"]
    assert sent.round_trips == 1  # BEGIN, the group and COMMIT together; nothing at the block's end


def test_nothing_may_run_after_the_group_that_committed(ticket):
    with pytest.raises(TransactionManagementError), transaction.atomic():
        sql.run([set_attention(ticket.pk, "early")], commit=True)
        Ticket.objects.filter(pk=ticket.pk).update(subject="late")
    ticket.refresh_from_db()
    assert (ticket.attention, ticket.subject) == ("early", "Backend")
    # The connection is usable afterwards.
    with transaction.atomic():
        sql.run([set_attention(ticket.pk, "again")], commit=True)
    assert attention(ticket.pk) == "again"


def test_a_group_marked_last_inside_a_nested_block_leaves_the_commit_to_the_outer_one(ticket):
    with pytest.raises(RuntimeError), transaction.atomic():
        with transaction.atomic():
            sql.run([set_attention(ticket.pk, "not yet")], commit=True)
        with transaction.atomic(savepoint=False):
            sql.run([set_attention(ticket.pk, "nor this")], commit=True)
        raise RuntimeError  # the outer block rolls all of it back
    assert attention(ticket.pk) == ""


def test_a_failing_commit_group_rolls_back_and_leaves_the_connection_usable(ticket):
    with pytest.raises(IntegrityError), transaction.atomic():
        sql.run([set_attention(ticket.pk, "lost")])
        sql.run([(f"INSERT INTO {sql.table(Ticket)} (id) VALUES (%s)", [ticket.pk])], commit=True)
    assert attention(ticket.pk) == ""
    with transaction.atomic():
        sql.run([set_attention(ticket.pk, "fine")], commit=True)
    assert attention(ticket.pk) == "fine"


# --- deferred writes (core.sql.defer) ---------------------------------------------------------


def test_a_deferred_write_goes_with_the_next_group_and_is_seen_by_it(ticket):
    connection.ensure_connection()
    with wire(connection) as sent:
        with transaction.atomic():
            sql.defer([set_attention(ticket.pk, "deferred")])
            [[(seen,)]] = sql.run([(f"SELECT attention FROM {sql.table(Ticket)} WHERE id = %s", [ticket.pk])])
            assert seen == "deferred"
            assert Ticket.objects.get(pk=ticket.pk).attention == "deferred"  # ORM reads see it too
    assert sent.round_trips == 3  # BEGIN + the write + the read; the ORM read; COMMIT
    assert attention(ticket.pk) == "deferred"


def test_a_deferred_write_with_nothing_after_it_goes_with_the_commit(ticket):
    connection.ensure_connection()
    with wire(connection) as sent:
        with transaction.atomic():
            sql.defer([set_attention(ticket.pk, "at commit")])
    assert sent.round_trips == 1
    assert attention(ticket.pk) == "at commit"


def test_deferred_writes_never_sent_are_dropped_by_a_rollback(ticket):
    with pytest.raises(RuntimeError), transaction.atomic():
        sql.defer([set_attention(ticket.pk, "never")])
        raise RuntimeError
    assert attention(ticket.pk) == ""
    with transaction.atomic():
        sql.run([set_attention(ticket.pk, "outer")])
        with pytest.raises(RuntimeError), transaction.atomic():  # its SAVEPOINT was never sent
            sql.defer([set_attention(ticket.pk, "inner, unsent")])
            raise RuntimeError
        with pytest.raises(RuntimeError), transaction.atomic():  # its SAVEPOINT was sent
            sql.run([(f"SELECT 1 FROM {sql.table(Ticket)} WHERE id = %s", [ticket.pk])])
            sql.defer([set_attention(ticket.pk, "inner, after the savepoint went out")])
            raise RuntimeError
    assert attention(ticket.pk) == "outer"


def test_a_deferred_write_that_fails_fails_its_transaction_where_it_is_sent(ticket):
    with pytest.raises(IntegrityError), transaction.atomic():
        sql.run([set_attention(ticket.pk, "lost")])
        sql.defer([(f"INSERT INTO {sql.table(Ticket)} (id) VALUES (%s)", [ticket.pk])])
        sql.run([set_attention(ticket.pk, "lost too")])
    assert attention(ticket.pk) == ""


def test_outside_a_transaction_a_deferred_write_runs_at_once(ticket):
    sql.defer([set_attention(ticket.pk, "now")])
    assert attention(ticket.pk) == "now"


def test_the_wire_opens_a_transaction_itself_on_a_connection_not_in_autocommit(ticket):
    """What psycopg would do for a cursor: a driver connection outside autocommit gets its BEGIN."""
    from sundry.core.pgwire import wire

    db = settings.DATABASES["default"]
    with psycopg.connect(host=db["HOST"], port=db["PORT"] or 5432, user=db["USER"],
                         dbname=connection.settings_dict["NAME"], autocommit=False) as other:
        assert wire(other).run([set_attention(ticket.pk, "in a transaction"),
                                (f"SELECT attention FROM {sql.table(Ticket)} WHERE id = %s", [ticket.pk])]) == [
            None, [("in a transaction",)]]
        assert other.info.transaction_status == psycopg.pq.TransactionStatus.INTRANS
        assert attention(ticket.pk) == ""  # not committed
        other.rollback()
    assert attention(ticket.pk) == ""


def test_a_value_that_cannot_be_sent_fails_its_group_and_leaves_the_connection_usable(ticket):
    class Opaque:
        pass

    with pytest.raises(Exception, match="(?i)adapt"), transaction.atomic():
        sql.run([set_attention(ticket.pk, "sent first"), (f"SELECT %s", [Opaque()])])
    assert attention(ticket.pk) == ""  # the group's first statement went nowhere
    assert sql.run([(f"SELECT attention FROM {sql.table(Ticket)} WHERE id = %s", [ticket.pk])]) == [[("",)]]
