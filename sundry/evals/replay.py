"""Rebuild a ticket's lanes from its turns, purely, the way the services would have.

Feeding turns one by one mirrors what production does at each event:
customer text → unverified IDs and rule candidates; a successful tool result →
IDs harvested by the domain's description (verified), the call's IDs touched,
eviction past the cap by last use, side effects into `actions`, money into
`money`; lane tools (pin, label, record_fact) into their lanes. No ORM: the
harness runs recorded tickets without a database.

Sentences the rule classifier flags become *candidate rules*, as in production
(`services.rule_flag_candidates`): in the rules block at once, unconfirmed,
stated by the customer (or staff), with the check the product infers from their
words, rendered by the same code. Separately, the constraint classifier's low
threshold (`context.constraints`, what a summary quotes) is kept in `flagged`
so the harness can score it against labelled constraints.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field, replace

from sundry.context import harvest
from sundry.context.constraints import constraint_sentences
from sundry.context.harvest import LedgerRow
from sundry.context.lanes import (
    ActionData,
    LaneSnapshot,
    LedgerData,
    MoneyData,
    RuleData,
    StateFieldData,
    TurnData,
)
from sundry.context.rules import candidate_rules
from sundry.tooling.domain import arguments_digest


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
    ledger_tokens: int = 2400  # the live ledger's allowance (`harvest.ledger_allowance`)
    classifier: object = candidate_rules  # production's rule classifier; a control may switch it off
    quoter: object = constraint_sentences  # the low threshold a summary quotes (scored, never enforced)
    keep_recent: int = 8
    # Entries no write takes leave the window first (`harvest.evict`); False: by last use alone (a control).
    evict_by_need: bool = True
    rows: dict[str, LedgerRow] = field(default_factory=dict)  # the ledger, by value, archived entries too
    rules: dict[str, RuleData] = field(default_factory=dict)
    actions: list[ActionData] = field(default_factory=list)
    money: dict[str, MoneyData] = field(default_factory=dict)
    state: dict[str, StateFieldData] = field(default_factory=dict)
    calls: dict[str, dict] = field(default_factory=dict)  # call id → {"name", "arguments", "turn"}
    candidates: list[StatedConstraint] = field(default_factory=list)  # flagged: candidate rules
    flagged: list[StatedConstraint] = field(default_factory=list)  # customer sentences the quoter flags
    action_calls: list[str] = field(default_factory=list)  # call id of each action, in order
    history: list[TurnData] = field(default_factory=list)
    owned: dict[str, str] = field(default_factory=dict)  # ID → the customer a result said owns it
    identified: set[str] = field(default_factory=set)  # customer IDs a lookup identified as the ticket's own

    @property
    def needed_kinds(self) -> frozenset[str] | None:
        domain = getattr(self.domain, "domain", None)
        return domain.write_kinds if self.evict_by_need and domain is not None else None

    @property
    def live_kinds(self) -> frozenset[str]:
        domain = getattr(self.domain, "domain", None)
        return domain.live_id_kinds() if domain is not None else frozenset()

    def __post_init__(self):
        if self.customer_id:  # ticket_create records the desk's customer as verified and in use, at turn 0
            self.rows[self.customer_id] = LedgerRow(self.customer_id, "customer", "customer", True, 0, 0, used=True)

    # --- ledger: the same plans the live services apply (`context.harvest`) ----------------

    @property
    def ledger(self) -> dict[str, LedgerData]:
        """Every entry, archived ones too, as the lanes carry them."""
        return {
            r.value: LedgerData(
                r.role,
                r.value,
                r.kind,
                r.verified,
                r.first_seen_turn,
                r.last_used_turn,
                note=r.note,
                archived=not r.active,
                used=r.used,
                description=r.description,
                customer=self.owned.get(r.value, ""),
                identifies=r.value in self.identified,
            )
            for r in self.rows.values()
        }

    # --- rules -------------------------------------------------------------------------

    def pin(
        self, text: str, turn: int, source: str, enforcement: dict | None = None, *, confirmed: bool = True
    ) -> None:
        """A rule in force; pinning the text of a candidate confirms it, as staff do on the desk."""
        text = text.strip()
        if text and text in self.rules:
            if confirmed and not self.rules[text].confirmed:
                self.rules[text] = replace(self.rules[text], confirmed=True)
        elif text:
            self.rules[text] = RuleData(
                id=len(self.rules) + 1,
                text=text,
                turn=turn,
                source=source,
                enforcement=enforcement if enforcement is not None else self.domain.enforcement(text),
                confirmed=confirmed,
            )

    # --- feeding turns ---------------------------------------------------------------------

    def feed(self, t: TurnData) -> None:
        self.history.append(t)
        p = t.payload or {}
        if t.author in ("customer", "staff") and t.kind in ("message", "note"):
            if t.author == "customer":
                typed = [(value, kind) for kind, value in self.domain.typed_ids(t.text)]
                harvest.plan_mentions(
                    self.rows,
                    typed,
                    turn=t.number,
                    cap=self.ledger_tokens,
                    needed_kinds=self.needed_kinds,
                    live_kinds=self.live_kinds,
                )
            for sentence in self.classifier(t.text):
                self.candidates.append(StatedConstraint(sentence, t.number, t.author))
                self.pin(sentence, t.number, t.author, confirmed=False)  # a candidate rule, as production adds it
            if t.author == "customer":
                self.flagged += [StatedConstraint(s, t.number, t.author) for s in self.quoter(t.text)]
        elif t.kind == "tool_call":
            for c in p.get("calls") or []:
                if isinstance(c, dict) and c.get("id"):
                    self.calls[str(c["id"])] = {
                        "name": str(c.get("name")),
                        "arguments": c.get("arguments") or {},
                        "turn": t.number,
                    }
        elif t.kind == "tool_result" and p.get("ok", True) and not p.get("held"):
            call = self.calls.get(str(p.get("call_id")))
            if call is None:
                return
            self._result(call, t)

    def _owners(self, name: str, t: TurnData, found: list[tuple[str, str]]) -> None:
        """Whose the result's records are, as the live harvest marks them (`agent.remote`)."""
        domain = getattr(self.domain, "domain", None)
        if domain is None:
            return
        owner, owned, identified = domain.ownership(name, t.text or "", found)
        if owner:
            self.owned.update(dict.fromkeys(owned, owner))
        self.identified.update(identified)
        self.owned.update({v: v for v in identified})

    def _result(self, call: dict, t: TurnData) -> None:
        name, args = call["name"], call["arguments"]
        owners = self.domain.owners(name, t)
        harvest.touch(self.rows, [v for _, _, v in self.domain.id_args(name, args)], t.number)
        found = [(value, kind) for kind, value in self.domain.harvest(name, t)]
        found = list(dict.fromkeys(found + self.domain.looked_up(name, args, t)))  # as the live harvest does
        harvest.plan_harvest(
            self.rows,
            found,
            turn=t.number,
            cap=self.ledger_tokens,
            notes={v: f"of {o}" for v, o in owners.items()},
            descriptions=self.domain.descriptions(name, t),
            needed_kinds=self.needed_kinds,
            live_kinds=self.live_kinds,
        )
        self._owners(name, t, found)
        if (m := self.domain.money(name, t)) is not None:
            self.money[m.order] = m
        if self.domain.side_effect(name):
            key = (t.payload or {}).get("idempotency_key") or hashlib.sha256(
                f"{self.ticket_id}|{name}|{json.dumps(args, sort_keys=True, default=str)}".encode()
            ).hexdigest()[:40]
            data = (t.payload or {}).get("result") if isinstance((t.payload or {}).get("result"), dict) else {}
            amount = data.get("amount_cents") if isinstance(data.get("amount_cents"), int) else None
            currency = str(data.get("currency") or "")
            if (moved := self.domain.moved(name, t)) is not None:
                amount, currency = moved
            self.actions.append(
                ActionData(
                    tool=name,
                    target=self.domain.target(name, args),
                    turn=t.number,
                    # digested as the guard sees the call's arguments
                    arguments_digest=arguments_digest(self.domain.guard_arguments(name, args)),
                    idempotency_key=key,
                    reversible=self.domain.reversible(name),
                    amount_cents=amount,
                    currency=currency,
                )
            )
            self.action_calls.append(str((t.payload or {}).get("call_id") or ""))
        elif isinstance(args, dict):
            self._lane_tool(name, args, t)

    def _lane_tool(self, name: str, args: dict, t: TurnData) -> None:
        data = (t.payload or {}).get("result") or {}
        if name == "pin_constraint" and args.get("text"):
            self.pin(str(args["text"]), t.number, "model")
        elif name == "label_entity" and args.get("value") in self.rows and args.get("role"):
            self.rows[args["value"]].role = str(args["role"])
        elif name == "record_fact" and isinstance(data, dict) and data.get("name"):
            self.state[data["name"]] = StateFieldData(
                data["name"], str(data.get("value", "")), t.number, str(data.get("source", "model")), False
            )

    # --- reading -----------------------------------------------------------------------------

    def completed(self) -> list[CompletedAction]:
        return [CompletedAction(a.tool, a.target, a.turn, cid) for a, cid in zip(self.actions, self.action_calls)]

    def call_names(self) -> dict[str, str]:
        return {cid: c["name"] for cid, c in self.calls.items()}

    def snapshot(self, turns: list[TurnData] | None = None, *, policy: str = "") -> LaneSnapshot:
        """The lanes now, over `turns` (default: every turn fed so far, i.e. uncompacted)."""
        return LaneSnapshot(
            ticket_id=self.ticket_id,
            customer_id=self.customer_id,
            class_policy=policy or self.domain.policy,
            rules=list(self.rules.values()),
            ledger=[e for e in self.ledger.values() if not e.archived],
            state=list(self.state.values()),
            actions=list(self.actions),
            money=list(self.money.values()),
            turns=list(self.history if turns is None else turns),
            recent_turns_kept=self.keep_recent,
        )
