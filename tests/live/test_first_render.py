"""A ticket's first render reads what several panels show once, and shows the same HTML as each
panel read on its own.

The socket's render (`panels.render_current`) reads the ticket with what its head shows (its
response timer, rating, tags and the colleagues to assign it to), and the ledger's entries once
for the conversation and the ledger panel. Each panel rendered on
its own from a plainly read ticket (as the page's fragments are) takes the reads the panels made
before; the ledger panel's context is also built here as it was before (an active read, a count).
"""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.template.loader import render_to_string
from django.test.utils import CaptureQueriesContext

from sundry.agent.models import HeldAction
from sundry.context import services as lanes
from sundry.context.models import LedgerEntry, PinnedRule
from sundry.desk.lifecycle import ticket_create, ticket_set_status
from sundry.desk.panels import STAFF_PANELS
from sundry.live import panels
from sundry.live.panels import CUSTOMER, STAFF, Viewer, render_panel
from sundry.portal.panels import CUSTOMER_PANELS
from sundry.tickets.models import Rating, Tag, Ticket
from sundry.tickets.services import turn_append
from tests.factories import CustomerFactory, TicketClassFactory, paid_order

pytestmark = pytest.mark.django_db


@pytest.fixture
def tickets():
    users = get_user_model().objects
    staff = users.create_user("sam", password="x", is_staff=True, first_name="Sam")
    users.create_user("kim", password="x", is_staff=True, first_name="Kim")
    owner = users.create_user("alice", password="x")
    shopper = CustomerFactory(user=owner)
    paid_order(customer=shopper, number="SU-10001")
    customer = shopper.person
    tclass = TicketClassFactory()
    open_one = ticket_create(customer=customer, ticket_class=tclass, subject="Where is my kettle?")
    for n, (author, text) in enumerate(
        [("customer", "My order SU-10001 never came."), ("agent", "Let me look."), ("customer", "Any news?")], 1
    ):
        turn_append(ticket=open_one, author=author, text=text)
    open_one.tags.add(Tag.objects.create(name="damaged"), Tag.objects.create(name="vip"))
    entry = dict(ticket=open_one, kind="order", first_seen_turn=1, last_used_turn=2, description="Kettle order")
    LedgerEntry.objects.create(role="order", value="SU-10001", **entry)
    LedgerEntry.objects.create(role="order_old", value="SU-09999", status="archived", **entry)
    LedgerEntry.objects.create(
        role="reorder",
        value="SU-10002",
        superseded_by_user=staff,
        superseded_by="SU-10003",
        **{**entry, "first_seen_turn": 0},
    )
    PinnedRule.objects.create(ticket=open_one, text="Refunds to the card only.", turn=1, source="customer")
    for name, value in (("order_number", "SU-10001"), ("refund_method", "store credit")):
        lanes.state_set(ticket=open_one, name=name, value=value, turn=1, source="staff", confirmed=True)
    HeldAction.objects.create(
        ticket=open_one,
        tool="issue_refund",
        call_id="c1",
        reason="held",
        turn=3,
        idempotency_key="first-render-held",
        arguments={"order_number": "SU-10001", "amount": "10.00", "currency": "USD"},
    )
    rated = ticket_create(customer=customer, ticket_class=tclass, subject="Kettle replaced")
    turn_append(ticket=rated, author="customer", text="Thanks!")
    ticket_set_status(ticket=rated, status="resolved", user=staff)
    Rating.objects.create(ticket=rated, score=4, comment="Quick.", credited="staff", credited_staff=staff)
    return {"staff": staff, "owner": owner, "customer": customer, "tickets": [open_one, rated]}


def panels_sharing():
    """What the panels of one rendering share (holds, summary, runs) shared here too, so the
    difference counted is the ledger, timer and rating alone."""
    from contextlib import contextmanager

    @contextmanager
    def sharing():
        token = panels._SHARED_READS.set({})
        try:
            yield
        finally:
            panels._SHARED_READS.reset(token)

    return sharing()


def _plain(ticket):
    return Ticket.objects.select_related("customer", "ticket_class", "assigned_to").get(pk=ticket.pk)


def _ledger_as_before(ticket, viewer):
    entries = LedgerEntry.objects.filter(ticket=ticket)
    active = list(
        entries.filter(status="active").select_related("superseded_by_user").order_by("first_seen_turn", "id")
    )
    ours = {e.value for e in active if e.identifies_customer}
    for e in active:
        e.someone_else = bool(e.customer) and e.customer not in ours and e.customer != e.value
    context = {"ticket": ticket, "viewer": viewer, "panel_id": "panel-ledger", "window": panels.window()}
    return render_to_string(
        "desk/panels/ledger.html",
        {**context, "ledger": active, "archived_count": entries.filter(status="archived").count()},
    )


def test_the_first_render_shows_what_each_panel_read_on_its_own_shows(tickets):
    staff = Viewer(tickets["staff"], STAFF)
    customer = Viewer(tickets["owner"], CUSTOMER, tickets["customer"])
    for ticket in tickets["tickets"]:
        panels.CACHE.clear()
        rendered = panels.render_current((ticket, staff))
        panels.CACHE.clear()
        alone = {name: render_panel(panel, _plain(ticket), staff) for name, panel in STAFF_PANELS.items()}
        assert rendered == alone
        assert rendered["ledger"] == _ledger_as_before(_plain(ticket), staff)
        panels.CACHE.clear()
        rendered = panels.render_current((ticket, customer))
        panels.CACHE.clear()
        assert rendered == {name: render_panel(p, _plain(ticket), customer) for name, p in CUSTOMER_PANELS.items()}
    # What the shared reads show is on the page: the rendering is not vacuously equal.
    panels.CACHE.clear()
    shown = panels.render_current((tickets["tickets"][0], staff))
    assert "SU-10001" in shown["ledger"] and "SU-09999" not in shown["ledger"] and "damaged" in shown["head"]
    assert shown["ledger"].index("SU-10002") < shown["ledger"].index("SU-10001")  # first seen first
    assert "Quick." in panels.render_current((tickets["tickets"][1], staff))["head"]
    panels.CACHE.clear()
    mine = panels.render_current((tickets["tickets"][0], customer))
    assert "SU-10001" in mine["details"] and "SU-10001" in mine["orders"]
    assert "Quick." in panels.render_current((tickets["tickets"][1], customer))["rating"]


def test_a_first_desk_render_reads_the_ledger_and_the_head_with_other_reads(tickets):
    """This ticket (a hold and an order, whose cards read their own rows) takes 27 statements; the existing
    socket test bounds the plain one at 14. Negative control: the panels reading on their own
    (the ticket plain) take four more than the render: the timer, the rating, the tags and the
    colleagues."""
    staff = Viewer(tickets["staff"], STAFF)
    ticket = tickets["tickets"][0]
    panels.CACHE.clear()
    with CaptureQueriesContext(connection) as shared:
        panels.render_current((ticket, staff))
    assert len(shared) <= 27, [q["sql"][:80] for q in shared.captured_queries]
    panels.CACHE.clear()
    with CaptureQueriesContext(connection) as alone:
        plain = _plain(ticket)
        with panels_sharing():
            for panel in STAFF_PANELS.values():
                render_panel(panel, plain, staff)
    # The timer, the rating, the tags and the colleagues.
    assert len(alone) - len(shared) == 4, (len(alone), len(shared))
    # The ledger: one statement for the conversation's cards and the ledger panel (three before:
    # the cards' descriptions, the active entries, the archived count).
    ledger = [q for q in shared.captured_queries if q["sql"].startswith('SELECT "context_ledgerentry"')]
    assert len(ledger) == 1, ledger


def test_a_first_customer_render_reads_the_rating_and_confirmed_values_with_other_reads(tickets):
    """At most 11 statements for the customer's page of this ticket (a hold: 13 before); the
    existing socket test bounds the plain one at 10. Negative control:
    each panel reading on its own from the plain ticket takes two more: the rating and the
    confirmed values the order picker reads again."""
    customer = Viewer(tickets["owner"], CUSTOMER, tickets["customer"])
    ticket = tickets["tickets"][0]
    panels.CACHE.clear()
    with CaptureQueriesContext(connection) as shared:
        panels.render_current((ticket, customer))
    assert len(shared) <= 11, [q["sql"][:80] for q in shared.captured_queries]
    panels.CACHE.clear()
    with CaptureQueriesContext(connection) as alone:
        plain = _plain(ticket)
        for panel in CUSTOMER_PANELS.values():
            render_panel(panel, plain, customer)
    assert len(alone) - len(shared) == 2, (len(alone), len(shared))


def test_what_a_rendering_reads_with_the_ticket_leaves_the_other_panels_digests_alone(tickets):
    """The ticket's timer, rating, tags and colleagues are in the head's own context (and the
    rating in the customer's rating panel's): the ticket row every panel is given digests as a
    plainly read one does, so a customer's message (which moves the timer) does not re-render
    every panel. Control: the ticket read so does digest differently when they are not left out."""
    from sundry.live import fingerprint
    from sundry.live.panels import AUDIENCES

    reads = Ticket.objects.select_related("customer", "ticket_class", "assigned_to")
    for ticket in tickets["tickets"]:
        for viewer in (Viewer(tickets["staff"], STAFF), Viewer(tickets["owner"], CUSTOMER, tickets["customer"])):
            rich = AUDIENCES[viewer.audience].reach(reads.filter(pk=ticket.pk), viewer).get()
            assert fingerprint.fingerprint({"ticket": rich}) == fingerprint.fingerprint({"ticket": _plain(ticket)})
            kept = fingerprint.VOLATILE["tickets.ticket"]
            fingerprint.VOLATILE["tickets.ticket"] = {"version", "last_turn_number", "updated_at"}
            try:
                assert fingerprint.fingerprint({"ticket": rich}) != fingerprint.fingerprint({"ticket": _plain(ticket)})
            finally:
                fingerprint.VOLATILE["tickets.ticket"] = kept
