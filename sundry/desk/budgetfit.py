"""Whether a ticket class's budget leaves room to work: the fixed part of every request against it.

Every request carries the system prompt and the tool schemas whatever compaction does. What
compaction can bring a request down to is that fixed part plus a summary and the recent turns it
never replaces; when that floor is over the trigger, every compaction leaves the request over
(the desk then says "Over the budget, not compacted"). Counted with the same assembly and
tokenizer the agent's steps use, on a request with empty lanes.
"""

from __future__ import annotations

from dataclasses import dataclass

from sundry.agent.step import assemble_request
from sundry.compaction.trigger import EXPECTED_SUMMARY_TOKENS
from sundry.context.harvest import ledger_allowance
from sundry.context.lanes import LaneSnapshot
from sundry.tickets.models import Ticket, TicketClass
from sundry.tooling.domain import domain_for

# A recent turn the summary never replaces, at the least: the admin form's own floor per turn.
MIN_TURN_TOKENS = 50
# A recent turn as the desk's tickets hold them (a customer message, a call and its result):
# what the warning assumes the kept turns take.
TYPICAL_TURN_TOKENS = 150


@dataclass(frozen=True)
class Fit:
    budget: int
    trigger: int
    system: int
    tools: int
    framing: int
    summary: int
    kept_turns: int
    ledger_allowance: int

    @property
    def fixed(self) -> int:
        return self.system + self.tools + self.framing

    @property
    def fixed_share(self) -> int:
        return round(100 * self.fixed / self.budget) if self.budget else 0

    @property
    def left(self) -> int:
        """Under the trigger, once the fixed part is in: what the lanes and turns may fill."""
        return self.trigger - self.fixed

    @property
    def floor(self) -> int:
        """The least a compacted request holds: fixed part, a summary, the kept turns at a typical size."""
        return self.fixed + self.summary + self.kept_turns * TYPICAL_TURN_TOKENS

    @property
    def hard_floor(self) -> int:
        """The same with every kept turn at the form's minimum: below it nothing can work."""
        return self.fixed + self.summary + self.kept_turns * MIN_TURN_TOKENS

    @property
    def impossible(self) -> bool:
        return self.hard_floor > self.trigger

    @property
    def tight(self) -> bool:
        return self.floor > self.trigger

    def explain(self) -> str:
        return (
            f"Every request carries a fixed part of {self.fixed:,} tokens (system prompt {self.system:,} + "
            f"tool schemas {self.tools:,}"
            + (f" + {self.framing:,} for the lanes' headings and the chat framing" if self.framing else "")
            + f"): {self.fixed_share}% of the {self.budget:,}-token budget. Under the trigger "
            f"({self.trigger:,}) that leaves {self.left:,} tokens for the rules, ledger (allowed "
            f"{self.ledger_allowance:,}), state, summary and recent turns."
        )

    def problem(self) -> str:
        """Why compaction cannot bring requests under this budget, or "" when it can."""
        if not self.tight:
            return ""
        return (
            f"{self.explain()} A compacted request still holds the fixed part, a summary (about "
            f"{self.summary:,}) and the {self.kept_turns} recent turns kept (about {TYPICAL_TURN_TOKENS} "
            f"each): about {self.floor:,} tokens, over the trigger of {self.trigger:,}, so compaction "
            f"cannot bring requests under it. Raise the budget or the trigger, or keep fewer recent turns."
        )


def fixed_part(
    tclass: TicketClass,
    *,
    budget: int | None = None,
    trigger_fraction: float | None = None,
    recent_turns_kept: int | None = None,
    ledger_share: float | None = None,
    description: str | None = None,
) -> Fit:
    """The class's fixed part, with the budget figures as given (default: the class's own).

    A request with empty lanes and no turns, assembled as the class's steps are (its tool
    servers' tools and prompts when it has servers, else its domain's), holds exactly the
    system prompt, the tool schemas, the empty lanes' headings and the chat format's framing.
    """
    budget = budget if budget is not None else tclass.token_budget
    fraction = trigger_fraction if trigger_fraction is not None else tclass.trigger_fraction
    kept = recent_turns_kept if recent_turns_kept is not None else tclass.recent_turns_kept
    share = ledger_share if ledger_share is not None else tclass.ledger_share
    policy = description if description is not None else tclass.description  # the class's policy is in the prompt
    empty = LaneSnapshot(
        ticket_id=0, customer_id="", class_policy=policy, recent_turns_kept=kept, domain=domain_for(tclass).name
    )
    accounting = assemble_request(Ticket(ticket_class=tclass), empty).accounting
    system, tools = accounting.lane_tokens.get("system", 0), accounting.tools_tokens
    return Fit(
        budget=budget,
        trigger=int(budget * fraction),
        system=system,
        tools=tools,
        framing=accounting.total_tokens - system - tools,
        summary=EXPECTED_SUMMARY_TOKENS,
        kept_turns=kept,
        ledger_allowance=ledger_allowance(budget, share),
    )
