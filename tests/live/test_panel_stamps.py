"""A push re-reads only the panels whose tables its writes stamped.

Every panel declares the tables it shows (`Panel.reads`); every write stamps the tables it
changed in the ticket row, in its version bump (`sundry.tickets.versions`). Shown here: each panel
reads no table it does not declare; after every write path listed by
tests/tickets/test_coherence.py the rendering made from the one before equals one made afresh, for
both audiences; and a write that changed nothing a panel shows does not read that panel again.
"""

from __future__ import annotations

import re

import pytest
from django.apps import apps
from django.db import connection
from django.test.utils import CaptureQueriesContext

from sundry.agent.services import customer_message_post, staff_note_post
from sundry.live import panels
from sundry.live.panels import CUSTOMER, STAFF, Viewer
from sundry.tickets.models import Ticket
from sundry.tickets.versions import RUNS, STEPS, TURNS
from tests.tickets import test_coherence as coherence

pytestmark = pytest.mark.django_db

world = coherence.world

# Read with the ticket row, which every rendering reads and digests (`panels.row_digest`): a change
# to any of them re-reads every panel. Users are named beside rows (who changed a value).
ROW = {"tickets.ticket", "tickets.ticketclass", "people.customer", "auth.user", "tickets.tag", "tickets.rating"}


def _allowed(panel) -> set[str]:
    allowed = set(panel.reads) | ROW
    if panel.outside:
        allowed |= coherence.NOT_WRITTEN_BY_SUNDRY | {"context.pinnedrule"}  # other tickets' rules too
    if RUNS in panel.reads:
        allowed.add(STEPS)  # a run's trigger step, joined: a step's row never changes once written
    if TURNS in panel.reads:
        allowed.add("toolservers.toolserver")  # the admin's, read with every turn
    if panel.name == "held":
        allowed.add(TURNS)  # the customer's words before a held call: turns never change once written
    return allowed


def _labels(queries) -> set[str]:
    by_table = {m._meta.db_table: m._meta.label_lower for m in apps.get_models()}
    names = set()
    for q in queries:
        names |= set(re.findall(r'(?:FROM|JOIN) "([a-z0-9_]+)"', q["sql"]))
    return {by_table[t] for t in names if t in by_table}


def _viewers(world):
    return (Viewer(world.staff, STAFF), Viewer(world.customer_user, CUSTOMER, world.customer.person))


def _render(ticket_id, viewer):
    return panels.render_current((Ticket.objects.get(pk=ticket_id), viewer))


def test_each_panel_reads_only_the_tables_it_declares(world):
    coherence._step_with_lookup(world)
    coherence._held(world)
    coherence._rule_candidate(world)
    coherence._rule_pin(world)
    coherence._action(world)
    coherence._order_pick(world)
    coherence._compacted(world)
    coherence._rated(world)
    checked = 0
    for viewer in _viewers(world):
        ticket = world.ticket
        for panel in panels.panels_of(viewer.audience).values():
            if panel.reads is None:
                continue
            with CaptureQueriesContext(connection) as q:
                panels.render_panel_parts(panel, ticket, viewer)
            assert _labels(q.captured_queries) - _allowed(panel) == set(), (viewer.audience, panel.name)
            checked += 1
    assert checked == 14  # every panel but the staff head, which is read on every push


@pytest.mark.parametrize("model,path", list(coherence._cases()))
def test_a_rendering_made_from_the_one_before_shows_what_a_fresh_one_shows(world, model, path):
    panels.CACHE.clear()
    viewers = _viewers(world)
    for viewer in viewers:
        _render(world.ticket_id, viewer)
    result = path(world)
    ticket_id = result.pk if isinstance(result, Ticket) else world.ticket_id
    for viewer in viewers:
        if ticket_id != world.ticket_id and viewer.audience == CUSTOMER:
            continue  # another customer's ticket
        made = _render(ticket_id, viewer)  # from the rendering before, where there is one
        panels.CACHE.clear()
        fresh = _render(ticket_id, viewer)
        assert made.version == fresh.version
        for name in fresh:
            assert made[name] == fresh[name], (viewer.audience, name)


def _tables_on_push(world, viewer, write) -> tuple[set[str], int]:
    _render(world.ticket_id, viewer)
    write()
    with CaptureQueriesContext(connection) as q:
        _render(world.ticket_id, viewer)
    return _labels(q.captured_queries), len(q.captured_queries)


@pytest.fixture
def worked(world):
    """A ticket with something in every lane, rendered once for each audience."""
    coherence._step_with_lookup(world)
    coherence._held(world)
    coherence._rule_pin(world)
    coherence._action(world)
    coherence._order_pick(world)
    panels.CACHE.clear()
    return world


UNCHANGED_BY_A_NOTE = {  # (the held calls are counted by the staff head, read on every push)
    "agent.confirmation",
    "context.pinnedrule",
    "context.statevalue",
    "context.moneytotal",
    "context.actiontaken",
    "shop.order",
}


def test_a_message_reads_only_the_panels_that_show_it(worked, settings):
    staff, customer = _viewers(worked)
    tables, statements = _tables_on_push(
        worked, staff, lambda: customer_message_post(ticket=worked.ticket, text="Any news?", wake=False)
    )
    assert tables & UNCHANGED_BY_A_NOTE == set(), tables
    tables, _ = _tables_on_push(
        worked, customer, lambda: customer_message_post(ticket=worked.ticket, text="Hello?", wake=False)
    )
    assert tables & {"agent.confirmation", "shop.order"} == set(), tables  # their cards and orders
    # A staff note (an unannotated write: it stamps every table) re-reads them all.
    tables, every = _tables_on_push(
        worked, staff, lambda: staff_note_post(ticket=worked.ticket, text="Check the lid.", user=worked.staff)
    )
    assert UNCHANGED_BY_A_NOTE - {"context.actiontaken", "shop.order"} <= tables
    assert statements < every
    print(f"statements a staff render after a customer's message: {statements}; after a staff note: {every}")


def test_a_panel_whose_table_was_stamped_is_read_again(worked):
    staff, customer = _viewers(worked)
    from sundry.context import services as lanes

    _render(worked.ticket_id, staff)
    _render(worked.ticket_id, customer)
    lanes.rule_pin(ticket=worked.ticket, text="Never call after 6pm.", turn=1, source="staff", user=worked.staff)
    with CaptureQueriesContext(connection) as q:
        made = _render(worked.ticket_id, staff)
    assert "context.pinnedrule" in _labels(q.captured_queries)
    assert "Never call after 6pm." in made["rules"]
    assert "agent.confirmation" not in _labels(q.captured_queries)  # the cards' panel: not stamped


def test_records_kept_outside_the_ticket_are_read_again_once_old_enough(worked, settings):
    staff, _ = _viewers(worked)
    settings.LIVE_OUTSIDE_SECONDS = 3600
    tables, _ = _tables_on_push(
        worked, staff, lambda: customer_message_post(ticket=worked.ticket, text="Any news?", wake=False)
    )
    assert "shop.order" not in tables
    settings.LIVE_OUTSIDE_SECONDS = 0
    tables, _ = _tables_on_push(
        worked, staff, lambda: customer_message_post(ticket=worked.ticket, text="Any news?", wake=False)
    )
    assert "shop.order" in tables


def test_a_version_moved_past_the_stamps_reads_every_panel(worked):
    """A write that moved the version without `tickets.versions` (a raw update, a script) stamped nothing:
    the rendering cannot tell what changed, so it reads every panel. Control: with the same version stamped,
    the same push reads none of the lanes' panels."""
    from django.db.models import F

    staff, _ = _viewers(worked)

    def raw_rule():
        from sundry.context.models import PinnedRule

        rule = PinnedRule.objects.filter(ticket=worked.ticket).first()
        PinnedRule.objects.filter(pk=rule.pk).update(text="Only call after 6pm.")
        Ticket.objects.filter(pk=worked.ticket_id).update(version=F("version") + 1)

    tables, _ = _tables_on_push(worked, staff, raw_rule)
    assert "context.pinnedrule" in tables
    assert "Only call after 6pm." in _render(worked.ticket_id, staff)["rules"]

    def stamped_elsewhere():
        ticket = Ticket.objects.get(pk=worked.ticket_id)
        Ticket.objects.filter(pk=ticket.pk).update(
            version=ticket.version + 1, stamps={**ticket.stamps, TURNS: ticket.version + 1}
        )

    tables, _ = _tables_on_push(worked, staff, stamped_elsewhere)
    assert "context.pinnedrule" not in tables
