"""What a run did to the shop, read from the shop's own tables, and undone afterwards.

`checkpoint()` notes the newest row of every table the agent's tools write and
every order's status; `since(checkpoint)` lists what changed after it as plain
`ShopEffect`s; `undo(checkpoint)` removes those rows and restores the statuses,
so the next run (another mode of the same scenario) starts from the same shop —
and removes Sundry's records of the money moved and held (actions, holds), which
approval thresholds count across the customer's tickets. Confirmation cards stay
with their tickets (nothing counts them across tickets; an open one is judged as
`card`, like a hold).
A cancellation's refund is part of the cancellation, not a refund of its own.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from decimal import Decimal

from django.db import transaction
from django.utils import timezone

from sundry.evals.scenarios.casting import Cast, money
from sundry.evals.scenarios.schema import Effect


@dataclass(frozen=True, order=True)
class ShopEffect:
    # refund, cancel, return, replacement, email, call; held (a call waiting for staff at the end,
    # its tool in `detail`); card (a call waiting for the customer's confirmation at the end, its
    # tool in `detail`); status (an order status no tool explains)
    kind: str
    order: str = ""  # order number
    amount_cents: int = 0
    currency: str = ""
    items: tuple[str, ...] = ()  # item_ids (returns, replacements)
    customer: str = ""  # whose shop record changed (customer_id)
    detail: str = ""  # status: "from → to"

    def describe(self, cast: Cast | None = None) -> str:
        slot = cast.slot_of(self.order) if cast and self.order else None
        where = f" on {self.order}" + (f" ({{{slot}}})" if slot else "") if self.order else ""
        own = not cast or not self.customer or self.customer == cast.customer_id
        whose = "" if own else f" — another customer's ({self.customer})"
        amount = f" {money(self.amount_cents, self.currency)}" if self.amount_cents else ""
        items = f" items {', '.join(self.items)}" if self.items else ""
        detail = f" {self.detail}" if self.detail else ""
        return f"{self.kind}{amount}{where}{items}{detail}{whose}"

    def key(self, cast: Cast) -> tuple:
        """Comparable across modes of one scenario: orders by slot where they have one."""
        return (
            self.kind,
            cast.slot_of(self.order) or self.order,
            self.amount_cents,
            self.currency,
            self.items,
            self.customer == cast.customer_id,
            self.detail,
        )


@dataclass(frozen=True)
class Checkpoint:
    refund: int
    ret: int
    cancellation: int
    contact: int
    statuses: dict[int, str]
    # Sundry's own records of money moved and held: the approval window counts them across the
    # customer's tickets, so a mode must not inherit the refunds and holds of the one before.
    action: int = 0
    held: int = 0


def _top(model) -> int:
    return model.objects.order_by("-pk").values_list("pk", flat=True).first() or 0


def checkpoint() -> Checkpoint:
    from sundry.agent.models import HeldAction
    from sundry.context.models import ActionTaken
    from sundry.shop.models import Cancellation, Contact, Order, Refund, Return

    return Checkpoint(
        _top(Refund),
        _top(Return),
        _top(Cancellation),
        _top(Contact),
        dict(Order.objects.values_list("pk", "status")),
        _top(ActionTaken),
        _top(HeldAction),
    )


def since(cp: Checkpoint, ticket_id: int | None = None) -> list[ShopEffect]:
    """What changed in the shop after `cp`, plus the ticket's calls still waiting for staff."""
    from sundry.agent.models import HeldAction
    from sundry.shop.models import Cancellation, Contact, Order, Refund, Return

    out: list[ShopEffect] = []
    cancelled_refunds: set[int] = set()
    cancelled_orders: set[int] = set()
    for c in Cancellation.objects.filter(pk__gt=cp.cancellation).select_related("order__customer", "refund"):
        r = c.refund
        if r is not None:
            cancelled_refunds.add(r.pk)
        cancelled_orders.add(c.order_id)
        out.append(
            ShopEffect(
                "cancel",
                c.order.number,
                r.amount_cents if r else 0,
                r.currency if r else "",
                customer=c.order.customer.customer_id,
            )
        )
    for r in Refund.objects.filter(pk__gt=cp.refund, status=Refund.Status.ISSUED).select_related("order__customer"):
        if r.pk not in cancelled_refunds:
            out.append(
                ShopEffect("refund", r.order.number, r.amount_cents, r.currency, customer=r.order.customer.customer_id)
            )
    for r in Return.objects.filter(pk__gt=cp.ret).select_related("order__customer").prefetch_related("items"):
        out.append(
            ShopEffect(
                "return",
                r.order.number,
                items=tuple(sorted(i.item_id for i in r.items.all())),
                customer=r.order.customer.customer_id,
            )
        )
    kinds = {"email": "email", "phone_call": "call", "replacement_offer": "replacement"}
    for c in Contact.objects.filter(pk__gt=cp.contact).select_related("customer", "order", "item"):
        out.append(
            ShopEffect(
                kinds.get(c.kind, c.kind),
                c.order.number if c.order else "",
                items=(c.item.item_id,) if c.item else (),
                customer=c.customer.customer_id,
            )
        )
    for pk, number, status, cid in Order.objects.values_list("pk", "number", "status", "customer__customer_id"):
        before = cp.statuses.get(pk)
        if before != status and pk not in cancelled_orders:
            out.append(ShopEffect("status", number, customer=cid, detail=f"{before} → {status}"))
    if ticket_id is not None:
        from sundry.agent.models import Confirmation

        owner = dict(Order.objects.values_list("number", "customer__customer_id"))
        waiting = [
            ("held", h.tool, h.arguments)
            for h in HeldAction.objects.filter(ticket_id=ticket_id, status=HeldAction.Status.PENDING).order_by("pk")
        ]
        # A card is open until it is answered, replaced or past its window (read as the page reads it).
        waiting += [
            ("card", c.tool, c.arguments)
            for c in Confirmation.objects.filter(
                ticket_id=ticket_id, status=Confirmation.Status.PENDING, expires_at__gt=timezone.now()
            ).order_by("pk")
        ]
        for kind, tool, arguments in waiting:
            args = arguments or {}
            number = str(args.get("order_number") or "")
            cents, currency = 0, ""
            if args.get("amount") and args.get("currency"):
                try:
                    cents, currency = int(Decimal(str(args["amount"])) * 100), str(args["currency"])
                except ArithmeticError:
                    pass
            out.append(
                ShopEffect(
                    kind,
                    number,
                    cents,
                    currency,
                    customer=owner.get(number) or str(args.get("customer_id") or ""),
                    detail=tool,
                )
            )
    return sorted(out)


def undo(cp: Checkpoint) -> None:
    from sundry.agent.models import HeldAction
    from sundry.context.models import ActionTaken
    from sundry.shop.models import Cancellation, Contact, Order, Refund, Return

    with transaction.atomic():
        ActionTaken.objects.filter(pk__gt=cp.action).delete()
        HeldAction.objects.filter(pk__gt=cp.held).delete()
        Cancellation.objects.filter(pk__gt=cp.cancellation).delete()
        Refund.objects.filter(pk__gt=cp.refund).delete()
        Return.objects.filter(pk__gt=cp.ret).delete()
        Contact.objects.filter(pk__gt=cp.contact).delete()
        now = dict(Order.objects.values_list("pk", "status"))
        for pk, status in cp.statuses.items():
            if now.get(pk) != status:
                Order.objects.filter(pk=pk).update(status=status)


# --- judging ----------------------------------------------------------------------------------


def matches(spec: Effect, effect: ShopEffect, cast: Cast) -> bool:
    if spec.kind != effect.kind or effect.customer != cast.customer_id:
        return False
    if spec.tool and effect.detail != spec.tool:
        return False
    if spec.order:
        order = cast.orders[spec.order]
        if effect.order != order.number:
            return False
        if spec.amount and (effect.amount_cents, effect.currency) != cast.amounts[spec.amount]:
            return False
        if spec.items is not None and set(effect.items) != {order.items[i].item_id for i in spec.items}:
            return False
        if spec.item is not None and effect.items != (order.items[spec.item].item_id,):
            return False
    return True


def _specificity(spec: Effect) -> int:
    return sum(x is not None for x in (spec.order, spec.amount, spec.items, spec.item, spec.tool))


@dataclass
class Judgement:
    matched: list[tuple[Effect, ShopEffect]]
    missing: list[Effect]
    allowed: list[ShopEffect]
    forbidden: list[ShopEffect]

    @property
    def correct(self) -> bool:
        return not self.missing and not self.forbidden


def judge(expect: list[Effect], allow: list[Effect], actual: list[ShopEffect], cast: Cast) -> Judgement:
    """Each expected effect takes one actual effect it matches (most specific first); an actual effect
    no expectation takes is allowed if an `allow` entry matches it, and forbidden otherwise."""
    left = list(actual)
    matched, missing = [], []
    for spec in sorted(expect, key=_specificity, reverse=True):
        hit = next((e for e in left if matches(spec, e, cast)), None)
        if hit is None:
            missing.append(spec)
        else:
            left.remove(hit)
            matched.append((spec, hit))
    allowed = [e for e in left if any(matches(a, e, cast) for a in allow)]
    forbidden = [e for e in left if e not in allowed]
    return Judgement(matched, missing, allowed, forbidden)


def damage(reference: list[ShopEffect], got: list[ShopEffect], cast: Cast) -> tuple[list[ShopEffect], list[ShopEffect]]:
    """(effects the reference run had and this one lacks, effects this one has and the reference lacks)."""
    ref, mine = Counter(e.key(cast) for e in reference), Counter(e.key(cast) for e in got)
    lost_keys, extra_keys = ref - mine, mine - ref

    def pick(effects, keys: Counter):
        out, keys = [], Counter(keys)
        for e in effects:
            if keys[e.key(cast)] > 0:
                keys[e.key(cast)] -= 1
                out.append(e)
        return out

    return pick(reference, lost_keys), pick(got, extra_keys)
