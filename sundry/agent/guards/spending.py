"""Money a call would move, and what was moved before it over the class's window (pure).

An approval threshold is about how much money leaves without staff, not about
one call: three refunds of 7,999 INR on one order are 23,997 INR whichever
tickets they came from. So the approval guard adds a call's amount to what was
refunded on the same order, and for the same customer, over the ticket class's
`approval_window_hours`, in the call's currency, counting both refunds executed
and calls still held for a decision (`agent.spending_reads` gathers them).

What a call moves is read from its arguments (an amount) or, for a tool whose
result declares `moves_money` but that takes no amount (a cancellation that
refunds whatever was captured), the order's refundable amount in the money lane.
Executed money is read from stored results by the same declarations.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable

from pydantic import BaseModel

from sundry.core import money as money_fmt
from sundry.tooling.declarations import model_declares
from sundry.tooling.tools import Tool

EXECUTED, PENDING = "executed", "pending"


@dataclass(frozen=True)
class Spent:
    """Money that moved (or is held to move) for the ticket's customer."""

    order: str
    currency: str
    cents: int
    state: str  # EXECUTED or PENDING
    ticket: int
    where: str = ""  # "hold #12", "turn 7", for the reason staff and the model read


@dataclass(frozen=True)
class Window:
    """The class's window and what the customer's tickets moved or hold inside it."""

    hours: int
    spent: tuple[Spent, ...] = field(default_factory=tuple)

    def before(self, order: str, currency: str) -> tuple[int, int, list[Spent]]:
        """(on this order, for this customer, the records counted) in `currency`, minor units."""
        same = [s for s in self.spent if s.currency.upper() == currency.upper()]
        return sum(s.cents for s in same if s.order == order), sum(s.cents for s in same), same


@dataclass(frozen=True)
class CallMoney:
    """What one call would move: None cents when it cannot be known before it runs."""

    order: str
    currency: str
    cents: int | None


def moves_money(tool: Tool) -> bool:
    """A tool whose result declares money moving (a refund, a cancellation that refunds): in its
    result model, or for a tool server's tool in its declaration file (`decl.money`)."""
    decl = getattr(tool, "decl", None)
    if decl is not None:
        return bool(decl.money)
    return model_declares(tool.result_model, "moves_money")


def _order_of(tool: Tool, args: BaseModel) -> str:
    if tool.target_arg and tool.id_args.get(tool.target_arg) == "order":
        return str(getattr(args, tool.target_arg, "") or "")
    return next((str(getattr(args, n, "") or "") for n, kind in tool.id_args.items() if kind == "order"), "")


def _amount(args: BaseModel) -> int | None:
    cents = getattr(args, "amount_cents", None)
    if isinstance(cents, int) and not isinstance(cents, bool):
        return cents
    amount, currency = getattr(args, "amount", None), str(getattr(args, "currency", "") or "")
    if amount is None:
        return None
    try:
        return money_fmt.parse_major(str(amount), currency, allow_negative=True)
    except money_fmt.MoneyError:
        return None


def call_money(tool: Tool, args: BaseModel, lane: Iterable) -> CallMoney | None:
    """What `tool(args)` would move, or None when it moves no money.

    `lane` is the money lane (objects with order, currency, paid_cents, refunded_cents):
    a call without an amount moves what is still refundable on its order; an order the
    lane does not know gives an unknown amount, which the guard holds.
    """
    has_amount = getattr(args, "amount_cents", None) is not None or getattr(args, "amount", None) is not None
    if not (has_amount or moves_money(tool)):
        return None
    order = _order_of(tool, args)
    known = next((m for m in lane if m.order == order), None)
    currency = str(getattr(args, "currency", "") or (known.currency if known else "")).upper()
    if has_amount:
        return CallMoney(order, currency, _amount(args))
    if known is None:
        return CallMoney(order, currency, None)
    return CallMoney(order, currency, max(0, known.paid_cents - known.refunded_cents))


def fmt(cents: int, currency: str) -> str:
    try:
        return money_fmt.format_money(cents, currency)
    except money_fmt.MoneyError:
        return f"{cents} minor units of {currency!r}"


def over_limit(window: Window, call: CallMoney, limit: int) -> str:
    """Why `call` on top of the window's totals passes `limit`, or "" when it stays within it."""
    if call.cents is None or call.cents <= 0:  # unknown is the guard's to hold; nothing moves nothing
        return ""
    on_order, for_customer, counted = window.before(call.order, call.currency)
    if call.cents + on_order <= limit and call.cents + for_customer <= limit:
        return ""
    total, scope = (
        (call.cents + on_order, f"on {call.order}")
        if call.cents + on_order > limit
        else (call.cents + for_customer, "for this customer")
    )
    tickets = sorted({s.ticket for s in counted if scope == "for this customer" or s.order == call.order})
    pending = sum(
        s.cents for s in counted if s.state == PENDING and (scope == "for this customer" or s.order == call.order)
    )
    already = total - call.cents
    if not already:
        return (
            f"{fmt(call.cents, call.currency)} is above the {fmt(limit, call.currency)} allowed without staff approval"
        )
    parts = [f"{fmt(already - pending, call.currency)} refunded"] if already > pending else []
    parts += [f"{fmt(pending, call.currency)} held"] if pending else []
    return (
        f"{fmt(call.cents, call.currency)} more makes {fmt(total, call.currency)} {scope} in "
        f"{window.hours} h ({' and '.join(parts)} already, ticket{'s' if len(tickets) != 1 else ''} "
        f"{', '.join(f'#{t}' for t in tickets)}), above the {fmt(limit, call.currency)} allowed without staff approval"
    )
