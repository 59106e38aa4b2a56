"""The pure ledger plans that both the live harvest and the harness replay apply."""

from __future__ import annotations

from sundry.context.harvest import LedgerRow, entry_tokens, evict, plan_harvest, plan_mentions, touch

ROOMY = 10_000  # tokens: more than these ledgers ever fill
# The ID kinds a domain declares live (`Domain.live_kinds`; the demo shop's orders here).
LIVE = frozenset({"order"})


def rows(*entries: LedgerRow) -> dict[str, LedgerRow]:
    return {e.value: e for e in entries}


def row(value, role, kind="order", *, verified=True, turn=1, active=True, used=False, order=0):
    return LedgerRow(value, role, kind, verified, turn, turn, active=active, used=used, order=order)


def test_new_ids_take_their_kinds_next_free_role_counting_archived_roles():
    ledger = rows(row("SU-1", "order", order=1), row("SU-2", "order_2", active=False, order=2))
    plan = plan_harvest(ledger, [("SU-3", "order"), ("itm_a", "item")], turn=5, cap=ROOMY)
    assert plan.roles == ["order_3", "item"]
    assert [r.value for r in plan.new] == ["SU-3", "itm_a"]
    assert ledger["SU-3"].order > 2 and ledger["SU-3"].verified and ledger["SU-3"].first_seen_turn == 5


def test_a_mentioned_id_earns_its_kinds_role_once_a_lookup_returns_it():
    ledger = rows(row("SU-1", "order_mentioned", verified=False, order=1))
    plan = plan_harvest(ledger, [("SU-1", "order")], turn=4, cap=ROOMY)
    assert [r.role for r in plan.renamed] == ["order"] and ledger["SU-1"].verified
    assert ledger["SU-1"].last_used_turn == 4


def test_an_archived_id_comes_back_under_its_role_unless_an_active_entry_holds_it():
    ledger = rows(row("SU-1", "order", active=False, order=1), row("SU-2", "order_2", order=2))
    plan = plan_harvest(ledger, [("SU-1", "order")], turn=6, cap=ROOMY)
    assert plan.restored == [ledger["SU-1"]] and ledger["SU-1"].role == "order" and ledger["SU-1"].active

    taken = rows(row("SU-1", "order", active=False, order=1), row("SU-9", "order", order=2))
    plan = plan_harvest(taken, [("SU-1", "order")], turn=6, cap=ROOMY)
    assert plan.renamed == [taken["SU-1"]] and taken["SU-1"].role == "order_2"


def test_an_active_id_seen_again_only_moves_its_last_use():
    ledger = rows(row("SU-1", "order", turn=2, order=1))
    plan = plan_harvest(ledger, [("SU-1", "order")], turn=9, cap=ROOMY)
    assert plan.seen_again == [ledger["SU-1"]] and not (plan.new or plan.renamed or plan.restored)
    assert (ledger["SU-1"].role, ledger["SU-1"].last_used_turn) == ("order", 9)


def test_eviction_goes_by_last_use_within_the_token_cap_and_can_take_a_new_row():
    ledger = rows(row("SU-1", "order", turn=1, used=True, order=1), row("SU-2", "order_2", turn=3, order=2))
    room_for_two = entry_tokens(ledger["SU-1"]) + entry_tokens(LedgerRow("itm_b", "item_2", "item", True, 3, 3))
    plan = plan_harvest(ledger, [("itm_a", "item"), ("itm_b", "item")], turn=3, cap=room_for_two, live_kinds=LIVE)
    # SU-2, itm_a and itm_b were last used (seen) at turn 3: the earliest inserted go first.
    # SU-1, an order a call used, is a live entity and goes last although it is older.
    assert [r.value for r in plan.evicted] == ["SU-2", "itm_a"]
    assert not ledger["itm_a"].active and ledger["itm_b"].active and ledger["SU-1"].active


def test_being_seen_counts_as_a_use_and_live_entities_leave_last():
    # A payment method seen at turn 6 outlives an item seen at turn 2; the customer and
    # an order a call used outlive both, whatever their turns.
    ledger = rows(
        LedgerRow("cus_1", "customer", "customer", True, 0, 0, used=True, order=1),
        row("SU-1", "order", turn=1, used=True, order=2),
        LedgerRow("itm_a", "item", "item", True, 2, 2, order=3),
        LedgerRow("card_9", "payment_method", "payment_method", True, 6, 6, order=4),
    )
    keep = ("cus_1", "SU-1", "card_9")
    assert [r.value for r in evict(ledger, sum(entry_tokens(ledger[v]) for v in keep), live_kinds=LIVE)] == ["itm_a"]
    assert [r.value for r in evict(ledger, sum(entry_tokens(ledger[v]) for v in keep[:2]), live_kinds=LIVE)] == [
        "card_9"
    ]


def test_live_kinds_are_the_domains_to_declare():
    # The same ledger in a domain whose live kinds leave orders out: the used order is an
    # entry like any other and leaves by its last use (turn 1), before the payment method
    # seen at turn 6. The desk's customer stays live whatever the domain declares.
    ledger = rows(
        LedgerRow("cus_1", "customer", "customer", True, 0, 0, used=True, order=1),
        row("SU-1", "order", turn=1, used=True, order=2),
        LedgerRow("card_9", "payment_method", "payment_method", True, 6, 6, order=3),
    )
    cap = entry_tokens(ledger["cus_1"]) + entry_tokens(ledger["card_9"])
    assert [r.value for r in evict(ledger, cap, live_kinds=frozenset({"reservation"}))] == ["SU-1"]


def test_touch_marks_used_and_protects_from_eviction():
    ledger = rows(row("SU-1", "order", turn=1, order=1), row("SU-2", "order_2", turn=2, order=2))
    touch(ledger, ["SU-1", "not-there"], 3)
    assert ledger["SU-1"].used and ledger["SU-1"].last_used_turn == 3
    assert [r.value for r in evict(ledger, entry_tokens(ledger["SU-1"]), live_kinds=LIVE)] == ["SU-2"]


def test_mentions_enter_unverified_and_leave_known_ids_alone():
    ledger = rows(row("SU-1", "order", order=1))
    plan = plan_mentions(ledger, [("SU-1", "order"), ("SU-7", "order"), ("SU-7", "order")], turn=2, cap=ROOMY)
    assert [(r.value, r.role, r.verified) for r in plan.new] == [("SU-7", "order_mentioned", False)]
    assert ledger["SU-1"].role == "order" and ledger["SU-1"].verified
    assert plan_mentions(ledger, [("SU-1", "order")], turn=3, cap=1).evicted == []  # nothing new, nothing evicted


def test_a_customer_bringing_up_a_looked_up_order_brings_it_and_its_own_ids_back():
    order = row("SU-1", "order", active=False, order=1)
    tracking = LedgerRow("1ZTRACK", "tracking", "tracking", True, 2, 2, active=False, order=2, note="of SU-1")
    other = LedgerRow("1ZOTHER", "tracking_2", "tracking", True, 3, 3, active=False, order=3, note="of SU-2")
    typed_only = row("SU-9", "order_mentioned", verified=False, active=False, order=4)
    ledger = rows(order, tracking, other, typed_only)
    plan = plan_mentions(ledger, [("SU-1", "order"), ("SU-9", "order")], turn=12, cap=ROOMY)
    assert {r.value for r in plan.restored} == {"SU-1", "1ZTRACK"} and not plan.new
    assert order.active and tracking.active and tracking.last_used_turn == 12
    assert not other.active  # another order's tracking number stays where it was
    assert not typed_only.active  # typing an ID earns no trust: only what a tool returned comes back


def test_mentioning_an_active_looked_up_id_counts_as_its_latest_use():
    seen = row("SU-1", "order", turn=2, order=1)
    ledger = rows(seen, row("SU-2", "order_2", turn=5, order=2))
    plan = plan_mentions(ledger, [("SU-1", "order")], turn=9, cap=ROOMY)
    assert plan.seen_again == [seen] and seen.last_used_turn == 9 and not plan.evicted
    assert [r.value for r in evict(ledger, entry_tokens(seen))] == ["SU-2"]  # SU-1 is now the more recent


def test_descriptions_enter_with_new_ids_and_a_later_result_replaces_them():
    ledger: dict[str, LedgerRow] = {}
    plan = plan_harvest(
        ledger,
        [("SU-1", "order"), ("SU-2", "order")],
        turn=2,
        cap=10_000,
        descriptions={"SU-1": "Air Fryer 5.5L · delivered", "SU-2": "USB-C Charger 65W · shipped"},
    )
    assert [r.description for r in plan.new] == ["Air Fryer 5.5L · delivered", "USB-C Charger 65W · shipped"]
    assert plan.described == []  # new rows carry theirs in the insert
    for pk, r in enumerate(ledger.values(), 1):
        r.id = pk  # stored
    # A cancellation describes SU-2 anew; a parcel lookup names SU-1 without describing it.
    plan = plan_harvest(
        ledger,
        [("SU-2", "order"), ("SU-1", "order")],
        turn=5,
        cap=10_000,
        descriptions={"SU-2": "USB-C Charger 65W · cancelled"},
    )
    assert plan.described == [ledger["SU-2"]] and ledger["SU-2"].description == "USB-C Charger 65W · cancelled"
    assert ledger["SU-1"].description == "Air Fryer 5.5L · delivered"
    # The same description again is no change.
    plan = plan_harvest(
        ledger, [("SU-2", "order")], turn=6, cap=10_000, descriptions={"SU-2": "USB-C Charger 65W · cancelled"}
    )
    assert plan.described == []


def test_a_description_survives_eviction_and_comes_back_with_its_id():
    ledger = rows(row("SU-1", "order", order=1))
    ledger["SU-1"].description, ledger["SU-1"].id = "Air Fryer 5.5L · delivered", 1
    two = 2 * entry_tokens(row("itm_0", "item"))  # room for about two entries
    plan_harvest(ledger, [(f"itm_{i}", "item") for i in range(5)], turn=3, cap=two)
    assert not ledger["SU-1"].active  # evicted, description and all
    plan = plan_mentions(ledger, [("SU-1", "order")], turn=9, cap=two)
    assert ledger["SU-1"].active and ledger["SU-1"].description == "Air Fryer 5.5L · delivered"
    assert ledger["SU-1"] in plan.restored + plan.seen_again + plan.renamed
