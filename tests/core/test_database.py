"""The database path is Django's own backend: it survives many open files and rolls back what it should."""

from __future__ import annotations

import contextlib
import os
import resource

import pytest
from django.contrib.auth import get_user_model
from django.db import connection, transaction
from django.db.backends.signals import connection_created
from django.test import Client

from sundry.desk.lifecycle import ticket_create
from sundry.tickets.models import Ticket, Turn
from tests.factories import CustomerFactory, TicketClassFactory

postgresql_only = pytest.mark.skipif(connection.vendor != "postgresql", reason="a PostgreSQL connection's socket")
OPEN_FILES = 1100


@contextlib.contextmanager
def many_open_files():
    """1,100 descriptors held open, so whatever opens next gets a number above 1024."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = OPEN_FILES + 512
    if soft != resource.RLIM_INFINITY and soft < wanted:
        if hard != resource.RLIM_INFINITY and hard < wanted:
            pytest.skip(f"the hard limit on open files ({hard}) is below {wanted}")
        resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
    held = [os.open(os.devnull, os.O_RDONLY) for _ in range(OPEN_FILES)]
    try:
        yield held
    finally:
        for fd in held:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


@postgresql_only
@pytest.mark.django_db(transaction=True)
def test_posting_a_message_works_with_more_than_1024_files_open():
    user = get_user_model().objects.create_user("alice", password="pw")
    # Handled by staff: the post stores, bumps and pushes, and queues no agent run.
    ticket = ticket_create(
        customer=CustomerFactory(user=user).person, ticket_class=TicketClassFactory(), subject="Where"
    )
    Ticket.objects.filter(pk=ticket.pk).update(handler=Ticket.Handler.STAFF)
    client = Client()
    client.force_login(user)
    descriptors = []

    def note_descriptor(sender, connection, **kwargs):
        descriptors.append(connection.connection.fileno())

    connection.close()  # the request connects afresh, on a descriptor above the ones held
    connection_created.connect(note_descriptor)
    try:
        with many_open_files():
            r = client.post(f"/help/tickets/{ticket.pk}/message", {"text": "Any news?"}, HTTP_HX_REQUEST="true")
    finally:
        connection_created.disconnect(note_descriptor)

    assert r.status_code == 200, r.content[:500]
    assert descriptors and min(descriptors) > 1024  # the case this test is about
    assert Turn.objects.filter(ticket=ticket, author=Turn.Author.CUSTOMER, text="Any news?").exists()


@pytest.mark.django_db(transaction=True)
def test_a_cursor_taken_before_atomic_is_rolled_back_with_the_block():
    ticket = ticket_create(customer=CustomerFactory().person, ticket_class=TicketClassFactory(), subject="As it was")
    table, subject, pk = (
        connection.ops.quote_name(n)
        for n in (Ticket._meta.db_table, Ticket._meta.get_field("subject").column, Ticket._meta.pk.column)
    )
    cursor = connection.cursor()
    try:
        with pytest.raises(RuntimeError), transaction.atomic():
            cursor.execute(f"UPDATE {table} SET {subject} = %s WHERE {pk} = %s", ["changed", ticket.pk])
            raise RuntimeError("the block fails after the write")
    finally:
        cursor.close()
    assert Ticket.objects.get(pk=ticket.pk).subject == "As it was"
