"""Benchmarks that print figures (never timed tests): assembly, tokens, compaction overhead, the loop.

The push-latency benchmark needs a server and many sockets, so it lives in
`pushbench` and runs in a subprocess.
"""

from __future__ import annotations

import os
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
    replay = LaneReplay(
        domain, customer_id=ticket.customer_id, ledger_tokens=cfg.ledger_tokens, keep_recent=cfg.keep_recent
    )
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
            if (
                resolved
                and decide(
                    TriggerInput(
                        total_tokens=total,
                        trigger_tokens=cfg.trigger_tokens,
                        budget=cfg.budget,
                        last_tokens_after=after,
                    )
                ).compact
            ):
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
        if (t.author == "agent" and t.kind == "message") or (
            t.kind == "tool_result" and domain.side_effect((t.payload or {}).get("name") or "")
        ):
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
        turns=len(ticket.turns),
        steps=len(times),
        compactions=compactor.runs,
        median_ms=ms(statistics.median(times)),
        p95_ms=ms(pct(times, 0.95)),
        late_median_ms=ms(statistics.median(times[-late:])),
        full_late_median_ms=ms(statistics.median(full_times[-late:])),
        late_tokens=statistics.median(tokens[-late:]),
        full_late_tokens=statistics.median(full_tokens[-late:]),
        overhead_ms=[ms(x) for x in overhead],
        final_repeat_ms=ms(statistics.median(repeats)),
        final_tokens=final.accounting.total_tokens,
    )


def token_life(ticket: RecordedTicket, cfg: HarnessConfig | None = None) -> dict:
    """Tokens per request over the ticket's life, per strategy (the harness's own walk, no model)."""
    domain = DOMAINS[ticket.domain]
    run = _Run(ticket, domain, cfg or HarnessConfig(plant=False))
    run.cfg.plant = False
    result = run.run()
    s = result.series
    return {
        name: {"median": statistics.median(s[name]), "max": max(s[name]), "last": s[name][-1]}
        for name in ("full", "triggered", "sundry", "window", "prose")
    } | {
        "steps": len(s["turn"]),
        "triggered_compactions": len(result.triggered_compactions),
        "forced_compaction_overhead_ms": None,
    }


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

    from sundry.agent.loop import agent_run, tool_specs
    from sundry.agent.provider.gateway import Gateway
    from sundry.agent.services import customer_message_post
    from sundry.compaction.models import CompactionRun
    from sundry.core.background import wait_idle
    from sundry.desk.lifecycle import ticket_create
    from sundry.shop.demo import ensure_classes
    from sundry.shop.models import Order
    from sundry.shop.seed import generate_shop

    generate_shop(seed=settings.DEMO_SEED, customers=20, orders=200)
    classes = ensure_classes()
    customer = Order.objects.select_related("customer").order_by("number").first().customer
    numbers = list(Order.objects.filter(customer=customer).values_list("number", flat=True))
    ticket = ticket_create(customer=customer.person, ticket_class=classes["standard"], subject="Benchmark")
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
        post_seconds, loop_seconds, compaction_seconds = (
            post_seconds + t1 - t0,
            loop_seconds + t2 - t1,
            compaction_seconds + t3 - t2,
        )
        steps += n
        block_steps, block_seconds = block_steps + n, block_seconds + t2 - t1
        if (i + 1) % block == 0:
            blocks.append(round(block_steps / block_seconds, 1))
            say(f"    messages {i + 2 - block}–{i + 1}: {blocks[-1]} steps/s in the worker's loop")
            block_seconds, block_steps = 0.0, 0
    seconds = time.perf_counter() - started
    ticket.refresh_from_db()
    compactions = CompactionRun.objects.filter(ticket=ticket).count()
    return {
        "messages": messages,
        "steps": steps,
        "turns": ticket.last_turn_number,
        # The agent worker's own throughput: time inside agent_run (model, guards, tools,
        # harvest, commits, pushes and the compaction trigger check).
        "steps_per_second": round(steps / loop_seconds, 1),
        "per_block": blocks,
        "loop_ms_per_step": round(1000 * loop_seconds / steps, 2),
        # Everything else one message costs, timed apart: posting it (the web process) and
        # running the compactions it queued (their own task).
        "post_ms_per_message": round(1000 * post_seconds / messages, 2),
        "compactions": compactions,
        "compaction_ms_each": round(1000 * compaction_seconds / compactions, 1) if compactions else None,
        "overall_steps_per_second": round(steps / seconds, 1),
        "seconds": round(seconds, 2),
        "database": settings.DATABASES["default"]["ENGINE"].rsplit(".", 1)[-1],
    }


# --- where a step's time goes, by stage, at several ticket lengths ------------------------------

PROFILE_STAGES = (
    "http",
    "handoff",
    "open",
    "lanes",
    "assembly",
    "gateway",
    "model",
    "checks",
    "tool",
    "harvest",
    "commit",
    "push",
    "let_go",
    "render",
)
# Once a message, before its first step: the customer's POST through Django (`http`: middleware,
# the view's reads and writes, the wake-up queued, the answer's panel) and the task's start
# (`handoff`: Celery's own wrapper around the run, in-process — the broker's transit is the
# realistic benchmark's). Before the model call: the run's claim and load (`open`), the lane
# read, assembly. After it: the reply's checks, the tool call (its own reads), harvest and
# effects, the step's commit (turns, step record, the push queued), the push itself, letting go
# of the claim; and the desk's render as a push makes it (the web process's work, timed here in
# the same process: `render_current` extending the rendering before).
PER_MESSAGE = ("http", "handoff")
HTMX = {"HTTP_HX_REQUEST": "true"}
BEFORE_MODEL = ("open", "lanes", "assembly")
AFTER_MODEL = ("checks", "tool", "harvest", "commit", "push", "let_go", "render")


class _Stages:
    """Time per stage of the current step, by wrapping the functions each stage calls: wall time,
    or with `clock=time.thread_time` the calling thread's CPU time (what a loaded machine disturbs
    least; a wait on the database or the model is not in it); and the process's CPU time in each
    (`cpu:` + stage: every thread's — the push loop's, the records read beside the call)."""

    def __init__(self, clock=time.perf_counter):
        self.clock = clock
        self.now: dict[str, float] = {}
        self.depth: list[str] = []

    def wrap(self, owner, name: str, stage: str) -> None:
        real = getattr(owner, name)

        def timed(*args, **kwargs):
            t0, c0 = self.clock(), time.process_time()
            self.depth.append(stage)
            try:
                return real(*args, **kwargs)
            finally:
                self.depth.pop()
                for key, spent in ((stage, self.clock() - t0), ("cpu:" + stage, time.process_time() - c0)):
                    self.now[key] = self.now.get(key, 0.0) + spent
                    if self.depth:  # a stage inside another counts once: taken out of the outer one
                        outer = ("cpu:" if key.startswith("cpu:") else "") + self.depth[-1]
                        self.now[outer] = self.now.get(outer, 0.0) - spent

        timed.__wrapped__ = real
        setattr(owner, name, timed)

    def take(self) -> dict[str, float]:
        got, self.now = self.now, {}
        return got


def _profile_ticket(length: int, tclass, customer, order: str):
    """A ticket of `length` turns, compacted as the trigger would leave it: a current summary
    through all but the class's recent turns."""
    from sundry.context.models import Summary
    from sundry.desk.lifecycle import ticket_create
    from sundry.tickets.models import Ticket, Turn

    ticket = ticket_create(customer=customer.person, ticket_class=tclass, subject=f"Profile {length}")
    rows = []
    for n in range(1, length + 1):
        author = "customer" if n % 2 else "agent"
        text = (
            f"Where is my order {order}? I asked before."
            if author == "customer"
            else f"Your order {order} is on its way; it should arrive this week."
        )
        rows.append(Turn(ticket=ticket, number=n, author=author, kind="message", text=text, payload={}, tokens=16))
    Turn.objects.bulk_create(rows)
    Ticket.objects.filter(pk=ticket.pk).update(last_turn_number=length, version=length)
    kept = tclass.recent_turns_kept
    if length > kept:
        Summary.objects.create(
            ticket=ticket,
            covers_through_turn=length - kept,
            is_current=True,
            fields={},
            text=f"The customer asked about {order} several times; it was shipped.",
        )
    return Ticket.objects.select_related("ticket_class", "customer").get(pk=ticket.pk)


def step_profile(
    *, lengths=(10, 100, 1000), messages: int = 12, reconnect: str = "close", clock: str = "wall", say=print
) -> dict:
    """Milliseconds per step by stage, with the loopback model server answering at once.

    Each customer message runs `agent_run` through the real gateway (pydantic-ai, the SDK, HTTP)
    to `sundry.evals.modelserver` with no added latency: a lookup step, then a reply step. The
    server logs its own time per call, so `gateway` is the call as the gateway timed it minus
    `model`. `reconnect="close"`: each run starts on a fresh database connection, as a Celery
    task does with `CONN_MAX_AGE=0` (`connect` then times opening it; with Django's connection
    pool, `OPTIONS["pool"]`, it is taken from the pool); `"close_pool"`: the pool is closed
    too, as Celery's Django fixup does around every task in a prefork worker; `""`: one
    connection throughout. Statements per step are counted too. `clock="cpu"`: each stage's CPU
    time on the worker's thread (`time.thread_time`) rather than wall time; `gateway` is then the
    thread's own CPU in the call, the model's time not taken off (the server is another process).
    """
    import subprocess
    import sys
    import tempfile
    from pathlib import Path

    from django.test.utils import override_settings

    from bench import realbench
    from sundry.agent import answer, calls, claims, loop, outbox, step, tasks
    from sundry.agent.provider.gateway import Gateway
    from sundry.core import background
    from sundry.evals.sources import throwaway_database
    from sundry.tickets import events

    port = realbench._free_port()
    log = Path(tempfile.mkdtemp(prefix="sundry-profile-")) / "model.jsonl"
    env = {**os.environ, "SUNDRY_LOG_LEVEL": "ERROR"}
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "sundry.evals.modelserver",
            "--port",
            str(port),
            "--min",
            "0",
            "--max",
            "0",
            "--seed",
            "1",
            "--log",
            str(log),
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    saved_env = {k: os.environ.get(k) for k in ("SUNDRY_OPENAI_COMPAT_BASE_URL", "SUNDRY_OPENAI_COMPAT_API_KEY")}
    os.environ.update(
        {
            "SUNDRY_OPENAI_COMPAT_BASE_URL": f"http://{realbench.HOST}:{port}/v1",
            "SUNDRY_OPENAI_COMPAT_API_KEY": "loopback",
        }
    )
    stages, restore = _Stages(time.thread_time if clock == "cpu" else time.perf_counter), []
    saved_listeners = list(loop.resolution_listeners)
    try:
        realbench._wait_for(lambda: realbench._listening(port), time.monotonic() + 30, "model server", server)
        for owner, name, stage in (
            (background, "wait_idle", "handoff"),
            (tasks, "run_slice", "run"),  # the run's own time, beside its stages: not counted
            (loop, "_open", "open"),
            (step, "lane_snapshot", "lanes"),
            (step, "assemble_request", "assembly"),
            (Gateway, "call", "gateway"),
            (answer, "obtain", "checks"),
            (calls, "execute", "tool"),
            (calls.lanes, "ledger_harvest", "harvest"),
            (calls, "apply_effects", "harvest"),
            (step, "_step", "commit"),
            (events, "_push", "push"),
            (events, "reply_stream", "push"),
            (claims, "release", "let_go"),
            (loop, "_inputs_after", "let_go"),
            (outbox, "settle", "let_go"),
        ):
            restore.append((owner, name, getattr(owner, name)))
            stages.wrap(owner, name, stage)
        loop.resolution_listeners[:] = []  # the compaction check is measured apart (`loop_run`)
        with (
            throwaway_database(),
            override_settings(DEBUG=False, BACKGROUND_MODE="deferred", RATE_CUSTOMER_MESSAGES="10000/m"),
        ):
            return _profile(lengths, messages, reconnect, stages, log, say)
    finally:
        loop.resolution_listeners[:] = saved_listeners
        for owner, name, real in reversed(restore):
            setattr(owner, name, real)
        for k, v in saved_env.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        realbench._stop(server)


def _profile(lengths, messages: int, reconnect: str, stages: _Stages, log, say) -> dict:
    from django.contrib.auth import get_user_model
    from django.db import connection
    from django.test import Client

    from bench import realbench
    from sundry.core import background
    from sundry.live import panels
    from sundry.shop.models import Order
    from sundry.shop.seed import generate_shop
    from sundry.tickets.models import TicketClass

    generate_shop(seed=1, customers=5, orders=40)
    tclass = TicketClass.objects.create(
        name="Profile",
        slug="profile",
        token_budget=8000,
        trigger_fraction=0.8,
        recent_turns_kept=8,
        working_model=realbench.MODEL_NAME,
        approval_rules={},
    )
    order = Order.objects.select_related("customer").filter(status="delivered").order_by("number").first()
    staff = panels.Viewer(get_user_model().objects.create_user("profile-staff", is_staff=True), panels.STAFF)
    counted: list[int] = []
    rows = []
    with connection.execute_wrapper(
        lambda execute, sql, params, many, context: (counted.append(1), execute(sql, params, many, context))[1]
    ):
        for length in lengths:
            ticket = _profile_ticket(length, tclass, order.customer, order.number)
            if ticket.customer.user is None:  # the customer signs in to post, as on their page
                ticket.customer.user = get_user_model().objects.create_user(f"profile-customer-{length}")
                ticket.customer.save(update_fields=["user"])
            per_step: list[dict] = []
            connect: list[float] = []
            seen = len(_log_lines(log))
            customer = Client()
            customer.force_login(ticket.customer.user)
            for i in range(messages + 1):  # the first message warms the process and is not counted
                stages.take()
                t0 = stages.clock()
                answered = customer.post(
                    f"/help/tickets/{ticket.pk}/message", {"text": f"Where is my order {order.number}?"}, **HTMX
                )
                posted = stages.clock() - t0
                assert answered.status_code == 200, answered.status_code
                if reconnect:
                    connection.close()
                    if reconnect == "close_pool" and hasattr(connection, "close_pool"):
                        connection.close_pool()
                    t0 = time.perf_counter()
                    connection.ensure_connection()
                    took = time.perf_counter() - t0
                counted.clear()
                background.wait_idle()  # the wake-up the POST queued: the task, as a worker runs it
                statements = len(counted)
                got = stages.take()
                got["http"] = posted
                t0 = stages.clock()
                panels.render_current((ticket, staff))  # as a push renders: extending the one before
                got["render"] = stages.clock() - t0
                model = [line["seconds"] for line in _log_lines(log)[seen:]]
                seen += len(model)
                if i == 0:
                    continue
                if reconnect:
                    connect.append(took)
                steps = len(model) or 1
                got["model"] = sum(model)
                if stages.clock is time.perf_counter:  # the server's wall time; not in a CPU clock
                    got["gateway"] = got.get("gateway", 0.0) - got["model"]
                # Per step, but a message's POST and hand-off once (they come before its first step).
                per_step.append(
                    {stage: got.get(stage, 0.0) / (1 if stage in PER_MESSAGE else steps) for stage in PROFILE_STAGES}
                    | {"steps": steps, "statements": statements / steps}
                    | {
                        # CPU after the model call, the desk's render (the web process's) left out.
                        "cpu_after": sum(got.get("cpu:" + s, 0.0) for s in AFTER_MODEL if s != "render") / steps,
                        "cpu_before": sum(got.get("cpu:" + s, 0.0) for s in BEFORE_MODEL) / steps,
                    }
                )
            row = {
                "turns": length,
                "messages": messages,
                "steps_per_message": statistics.mean(s["steps"] for s in per_step),
                "statements_per_step": statistics.mean(s["statements"] for s in per_step),
                "connect_ms": ms(statistics.median(connect)) if connect else None,
                "stages_ms": {stage: ms(statistics.median(s[stage] for s in per_step)) for stage in PROFILE_STAGES},
            }
            st = row["stages_ms"]
            row["per_message_ms"] = round(sum(st[s] for s in PER_MESSAGE), 3)
            row["before_model_ms"] = round(sum(st[s] for s in BEFORE_MODEL), 3)
            row["after_model_ms"] = round(sum(st[s] for s in AFTER_MODEL), 3)
            row["cpu_after_model_ms"] = ms(statistics.median(s["cpu_after"] for s in per_step))
            row["cpu_before_model_ms"] = ms(statistics.median(s["cpu_before"] for s in per_step))
            rows.append(row)
            say(
                f"  {length:>5} turns: POST and hand-off {row['per_message_ms']:.1f} ms a message; "
                f"before the model {row['before_model_ms']:.1f} ms, gateway {st['gateway']:.1f} ms, "
                f"after {row['after_model_ms']:.1f} ms a step; {row['statements_per_step']:.1f} statements a step; "
                + ", ".join(f"{s} {st[s]:.1f}" for s in PROFILE_STAGES)
                + (f"; connect {row['connect_ms']:.1f} ms a run" if row["connect_ms"] is not None else "")
                + f"; CPU before the model {row['cpu_before_model_ms']:.1f} ms, after (render apart)"
                f" {row['cpu_after_model_ms']:.1f} ms a step"
            )
    return {
        "rows": rows,
        "load": os.getloadavg(),
        "database": connection.vendor,
        "pool": bool(connection.settings_dict.get("OPTIONS", {}).get("pool")),
    }


def _log_lines(path) -> list[dict]:
    import json

    try:
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    except FileNotFoundError:
        return []
