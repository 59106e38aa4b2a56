"""Every write that changes what a panel shows bumps the ticket's version.

The panels are cached by version and pushed by version, so a write that
changes a panel's input without a bump leaves every watcher (and the next
socket to connect) looking at the rendering from before it. The test renders
every staff and customer panel, collects the tables those renderings read,
and requires each to be written only through paths listed here; then it runs
every listed path through the production services and checks that it changed
its table and moved the version.
"""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.apps import apps
from django.contrib.auth import get_user_model
from django.db import connection, transaction
from django.db.models.signals import post_save
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from sundry.agent import cardstore
from sundry.agent.loop import agent_run
from sundry.agent.models import AgentStep, Confirmation, HeldAction
from sundry.agent.provider.gateway import Gateway, ModelCallError
from sundry.agent.provider.scripted import ScriptedModel
from sundry.agent.services import (
    ConfirmationError,
    confirmation_decide,
    customer_message_post,
    held_action_decide,
    staff_note_post,
    staff_reply_post,
    ticket_set_handler,
)
from sundry.compaction.models import CompactionRun
from sundry.compaction.offline import OfflineSummariser
from sundry.compaction.services import compaction_consider, compaction_run
from sundry.context import services as lanes
from sundry.context.models import ActionTaken, LedgerEntry, MoneyTotal, PinnedRule, StateValue, Summary
from sundry.desk.lifecycle import ticket_create, ticket_set_status
from sundry.live.panels import CUSTOMER, STAFF, Viewer, render_all
from sundry.portal.services import detail_flag, order_pick, rule_withdraw
from sundry.tickets.attention import flags_resolve
from sundry.tickets.models import Rating, Ticket, TicketClass, Turn
from sundry.tickets.satisfaction import rating_save
from sundry.tickets.services import ticket_class_save, ticket_fields_save
from sundry.tickets.versions import ticket_lock
from sundry.tooling.messages import ModelResponse, ToolCall
from tests.compaction.helpers import long_ticket
from tests.factories import CustomerFactory, TicketClassFactory, customer_confirms, paid_order

pytestmark = pytest.mark.django_db

ORDER = "SU-10480"


class World:
    def __init__(self):
        users = get_user_model().objects
        self.staff = users.create_user("sam", password="x", is_staff=True)
        self.customer_user = users.create_user("alice", password="x")
        self.customer = CustomerFactory(user=self.customer_user)
        paid_order(customer=self.customer, number=ORDER, prices=(6000, 4000), status="placed")  # cancellable
        self.tclass = TicketClassFactory(approval_rules={"cancel_order": {}})
        self.ticket_id = ticket_create(customer=self.customer.person, ticket_class=self.tclass, subject="Kettle").pk

    @property
    def ticket(self) -> Ticket:
        return Ticket.objects.select_related("ticket_class", "customer", "assigned_to").get(pk=self.ticket_id)

    def version(self, ticket_id=None) -> int:
        return Ticket.objects.values_list("version", flat=True).get(pk=ticket_id or self.ticket_id)

    def run(self, *responses) -> None:
        agent_run(self.ticket_id, gateway=Gateway(override=ScriptedModel(list(responses))))


@pytest.fixture
def world():
    return World()


def _call(name, **arguments):
    return ModelResponse(tool_calls=[ToolCall(id=f"c-{name}", name=name, arguments=arguments)])


def _carded(world) -> Confirmation:
    """The customer asks to cancel; the model's cancel_order becomes a card for them to confirm."""
    customer_message_post(ticket=world.ticket, text=f"Cancel {ORDER} please", wake=False)
    # Looked up first: the ID guard takes an order a tool returned, not one only typed.
    world.run(
        _call("get_order", order_number=ORDER),
        _call("cancel_order", order_number=ORDER, reason="customer asked"),
        ModelResponse(text="Please check the card."),
    )
    return Confirmation.objects.get(ticket_id=world.ticket_id, status="pending")


def _held(world) -> HeldAction:
    _carded(world)
    # The customer confirms the card; the class's approval rule still holds the cancellation for staff.
    (card,) = customer_confirms(world.ticket)
    assert card.outcome == "held"
    return HeldAction.objects.get(ticket_id=world.ticket_id, status="pending")


def _version_after_card_writes(world, path):
    """Run `path`, noting the ticket's version each time a card row is saved; the version must move
    past every one of them: a bump after the card's write, not only the turns before it."""
    seen = []

    def note(sender, instance, **kwargs):
        if instance.ticket_id == world.ticket_id:
            seen.append(world.version())

    post_save.connect(note, sender=Confirmation, weak=False)
    try:
        path()
    finally:
        post_save.disconnect(note, sender=Confirmation)
    assert seen, "no card was written"
    assert world.version() > max(seen), "a card was written after the ticket's last version bump"


def _confirmed_order(world) -> StateValue:
    return lanes.state_set(
        ticket=world.ticket, name="order_number", value=ORDER, turn=1, source="customer", confirmed=True
    )


# --- the write paths, per table a panel reads ---------------------------------------------------
# Each takes the world and returns the ticket whose version must move (None: the world's).


def _status(world):
    ticket_set_status(ticket=world.ticket, status="resolved", user=world.staff)


def _handler(world):
    ticket_set_handler(ticket=world.ticket, handler="staff", user=world.staff)


def _flag(world):
    detail_flag(ticket=world.ticket, value=_confirmed_order(world), note="wrong order")


def _flag_resolved(world):
    _flag(world)
    before = world.version()
    assert flags_resolve(ticket=world.ticket, user=world.staff)
    assert world.version() > before


def _model_unavailable(world):
    customer_message_post(ticket=world.ticket, text="Hello?", wake=False)
    world.run(ModelCallError("provider down", retryable=True))


def _admin_ticket_edit(world):
    ticket = world.ticket
    ticket.subject = "Kettle, broken lid"
    ticket_fields_save(ticket=ticket, fields=["subject"])


def _class_edit(world):
    tclass = TicketClass.objects.get(pk=world.tclass.pk)
    tclass.token_budget = 6000
    ticket_class_save(ticket_class=tclass)


def _step_with_lookup(world):
    customer_message_post(ticket=world.ticket, text=f"Where is {ORDER}?", wake=False)
    world.run(_call("get_order", order_number=ORDER), ModelResponse(text="It has not shipped yet."))


def _hold(world):
    _held(world)


def _approve(world):
    held = _held(world)
    before = world.version()
    held_action_decide(held_id=held.pk, ticket=world.ticket, approve=True, user=world.staff, wake=False)
    assert world.version() > before


def _reject(world):
    held = _held(world)
    before = world.version()
    held_action_decide(held_id=held.pk, ticket=world.ticket, approve=False, user=world.staff, wake=False)
    assert world.version() > before


def _card(world):
    _version_after_card_writes(world, lambda: _carded(world))


def _card_confirm(world):
    card = _carded(world)
    _version_after_card_writes(world, lambda: customer_confirms(world.ticket))
    assert Confirmation.objects.get(pk=card.pk).status == "confirmed"


def _card_confirm_runs(world):
    # A class with no threshold for it: the confirmed call runs at once.
    TicketClass.objects.filter(pk=world.tclass.pk).update(approval_rules={})
    card = _carded(world)
    _version_after_card_writes(world, lambda: customer_confirms(world.ticket))
    assert Confirmation.objects.get(pk=card.pk).outcome == "executed"


def _card_decline(world):
    card = _carded(world)
    _version_after_card_writes(world, lambda: customer_confirms(world.ticket, decline=True))
    assert Confirmation.objects.get(pk=card.pk).status == "declined"


def _card_typed_yes(world):
    card = _carded(world)
    _version_after_card_writes(world, lambda: customer_message_post(ticket=world.ticket, text="Yes please", wake=False))
    card.refresh_from_db()
    assert (card.status, card.via) == ("confirmed", Confirmation.Via.TYPED)


def _card_staff_confirm(world):
    card = _carded(world)
    _version_after_card_writes(
        world,
        lambda: confirmation_decide(
            card_id=card.pk,
            ticket=world.ticket,
            confirm=True,
            digest=card.digest,
            via=Confirmation.Via.STAFF,
            user=world.staff,
            reason="Said yes on the phone at 14:10",
            wake=False,
        ),
    )
    card.refresh_from_db()
    assert (card.status, card.via, card.decided_by) == ("confirmed", Confirmation.Via.STAFF, world.staff)


def _card_superseded(world):
    old = _carded(world)
    customer_message_post(ticket=world.ticket, text="Actually it's because I ordered the wrong colour.", wake=False)
    # A different cancel_order call for the same order replaces the card the customer has not answered.
    _version_after_card_writes(
        world,
        lambda: world.run(
            _call("cancel_order", order_number=ORDER, reason="ordered the wrong colour"),
            ModelResponse(text="Please check the new card."),
        ),
    )
    old.refresh_from_db()
    assert old.status == "superseded"
    assert Confirmation.objects.filter(ticket_id=world.ticket_id, status="pending").exclude(pk=old.pk).count() == 1


def _expire(card):
    Confirmation.objects.filter(pk=card.pk).update(expires_at=timezone.now() - timedelta(seconds=1))  # time passes


def _card_expired(world):
    card = _carded(world)
    _expire(card)

    def retire():
        with transaction.atomic():  # as its callers run it: the ticket row locked
            ticket_lock(world.ticket_id)
            assert cardstore.pending(world.ticket) == []

    _version_after_card_writes(world, retire)
    assert Confirmation.objects.get(pk=card.pk).status == "expired"


def _press(world, card):
    """The customer's Confirm on one card (the page's button), even one the page still shows after it expired."""
    return confirmation_decide(
        card_id=card.pk, ticket=world.ticket, confirm=True, digest=card.digest, via=Confirmation.Via.BUTTON, wake=False
    )


def _card_expired_press(world):
    card = _carded(world)
    _expire(card)

    def press():
        with pytest.raises(ConfirmationError, match="expired"):
            _press(world, card)

    _version_after_card_writes(world, press)
    assert Confirmation.objects.get(pk=card.pk).status == "expired"


def _rules_closed(world):
    lanes.rule_pin(ticket=world.ticket, text="Phone only.", turn=1, source="staff", user=world.staff)
    before = world.version()
    ticket_set_status(ticket=world.ticket, status="resolved", user=world.staff)  # closes the ticket's rules
    assert world.version() > before


def _rule_pin(world):
    lanes.rule_pin(ticket=world.ticket, text="Phone only.", turn=1, source="staff", user=world.staff)


def _rule_decide(world):
    rule = lanes.rule_pin(ticket=world.ticket, text="Phone only.", turn=1, source="staff", user=world.staff)
    before = world.version()
    lanes.rule_decide(ticket=world.ticket, rule_id=rule.pk, decision="dismiss", user=world.staff, turn=1)
    assert world.version() > before


def _rule_candidate(world):
    customer_message_post(ticket=world.ticket, text="Never email me, only phone.", wake=False)


def _rule_withdraw(world):
    _rule_candidate(world)
    rule = PinnedRule.objects.get(ticket_id=world.ticket_id, source="customer", status="candidate")
    before = world.version()
    rule_withdraw(ticket=world.ticket, rule_id=rule.pk)
    assert world.version() > before
    assert PinnedRule.objects.get(pk=rule.pk).status == "dismissed"


def _rename(world):
    value = world.ticket.customer.external_key
    lanes.ledger_rename(ticket=world.ticket, value=value, role="the_customer", turn=1)


def _state_set(world):
    lanes.state_set(ticket=world.ticket, name="issue", value="lid broken", turn=1, source="staff", user=world.staff)


def _state_confirm(world):
    value = lanes.state_set(ticket=world.ticket, name="issue", value="lid broken", turn=1, source="model")
    before = world.version()
    lanes.state_confirm(ticket=world.ticket, value_id=value.pk, user=world.staff)
    assert world.version() > before


def _order_pick(world):
    order_pick(ticket=world.ticket, reference=ORDER)


def _rated(world):
    # Already resolved (set without a bump here, so the bump asserted is the rating's own).
    Ticket.objects.filter(pk=world.ticket_id).update(status=Ticket.Status.RESOLVED)
    rating_save(ticket=world.ticket, customer=world.customer.person, score="4", comment="Quick.")


def _action(world):
    lanes.action_record(
        ticket=world.ticket,
        tool="issue_refund",
        target=ORDER,
        arguments={},
        turn=1,
        result={"order_number": ORDER},
        idempotency_key="k1",
        reversible=False,
        amount_cents=500,
        currency="USD",
    )


def _long(world) -> Ticket:
    ticket = long_ticket()
    tclass = ticket.ticket_class
    tclass.trigger_fraction, tclass.token_budget = 0.5, 2000
    tclass.save()
    return ticket


def _queued(world):
    ticket = _long(world)
    before = world.version(ticket.pk)
    assert compaction_consider(ticket_id=ticket.pk) is not None
    assert world.version(ticket.pk) > before
    return ticket


class Summariser:
    """The summariser a run calls, noting the ticket's version when it is called: by then the
    run's earlier transactions (queued, running) have committed, so what the run's last
    transaction does (accept, fail, trip the breaker) must move the version past this."""

    def __init__(self, ticket_id, answer):
        self.ticket_id, self.answer, self.version_at_call = ticket_id, answer, None

    def __call__(self, request):
        self.version_at_call = Ticket.objects.values_list("version", flat=True).get(pk=self.ticket_id)
        if isinstance(self.answer, BaseException):
            raise self.answer
        return self.answer.complete(request)

    def run(self, run_id) -> CompactionRun:
        # One script step per attempt the summariser may be asked for.
        done = compaction_run(run_id, gateway=Gateway(override=ScriptedModel([self] * 3)))
        assert self.version_at_call is not None
        assert Ticket.objects.values_list("version", flat=True).get(pk=self.ticket_id) > self.version_at_call
        return done


def _compacted(world):
    ticket = _queued(world)
    run = CompactionRun.objects.get(ticket=ticket)
    assert Summariser(ticket.pk, OfflineSummariser()).run(run.pk).status == "succeeded"
    return ticket


def _failed(world):
    ticket = _queued(world)
    run = CompactionRun.objects.get(ticket=ticket)
    assert Summariser(ticket.pk, RuntimeError("boom")).run(run.pk).status == "failed"
    return ticket


def _stale(world):
    ticket = _queued(world)
    run = CompactionRun.objects.get(ticket=ticket)
    Summary.objects.create(
        ticket=ticket, covers_through_turn=1, text="Another run's summary.", fields={}, is_current=True
    )
    before = world.version(ticket.pk)
    assert compaction_run(run.pk).status == "stale"
    assert world.version(ticket.pk) > before
    return ticket


def _breaker(world):
    ticket = _long(world)
    for _ in range(3):
        run = compaction_consider(ticket_id=ticket.pk)
        assert Summariser(ticket.pk, RuntimeError("boom")).run(run.pk).status == "failed"
        customer_message_post(
            ticket=Ticket.objects.select_related("ticket_class").get(pk=ticket.pk), text="Any news?", wake=False
        )
    assert Ticket.objects.get(pk=ticket.pk).attention.startswith("Compaction breaker")
    return ticket


WRITE_PATHS = {
    Turn: [
        lambda w: customer_message_post(ticket=w.ticket, text="Hi", wake=False),
        lambda w: staff_reply_post(ticket=w.ticket, text="On it.", user=w.staff),
        lambda w: staff_note_post(ticket=w.ticket, text="Check the lid.", user=w.staff),
    ],
    Ticket: [_status, _handler, _flag, _flag_resolved, _model_unavailable, _admin_ticket_edit, _breaker],
    TicketClass: [_class_edit],
    AgentStep: [_step_with_lookup],
    HeldAction: [_hold, _approve, _reject],
    Confirmation: [
        _card,
        _card_confirm,
        _card_confirm_runs,
        _card_decline,
        _card_typed_yes,
        _card_staff_confirm,
        _card_superseded,
        _card_expired,
        _card_expired_press,
    ],
    PinnedRule: [_rule_pin, _rule_decide, _rule_candidate, _rule_withdraw, _rules_closed],
    LedgerEntry: [_rename, _step_with_lookup],
    StateValue: [_state_set, _state_confirm, _order_pick],
    ActionTaken: [_action, _approve, _card_confirm_runs],
    MoneyTotal: [_step_with_lookup],
    Summary: [_compacted],
    Rating: [_rated],
    CompactionRun: [_queued, _compacted, _failed, _stale, _breaker],
}

# Tables panels read that Sundry's own code never writes while a ticket is worked: the shop's
# records and logins change in the shop and user admin, outside any ticket; a page shows such an
# edit with the ticket's next change or on reload.
NOT_WRITTEN_BY_SUNDRY = {
    "shop.customer",
    # The desk's customer records follow the shop's customers (linked on save), not ticket work.
    "people.customer",
    "shop.order",
    "auth.user",
    "shop.address",
    "shop.orderitem",
    "shop.product",
    "shop.payment",
    "shop.paymentmethod",
    "shop.parcel",
    "shop.trackingevent",
    "shop.refund",
    "shop.return",
    "shop.replacement",
    "shop.cancellation",
    # Desk vocabulary kept in the admin: the canned replies and the tag names on
    # offer. Tagging a ticket is a ticket write (an event turn, which bumps).
    "tickets.cannedreply",
    "tickets.tag",
    # A class's tool servers, configured in the admin: the customer page words a
    # held call as its card does, from the tools they declare.
    "toolservers.toolserver",
}


def _fingerprint(model) -> list:
    return list(model.objects.order_by("pk").values())


def _cases():
    for model, paths in WRITE_PATHS.items():
        for path in paths:
            name = getattr(path, "__name__", "path")
            yield pytest.param(model, path, id=f"{model._meta.label}-{name}")


@pytest.mark.parametrize("model,path", list(_cases()))
def test_each_write_path_changes_its_table_and_bumps_the_version(world, model, path):
    before_rows = _fingerprint(model)
    versions = dict(Ticket.objects.values_list("pk", "version"))
    result = path(world)
    touched = result if isinstance(result, Ticket) else world.ticket  # paths on another ticket return it
    assert _fingerprint(model) != before_rows, "the path did not write the table it is listed under"
    assert world.version(touched.pk) > versions.get(touched.pk, -1)


def _tables_read(world) -> set[str]:
    ticket = world.ticket
    with CaptureQueriesContext(connection) as queries:
        render_all(ticket, Viewer(world.staff, STAFF))
        render_all(ticket, Viewer(world.customer_user, CUSTOMER, world.customer.person))
    names = set()
    for q in queries.captured_queries:
        names |= set(re.findall(r'(?:FROM|JOIN) "([a-z0-9_]+)"', q["sql"]))
    return names


def test_every_table_a_panel_reads_has_its_write_paths_listed(world):
    # A ticket with something in every lane, so every panel reads what it can.
    _step_with_lookup(world)
    _held(world)
    # An open card too (a call waiting for the customer), so both card panels render one.
    customer_message_post(ticket=world.ticket, text="And e-mail me the details.", wake=False)
    world.run(
        _call("send_email", customer_id=world.customer.customer_id, subject="Your order", body=f"About {ORDER}."),
        ModelResponse(text="Please check the card."),
    )
    assert Confirmation.objects.filter(ticket_id=world.ticket_id, status="pending", tool="send_email").exists()
    _rule_candidate(world)  # the customer's own instruction, for their instructions panel
    _rule_pin(world)
    _action(world)
    _order_pick(world)
    _compacted(world)
    by_table = {m._meta.db_table: m._meta.label_lower for m in apps.get_models()}
    read = {by_table[t] for t in _tables_read(world) if t in by_table}
    listed = {m._meta.label_lower for m in WRITE_PATHS}
    assert {
        "tickets.ticket",
        "tickets.turn",
        "agent.heldaction",
        "agent.confirmation",
        "context.ledgerentry",
        "context.pinnedrule",
    } <= read  # the walk works
    assert read - listed - NOT_WRITTEN_BY_SUNDRY == set()


# --- the admin -----------------------------------------------------------------------------------


def _admin_client():
    client = Client()
    client.force_login(get_user_model().objects.create_superuser("root", password="x"))
    return client


def test_a_class_edited_in_the_admin_bumps_every_ticket_of_the_class(world):
    tclass = world.tclass
    before = world.version()
    data = {
        f: getattr(tclass, f)
        for f in (
            "name",
            "slug",
            "description",
            "trigger_fraction",
            "recent_turns_kept",
            "working_model",
            "summariser_model",
            "ledger_share",
            "pinned_rules_cap",
            "first_response_minutes",
            "next_response_minutes",
            "approval_window_hours",
        )
    }
    # 6,000 leaves compaction too little room (tests/tickets/test_budget_lab.py): the admin keeps it knowingly.
    data.update(token_budget=6000, approval_rules='{"cancel_order": {}}', accept_tight_budget="on")
    response = _admin_client().post(f"/admin/tickets/ticketclass/{tclass.pk}/change/", data)
    assert response.status_code == 302, response.content[:2000]
    assert TicketClass.objects.get(pk=tclass.pk).token_budget == 6000
    assert world.version() > before


def test_turns_are_read_only_in_the_admin(world):
    turn = customer_message_post(ticket=world.ticket, text="Hi", wake=False)
    client = _admin_client()
    page = client.get(f"/admin/tickets/turn/{turn.pk}/change/")
    assert page.status_code == 200 and b'name="text"' not in page.content  # shown, not editable
    assert client.post(f"/admin/tickets/turn/{turn.pk}/change/", {"text": "rewritten"}).status_code == 403
    assert client.post(f"/admin/tickets/turn/{turn.pk}/delete/", {"post": "yes"}).status_code == 403
    assert client.get("/admin/tickets/turn/add/").status_code == 403
    assert Turn.objects.get(pk=turn.pk).text == "Hi"


def test_a_ticket_saved_in_the_admin_never_writes_back_the_counters_it_loaded(world):
    stale = world.ticket
    customer_message_post(ticket=world.ticket, text="Meanwhile", wake=False)  # the counters move on
    now = Ticket.objects.get(pk=world.ticket_id)
    stale.subject = "Edited"
    ticket_fields_save(ticket=stale, fields=["subject", "version", "last_turn_number"])
    after = Ticket.objects.get(pk=world.ticket_id)
    assert after.subject == "Edited"
    assert after.last_turn_number == now.last_turn_number and after.version > now.version
