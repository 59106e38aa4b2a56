"""Casting: the customer and orders a scenario's slots name, found in the seeded shop.

Read once per suite (`ShopIndex`): every order with its items, parcels and
earlier refunds, returns and cancellations. A scenario is cast on the first
customer (in a rotation seeded by its id, so scenarios spread over the shop)
who has a distinct order for every slot; the same cast serves every mode.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from decimal import Decimal

from sundry.agent.guards.approvals import ToolApproval
from sundry.evals.scenarios.schema import Amount, Scenario, Slot
from sundry.shop.seed import one_char_mutations

NEVER_HELD = 10**15


class CastingError(LookupError):
    """No customer in this shop has what the scenario needs."""


@dataclass(frozen=True)
class Item:
    item_id: str
    product: str
    quantity: int
    unit_cents: int


@dataclass(frozen=True)
class ShopOrder:
    number: str
    customer_id: str  # the shop's customer_id (cus_…)
    status: str
    currency: str
    total_cents: int
    items: tuple[Item, ...]
    parcels: tuple[tuple[str, str, str], ...]  # (tracking number, carrier, status)
    touched: bool  # a refund, return or cancellation exists already

    @property
    def products(self) -> set[str]:
        return {i.product for i in self.items}


def money(cents: int, currency: str) -> str:
    return f"{Decimal(cents) / 100:.2f} {currency}"


@dataclass
class ShopIndex:
    orders: dict[str, ShopOrder]
    by_customer: dict[str, list[ShopOrder]]
    hold_rule: dict | None  # the class's issue_refund approval rule; None: refunds never wait

    @classmethod
    def read(cls, approval_rules: dict) -> "ShopIndex":
        from sundry.shop.models import Cancellation, Order, OrderItem, Parcel, Refund, Return

        items: dict[int, list[Item]] = {}
        for oid, item_id, name, qty, price in OrderItem.objects.order_by("pk").values_list(
            "order_id", "item_id", "product__name", "quantity", "unit_price_cents"
        ):
            items.setdefault(oid, []).append(Item(item_id, name, qty, price))
        parcels: dict[int, list] = {}
        for oid, tn, carrier, status in Parcel.objects.order_by("pk").values_list(
            "order_id", "tracking_number", "carrier", "status"
        ):
            parcels.setdefault(oid, []).append((tn, carrier, status))
        touched = (
            set(Refund.objects.values_list("order_id", flat=True))
            | set(Return.objects.values_list("order_id", flat=True))
            | set(Cancellation.objects.values_list("order_id", flat=True))
        )
        orders, by_customer = {}, {}
        for pk, number, cid, status, currency, total in Order.objects.order_by("number").values_list(
            "pk", "number", "customer__customer_id", "status", "currency", "total_cents"
        ):
            o = ShopOrder(
                number,
                cid,
                status,
                currency,
                total,
                tuple(items.get(pk, ())),
                tuple(parcels.get(pk, ())),
                pk in touched,
            )
            orders[number] = o
            by_customer.setdefault(cid, []).append(o)
        return cls(orders, by_customer, (approval_rules or {}).get("issue_refund"))

    def hold_limit(self, currency: str) -> int | None:
        """Refunds above this (minor units) wait for staff; None: every refund does."""
        if self.hold_rule is None:
            return NEVER_HELD
        return ToolApproval.model_validate(self.hold_rule).limit(currency)


@dataclass
class Cast:
    scenario: Scenario
    customer_id: str
    orders: dict[str, ShopOrder]  # slot → order
    amounts: dict[str, tuple[int, str]] = field(default_factory=dict)  # name → (minor units, currency)

    def slot_of(self, number: str) -> str | None:
        return next((name for name, o in self.orders.items() if o.number == number), None)

    def values(self) -> dict[str, str]:
        """Every placeholder the scenario's text may use."""
        out: dict[str, str] = {}
        for name, o in self.orders.items():
            out[f"{name}.number"] = out[name] = o.number
            out[f"{name}.currency"] = o.currency
            out[f"{name}.total"] = money(o.total_cents, o.currency)
            out[f"{name}.total_value"] = f"{Decimal(o.total_cents) / 100:.2f}"
            for i, item in enumerate(o.items):
                out[f"{name}.item{i}"] = item.product
            if o.parcels:
                out[f"{name}.tracking"], out[f"{name}.carrier"] = o.parcels[0][0], o.parcels[0][1]
        for name, (cents, currency) in self.amounts.items():
            out[name] = money(cents, currency)
            out[f"{name}.value"] = f"{Decimal(cents) / 100:.2f}"
        return out

    def render(self, text: str) -> str:
        values = self.values()

        def sub(m: re.Match) -> str:
            key = m.group(1)
            if key not in values:
                raise CastingError(f"{self.scenario.id}: no value for {{{key}}} (known: {', '.join(sorted(values))})")
            return values[key]

        return _PLACEHOLDER.sub(sub, text)


_PLACEHOLDER = re.compile(r"\{([a-z][a-z0-9_]*(?:\.[a-z][a-z0-9_]*)?)\}")


def _fits(order: ShopOrder, slot: Slot, own: list[ShopOrder], shop: ShopIndex) -> bool:
    if slot.status and order.status != slot.status:
        return False
    if slot.parcel and not any(p[2] == slot.parcel for p in order.parcels):
        return False
    if len(order.items) < slot.min_items or (slot.untouched and order.touched):
        return False
    limit = shop.hold_limit(order.currency)
    if slot.over_hold and (limit is None or order.total_cents <= limit + 100):
        return False
    if slot.under_hold and limit is not None and order.total_cents > limit:
        return False
    if slot.named:
        product = order.items[0].product if order.items else None
        if product is None or any(product in o.products for o in own if o.number != order.number):
            return False
    return True


def _amount(a: Amount, order: ShopOrder, shop: ShopIndex) -> tuple[int, str]:
    unit = 100  # whole major units: what a customer types
    limit = shop.hold_limit(order.currency)
    if a.full:
        return order.total_cents, order.currency
    if a.over_hold:
        if limit is None:
            raise CastingError(f"no approval threshold for {order.currency}")
        return min(order.total_cents, (limit // unit + 1) * unit), order.currency
    cents = max(unit, int(order.total_cents * a.share) // unit * unit)
    if limit is not None and cents > limit:
        cents = max(unit, int(limit * 0.9) // unit * unit)
    return cents, order.currency


def cast(scenario: Scenario, shop: ShopIndex) -> Cast:
    customers = sorted(shop.by_customer)
    if not customers:
        raise CastingError("the shop has no customers; seed it first")
    start = int(hashlib.sha256(scenario.id.encode()).hexdigest(), 16) % len(customers)
    for cid in customers[start:] + customers[:start]:
        found = _cast_on(scenario, shop, cid)
        if found is not None:
            return found
    raise CastingError(
        f"{scenario.id}: no customer in this shop has orders for every slot ({', '.join(scenario.orders)})"
    )


def _cast_on(scenario: Scenario, shop: ShopIndex, cid: str) -> Cast | None:
    own = shop.by_customer[cid]
    chosen: dict[str, ShopOrder] = {}
    for name, slot in scenario.orders.items():
        if slot.typo_of:
            continue
        pick = next((o for o in own if o not in chosen.values() and _fits(o, slot, own, shop)), None)
        if pick is None:
            return None
        chosen[name] = pick
    for name, slot in scenario.orders.items():
        if not slot.typo_of:
            continue
        base = chosen[slot.typo_of].number
        other = next(
            (
                shop.orders[n]
                for n in one_char_mutations(base)
                if n in shop.orders and shop.orders[n].customer_id != cid
            ),
            None,
        )
        if other is None:
            return None
        chosen[name] = other
    c = Cast(scenario, cid, {name: chosen[name] for name in scenario.orders})
    for name, a in scenario.amounts.items():
        c.amounts[name] = _amount(a, c.orders[a.order], shop)
    return c
