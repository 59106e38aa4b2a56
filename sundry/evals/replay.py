"""Rebuild a ticket's lanes from its turns, purely, the way the services would have.

Feeding turns one by one mirrors what production does at each event:
customer text → unverified IDs and rule candidates; a successful tool result →
IDs harvested by the domain's description (verified), the call's IDs touched,
eviction past the cap by last use, side effects into `actions`, money into
`money`; lane tools (pin, label, record_fact) into their lanes. No ORM: the
harness runs recorded tickets without a database.

One modelling choice, stated where it is made: customer sentences that the
rule classifier flags are treated as pinned (in production a candidate waits
for staff or the agent's `pin_constraint`; the offline model pins at once).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field, replace

from sundry.context.lanes import (
    eviction_key,
    next_role,
    ActionData,
    LaneSnapshot,
    LedgerData,
    MoneyData,
    RuleData,
    StateFieldData,
    TurnData,
)
from sundry.context.rules import candidate_rules


@dataclass
class StatedConstraint:
    text: str
    turn: int
    source: str


@dataclass
class CompletedAction:
    tool: str
    target: str
    turn: int
    call_id: str = ""


@dataclass
class LaneReplay:
    domain: object
    ticket_id: int = 0
    customer_id: str = ""
    ledger_cap: int = 24
    keep_recent: int = 8
    ledger: dict[str, LedgerData] = field(default_factory=dict)
    rules: dict[str, RuleData] = field(default_factory=dict)
    actions: list[ActionData] = field(default_factory=list)
    money: dict[str, MoneyData] = field(default_factory=dict)
    state: dict[str, StateFieldData] = field(default_factory=dict)
    calls: dict[str, dict] = field(default_factory=dict)  # call id → {"name", "arguments", "turn"}
    stated: list[StatedConstraint] = field(default_factory=list)
    action_calls: list[str] = field(default_factory=list)  # call id of each action, in order
    history: list[TurnData] = field(default_factory=list)

    def __post_init__(self):
        if self.customer_id:  # ticket_create records the desk's customer as verified and in use, at turn 0
            self.ledger[self.customer_id] = LedgerData("customer", self.customer_id, "customer", True, 0, 0, used=True)

    # --- ledger ----------------------------------------------------------------------

    def _role(self, base: str) -> str:
        return next_role(base, {e.role for e in self.ledger.values()})

    def _record(self, kind: str, value: str, turn: int, verified: bool, note: str = "") -> None:
        e = self.ledger.get(value)
        if e is None:
            role = self._role(kind if verified else f"{kind}_mentioned")
            self.ledger[value] = LedgerData(role, value, kind, verified, turn, turn, note=note)
            return
        if not verified:
            return  # typed again: nothing new
        if not e.verified and e.role.endswith("_mentioned"):
            e = replace(e, role=self._role(kind))  # verified now: it earns its kind's default role
        if e.archived and any(o.role == e.role and not o.archived for o in self.ledger.values() if o is not e):
            e = replace(e, role=self._role(kind))
        self.ledger[value] = replace(e, verified=True, archived=False, last_used_turn=max(e.last_used_turn, turn))

    def _touch(self, values: list[str], turn: int) -> None:
        for v in values:
            if v in self.ledger:
                e = self.ledger[v]
                self.ledger[v] = replace(e, last_used_turn=max(e.last_used_turn, turn), used=True)

    def _evict(self) -> None:
        active = [e for e in self.ledger.values() if not e.archived]
        excess = len(active) - self.ledger_cap
        if excess > 0:
            for e in sorted(active, key=eviction_key)[:excess]:
                self.ledger[e.value] = replace(e, archived=True)

    # --- rules -------------------------------------------------------------------------

    def pin(self, text: str, turn: int, source: str, enforcement: dict | None = None) -> None:
        text = text.strip()
        if text and text not in self.rules:
            self.rules[text] = RuleData(id=len(self.rules) + 1, text=text, turn=turn, source=source,
                                        enforcement=enforcement if enforcement is not None else self.domain.enforcement(text))

    # --- feeding turns ---------------------------------------------------------------------

    def feed(self, t: TurnData) -> None:
        self.history.append(t)
        p = t.payload or {}
        if t.author in ("customer", "staff") and t.kind in ("message", "note"):
            if t.author == "customer":
                for kind, value in self.domain.typed_ids(t.text):
                    self._record(kind, value, t.number, verified=False)
                self._evict()
            for sentence in candidate_rules(t.text):
                self.stated.append(StatedConstraint(sentence, t.number, t.author))
                self.pin(sentence, t.number, t.author)
        elif t.kind == "tool_call":
            for c in p.get("calls") or []:
                if isinstance(c, dict) and c.get("id"):
                    self.calls[str(c["id"])] = {"name": str(c.get("name")), "arguments": c.get("arguments") or {},
                                                "turn": t.number}
        elif t.kind == "tool_result" and p.get("ok", True) and not p.get("held"):
            call = self.calls.get(str(p.get("call_id")))
            if call is None:
                return
            self._result(call, t)

    def _result(self, call: dict, t: TurnData) -> None:
        name, args = call["name"], call["arguments"]
        owners = self.domain.owners(name, t)
        for kind, value in self.domain.harvest(name, t):
            self._record(kind, value, t.number, verified=True, note=f"of {owners[value]}" if value in owners else "")
        self._touch([v for _, _, v in self.domain.id_args(name, args)], t.number)
        self._evict()
        if (m := self.domain.money(name, t)) is not None:
            self.money[m.order] = m
        if self.domain.side_effect(name):
            key = (t.payload or {}).get("idempotency_key") or hashlib.sha256(
                f"{self.ticket_id}|{name}|{json.dumps(args, sort_keys=True, default=str)}".encode()).hexdigest()[:40]
            data = (t.payload or {}).get("result") if isinstance((t.payload or {}).get("result"), dict) else {}
            amount = data.get("amount_cents") if isinstance(data.get("amount_cents"), int) else None
            self.actions.append(ActionData(tool=name, target=self.domain.target(name, args), turn=t.number,
                                           idempotency_key=key, reversible=self.domain.reversible(name),
                                           amount_cents=amount, currency=str(data.get("currency") or "")))
            self.action_calls.append(str((t.payload or {}).get("call_id") or ""))
        elif isinstance(args, dict):
            self._lane_tool(name, args, t)

    def _lane_tool(self, name: str, args: dict, t: TurnData) -> None:
        data = (t.payload or {}).get("result") or {}
        if name == "pin_constraint" and args.get("text"):
            self.pin(str(args["text"]), t.number, "model")
        elif name == "label_entity" and args.get("value") in self.ledger and args.get("role"):
            self.ledger[args["value"]] = replace(self.ledger[args["value"]], role=str(args["role"]))
        elif name == "record_fact" and isinstance(data, dict) and data.get("name"):
            self.state[data["name"]] = StateFieldData(data["name"], str(data.get("value", "")), t.number,
                                                      str(data.get("source", "model")), False)

    # --- reading -----------------------------------------------------------------------------

    def completed(self) -> list[CompletedAction]:
        return [CompletedAction(a.tool, a.target, a.turn, cid) for a, cid in zip(self.actions, self.action_calls)]

    def call_names(self) -> dict[str, str]:
        return {cid: c["name"] for cid, c in self.calls.items()}

    def snapshot(self, turns: list[TurnData] | None = None, *, policy: str = "") -> LaneSnapshot:
        """The lanes now, over `turns` (default: every turn fed so far, i.e. uncompacted)."""
        return LaneSnapshot(
            ticket_id=self.ticket_id, customer_id=self.customer_id, class_policy=policy or self.domain.policy,
            rules=list(self.rules.values()), ledger=[e for e in self.ledger.values() if not e.archived],
            state=list(self.state.values()), actions=list(self.actions), money=list(self.money.values()),
            turns=list(self.history if turns is None else turns), recent_turns_kept=self.keep_recent,
        )
