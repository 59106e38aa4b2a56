"""Where a realistic run's time goes, per message, on the wall clocks of the run itself.

`bench.realbench` hands over what each process wrote down: the customers' POST and the desk
socket's arrival (the client), the time each task was published (the web process,
`bench.benchweb`), each task's start, end and stage spans (the worker, `bench.stageclock`) and
each model call's arrival and time at the model server. All share `time.time()` on one machine.

A message's chain, consecutive segments that add up to the whole reply push:

    posted → published → task start → open → steps → reply push start → desk socket

where each step is: before the call (lanes, assembly, the records read started) → request out
(gateway start → the model server has it) → the model server's time → reply in (server done →
gateway done: the SDK's parse and the streamed reply's sentences) → after the call (checks,
commit) — the last step until its push starts. Each segment's p50 and p99 over messages; the
segments' p50s do not add up to the total's p50 (medians do not add), their means do.

Beside the chain, `parts`: spans inside the chain's segments (the push's PUBLISHes inside the
commit, connecting to the database inside the open, the heartbeat's start and stop, the
streamed reply's work inside the call) and the task's time after the reply's push (letting
go), which a customer does not wait for but a worker slot does.
"""

from __future__ import annotations

import math
import statistics

CHAIN = [
    ("post → published", "the POST until its commit publishes the task (web process)"),
    ("published → task start", "the Celery hand-off (and any wait for a free slot)"),
    ("task start → open", "Celery's own work before the run (the fixup's connection close)"),
    ("open", "claim and load: connecting to PostgreSQL, one round trip"),
    ("open → first step", "the class's toolbox"),
    ("before call", "lanes, assembly, the reply's facts, heartbeat start"),
    ("request out", "gateway start → the model server has the request"),
    ("model server", "the model's own time"),
    ("reply in", "model server done → gateway done"),
    ("after call", "checks, commit (not the last step's push), heartbeat stop"),
    ("between steps", "a step's end → the next's start (the claim renewed)"),
    ("push → desk socket", "the reply's push: PUBLISH, the web process's render, the socket"),
]


def _pct(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]


def _summary(values: list[float]) -> dict:
    return {
        "n": len(values),
        "p50": None if not values else round(1000 * _pct(values, 0.5), 1),
        "p99": None if not values else round(1000 * _pct(values, 0.99), 1),
        "mean": None if not values else round(1000 * statistics.fmean(values), 1),
    }


def _spans(task: dict, name: str) -> list[tuple[float, float]]:
    return [(s[1], s[2]) for s in task.get("spans") or () if s[0] == name]


def _within(spans, start: float, end: float) -> list[tuple[float, float]]:
    return [(a, b) for a, b in spans if a >= start and b <= end]


def _total(spans) -> float:
    return sum(b - a for a, b in spans)


def message_chain(ex: dict, task: dict, calls: list[dict]) -> dict | None:
    """The chain's segments (seconds) for one message served by one task, or None where the records
    do not make a chain (no step, no call inside a gateway span, no push before the reply)."""
    posted, replied, published = ex["posted"], ex["replied"], task.get("published")
    opens, steps = _spans(task, "open"), _spans(task, "step")
    if published is None or not opens or not steps:
        return None
    gateways = _spans(task, "gateway")
    pushes = _spans(task, "push")
    out = {name: 0.0 for name, _ in CHAIN}
    out["post → published"] = published - posted
    out["published → task start"] = task["start"] - published
    out["task start → open"] = opens[0][0] - task["start"]
    out["open"] = opens[0][1] - opens[0][0]
    out["open → first step"] = steps[0][0] - opens[0][1]
    last_end = None
    for i, (s0, s1) in enumerate(steps):
        if last_end is not None:
            out["between steps"] += s0 - last_end
        inside = _within(gateways, s0, s1)
        if not inside:
            return None
        g0, g1 = inside[0][0], inside[-1][1]
        served = sorted((c for c in calls if g0 <= c["arrived"] <= g1), key=lambda c: c["arrived"])
        if not served:
            return None
        server = sum(c["seconds"] for c in served)
        out["before call"] += g0 - s0
        out["request out"] += served[0]["arrived"] - g0
        out["model server"] += server
        # Server done → gateway done, and any time between several calls of one step (a re-ask).
        out["reply in"] += (g1 - g0) - server - (served[0]["arrived"] - g0)
        final = i == len(steps) - 1
        if final:
            push = [p for p in _within(pushes, g1, s1)]
            if not push or push[0][0] > replied:
                return None
            out["after call"] += push[0][0] - g1
            out["push → desk socket"] = replied - push[0][0]
        else:
            out["after call"] += s1 - g1
        last_end = s1
    out["total"] = replied - posted
    return out


def breakdown(exchanges: list[dict], tasks: list[dict], calls: list[dict]) -> dict:
    """Per-segment figures over the messages that make a chain; the counts of those that do not."""
    agent = sorted((t for t in tasks if t["task"] == "sundry.agent.run"), key=lambda t: t["start"])
    by_ticket: dict[int, list[dict]] = {}
    for t in agent:
        by_ticket.setdefault(t["arg"], []).append(t)
    chains, skipped, several = [], 0, 0
    for ex in exchanges:
        if ex.get("replied") is None:
            continue
        served = [t for t in by_ticket.get(ex["ticket"], []) if ex["posted"] <= t["start"] <= ex["replied"]]
        with_steps = [t for t in served if _spans(t, "step")]
        if len(with_steps) != 1:
            skipped += 1
            several += len(with_steps) > 1
            continue
        task = with_steps[0]
        mine = [c for c in calls if c.get("ticket") == ex["ticket"]]
        chain = message_chain(ex, task, mine)
        if chain is None:
            skipped += 1
            continue
        chain["_task"] = task
        chains.append(chain)
    segments = {name: _summary([c[name] for c in chains]) for name, _ in CHAIN}
    segments["total (posted → desk socket)"] = _summary([c["total"] for c in chains])
    segments["beyond model"] = _summary([c["total"] - c["model server"] for c in chains])
    parts = _parts([c["_task"] for c in chains], agent)
    return {"messages": len(chains), "skipped": skipped, "several_tasks": several, "chain": segments, "parts": parts}


# Spans inside the chain's segments, summed per task (a message's), and per step where a step has one.
PARTS = [
    ("db.connect", "connecting to PostgreSQL (a task)"),
    ("db.close", "closing connections (a task)"),
    ("lanes", "the lane snapshot (a step)"),
    ("assembly", "assembly (a step)"),
    ("facts", "the reply's facts, the records read started (a step)"),
    ("heartbeat:enter", "the heartbeat thread started (a step)"),
    ("heartbeat:exit", "the heartbeat thread stopped and joined (a step)"),
    ("records.join", "waiting for the records read (a step)"),
    ("stream.typing", "the stream's 'is writing…' sent, inside the call (a step)"),
    ("stream.written", "the streamed reply's sentences judged and sent, inside the call (a step)"),
    ("send", "the SDK's request, streamed or whole, inside the call (a step)"),
    ("commit", "the step's commit, its push included (a step)"),
    ("calls", "a tool step's calls: guards, the tool, its result, harvest, effects (a step)"),
    ("call guards", "a call's guards (each)"),
    ("execute", "a call run: the tool, its result's turn, harvest, effects (each)"),
    ("harvest", "the ledger's harvest of a result (each)"),
    ("effects", "a result's effects (each)"),
    ("turn append (calls)", "a turn the calls append (each)"),
    ("reply at once", "a plain reply in one statement (a step)"),
    ("step record", "the step's record, in the transaction (a step)"),
    ("sql", "a statement (each; a message: all the task's)"),
    ("db.commit", "a COMMIT (each)"),
    ("push", "a push: its PUBLISHes (each)"),
    ("group_send", "a group send (each: pushes and stream messages)"),
    ("stream.finish", "the stream's 'done' sent after the commit (a step)"),
    ("release", "letting go of the claim (a task)"),
    ("inputs_after", "looking for input that came meanwhile (a task)"),
]


def _parts(tasks: list[dict], all_tasks: list[dict]) -> dict:
    out = {}
    for name, _ in PARTS:
        each = [b - a for t in tasks for a, b in _spans(t, name)]
        per_task = [_total(_spans(t, name)) for t in tasks]
        out[name] = {"each": _summary(each), "per_message": _summary(per_task)}
    # The task's time after the step that replied: letting go, and Celery's own after.
    tails = []
    for t in tasks:
        steps = _spans(t, "step")
        if steps:
            tails.append(t["end"] - steps[-1][1])
    out["after last step → task end"] = {"each": _summary(tails), "per_message": _summary(tails)}
    # Every agent task's own time less the model server's: the share's numerator, per task.
    return out


def table(result: dict) -> list[str]:
    """The breakdown as Markdown rows (ms)."""
    rows = [
        f"{result['messages']} messages in a chain ({result['skipped']} not: "
        f"{result['several_tasks']} served by several tasks, the rest missing a record)",
        "",
        "| segment | what | p50 | p99 | mean |",
        "|---|---|---:|---:|---:|",
    ]
    what = dict(CHAIN)
    for name, s in result["chain"].items():
        rows.append(f"| {name} | {what.get(name, '')} | {s['p50']} | {s['p99']} | {s['mean']} |")
    rows += [
        "",
        "| inside | what | each p50 | each p99 | a message p50 | a message p99 | count |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    what = dict(PARTS)
    for name, s in result["parts"].items():
        e, m = s["each"], s["per_message"]
        rows.append(f"| {name} | {what.get(name, '')} | {e['p50']} | {e['p99']} | {m['p50']} | {m['p99']} | {e['n']} |")
    return rows
