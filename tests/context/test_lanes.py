"""Lane services and request assembly."""

from __future__ import annotations

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from sundry.context import harvest, services
from sundry.context.assembly import LANE_ORDER, assemble, whole_units
from sundry.context.lanes import TurnData
from sundry.context.models import LedgerEntry, MoneyTotal, StateValue
from sundry.context.selectors import lane_snapshot
from sundry.context.services import (
    LaneConflict,
    ledger_evict,
    ledger_harvest_found,
    ledger_rename,
    money_add_refund,
    money_observe,
    state_set,
)
from sundry.context.statefields import StateValueInvalid
from sundry.core.tokens import count_tokens
from sundry.desk.lifecycle import ticket_create
from tests.factories import CustomerFactory, TicketClassFactory, paid_order

pytestmark = pytest.mark.django_db


@pytest.fixture
def ticket():
    customer = CustomerFactory()
    paid_order(customer=customer, number="SU-20481")
    return ticket_create(customer=customer.person, ticket_class=TicketClassFactory(), subject="Charge")


def test_changed_amount_supersedes_and_keeps_both_with_turns_and_sources(ticket):
    first = state_set(ticket=ticket, name="amount", value="4,180 INR", turn=3, source="customer")
    second = state_set(ticket=ticket, name="amount", value="4,050 INR", turn=11, source="customer")
    first.refresh_from_db()
    assert (first.value, first.turn, first.source, first.is_current) == ("4,180.00 INR", 3, "customer", False)
    assert first.superseded_by_id == second.pk and first.superseded_at_turn == 11
    assert (second.value, second.turn, second.is_current) == ("4,050.00 INR", 11, True)
    assert StateValue.objects.filter(ticket=ticket, name="amount").count() == 2
    # Only the current value is in the request's state lane.
    state = lane_snapshot(ticket).state
    assert [(s.name, s.value) for s in state] == [("amount", "4,050.00 INR")]


def test_invalid_values_are_rejected_and_the_previous_value_stays(ticket):
    state_set(ticket=ticket, name="order_number", value="SU-20481", turn=2, source="customer")
    with pytest.raises(StateValueInvalid, match="does not exist"):
        state_set(ticket=ticket, name="order_number", value="SU-99999", turn=5, source="model")
    with pytest.raises(StateValueInvalid, match="currency"):
        state_set(ticket=ticket, name="amount", value="40", turn=5, source="model")
    with pytest.raises(StateValueInvalid, match="date"):
        state_set(ticket=ticket, name="delivery_date", value="next tuesday", turn=5, source="model")
    current = StateValue.objects.get(ticket=ticket, name="order_number", is_current=True)
    assert current.value == "SU-20481"
    assert not StateValue.objects.filter(ticket=ticket, name__in=["amount", "delivery_date"]).exists()


def test_second_staff_save_on_a_stale_value_is_a_conflict(ticket):
    seen = state_set(ticket=ticket, name="issue", value="cracked lid", turn=2, source="customer")
    state_set(
        ticket=ticket,
        name="issue",
        value="cracked lid and base",
        turn=3,
        source="staff",
        check_conflict=True,
        expected_current_id=seen.pk,
    )
    with pytest.raises(LaneConflict) as exc:
        state_set(
            ticket=ticket,
            name="issue",
            value="lid only",
            turn=3,
            source="staff",
            check_conflict=True,
            expected_current_id=seen.pk,
        )
    assert exc.value.current.value == "cracked lid and base"


def test_ledger_evicts_by_last_use_and_archives(ticket):
    # (value, last used turn, used as a call argument?)
    for i, (used_turn, used) in enumerate([(9, False), (2, False), (3, True), (5, False)]):
        LedgerEntry.objects.create(
            ticket=ticket,
            role=f"order_{i}",
            value=f"SU-3000{i}",
            kind="order",
            verified=True,
            first_seen_turn=1,
            last_used_turn=used_turn,
            used_in_call=used,
        )
    # 5 entries (the customer + 4) over a cap the size of three: two must go, least
    # recently used first (being seen counts as a use). SU-30002, an order a call acted
    # on, is a live entity and stays although SU-30000 and SU-30003 were seen later.
    rows = {
        e.value: harvest.LedgerRow(e.value, e.role, e.kind, e.verified, e.first_seen_turn, e.last_used_turn)
        for e in LedgerEntry.objects.filter(ticket=ticket)
    }
    cap = sum(harvest.entry_tokens(rows[v]) for v in (ticket.customer.external_key, "SU-30000", "SU-30002"))
    evicted = ledger_evict(ticket=ticket, cap=cap)
    assert evicted == ["SU-30001", "SU-30003"]
    archived = set(LedgerEntry.objects.filter(ticket=ticket, status="archived").values_list("value", flat=True))
    assert archived == {"SU-30001", "SU-30003"}  # archived, not deleted
    assert {e.value for e in lane_snapshot(ticket).ledger} == {ticket.customer.external_key, "SU-30000", "SU-30002"}


def test_roles_can_be_renamed_and_must_stay_unique(ticket):
    LedgerEntry.objects.create(
        ticket=ticket, role="order", value="SU-20481", kind="order", verified=True, first_seen_turn=1, last_used_turn=1
    )
    ledger_rename(ticket=ticket, value="SU-20481", role="damaged order", turn=4)
    assert LedgerEntry.objects.get(value="SU-20481").role == "damaged_order"
    with pytest.raises(StateValueInvalid, match="already used"):
        ledger_rename(ticket=ticket, value="SU-20481", role="customer", turn=5)


def test_assembly_orders_lanes_and_accounts_tokens_with_the_real_tokenizer(ticket):
    snap = lane_snapshot(ticket)
    snap.turns = [TurnData(number=1, author="customer", kind="message", text="Where is SU-20481?")]
    assembled = assemble(snap, model="openai:gpt-4.1")
    lanes = [m.lane for m in assembled.request.messages if m.lane]
    assert lanes == [lane for lane in LANE_ORDER if lane in lanes] and lanes[0] == "system"
    ledger = next(m for m in assembled.request.messages if m.lane == "ledger")
    assert assembled.accounting.lane_tokens["ledger"] == count_tokens(ledger.content, "openai:gpt-4.1")
    assert assembled.accounting.encoding == "o200k_base" and assembled.accounting.exact
    assert assembled.recent_text_ids == frozenset({"SU-20481"})
    assert assembled.request.messages[-1].role == "user"


def test_units_are_never_split_or_orphaned():
    turns = [
        TurnData(number=5, author="tool", kind="tool_result", text="{}", payload={"call_id": "a", "ok": True}),
        TurnData(
            number=6,
            author="agent",
            kind="tool_call",
            text="",
            payload={"calls": [{"id": "b", "name": "get_order", "arguments": {}}]},
        ),
        TurnData(number=7, author="tool", kind="tool_result", text="{}", payload={"call_id": "b", "ok": True}),
    ]
    kept = whole_units(turns)
    assert [t.number for t in kept] == [6, 7]


def test_record_fact_checks_provenance_and_validates(ticket):
    from sundry.agent.loop import agent_run
    from sundry.agent.provider.gateway import Gateway
    from sundry.agent.provider.scripted import ScriptedModel
    from sundry.agent.services import customer_message_post
    from sundry.tooling.messages import ModelResponse, ToolCall

    customer_message_post(ticket=ticket, text="I was charged 4,180 INR twice.")

    def fact(i, **a):
        return ModelResponse(tool_calls=[ToolCall(id=f"f{i}", name="record_fact", arguments=a)])

    model = ScriptedModel(
        [
            fact(1, name="amount", value="4,180 INR", stated_by_customer=True),
            fact(2, name="amount", value="4,050 INR", stated_by_customer=True),  # the customer never wrote this
            fact(3, name="delivery_date", value="soon"),
            ModelResponse(text="Thanks."),
        ]
    )
    agent_run(ticket.pk, gateway=Gateway(override=model))
    rows = list(StateValue.objects.filter(ticket=ticket, name="amount").order_by("id"))
    assert [(r.value, r.source, r.is_current) for r in rows] == [
        ("4,180.00 INR", "customer", False),
        ("4,050.00 INR", "model", True),
    ]
    rejected = ticket.turns.filter(kind="tool_result", payload__ok=False).last()
    assert "not a date" in rejected.text
    assert not StateValue.objects.filter(ticket=ticket, name="delivery_date").exists()


def test_rule_scopes_close_and_customer_rules_follow_the_customer(ticket):
    from sundry.context.models import PinnedRule
    from sundry.context.services import ledger_record_system_id, rule_pin
    from sundry.desk.lifecycle import ticket_set_status

    ledger_record_system_id(ticket=ticket, kind="order", value="SU-20481", role="order", turn=1)
    rule_pin(ticket=ticket, text="Never email me.", turn=2, source="customer", scope="customer")
    rule_pin(
        ticket=ticket, text="Don't cancel SU-20481.", turn=3, source="customer", scope="order", scope_ref="SU-20481"
    )
    rule_pin(ticket=ticket, text="Only call after 6pm.", turn=4, source="customer", scope="ticket")
    ticket_set_status(ticket=ticket, status="resolved")
    statuses = dict(PinnedRule.objects.filter(ticket=ticket).values_list("text", "status"))
    assert statuses == {
        "Never email me.": "active",
        "Don't cancel SU-20481.": "closed",
        "Only call after 6pm.": "closed",
    }
    assert [r.text for r in lane_snapshot(ticket).rules] == ["Never email me."]
    later = ticket_create(customer=ticket.customer, ticket_class=ticket.ticket_class, subject="Another")
    carried = PinnedRule.objects.get(ticket=later)
    assert (carried.text, carried.status, carried.enforcement) == (
        "Never email me.",
        "active",
        {"block_tools": ["send_email"]},
    )


def test_money_moved_on_an_order_without_reported_figures_adds_to_the_lane(ticket):
    money_observe(ticket=ticket, order="SU-20481", currency="INR", paid_cents=418000, refunded_cents=0, turn=2)
    money_add_refund(ticket=ticket, order="SU-20481", amount_cents=50000, turn=4)
    row = MoneyTotal.objects.get(ticket=ticket, order="SU-20481")
    assert (row.refunded_cents, row.turn) == (50000, 4)
    # An order the lane holds no figures for stays unknown rather than invented.
    money_add_refund(ticket=ticket, order="SU-99999", amount_cents=100, turn=5)
    assert not MoneyTotal.objects.filter(ticket=ticket, order="SU-99999").exists()


def _ledger_entry(ticket, value, role, *, last, status="active", version=1, used=False):
    return LedgerEntry.objects.create(
        ticket=ticket,
        role=role,
        value=value,
        kind="order",
        verified=True,
        first_seen_turn=1,
        last_used_turn=last,
        status=status,
        version=version,
        used_in_call=used,
    )


def test_a_harvest_writes_every_ledger_change_in_one_statement(ticket):
    """The call's own IDs marked used, IDs seen again, an archived one restored, a new one: one
    read and one upsert of the ledger (they were up to six statements: a touch, the read, an
    insert and an update per kind of change). Each row ends as the per-kind updates left it."""
    _ledger_entry(ticket, "SU-30000", "order_a", last=2)  # the call's argument
    _ledger_entry(ticket, "SU-30001", "order_b", last=3)  # in the result again
    _ledger_entry(ticket, "SU-30002", "order_c", last=1, status="archived", version=2)  # comes back
    _ledger_entry(ticket, "SU-30003", "order_d", last=4)  # untouched
    with CaptureQueriesContext(connection) as queries, transaction.atomic():
        ledger_harvest_found(
            ticket=ticket,
            turn=7,
            tool_name="search_orders",
            found=[("SU-30001", "order"), ("SU-30002", "order"), ("SU-30009", "order")],
            used=["SU-30000"],
            descriptions={"SU-30001": "Blender · delivered"},
        )
    ledger = [q["sql"] for q in queries.captured_queries if "context_ledgerentry" in q["sql"]]
    assert len(ledger) == 2 and ledger[0].startswith("SELECT") and "ON CONFLICT" in ledger[1], ledger
    got = {
        e.value: (e.status, e.verified, e.used_in_call, e.last_used_turn, e.version, e.description)
        for e in LedgerEntry.objects.filter(ticket=ticket, value__startswith="SU-3000")
    }
    assert got == {
        "SU-30000": ("active", True, True, 7, 1, ""),  # used: no version of its own, as ledger_touch
        "SU-30001": ("active", True, False, 7, 2, "Blender · delivered"),
        "SU-30002": ("active", True, False, 7, 3, ""),
        "SU-30003": ("active", True, False, 4, 1, ""),
        "SU-30009": ("active", True, False, 7, 1, ""),
    }
    assert LedgerEntry.objects.get(ticket=ticket, value="SU-30002").role == "order_c"  # its old role


def test_a_harvest_over_the_cap_archives_in_the_same_statement_as_the_plan_says(ticket):
    for i in range(6):
        _ledger_entry(ticket, f"SU-3100{i}", f"order_{i}", last=i + 1)
    before, versions = services._ledger_rows_versioned(ticket)
    found = [("SU-31009", "order"), ("SU-31002", "order")]
    cap = sum(harvest.entry_tokens(r) for r in before.values()) // 2
    rows = services._touched(before, {"SU-31001"}, 9)  # the plan updates these in place, adds its new ones
    planned = harvest.plan_harvest(
        rows,
        found,
        turn=9,
        cap=cap,
        needed_kinds=services._needed_kinds(ticket, before),
        live_kinds=services._live_kinds(ticket),
    )
    assert planned.evicted and planned.new  # the case is what it says
    with transaction.atomic():
        ledger_harvest_found(ticket=ticket, turn=9, tool_name="search_orders", found=found, cap=cap, used=["SU-31001"])
    after, _ = services._ledger_rows_versioned(ticket)
    fields = ("role", "active", "verified", "last_used_turn", "used", "description")
    expected = {v: tuple(getattr(r, f) for f in fields) for v, r in rows.items()}
    assert {v: tuple(getattr(r, f) for f in fields) for v, r in after.items()} == expected
    assert {v for v, r in after.items() if not r.active} == {r.value for r in planned.evicted}
