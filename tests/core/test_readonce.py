"""Reads shared by the panels of one rendering (sundry.core.readonce)."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.test.utils import CaptureQueriesContext

from sundry.core.readonce import once, shared_reads


def test_inside_a_rendering_each_key_is_read_once_and_outside_every_time():
    reads = []

    def read():
        reads.append(1)
        return len(reads)

    assert (once(("k", 1), read), once(("k", 1), read)) == (1, 2)  # no rendering: every call reads
    with shared_reads():
        assert (once(("k", 1), read), once(("k", 1), read), once(("k", 2), read)) == (3, 3, 4)
    with shared_reads():  # a new rendering reads afresh
        assert once(("k", 1), read) == 5


@pytest.mark.django_db
def test_a_staff_rendering_reads_the_rows_several_panels_show_once():
    from sundry.live import panels
    from sundry.tickets.services import ticket_create, turn_append
    from tests.factories import CustomerFactory, TicketClassFactory

    staff = get_user_model().objects.create_user("ann", password="pw", is_staff=True)
    ticket = ticket_create(customer=CustomerFactory(), ticket_class=TicketClassFactory(), subject="Shared reads")
    turn_append(ticket=ticket, author="customer", text="Hello")
    ticket, viewer = panels.viewer_for(staff, panels.STAFF, ticket.pk)
    with CaptureQueriesContext(connection) as queries:
        rendered = panels.render_all(ticket, viewer)
    tables = [q["sql"] for q in queries.captured_queries]
    for table in ("compaction_compactionrun", "agent_heldaction"):
        assert sum(f'FROM "{table}"' in sql for sql in tables) == 1, table
    assert sum('"context_summary"."is_current"' in sql for sql in tables) == 1  # the current summary, by the ORM
    assert {"head", "held", "summary", "budget", "conversation"} <= set(rendered)
