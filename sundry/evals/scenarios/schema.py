"""What a scenario file declares, validated on load.

A file holds one scenario or a list of them. Each scenario names the orders it
needs as *slots* with criteria over the seeded shop (`casting` finds a customer
who has them all); messages, expected effects and reply facts refer to slots
with `{slot.field}` placeholders, so no login name or order number is written
down and the same file works on any seed that has such a customer.

A call that moves money, cannot be undone or contacts the customer outside the
conversation runs only once the customer confirms its card: a script says where
the customer presses Confirm (`{"customer": "confirm"}`) or Not now
(`{"customer": "decline"}`), or leaves the cards open (`{"customer": "ignore"}`,
which presses nothing). A typed "yes" is a message like any other. A message sent
before the agent answered the one before it is `{"also": "…"}`; one sent while the
agent is already working on the one before (after its first step) is `{"during": "…"}`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Literal, Union

from pydantic import BaseModel, ConfigDict, Field, model_validator

FILES = Path(__file__).resolve().parent / "files"
ORDER_STATUSES = ("placed", "shipped", "delivered", "cancelled", "returned")
PARCEL_STATUSES = ("label_created", "in_transit", "out_for_delivery", "delivered", "lost")
EFFECT_KINDS = ("refund", "cancel", "return", "replacement", "email", "call", "held", "card")
HELD_TOOLS = ("issue_refund", "cancel_order", "book_return", "offer_replacement", "send_email", "log_phone_call")
MIN_MESSAGES, MAX_MESSAGES = 8, 30


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Slot(Strict):
    """An order the scenario needs, by what it must be like."""

    status: Literal[ORDER_STATUSES] | None = None
    parcel: Literal[PARCEL_STATUSES] | None = Field(None, description="Has a parcel in this state.")
    min_items: int = Field(1, ge=1, description="Distinct items on the order.")
    named: bool = Field(
        False,
        description="Its first item's product is on no other order of the customer, so "
        "the customer can name the order by it.",
    )
    untouched: bool = Field(True, description="No refund, return or cancellation on it yet.")
    over_hold: bool = Field(False, description="Its total is above the class's refund approval threshold.")
    under_hold: bool = Field(False, description="Its total is at most the class's refund approval threshold.")
    # Orders that are not the customer's own:
    typo_of: str | None = Field(
        None, description="A one-character slip of this slot's number that names another customer's real order."
    )

    @model_validator(mode="after")
    def _coherent(self):
        if self.over_hold and self.under_hold:
            raise ValueError("a slot cannot be both over_hold and under_hold")
        if self.typo_of and (self.status or self.parcel or self.named or self.over_hold or self.under_hold):
            raise ValueError("a typo_of slot is another customer's order: it takes no other criteria")
        return self


class Amount(Strict):
    """A sum of money on one order, in its currency, in whole major units."""

    order: str
    share: float | None = Field(
        None, gt=0, le=1, description="This share of the order total, kept under the approval threshold."
    )
    full: bool = Field(False, description="The order's total.")
    over_hold: bool = Field(False, description="Just above the class's approval threshold.")

    @model_validator(mode="after")
    def _one_rule(self):
        if sum([self.share is not None, self.full, self.over_hold]) != 1:
            raise ValueError("an amount is exactly one of share, full or over_hold")
        return self


class Staff(Strict):
    """Something staff do between the customer's messages."""

    staff: Literal["approve", "reject", "take_over", "reply", "hand_back", "note", "set_state"]
    text: str = ""
    field: str = ""
    value: str = ""

    @model_validator(mode="after")
    def _needs(self):
        if self.staff in ("reply", "note") and not self.text:
            raise ValueError(f"staff {self.staff} needs text")
        if self.staff == "set_state" and not (self.field and self.value):
            raise ValueError("staff set_state needs field and value")
        return self


class CustomerStep(Strict):
    """The customer answers the confirmation cards on their screen, between messages.

    `confirm` presses Confirm on every open card, oldest first (`decline`: Not now), through the
    same service the page's button posts to; `order` narrows it to the open cards for that slot's
    order (a customer who reads two cards and confirms one). `ignore` presses nothing: the cards
    stay open. With no open card it does nothing."""

    customer: Literal["confirm", "decline", "ignore"]
    order: str | None = Field(None, description="Only the open cards that act on this slot's order.")

    @model_validator(mode="after")
    def _needs(self):
        if self.order and self.customer == "ignore":
            raise ValueError("customer ignore presses nothing: it names no order")
        return self


class Also(Strict):
    """A customer message sent right after the one before it, before the agent answered that one:
    both are stored, then the agent works once. It counts as a customer message (facts index it)."""

    also: str = Field(min_length=1)


class During(Strict):
    """A customer message sent while the agent works on the one before it: posted just before the
    run's second model call, so the step making that call cannot have read it. It counts as a
    customer message (facts index it)."""

    during: str = Field(min_length=1)


# A customer's message, whichever way it reaches the ticket.
Message = (str, Also, During)


def message_text(step) -> str:
    return step.also if isinstance(step, Also) else step.during if isinstance(step, During) else step


Step = Union[str, Also, During, Staff, CustomerStep]


class Effect(Strict):
    """One change in the shop. `order` names a slot; for email and call there is none.

    `held`: a call still waiting for staff when the conversation ends — not yet a change
    in the shop, but one staff are asked to make, so it is judged like one.
    `card`: a call still waiting for the customer's confirmation when the conversation ends
    (an open card) — the customer is asked to make it, so it is judged like one too."""

    kind: Literal[EFFECT_KINDS]
    tool: Literal[HELD_TOOLS] | None = Field(None, description="held, card: the tool waiting; none means any.")
    order: str | None = None
    amount: str | None = Field(None, description="An amount's name (refunds); none means any amount.")
    items: list[int] | None = Field(None, description="Returns: indexes of the slot's items; none means any.")
    item: int | None = Field(None, description="Replacements: index of the slot's item; none means any.")

    @model_validator(mode="after")
    def _shape(self):
        if self.tool and self.kind not in ("held", "card"):
            raise ValueError("only a held effect or a card names a tool")
        if self.kind in ("held", "card"):
            pass
        elif self.kind in ("email", "call"):
            if self.order or self.amount or self.items or self.item is not None:
                raise ValueError(f"a {self.kind} effect names no order, amount or items")
        elif not self.order:
            raise ValueError(f"a {self.kind} effect names its order slot")
        if self.amount and self.kind not in ("refund", "held", "card"):
            raise ValueError("only a refund (or a held refund, or a refund on a card) has an amount")
        return self


class Fact(Strict):
    """What the agent's replies to one customer message (until the next one) must say.

    `after` is the index of that message among the customer's messages (0 = first).
    Each entry of `all` must appear; an entry may be a list of alternatives.
    Matching ignores case. `none`: phrases that must not appear."""

    after: int = Field(ge=0)
    all: list[Union[str, list[str]]] = Field(default_factory=list)
    none: list[str] = Field(default_factory=list)
    why: str = ""


class Scenario(Strict):
    id: str = Field(pattern=r"^[a-z0-9][a-z0-9-]*$")
    title: str
    themes: list[str] = Field(min_length=1)
    fast: bool = Field(False, description="In the CI slice.")
    orders: dict[str, Slot] = Field(min_length=1)
    amounts: dict[str, Amount] = Field(default_factory=dict)
    script: list[Step]
    expect: list[Effect] = Field(default_factory=list)
    allow: list[Effect] = Field(default_factory=list, description="Effects a correct agent may also take.")
    facts: list[Fact] = Field(default_factory=list)
    min_compactions: int = Field(
        0, ge=0, description="Compactions this scenario must reach when production triggers them (long scenarios: 3)."
    )
    note: str = ""

    @property
    def customer_messages(self) -> list[str]:
        return [message_text(s) for s in self.script if isinstance(s, Message)]

    @model_validator(mode="after")
    def _consistent(self):
        n = len(self.customer_messages)
        if not MIN_MESSAGES <= n <= MAX_MESSAGES:
            raise ValueError(f"{self.id}: {n} customer messages; a scenario has {MIN_MESSAGES}–{MAX_MESSAGES}")
        for name, slot in self.orders.items():
            if slot.typo_of and slot.typo_of not in self.orders:
                raise ValueError(f"{self.id}: slot {name} is a typo of unknown slot {slot.typo_of}")
        for name, amount in self.amounts.items():
            if amount.order not in self.orders:
                raise ValueError(f"{self.id}: amount {name} is on unknown slot {amount.order}")
            if name in self.orders:
                raise ValueError(f"{self.id}: {name} is both a slot and an amount")
        for e in [*self.expect, *self.allow]:
            if e.order and e.order not in self.orders:
                raise ValueError(f"{self.id}: effect on unknown slot {e.order}")
            if e.amount and e.amount not in self.amounts:
                raise ValueError(f"{self.id}: effect with unknown amount {e.amount}")
        for i, step in enumerate(self.script):
            if isinstance(step, CustomerStep) and step.order and step.order not in self.orders:
                raise ValueError(f"{self.id}: a customer step on unknown slot {step.order}")
            if isinstance(step, (Also, During)) and (i == 0 or not isinstance(self.script[i - 1], Message)):
                word = "an 'also'" if isinstance(step, Also) else "a 'during'"
                raise ValueError(f"{self.id}: {word} message follows a customer message (step {i})")
        for f in self.facts:
            if f.after >= n:
                raise ValueError(f"{self.id}: a fact after message {f.after}, but there are {n} messages")
        return self


class ScenarioFile(BaseModel):
    scenarios: list[Scenario]


def load(paths: list[Path] | None = None) -> list[Scenario]:
    """Every scenario in the given files (default: all of `files/`), ids unique."""
    out: list[Scenario] = []
    for path in paths or sorted(FILES.glob("*.json")):
        data = json.loads(Path(path).read_text())
        try:
            out += ScenarioFile.model_validate({"scenarios": data if isinstance(data, list) else [data]}).scenarios
        except ValueError as exc:
            raise ValueError(f"{path}: {exc}") from None
    seen: set[str] = set()
    for s in out:
        if s.id in seen:
            raise ValueError(f"scenario id {s.id} appears twice")
        seen.add(s.id)
    return out
