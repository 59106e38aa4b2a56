"""Response timers: how long a customer has waited, against the ticket class's targets.

Pure: times and targets in, a label and a level out. "near" from three quarters
of the target, "past" beyond it.

Whose reply stops a timer depends on whom the customer is waiting for
(`sundry.desk.selectors.with_timers`): on a ticket waiting on staff — a
follow-up promised, an action held for approval, any attention flag — only a
person's reply does, and the timer says "staff"; on any other ticket the agent's
reply does too.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

NEAR = 0.75


@dataclass(frozen=True)
class Timer:
    kind: str  # "first response" or "next response", after "staff " when only a person's reply stops it
    waited: timedelta
    target: timedelta
    level: str  # ok, near, past

    @property
    def label(self) -> str:
        return f"{self.kind} {short(self.waited)} / {short(self.target)}"

    @property
    def left(self) -> timedelta:
        return self.target - self.waited


def short(span: timedelta) -> str:
    minutes = int(span.total_seconds() // 60)
    if minutes < 60:
        return f"{max(minutes, 0)}m"
    hours, minutes = divmod(minutes, 60)
    if hours < 48:
        return f"{hours}h {minutes:02d}m" if minutes else f"{hours}h"
    return f"{hours // 24}d {hours % 24}h"


def level(waited: timedelta, target: timedelta) -> str:
    if waited >= target:
        return "past"
    return "near" if waited >= target * NEAR else "ok"


def response_timer(
    *,
    now: datetime,
    waiting_since: datetime | None,
    answered_before: bool,
    first_minutes: int,
    next_minutes: int,
    staff: bool = False,
) -> Timer | None:
    """The timer running now, or None when nobody is waiting for a reply.

    `waiting_since`: the customer's oldest message that no reply counted here has followed;
    `answered_before`: whether such a reply came before it; `staff`: only staff replies count.
    """
    if waiting_since is None:
        return None
    kind, minutes = ("next response", next_minutes) if answered_before else ("first response", first_minutes)
    kind = f"staff {kind}" if staff else kind
    waited, target = now - waiting_since, timedelta(minutes=minutes)
    return Timer(kind, waited, target, level(waited, target))
