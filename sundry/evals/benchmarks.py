"""Benchmarks that print figures (never timed tests): assembly, tokens, compaction overhead, the loop.

The push-latency benchmark needs a server and many sockets, so it lives in
`pushbench` and runs in a subprocess.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, field

from sundry.compaction.trigger import TriggerInput, cut_point, decide
from sundry.context.assembly import assemble
from sundry.context.idformats import find_ids
from sundry.context.lanes import SummaryData, TurnData
from sundry.evals.domains import DOMAINS
from sundry.evals.harness import HarnessConfig, _Run
from sundry.evals.records import RecordedTicket, RecordedTurn
from sundry.evals.replay import LaneReplay
from sundry.evals.strategies import SundryCompactor
from sundry.tooling.messages import ModelRequest, ModelResponse, ToolCall


def ms(seconds: float) -> float:
    return round(seconds * 1000, 3)


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def tile(ticket: RecordedTicket, turns: int) -> RecordedTicket:
    """The ticket's turns repeated (call ids made unique) until it has `turns` turns."""
    out: list[RecordedTurn] = []
    lap = 0
    while len(out) < turns:
        for t in ticket.turns:
            if len(out) >= turns:
                break
            p = dict(t.payload)
            if "calls" in p:
                p["calls"] = [{**c, "id": f"{c.get('id')}~{lap}"} for c in p["calls"]]
            if p.get("call_id"):
                p["call_id"] = f"{p['call_id']}~{lap}"
            out.append(RecordedTurn(number=len(out) + 1, author=t.author, kind=t.kind, text=t.text, payload=p))
        lap += 1
    # Never end mid-call: a trailing call without its result is dropped.
    while out and out[-1].kind == "tool_call":
        out.pop()
    return ticket.model_copy(update={"id": f"{ticket.id}x{turns}", "turns": out})


# --- assembly per step, with compaction when the trigger fires ----------------------------


@dataclass
class AssemblyFigures:
    turns: int
    steps: int
    compactions: int
    median_ms: float
    p95_ms: float
    late_median_ms: float  # the last fifth of the ticket: flat if compaction holds the request size
    full_late_median_ms: float  # the same steps, assembling the whole uncompacted history
    late_tokens: float
    full_late_tokens: float
    overhead_ms: list[float] = field(default_factory=list)  # compaction minus the summariser call
    # The ticket's last request assembled again and again: the steady per-step cost at this length,
    # free of the few-sample noise of a short ticket's last fifth.
    final_repeat_ms: float = 0.0
    final_tokens: int = 0


REPEATS = 300


def assembly_run(ticket: RecordedTicket, cfg: HarnessConfig | None = None) -> AssemblyFigures:
    domain = DOMAINS[ticket.domain]
    cfg = cfg or HarnessConfig()
    replay = LaneReplay(domain, customer_id=ticket.customer_id, ledger_tokens=cfg.ledger_tokens, keep_recent=cfg.keep_recent)
    compactor = SundryCompactor(model=cfg.model)
    tools = domain.tool_specs()
    summary: SummaryData | None = None
    raw: list[TurnData] = []
    after: int | None = None
    times, full_times, tokens, full_tokens, overhead = [], [], [], [], []
    resolved, last, full_snaps = False, None, []
    for t in ticket.turn_data():
        if t.author == "agent" and t.kind in ("tool_call", "message") and replay.history:
            snap = replay.snapshot(raw)
            snap.summary = summary
            t0 = time.perf_counter()
            assembled = assemble(snap, model=cfg.model, tools=tools)
            times.append(time.perf_counter() - t0)
            last = snap
            tokens.append(assembled.accounting.total_tokens)
            # The uncompacted request is assembled after the walk: a 70,000-token assembly
            # between two timed steps would leave them measuring its wake, not their own cost.
            full_snaps.append(replay.snapshot())
            total = assembled.accounting.total_tokens
            if resolved and decide(TriggerInput(total_tokens=total, trigger_tokens=cfg.trigger_tokens, budget=cfg.budget,
                                                last_tokens_after=after)).compact:
                cut = cut_point(raw, covered=summary.covers_through_turn if summary else 0, keep_recent=cfg.keep_recent)
                if cut is not None:
                    t0 = time.perf_counter()
                    done = compactor.compact(snap, cut, history=replay.history, ledger_all=list(replay.ledger.values()))
                    summary, raw = done.summary, done.turns
                    after_snap = replay.snapshot(raw)
                    after_snap.summary = summary
                    after = assemble(after_snap, model=cfg.model, tools=tools).accounting.total_tokens
                    # Everything but the summariser's own call: request building, validation, re-assembly.
                    overhead.append(time.perf_counter() - t0 - compactor.last.model_seconds)
            resolved = False
        replay.feed(t)
        raw.append(t)
        if (t.author == "agent" and t.kind == "message") or (t.kind == "tool_result" and domain.side_effect(
                (t.payload or {}).get("name") or "")):
            resolved = True
    late = max(1, len(times) // 5)
    for full_snap in full_snaps[-late:]:  # the comparison is made over the last fifth
        t0 = time.perf_counter()
        full = assemble(full_snap, model=cfg.model, tools=tools)
        full_times.append(time.perf_counter() - t0)
        full_tokens.append(full.accounting.total_tokens)
    repeats = []
    for _ in range(REPEATS):
        t0 = time.perf_counter()
        final = assemble(last, model=cfg.model, tools=tools)
        repeats.append(time.perf_counter() - t0)
    return AssemblyFigures(
        turns=len(ticket.turns), steps=len(times), compactions=compactor.runs,
        median_ms=ms(statistics.median(times)), p95_ms=ms(pct(times, 0.95)),
        late_median_ms=ms(statistics.median(times[-late:])), full_late_median_ms=ms(statistics.median(full_times[-late:])),
        late_tokens=statistics.median(tokens[-late:]), full_late_tokens=statistics.median(full_tokens[-late:]),
        overhead_ms=[ms(x) for x in overhead],
        final_repeat_ms=ms(statistics.median(repeats)), final_tokens=final.accounting.total_tokens,
    )


def token_life(ticket: RecordedTicket, cfg: HarnessConfig | None = None) -> dict:
    """Tokens per request over the ticket's life, per strategy (the harness's own walk, no model)."""
    domain = DOMAINS[ticket.domain]
    run = _Run(ticket, domain, cfg or HarnessConfig(plant=False))
    run.cfg.plant = False
    result = run.run()
    s = result.series
    return {name: {"median": statistics.median(s[name]), "max": max(s[name]), "last": s[name][-1]}
            for name in ("full", "triggered", "sundry", "window", "prose")} | {
        "steps": len(s["turn"]), "triggered_compactions": len(result.triggered_compactions),
        "forced_compaction_overhead_ms": None}


# --- steps per second through the whole loop -------------------------------------------------


class InstantModel:
    """Answers at once: looks up the order the customer named, then replies. Reads only the request."""

    name = "instant"

    def complete(self, request: ModelRequest) -> ModelResponse:
        conv = [m for m in request.messages if m.role != "system"]
        if conv and conv[-1].role == "tool":
            return ModelResponse(text="Here is what I found.", model=self.name)
        latest = next((m.content for m in reversed(conv) if m.role == "user"), "")
        orders = [v for k, v in find_ids(latest) if k == "order"]
        if not orders:
            return ModelResponse(text="Which order do you mean?", model=self.name)
        call = ToolCall(id=f"i{len(request.messages)}", name="get_order", arguments={"order_number": orders[0]})
        return ModelResponse(tool_calls=[call], model=self.name)


def loop_run(*, messages: int = 150, block: int = 50, compaction: bool = True, say=print) -> dict:
    """Customer messages through `agent_run` with an instant model, in a throwaway database.

    Each message costs two steps (a lookup, then a reply); with `compaction` the
    compaction the trigger queues runs before the next message and is counted.
    Reported per block of messages, so growth with ticket length would show.
    """
    from django.test.utils import override_settings

    from sundry.agent import loop, step
    from sundry.evals.sources import throwaway_database

    saved, hooks = list(loop.resolution_listeners), list(step.before_request_hooks)
    if not compaction:  # the same loop with no compaction checks, to separate the two costs
        loop.resolution_listeners[:] = []
        step.before_request_hooks[:] = []
    try:
        # Deferred: the compactions a step queues run between messages, in this thread, timed
        # apart, as their own worker process would run them; never overlapping the loop's timing.
        with throwaway_database(file_backed=True), override_settings(BACKGROUND_MODE="deferred", DEBUG=False):
            return _loop(messages, block, say)
    finally:
        loop.resolution_listeners[:] = saved
        step.before_request_hooks[:] = hooks


def _loop(messages: int, block: int, say) -> dict:
    from django.conf import settings

    from sundry.agent.gateway import Gateway
    from sundry.agent.loop import agent_run, tool_specs
    from sundry.agent.services import customer_message_post
    from sundry.compaction.models import CompactionRun
    from sundry.core.background import wait_idle
    from sundry.shop.models import Order
    from sundry.shop.seed import generate_shop
    from sundry.tickets.demo import ensure_classes
    from sundry.tickets.services import ticket_create

    generate_shop(seed=settings.DEMO_SEED, customers=20, orders=200)
    classes = ensure_classes()
    customer = Order.objects.select_related("customer").order_by("number").first().customer
    numbers = list(Order.objects.filter(customer=customer).values_list("number", flat=True))
    ticket = ticket_create(customer=customer, ticket_class=classes["standard"], subject="Benchmark")
    gateway = Gateway(override=InstantModel())
    tool_specs()  # the tools' JSON schemas are built once per worker process, not per step
    blocks, steps, started = [], 0, time.perf_counter()
    loop_seconds = post_seconds = compaction_seconds = 0.0
    block_seconds, block_steps = 0.0, 0
    for i in range(messages):
        t0 = time.perf_counter()
        customer_message_post(ticket=ticket, text=f"Where is my order {numbers[i % len(numbers)]}?", wake=False)
        t1 = time.perf_counter()
        n = agent_run(ticket.pk, gateway=gateway)
        t2 = time.perf_counter()
        wait_idle()  # a queued compaction runs (its own task in production) before the next message
        t3 = time.perf_counter()
        post_seconds, loop_seconds, compaction_seconds = (post_seconds + t1 - t0, loop_seconds + t2 - t1,
                                                          compaction_seconds + t3 - t2)
        steps += n
        block_steps, block_seconds = block_steps + n, block_seconds + t2 - t1
        if (i + 1) % block == 0:
            blocks.append(round(block_steps / block_seconds, 1))
            say(f"    messages {i + 2 - block}–{i + 1}: {blocks[-1]} steps/s in the worker's loop")
            block_seconds, block_steps = 0.0, 0
    seconds = time.perf_counter() - started
    ticket.refresh_from_db()
    compactions = CompactionRun.objects.filter(ticket=ticket).count()
    return {"messages": messages, "steps": steps, "turns": ticket.last_turn_number,
            # The agent worker's own throughput: time inside agent_run (model, guards, tools,
            # harvest, commits, pushes and the compaction trigger check).
            "steps_per_second": round(steps / loop_seconds, 1), "per_block": blocks,
            "loop_ms_per_step": round(1000 * loop_seconds / steps, 2),
            # Everything else one message costs, timed apart: posting it (the web process) and
            # running the compactions it queued (their own task).
            "post_ms_per_message": round(1000 * post_seconds / messages, 2),
            "compactions": compactions,
            "compaction_ms_each": round(1000 * compaction_seconds / compactions, 1) if compactions else None,
            "overall_steps_per_second": round(steps / seconds, 1), "seconds": round(seconds, 2),
            "database": settings.DATABASES["default"]["ENGINE"].rsplit(".", 1)[-1]}
