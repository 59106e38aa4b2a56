"""A near-full ledger evicts what no write will take before what one may (`harvest.evict` with the
kinds the domain's writes take); control: by last use alone, the payment method read first is dropped."""

from __future__ import annotations

from sundry.context import harvest
from sundry.context.harvest import LedgerRow
from sundry.evals.domains import DOMAINS

WRITES_TAKE = frozenset({"order", "payment_method", "item"})


def _ledger() -> dict[str, LedgerRow]:
    # The customer's payment method, read at turn 2 and not used yet; then a catalogue listing's products.
    rows = {"paypal_1": LedgerRow("paypal_1", "payment_method", "payment_method", True, 2, 2, order=1)}
    for i in range(12):
        value = f"{1000000000 + i}"
        rows[value] = LedgerRow(value, f"product_{i}", "product", True, 5, 5, order=2 + i)
    return rows


def _cap(rows) -> int:
    return harvest.fill(rows)  # full to the token: the next entry must evict something


def test_a_near_full_ledger_drops_what_no_write_takes_first():
    rows = _ledger()
    plan = harvest.plan_harvest(rows, [("5000000001", "item")], turn=9, cap=_cap(rows), needed_kinds=WRITES_TAKE)
    assert plan.evicted and all(r.kind == "product" for r in plan.evicted)
    assert rows["paypal_1"].active and rows["5000000001"].active


def test_control_by_last_use_alone_the_needed_payment_method_is_dropped():
    rows = _ledger()
    plan = harvest.plan_harvest(rows, [("5000000001", "item")], turn=9, cap=_cap(rows), needed_kinds=None)
    assert [r.value for r in plan.evicted][:1] == ["paypal_1"]
    assert not rows["paypal_1"].active


def _orders() -> dict[str, LedgerRow]:
    return {
        "#W1": LedgerRow("#W1", "order", "order", True, 1, 1, order=1),
        "#W2": LedgerRow("#W2", "order_2", "order", True, 3, 3, order=2, superseded=True),
    }


def test_a_superseded_entry_leaves_before_one_a_write_may_take():
    rows = _orders()
    harvest.plan_harvest(rows, [("#W3", "order")], turn=4, cap=harvest.fill(rows), needed_kinds=frozenset({"order"}))
    assert rows["#W1"].active and not rows["#W2"].active
    control = _orders()  # by last use alone, the older order the correction did not touch goes
    harvest.plan_harvest(control, [("#W3", "order")], turn=4, cap=harvest.fill(control), needed_kinds=None)
    assert not control["#W1"].active


def test_the_kinds_writes_take_come_from_the_declarations():
    kinds = DOMAINS["retail"].domain.write_kinds
    assert {"order", "payment_method", "item"} <= kinds and "product" not in kinds
