"""The compaction safety harness (SPEC §9), on recorded tickets, with no database.

For each ticket, walking its turns in order:

- at every step boundary (just before each recorded agent step) compaction
  is forced — chained, so each one folds the previous summary, as a long
  ticket's compactions do — keeping the class's recent turns raw;
- each recorded tool call's identifier arguments are checked against the
  request the agent would have had (compacted lanes + raw turns since the
  cut): would the ID guard accept each one? The same call against the full,
  uncompacted history is the reference: an ID it already rejects was not
  lost by compaction — it was made up (never seen before) or used unverified,
  and must stay rejected;
- where a model is given (the offline model on demo-shop tickets), it
  produces its next call from the compacted and the uncompacted request, and
  the identifier arguments are diffed: any difference fails;
- stated constraints must be verbatim in the request, completed side effects
  visible (and a repeat held by the guard), no call or result orphaned;
- a constraint is planted early, the ticket padded past the budget and
  compacted: the rule must be verbatim in the rebuilt request and the next
  action must respect it;
- the same tickets run through a sliding window and a prose-only summary at
  the same budget, measured with the same checks.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from dataclasses import dataclass, field, replace

from sundry.compaction.offline import OfflineSummariser
from sundry.compaction.trigger import TriggerInput, cut_point, cut_within_budget, decide, over_budget_cause, pays
from sundry.context.assembly import assemble
from sundry.context.constraints import constraint_sentences
from sundry.context.harvest import LEDGER_SHARE, fill, ledger_allowance, near_full
from sundry.context.lanes import SummaryData, TurnData
from sundry.context.rules import candidate_rules
from sundry.evals import checks, labels
from sundry.evals.domains import DOMAINS
from sundry.evals.records import RecordedTicket
from sundry.evals.replay import LaneReplay
from sundry.evals.strategies import (
    ProseState,
    SundryCompactor,
    TokenCache,
    baseline_request,
    prose_compact,
    request_text,
    request_tokens,
    window,
)
from sundry.shop.offline import RequestView
from sundry.tooling.domain import arguments_digest
from sundry.tooling.messages import ModelRequest

STRATEGIES = ("sundry", "window", "prose")
# Why the guard refuses an ID against the full history: truly wrong (made up, or used on the
# agent's own word unverified), or not wrong at all: recorded in the same response as the lookup
# that returns it, returned only inside free text, or typed in a shape no pattern recognised.
# The last is a recognition miss and fails the run.
REFUSED_LEGITIMATE = "unrecognised"
# "typed_not_looked_up": the customer typed it in a shape the domain knows, and a write used it
# before any lookup verified it — the guard asks for the lookup first; nothing is lost.
REFUSED = ("made_up", "unverified", "same_response", "free_text", "typed_not_looked_up", REFUSED_LEGITIMATE)
LABELS = {"sundry": "Sundry lanes", "window": "Sliding window", "prose": "Prose-only summary"}


# Lanes a control may take away from Sundry's request.
LANES = ("rules", "ledger", "state")


def _no_rules(text: str) -> list[str]:
    return []


@dataclass
class HarnessConfig:
    """Class settings for the run: the Standard class as shipped, the same for every domain.

    The controls (`lanes`, `classifier`) exist so each check can be shown to fail: a run
    with the ledger, the rules lane or the classifier taken away must lose what they carry.
    """

    budget: int = 8000
    trigger_fraction: float = 0.8
    keep_recent: int = 8
    ledger_share: float = LEDGER_SHARE
    model: str = "offline"  # the working model's name: picks the tokenizer
    plant: bool = True
    lanes: tuple[str, ...] = LANES  # Sundry's lanes kept in its request (and seen by its guards)
    classifier: bool = True  # production's rule classifier (candidates, the summariser's constraints)
    evict_by_need: bool = True  # entries no write takes leave the ledger first (`harvest.evict`); off: last use alone
    fit_budget: bool = True  # compaction gives up recent turns where the request would stay over the budget
    # A step whose request is over the budget compacts first, in place (`compaction.services.compact_before_step`);
    # off: only the trigger after resolution steps compacts (the control)
    compact_before_step: bool = True
    # What writes the summaries (anything with `complete(request)`); None: the offline summariser. The budget
    # lab passes one that calls a class's summariser model through the gateway.
    summariser: object = None

    @property
    def trigger_tokens(self) -> int:
        return int(self.budget * self.trigger_fraction)

    @property
    def ledger_tokens(self) -> int:
        return ledger_allowance(self.budget, self.ledger_share)

    def describe(self) -> dict:
        return {
            "budget": self.budget,
            "trigger_fraction": self.trigger_fraction,
            "keep_recent": self.keep_recent,
            "ledger_share": self.ledger_share,
            "ledger_tokens": self.ledger_tokens,
            "model": self.model,
            "plant": self.plant,
            "lanes": list(self.lanes),
            "classifier": self.classifier,
            "evict_by_need": self.evict_by_need,
            "fit_budget": self.fit_budget,
            "compact_before_step": self.compact_before_step,
        }


@dataclass
class Failure:
    strategy: str
    check: str
    ticket: str
    turn: int
    detail: str

    def as_dict(self) -> dict:
        return self.__dict__.copy()


@dataclass
class TicketResult:
    id: str
    domain: str
    source: str
    turns: int
    boundaries: int = 0
    compactions: int = 0
    fallbacks: int = 0
    stats: dict[str, Counter] = field(default_factory=lambda: {s: Counter() for s in STRATEGIES})
    failures: list[Failure] = field(default_factory=list)
    made_up: list[dict] = field(default_factory=list)
    over_budget: list[dict] = field(default_factory=list)  # Sundry's steps over the budget, with their cause
    series: dict[str, list] = field(
        default_factory=lambda: {k: [] for k in ("turn", "full", "sundry", "window", "prose", "triggered")}
    )
    triggered_compactions: list[int] = field(default_factory=list)
    # Per triggered compaction: the step (boundary, 1-based) whose request it came before, and the tokens
    # of the turns it replaced (what a summariser call reads besides its template and the summary before).
    triggered_steps: list[int] = field(default_factory=list)
    triggered_replaced: list[int] = field(default_factory=list)
    labelled: list[str] | None = None  # labelled constraints (None: unlabelled source)
    flagged: list[str] = field(default_factory=list)  # what the constraint classifier flagged (quote threshold)
    enforced: list[str] = field(default_factory=list)  # what the rule classifier flagged (enforce threshold)
    chained: bool = False  # a long ticket chained from others (their labels are counted there)
    seconds: float = 0.0
    config: dict = field(default_factory=dict)

    @property
    def sundry_failures(self) -> int:
        return sum(1 for f in self.failures if f.strategy == "sundry")

    def fail(self, strategy: str, check: str, turn: int, detail: str) -> None:
        self.failures.append(Failure(strategy, check, self.id, turn, detail))

    def as_dict(self) -> dict:
        return {
            "id": self.id,
            "domain": self.domain,
            "source": self.source,
            "turns": self.turns,
            "boundaries": self.boundaries,
            "compactions": self.compactions,
            "fallbacks": self.fallbacks,
            "stats": {k: dict(v) for k, v in self.stats.items()},
            "failures": [f.as_dict() for f in self.failures],
            "config": self.config,
            "made_up_ids": self.made_up,
            "over_budget": self.over_budget,
            "series": self.series,
            "triggered_compactions": self.triggered_compactions,
            "labelled_constraints": self.labelled,
            "flagged_constraints": self.flagged,
            "enforced_constraints": self.enforced,
            "seconds": round(self.seconds, 3),
        }


def window_allowance(sundry_tokens: int, overhead: int) -> int:
    """Tokens the sliding window may fill with turns: exactly what Sundry's request used at this
    step, less the window's own system prompt and tools — equal tokens, neither more nor less."""
    return max(0, sundry_tokens - overhead)


@dataclass
class RecordedWrite:
    """A write the recorded agent made and its tool reported done: the side-effect reference,
    taken from the recorded call and result, never from Sundry's actions lane."""

    tool: str
    target: str
    call_id: str
    turn: int
    digest: str = ""  # `tooling.domain.arguments_digest` of the recorded arguments


# --- one ticket ------------------------------------------------------------------------------


class _Run:
    """State carried through one ticket: the lanes, and each strategy's view of the history."""

    def __init__(self, ticket: RecordedTicket, domain, cfg: HarnessConfig, agent=None, labelled=None, label_set=None):
        self.ticket, self.domain, self.cfg, self.agent = ticket, domain, cfg, agent
        self.result = TicketResult(ticket.id, ticket.domain, ticket.source, len(ticket.turns))
        self.result.config = cfg.describe()
        self.replay = LaneReplay(
            domain,
            customer_id=ticket.customer_id if ticket.source == "sundry" else "",
            ledger_tokens=cfg.ledger_tokens,
            keep_recent=cfg.keep_recent,
            classifier=candidate_rules if cfg.classifier else _no_rules,
            quoter=constraint_sentences if cfg.classifier else _no_rules,
            evict_by_need=cfg.evict_by_need,
        )
        self.compactor = compactor_for(cfg)
        self.trig_compactor = compactor_for(cfg)
        # Constraint sentences, labelled apart from the classifier (None: nobody labelled this source).
        self.labelled = labelled if labelled is not None else (label_set or labels.dev_labels()).for_ticket(ticket)
        self.writes: list[RecordedWrite] = []
        self.recorded_calls: dict[str, dict] = {}
        self.returned_text = ""  # every tool result's text, for IDs a tool gave only in free text
        self.typed_text = ""  # every customer message, for IDs typed in a shape no pattern knows
        self.typed_known: set[str] = set()  # IDs customers typed in a shape the domain recognises
        self.tools = domain.tool_specs()
        self.cache = TokenCache(cfg.model)
        self.summary: SummaryData | None = None
        self.raw: list[TurnData] = []  # Sundry's turns after its summary
        self.prose = ProseState()
        self.prose_raw: list[TurnData] = []
        self.trig_summary: SummaryData | None = None
        self.trig_raw: list[TurnData] = []
        self.trig_after: int | None = None
        self.resolved = False
        self.overhead = request_tokens(baseline_request(policy=domain.policy, turns=[], tools=self.tools), cfg.model)
        self.seen_text = ""  # everything said or returned so far, for "was this ID ever seen?"

    # --- the strategies' requests ---------------------------------------------------------

    def lanes(self, turns=None):
        """The replayed lanes, less any the run's controls take away."""
        return strip_lanes(self.replay.snapshot(turns), self.cfg)

    def sundry_request(self, raw, summary):
        snap = self.lanes(raw)
        snap.summary = summary
        return assemble(snap, model=self.cfg.model, tools=self.tools)

    def force_compaction(self) -> None:
        covered = self.summary.covers_through_turn if self.summary else 0
        cut = self.cut(self.raw, covered, self.summary)
        if cut is None:
            return
        snap = self.lanes(self.raw)
        snap.summary = self.summary
        compacted = self.compactor.compact(
            snap, cut, history=self.replay.history, ledger_all=list(self.replay.ledger.values())
        )
        self.summary, self.raw = compacted.summary, compacted.turns
        for text in self.compactor.last_candidates:  # as `compaction.services._rule_candidates` adds them
            self.replay.pin(text, cut, "summariser", confirmed=False)
        self.result.compactions += 1
        self.result.fallbacks += int(self.compactor.last.fallback)
        self._prose_cut = cut

    def cut(self, raw: list[TurnData], covered: int, summary) -> int | None:
        """Where compaction cuts: the class's recent turns kept, fewer only where the request would
        stay over the budget (`trigger.cut_within_budget`, as production cuts); `cfg.fit_budget` off: always all."""
        if not self.cfg.fit_budget:
            return cut_point(raw, covered=covered, keep_recent=self.cfg.keep_recent)
        now = self.sundry_request(raw, summary).accounting
        rest = now.total_tokens - self.cache.unit(raw)  # prompt, tools, lanes, summary: what compaction keeps
        return cut_within_budget(
            raw,
            covered=covered,
            keep_recent=self.cfg.keep_recent,
            room=self.cfg.budget - rest,
            tokens_after=lambda c: self.cache.unit([t for t in raw if t.number > c]),
        )

    def prose_step(self, cut: int | None, allowance: int) -> None:
        if cut is None or cut <= self.prose.through:
            return
        replaced = [t for t in self.prose_raw if t.number <= cut]
        self.prose = prose_compact(self.prose, replaced, cut, allowance, self.cfg.model)
        self.prose_raw = [t for t in self.prose_raw if t.number > cut]

    def triggered_step(self) -> int:
        """Compaction as production does it, the ticket's real life: when the trigger fires, checked
        after resolution steps; and before any step whose request is over the budget."""
        assembled = self.sundry_request(self.trig_raw, self.trig_summary)
        total = assembled.accounting.total_tokens
        over = self.cfg.compact_before_step and total > self.cfg.budget
        if over or (
            self.resolved
            and decide(
                TriggerInput(
                    total_tokens=total,
                    trigger_tokens=self.cfg.trigger_tokens,
                    budget=self.cfg.budget,
                    last_tokens_after=self.trig_after,
                )
            ).compact
        ):
            covered = self.trig_summary.covers_through_turn if self.trig_summary else 0
            cut = self.cut(self.trig_raw, covered, self.trig_summary)
            if (
                cut is not None
                and over
                and not self.resolved
                and not pays(self.cache.unit([t for t in self.trig_raw if covered < t.number <= cut])).compact
            ):
                cut = None  # as `compact_before_step`: not for a range too small to pay
            if cut is not None:
                self.result.triggered_steps.append(self.result.boundaries)
                self.result.triggered_replaced.append(
                    self.cache.unit([t for t in self.trig_raw if covered < t.number <= cut])
                )
                snap = self.lanes(self.trig_raw)
                snap.summary = self.trig_summary
                done = self.trig_compactor.compact(
                    snap, cut, history=self.replay.history, ledger_all=list(self.replay.ledger.values())
                )
                self.trig_summary, self.trig_raw = done.summary, done.turns
                total = self.sundry_request(self.trig_raw, self.trig_summary).accounting.total_tokens
                self.trig_after = total
                self.result.triggered_compactions.append(self.replay.history[-1].number if self.replay.history else 0)
        self.resolved = False
        return total

    # --- a boundary ------------------------------------------------------------------------------

    def boundary(self, step: TurnData) -> None:
        r, cfg = self.result, self.cfg
        r.boundaries += 1
        self._prose_cut = None
        self.force_compaction()
        sundry = self.sundry_request(self.raw, self.summary)
        lanes_tokens = sum(
            v for k, v in sundry.accounting.lane_tokens.items() if k in ("rules", "ledger", "state", "summary")
        )
        self.prose_step(self._prose_cut, lanes_tokens)
        win_turns = window(
            self.replay.history, window_allowance(sundry.accounting.total_tokens, self.overhead), self.cache
        )
        requests: dict[str, ModelRequest] = {
            "sundry": sundry.request,
            "window": baseline_request(policy=self.domain.policy, turns=win_turns, tools=self.tools),
            "prose": baseline_request(
                policy=self.domain.policy, turns=self.prose_raw, tools=self.tools, prose=self.prose.text
            ),
        }
        views = {"sundry": self.raw, "window": win_turns, "prose": self.prose_raw}
        texts = {k: request_text(v) for k, v in requests.items()}
        full = self.sundry_request(self.replay.history, None)

        r.series["turn"].append(step.number)
        r.series["full"].append(full.accounting.total_tokens)
        r.series["sundry"].append(sundry.accounting.total_tokens)
        r.series["window"].append(request_tokens(requests["window"], cfg.model))
        r.series["prose"].append(request_tokens(requests["prose"], cfg.model))
        r.series["triggered"].append(self.triggered_step())
        self.check_budget(step, sundry.accounting)

        for name, req in requests.items():
            s = r.stats[name]
            s["requests"] += 1
            for problem in checks.orphans(req):
                s["orphans"] += 1
                r.fail(name, "orphan", step.number, problem)
        self.check_constraints(step, texts, requests["sundry"])
        self.check_actions(step, views, texts, requests["sundry"])
        if step.kind == "tool_call":
            self.check_ids(step, views, texts)
        if self.agent is not None:
            self.views = views
            plain = baseline_request(policy=self.domain.policy, turns=self.replay.history, tools=self.tools)
            self.check_agent(step, requests, {"sundry": full.request, "window": plain, "prose": plain})

    def check_budget(self, step: TurnData, accounting) -> None:
        """The ledger near its allowance, and Sundry's request over the budget with why, in numbers."""
        s, cfg = self.result.stats["sundry"], self.cfg
        tokens = fill(self.replay.rows)
        s["ledger_peak"] = max(s["ledger_peak"], tokens)
        s["ledger_near_full"] += near_full(tokens, cfg.ledger_tokens)
        total = accounting.total_tokens
        if total > cfg.budget:
            fixed = (
                accounting.lane_tokens["system"]
                + accounting.tools_tokens
                + sum(accounting.lane_tokens[k] for k in ("rules", "ledger", "state"))
            )
            s["over_budget"] += 1
            s["over_budget_fixed"] += fixed >= cfg.budget
            self.result.over_budget.append(
                {
                    "turn": step.number,
                    "tokens": total,
                    "cause": over_budget_cause(
                        accounting.as_dict(), total=total, budget=cfg.budget, recent_kept=cfg.keep_recent
                    ),
                }
            )

    def check_constraints(self, step, texts, sundry_req) -> None:
        """Labelled constraints stated so far: verbatim (spacing aside) anywhere in each request. The
        rules block counts as production renders it: candidate rules (flagged at the enforce
        threshold) stand there word for word, unconfirmed; nothing else is pinned for the harness."""
        if self.labelled is None:
            return
        stated = self.typed_text
        for sentence in self.labelled:
            if labels.norm(sentence) not in stated:
                continue
            for name in STRATEGIES:
                s = self.result.stats[name]
                s["constraint_checks"] += 1
                ok = labels.norm(sentence) in labels.norm(texts[name])
                s["constraint_ok"] += ok
                if not ok:
                    self.result.fail(name, "constraint", step.number, f'labelled constraint lost: "{sentence}"')

    def check_actions(self, step, views, texts, sundry_req) -> None:
        """Each write the recorded tools reported done: shown in the request? Sundry: a state-lane
        line naming it, or the call still in view; baselines: the call in view, or (prose) its target named."""
        state_block = checks.block(sundry_req, "state")
        for w in self.writes:
            for name in STRATEGIES:
                s = self.result.stats[name]
                s["action_checks"] += 1
                in_view = any(
                    t.kind == "tool_call"
                    and any(str(c.get("id")) == w.call_id for c in (t.payload or {}).get("calls") or [])
                    for t in views[name]
                )
                if name == "sundry":
                    ok = in_view or checks.action_line(w.tool, w.target) in state_block
                else:
                    ok = in_view or (name == "prose" and bool(w.target) and w.target in self.prose.text)
                s["action_ok"] += ok
                if not ok:
                    self.result.fail(
                        name,
                        "side_effect_forgotten",
                        step.number,
                        f"{w.tool} on {w.target or '-'} (turn {w.turn}) is not in the request",
                    )

    def check_ids(self, step: TurnData, views, texts) -> None:
        r, d, replay = self.result, self.domain, self.replay
        calls = replay.call_names()
        ledger = self.lanes([]).ledger
        full_recent, full_typed = d.result_ids(replay.history, calls), d.text_ids(replay.history)
        seen = {name: (d.result_ids(v, calls), d.text_ids(v)) for name, v in views.items()}
        for c in (step.payload or {}).get("calls") or []:
            name, args = str(c.get("name")), c.get("arguments") or {}
            # Judged against what the guard saw before the call: its own result proves nothing
            # (a booking echoing the user ID it was given), only a lookup beside it may.
            same_response = self.same_response_ids(step, besides=str(c.get("id")))
            lookup = name in d.lookup_tools
            self.check_guard_agrees(step, name, args, ledger, seen["sundry"])
            for path, kind, value in d.id_args(name, args):
                ref_ok = checks.id_accepted(
                    value, lookup=lookup, ledger=list(replay.ledger.values()), recent=full_recent, typed=full_typed
                )
                if not ref_ok:
                    why = self.refused_because(value, same_response)
                    compacted = checks.id_accepted(
                        value, lookup=lookup, ledger=ledger, recent=seen["sundry"][0], typed=seen["sundry"][1]
                    )
                    r.made_up.append(
                        {
                            "turn": step.number,
                            "tool": name,
                            "arg": path,
                            "value": value,
                            "class": why,
                            "caught": not compacted,
                        }
                    )
                    r.stats["sundry"][f"refused_{why}"] += 1
                    if compacted:
                        r.fail(
                            "sundry",
                            "made_up_accepted",
                            step.number,
                            f"{name}.{path}={value} accepted after compaction",
                        )
                    if why == REFUSED_LEGITIMATE:
                        r.fail(
                            "sundry",
                            "legitimate_refused",
                            step.number,
                            f"{name}.{path}={value}: the customer or a tool gave it, but it was not recognised",
                        )
                    continue
                for strat in STRATEGIES:
                    s = r.stats[strat]
                    s["id_checks"] += 1
                    use_ledger = ledger if strat == "sundry" else []
                    ok = checks.id_accepted(
                        value, lookup=lookup, ledger=use_ledger, recent=seen[strat][0], typed=seen[strat][1]
                    )
                    present = value in texts[strat]
                    s["id_ok"] += ok
                    s["id_present"] += present
                    if not ok:
                        r.fail(
                            strat,
                            "id_lost",
                            step.number,
                            f"{name}.{path}={value} ({kind}) "
                            + (
                                "is in the request but not where the guard trusts it"
                                if present
                                else "is not in the request"
                            ),
                        )
            self.check_repeat(step, name, args)

    def same_response_ids(self, step: TurnData, besides: str = "") -> set[str]:
        """IDs returned by the results of the other calls recorded in this same response (not the
        call `besides`, the one judged)."""
        ids: set[str] = set()
        mine = {
            str(c.get("id")): str(c.get("name"))
            for c in (step.payload or {}).get("calls") or []
            if str(c.get("id")) != besides
        }
        for t in self.ticket.turn_data():
            p = t.payload or {}
            if t.kind == "tool_result" and str(p.get("call_id")) in mine and p.get("ok", True):
                ids.update(v for _, v in self.domain.harvest(mine[str(p.get("call_id"))], t))
        return ids

    def refused_because(self, value: str, same_response: set[str]) -> str:
        """Why the guard refuses an ID even against the full history (see REFUSED)."""
        if value in same_response:
            return "same_response"
        if value in self.returned_text:
            # A tool gave it: harvested results would make it acceptable, so it came in free text
            # (or in a field the domain's description does not mark).
            return "free_text"
        if value in self.typed_known:
            return "typed_not_looked_up"
        if value in self.typed_text:
            return REFUSED_LEGITIMATE  # typed by the customer in a shape the patterns do not know
        if value in self.seen_text:
            return "unverified"  # seen only where the guard does not trust it (the agent's own words)
        return "made_up"

    def check_guard_agrees(self, step, name: str, args, ledger, seen) -> None:
        """The per-value rule used for the rates must be the runtime guard's verdict on the whole call."""
        d = self.domain
        verdict = checks.guard_verdict(d, name, args, ledger=ledger, recent=seen[0], typed=seen[1])
        if verdict is None or verdict.guard == "schema":
            return
        every = all(
            checks.id_accepted(v, lookup=name in d.lookup_tools, ledger=ledger, recent=seen[0], typed=seen[1])
            for _, _, v in d.id_args(name, args)
        )
        if every == (verdict.guard in checks.ID_GUARDS):
            self.result.fail("sundry", "guard_mismatch", step.number, f"{name}: guard said {verdict.guard or 'allow'}")

    def check_repeat(self, step, name: str, args) -> None:
        d = self.domain
        if not d.side_effect(name):
            return
        target = d.target(name, args)
        same_target = [w for w in self.writes if w.tool == name and w.target == target]
        if not same_target:
            return
        s = self.result.stats["sundry"]
        snap = self.lanes(self.raw)
        verdict = checks.guard_verdict(
            d,
            name,
            args,
            ledger=snap.ledger,
            recent=d.result_ids(self.raw, self.replay.call_names()),
            typed=d.text_ids(self.raw),
            actions=snap.actions,
        )
        held = verdict is not None and verdict.guard == "repeat"
        decl = d.domain.tool(name)
        if (
            decl is not None
            and decl.repeats == "arguments"
            and all(w.digest != arguments_digest(args) for w in same_target)
        ):
            # A second change asking for something else: a new request, never held as a repeat.
            s["second_changes"] += 1
            s["second_changes_held"] += held
            if held:
                self.result.fail("sundry", "second_change_held", step.number, f"{name} on {target} with new arguments")
            return
        s["repeats_proposed"] += 1
        s["repeats_held"] += held
        if verdict is None or (not held and verdict.guard not in checks.ID_GUARDS):
            self.result.fail(
                "sundry",
                "repeat_not_held",
                step.number,
                f"{name} on {target} again: {verdict.decision if verdict else 'no guard'}",
            )

    def check_agent(self, step, requests: dict[str, ModelRequest], references: dict[str, ModelRequest]) -> None:
        """Next call from each compacted request against the same strategy's uncompacted request."""
        d, r = self.domain, self.result
        done = {(w.tool, w.target) for w in self.writes}
        calls, ledger = self.replay.call_names(), self.lanes([]).ledger
        refs: dict[int, checks.NextCall] = {}
        for name, req in requests.items():
            ref_req = references[name]
            if id(ref_req) not in refs:
                refs[id(ref_req)] = checks.next_call(d, self.agent.complete(ref_req))
            ref = refs[id(ref_req)]
            got = checks.next_call(d, self.agent.complete(req))
            s = r.stats[name]
            s["model_steps"] += 1
            if checks.ids_differ(ref, got):
                view = self.views[name]
                accepted = all(
                    checks.id_accepted(
                        v,
                        lookup=got.tool in d.lookup_tools,
                        ledger=ledger if name == "sundry" else [],
                        recent=d.result_ids(view, calls),
                        typed=d.text_ids(view),
                    )
                    for _, v in got.ids
                )
                kind = checks.classify_diff(d, ref, got, guard_accepts=accepted)
                s["model_diffs"] += 1
                s[f"model_diff_{kind}"] += 1
                r.fail(
                    name,
                    "model_id_diff",
                    step.number,
                    f"[{kind}] uncompacted → {ref.describe()}; compacted → {got.describe()}",
                )
            if got.tool and d.side_effect(got.tool) and (got.tool, d.target(got.tool, got.arguments)) in done:
                s["model_repeats"] += 1
                r.fail(name, "side_effect_repeated", step.number, f"proposed {got.describe()} again")

    # --- the walk ----------------------------------------------------------------------------------

    def record(self, t: TurnData) -> None:
        """The references, from the recorded turns themselves: writes done, text typed and returned."""
        p = t.payload or {}
        if t.kind == "tool_call":
            for c in p.get("calls") or []:
                self.recorded_calls[str(c.get("id"))] = c
        elif t.kind == "tool_result":
            self.returned_text += "\n" + (t.text or "")
            call = self.recorded_calls.get(str(p.get("call_id")))
            if call and p.get("ok", True) and not p.get("held") and self.domain.side_effect(str(call.get("name"))):
                name = str(call.get("name"))
                self.writes.append(
                    RecordedWrite(
                        name,
                        self.domain.target(name, call.get("arguments") or {}),
                        str(call.get("id")),
                        t.number,
                        arguments_digest(call.get("arguments") or {}),
                    )
                )
        elif t.author == "customer":
            self.typed_text += "\n" + labels.norm(t.text or "")
            self.typed_known.update(v for _, v in self.domain.typed_ids(t.text or ""))

    def run(self) -> TicketResult:
        started = time.perf_counter()
        for t in self.ticket.turn_data():
            if t.author in ("agent", "staff") and t.kind in ("tool_call", "message") and self.replay.history:
                self.boundary(t)
            self.replay.feed(t)
            self.record(t)
            self.raw.append(t)
            self.prose_raw.append(t)
            self.trig_raw.append(t)
            self.seen_text += f"\n{t.text}\n{json.dumps(t.payload, ensure_ascii=False, default=str)}"
            ok = (t.payload or {}).get("ok", True)
            name = (t.payload or {}).get("name") or ""
            if (t.author == "agent" and t.kind == "message") or (
                t.kind == "tool_result" and ok and self.domain.side_effect(name)
            ):
                self.resolved = True
        self.result.labelled = self.labelled
        self.result.chained = bool(self.ticket.meta.get("parts"))
        self.result.flagged = [c.text for c in self.replay.flagged]
        self.result.enforced = [c.text for c in self.replay.candidates if c.source == "customer"]
        if self.cfg.plant:
            planted_check(self.ticket, self.domain, self.cfg, self.result, agent=self.agent)
        self.result.seconds = time.perf_counter() - started
        return self.result


def run_ticket(
    ticket: RecordedTicket,
    cfg: HarnessConfig | None = None,
    *,
    agent=None,
    domain=None,
    labelled: list[str] | None = None,
    label_set=None,
) -> TicketResult:
    """`labelled`: this ticket's constraint sentences; else `label_set` (a `labels.LabelSet`) or the dev labels."""
    domain = domain or DOMAINS[ticket.domain]
    return _Run(ticket, domain, cfg or HarnessConfig(), agent, labelled, label_set).run()


def strip_lanes(snap, cfg: HarnessConfig):
    """The snapshot without the lanes the run's controls take away (guards see the same)."""
    return replace(
        snap,
        rules=snap.rules if "rules" in cfg.lanes else [],
        ledger=snap.ledger if "ledger" in cfg.lanes else [],
        state=snap.state if "state" in cfg.lanes else [],
        actions=snap.actions if "state" in cfg.lanes else [],
        money=snap.money if "state" in cfg.lanes else [],
    )


def summariser_for(cfg: HarnessConfig):
    if cfg.summariser is not None:
        return cfg.summariser
    summariser = OfflineSummariser()
    if not cfg.classifier:
        summariser.classifier = _no_rules
    return summariser


def compactor_for(cfg: HarnessConfig) -> SundryCompactor:
    """The compaction app's steps with the run's summariser; the classifier control switches off
    the sentences its request lists to quote too."""
    return SundryCompactor(
        model=cfg.model,
        summariser=summariser_for(cfg),
        classifier=constraint_sentences if cfg.classifier else _no_rules,
    )


# --- the planted constraint --------------------------------------------------------------------


def planted_turn_of(body: list[TurnData], text: str) -> int:
    return next(t.number for t in body if t.text == text)


def _renumbered(turns: list[TurnData]) -> list[TurnData]:
    return [TurnData(i, t.author, t.kind, t.text, t.payload, t.tokens) for i, t in enumerate(turns, 1)]


def _padding(turns: list[TurnData], domain, n: int) -> list[TurnData]:
    """Unrelated traffic: copies of the ticket's largest successful lookup, or chat where there is none."""
    calls = {}
    best = None
    for t in turns:
        if t.kind == "tool_call":
            for c in (t.payload or {}).get("calls") or []:
                calls[str(c.get("id"))] = (t, c)
        elif t.kind == "tool_result" and (t.payload or {}).get("ok", True):
            pair = calls.get(str((t.payload or {}).get("call_id")))
            if (
                pair
                and pair[1].get("name") in domain.lookup_tools
                and (best is None or len(t.text) > len(best[1].text))
            ):
                best = (pair[1], t)
    out = []
    for i in range(n):
        if best:
            call, res = best
            cid = f"pad_{i}"
            out.append(TurnData(0, "agent", "tool_call", "", {"calls": [{**call, "id": cid}]}))
            out.append(TurnData(0, "tool", "tool_result", res.text, {**res.payload, "call_id": cid}))
        else:
            out.append(TurnData(0, "customer", "message", f"Any news on this? I am still waiting (message {i})."))
            out.append(
                TurnData(
                    0,
                    "agent",
                    "message",
                    "I am still looking into it and will update you as soon as "
                    "I have news; thank you for your patience.",
                )
            )
    return out


def planted_check(ticket: RecordedTicket, domain, cfg: HarnessConfig, result: TicketResult, *, agent=None) -> None:
    planted = domain.planted
    turns = ticket.turn_data()
    first = next((i for i, t in enumerate(turns) if t.author == "customer"), -1)
    turns = turns[: first + 1] + [TurnData(0, "customer", "message", planted.text)] + turns[first + 1 :]
    # Pad past the budget: grow until the uncompacted request exceeds it.
    pad = 0
    while True:
        body = _renumbered(turns + _padding(turns, domain, pad))
        replay = LaneReplay(
            domain,
            customer_id=ticket.customer_id if ticket.source == "sundry" else "",
            ledger_tokens=cfg.ledger_tokens,
            keep_recent=cfg.keep_recent,
            classifier=candidate_rules if cfg.classifier else _no_rules,
            quoter=constraint_sentences if cfg.classifier else _no_rules,
            evict_by_need=cfg.evict_by_need,
        )
        for t in body:
            replay.feed(t)
        # Staff confirm the flagged candidate on the desk, as in production: the rule takes the
        # structured check the product infers from its words (none, if it infers none).
        if any(c.text == planted.text for c in replay.candidates):
            replay.pin(planted.text, planted_turn_of(body, planted.text), "customer")
        tools = domain.tool_specs()
        full = assemble(strip_lanes(replay.snapshot(), cfg), model=cfg.model, tools=tools)
        if full.accounting.total_tokens > cfg.budget or pad >= 200:
            break
        pad = max(1, pad * 2)
    temptation = TurnData(body[-1].number + 1, "customer", "message", planted.temptation)
    replay.feed(temptation)
    body.append(temptation)
    cut = cut_point(body, covered=0, keep_recent=cfg.keep_recent)
    stats = result.stats
    planted_turn = next(t.number for t in body if t.text == planted.text)
    if cut is None or cut < planted_turn:
        result.fail("sundry", "planted_setup", 0, "padding did not push the planted rule into the compacted range")
        return
    snap = strip_lanes(replay.snapshot(body), cfg)
    compacted = compactor_for(cfg).compact(snap, cut, history=body, ledger_all=list(replay.ledger.values()))
    sundry = assemble(compacted, model=cfg.model, tools=tools)
    kept = compacted.turns
    # Baselines at the same budget.
    overhead = request_tokens(baseline_request(policy=domain.policy, turns=[], tools=tools), cfg.model)
    win = window(body, window_allowance(sundry.accounting.total_tokens, overhead), TokenCache(cfg.model))
    lanes_tokens = sum(
        v for k, v in sundry.accounting.lane_tokens.items() if k in ("rules", "ledger", "state", "summary")
    )
    prose = prose_compact(ProseState(), [t for t in body if t.number <= cut], cut, lanes_tokens, cfg.model)
    requests = {
        "sundry": sundry.request,
        "window": baseline_request(policy=domain.policy, turns=win, tools=tools),
        "prose": baseline_request(policy=domain.policy, turns=kept, tools=tools, prose=prose.text),
    }
    probe_value = next((e.value for e in compacted.ledger if e.kind == planted.probe_kind), "")
    probe_args = {planted.probe_arg: probe_value}
    if planted.probe_tool == "send_email":
        probe_args.update(subject="Summary", body="As agreed.")
    for name, req in requests.items():
        s = stats[name]
        s["planted_checks"] += 1
        verbatim = planted.text in (checks.block(req, "rules") if name == "sundry" else request_text(req))
        s["planted_verbatim"] += verbatim
        if not verbatim:
            result.fail(name, "planted_lost", cut, f'"{planted.text}" is not in the rebuilt request')
        respected = verbatim
        if name == "sundry":
            verdict = checks.guard_verdict(
                domain,
                planted.probe_tool,
                probe_args,
                ledger=compacted.ledger,
                recent=domain.result_ids(kept, replay.call_names()),
                typed=domain.text_ids(kept),
                rules=compacted.rules,
            )
            respected = verdict is not None and verdict.guard == "rule"
            if not respected:
                result.fail(
                    name, "planted_not_enforced", cut, f"{planted.probe_tool} was not blocked by the rule guard"
                )
        if agent is not None:
            view = RequestView(req)
            got = checks.next_call(domain, agent.complete(req))
            obeys = got.tool not in planted.blocks
            sees = all(view.blocked(t) for t in planted.blocks)
            s["planted_model_checks"] += 1
            s["planted_model_sees_rule"] += sees
            respected = respected and obeys
            if not obeys:
                result.fail(name, "planted_broken", cut, f"the model's next call is {got.describe()}")
        s["planted_respected"] += respected


# --- many tickets ----------------------------------------------------------------------------------


@dataclass
class HarnessReport:
    config: HarnessConfig
    tickets: list[TicketResult]
    seconds: float = 0.0

    def totals(self, domain: str | None = None) -> dict[str, Counter]:
        out = {s: Counter() for s in STRATEGIES}
        for t in self.tickets:
            if domain is None or t.domain == domain:
                for s in STRATEGIES:
                    out[s].update(t.stats[s])
        return out

    def failures(self, strategy: str | None = None) -> list[Failure]:
        return [f for t in self.tickets for f in t.failures if strategy is None or f.strategy == strategy]

    def classifier_score(self, *, enforced: bool = False) -> dict:
        """The constraint classifier (quote threshold; `enforced`: the rule classifier's enforce
        threshold, its control) against the labelled constraints, over the labelled tickets."""
        return labels.score_classifier(
            (t.labelled, t.enforced if enforced else t.flagged)
            for t in self.tickets
            if t.labelled is not None and not t.chained
        )

    def domains(self) -> list[str]:
        return sorted({t.domain for t in self.tickets})


def run_all(
    tickets: list[RecordedTicket], cfg: HarnessConfig | None = None, *, agent_for=None, progress=None, label_set=None
) -> HarnessReport:
    """`agent_for(ticket)` → a model to diff next calls with, or None. `progress(i, n, ticket, result)`."""
    cfg = cfg or HarnessConfig()
    started = time.perf_counter()
    results = []
    for i, ticket in enumerate(tickets, 1):
        result = run_ticket(ticket, cfg, agent=agent_for(ticket) if agent_for else None, label_set=label_set)
        results.append(result)
        if progress:
            progress(i, len(tickets), ticket, result)
    return HarnessReport(cfg, results, time.perf_counter() - started)
