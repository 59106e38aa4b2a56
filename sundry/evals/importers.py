"""Importers: foreign agent logs → `RecordedTicket`.

- τ²-bench results files (`{timestamp, info, tasks, simulations}`);
- plain OpenAI chat-completions message lists, alone or wrapped the way
  tau-bench's historical trajectories are (`[{task_id, traj: [...]}, …]`),
  as JSON or JSON Lines.

Only what the agent saw becomes a turn: telecom's device tools
(`requestor: "user"`) act on the simulated customer's phone and their results
go to the customer, not the agent, so they are counted in `meta`, not replayed.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterable

from sundry.evals import records
from sundry.evals.records import RecordedTicket, RecordedTurn


class ImportFailed(ValueError):
    """A file that is not in any format the importers know; the message says what was expected."""


def _text(content: Any) -> str:
    """OpenAI content: a string, None, or a list of parts."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(p.get("text", "")) if isinstance(p, dict) else str(p) for p in content).strip()
    return str(content)


def _arguments(raw: Any) -> dict | str:
    if isinstance(raw, dict):
        return raw
    if isinstance(raw, str):
        try:
            parsed = json.loads(raw) if raw.strip() else {}
        except json.JSONDecodeError:
            return raw  # kept as the model wrote it; the guard reports it as malformed
        return parsed if isinstance(parsed, dict) else raw
    return {}


def _is_error(content: str) -> bool:
    return content.lstrip().lower().startswith("error")


class _Builder:
    """Appends turns with consecutive numbers, pairing results to their calls.

    Call IDs are made unique as the agent loop makes them (`loop.unique_call_ids`): a
    recorded agent that reused "call_0" would otherwise have one call's result paired
    with another call. A result pairs with the newest open call of its recorded ID.
    What cannot be paired is counted, and `check` refuses the ticket.
    """

    def __init__(self):
        self.turns: list[RecordedTurn] = []
        self.names: dict[str, str] = {}
        self.taken: set[str] = set()
        self.open: dict[str, list[str]] = {}  # recorded id → unique ids still awaiting a result
        self.orphans: list[str] = []

    def add(self, author: str, kind: str, text: str = "", payload: dict | None = None) -> None:
        self.turns.append(
            RecordedTurn(number=len(self.turns) + 1, author=author, kind=kind, text=text, payload=payload or {})
        )

    def calls(self, text: str, calls: list[dict]) -> None:
        for c in calls:
            recorded, n = c["id"] or "call", 2
            new = recorded
            while new in self.taken:
                new, n = f"{recorded}-{n}", n + 1
            self.taken.add(new)
            self.open.setdefault(c["id"], []).append(new)
            c["id"] = new
            self.names[new] = c["name"]
        self.add("agent", "tool_call", text, {"calls": calls})

    def result(self, call_id: str, text: str, ok: bool, name: str | None = None) -> None:
        waiting = self.open.get(call_id) or []
        if not waiting:
            self.orphans.append(f"result {call_id!r} at turn {len(self.turns) + 1} has no call before it")
            return
        unique = waiting.pop(0)
        name = name or self.names.get(unique, "tool")
        self.add("tool", "tool_result", text, {"call_id": unique, "name": name, "ok": ok})

    def check(self, where: str) -> None:
        unanswered = [f"call {i!r} has no result" for ids in self.open.values() for i in ids]
        problems = self.orphans + unanswered
        if problems:
            raise ImportFailed(f"{where}: {len(problems)} unpaired call(s)/result(s), e.g. " + "; ".join(problems[:3]))


# --- τ²-bench ------------------------------------------------------------------------------


def _tau2_domain(data: dict, path: Path) -> str:
    env = (data.get("info") or {}).get("environment_info") or {}
    name = env.get("domain_name") if isinstance(env, dict) else None
    if name:
        return str(name)
    for known in ("retail", "airline", "telecom"):
        if known in path.name:
            return known
    return "unknown"


def tau2_simulation(sim: dict, *, domain: str, source_name: str = "") -> RecordedTicket:
    b = _Builder()
    user_calls: set[str] = set()
    skipped = 0
    for m in sim.get("messages") or []:
        role, content = m.get("role"), _text(m.get("content"))
        calls = m.get("tool_calls") or []
        if role == "assistant":
            mine = [c for c in calls if c.get("requestor", "assistant") == "assistant"]
            if mine:
                b.calls(
                    content,
                    [
                        {"id": str(c["id"]), "name": str(c["name"]), "arguments": _arguments(c.get("arguments"))}
                        for c in mine
                    ],
                )
            elif content:
                b.add("agent", "message", content)
        elif role == "user":
            for c in calls:  # the simulated customer's own device actions
                user_calls.add(str(c.get("id")))
                skipped += 1
            if content:
                b.add("customer", "message", content)
        elif role == "tool":
            call_id = str(m.get("id") or m.get("tool_call_id") or "")
            if call_id in user_calls or m.get("requestor") == "user":
                continue
            b.result(call_id, content, ok=not (m.get("error") or _is_error(content)))
    sid = sim.get("task_id", sim.get("id", "?"))
    reward = (sim.get("reward_info") or {}).get("reward")
    b.check(f"{source_name or 'τ²-bench simulation'}, task {sid}")
    return RecordedTicket(
        id=f"{domain}-{sid}",
        source="tau2",
        domain=domain,
        subject=f"τ²-bench {domain} task {sid}",
        turns=b.turns,
        meta={
            "file": source_name,
            "source_id": f"{domain}-{sid}",
            "task_id": sid,
            "reward": reward,
            "customer_device_calls_skipped": skipped,
            "termination": sim.get("termination_reason"),
        },
    )


def is_tau2_simulations(data: Any) -> bool:
    """A bare list of τ²-bench simulations (what some runs write instead of a results object)."""
    return (
        isinstance(data, list)
        and bool(data)
        and all(isinstance(s, dict) for s in data)
        and all("messages" in s and ("task_id" in s or "reward_info" in s or "termination_reason" in s) for s in data)
    )


def tau2_results(path: str | Path, *, domain: str | None = None) -> list[RecordedTicket]:
    """A τ²-bench results object (`{info, tasks, simulations}`) or a bare list of its simulations."""
    path = Path(path)
    data = json.loads(path.read_text())
    if is_tau2_simulations(data):
        sims, dom = data, domain or _tau2_domain({}, path)
        if dom == "unknown":
            names = {
                str(c.get("name")) for s in sims for m in s.get("messages") or [] for c in m.get("tool_calls") or []
            }
            dom = guess_domain(names)
        if dom == "unknown":
            raise ImportFailed(
                f"{path}: no tool call names a known domain; pass --domain with one of: {', '.join(_domain_names())}"
            )
    elif isinstance(data, dict) and "simulations" in data:
        sims, dom = data["simulations"], domain or _tau2_domain(data, path)
    else:
        raise ImportFailed(
            f"{path} is not a τ²-bench results file (expected an object with 'simulations' or a list of simulations)"
        )
    return unique_ids([tau2_simulation(s, domain=dom, source_name=path.name) for s in sims])


def unique_ids(tickets: list[RecordedTicket]) -> list[RecordedTicket]:
    """Tickets with distinct IDs: a repeated one (several trials of one task) gets "#2", "#3" …"""
    seen: dict[str, int] = {}
    out = []
    for t in tickets:
        n = seen[t.id] = seen.get(t.id, 0) + 1
        out.append(t if n == 1 else t.model_copy(update={"id": f"{t.id}#{n}"}))
    return out


# --- OpenAI chat-completions message lists ---------------------------------------------------


def openai_messages(messages: list[dict], *, ticket_id: str, domain: str, meta: dict | None = None) -> RecordedTicket:
    b = _Builder()
    pending_function: list[str] = []  # legacy function_call ids awaiting their "function" result
    for i, m in enumerate(messages):
        role, content = m.get("role"), _text(m.get("content"))
        if role == "user":
            if content:
                b.add("customer", "message", content)
        elif role == "assistant":
            calls = []
            for c in m.get("tool_calls") or []:
                fn = c.get("function") or c
                calls.append(
                    {
                        "id": str(c.get("id") or f"call_{i}_{len(calls)}"),
                        "name": str(fn.get("name")),
                        "arguments": _arguments(fn.get("arguments")),
                    }
                )
            if m.get("function_call"):
                fc = m["function_call"]
                calls.append(
                    {"id": f"fn_{i}", "name": str(fc.get("name")), "arguments": _arguments(fc.get("arguments"))}
                )
                pending_function.append(f"fn_{i}")
            if calls:
                b.calls(content, calls)
            elif content:
                b.add("agent", "message", content)
        elif role == "tool":
            b.result(str(m.get("tool_call_id") or ""), content, ok=not _is_error(content), name=m.get("name"))
        elif role == "function":
            call_id = pending_function.pop(0) if pending_function else f"fn_orphan_{i}"
            b.result(call_id, content, ok=not _is_error(content), name=m.get("name"))
        # system prompts are the recorded agent's, not ours: not replayed
    b.check(f"{(meta or {}).get('file') or 'messages'}, ticket {ticket_id}")
    return RecordedTicket(
        id=ticket_id,
        source="openai",
        domain=domain,
        subject=f"{domain} trajectory {ticket_id}",
        turns=b.turns,
        meta=meta or {},
    )


def _trajectories(data: Any) -> Iterable[tuple[str, list[dict], dict]]:
    if isinstance(data, dict) and isinstance(data.get("messages"), list):
        yield str(data.get("id", data.get("task_id", "0"))), data["messages"], {}
    elif isinstance(data, list) and data and all(isinstance(m, dict) and "role" in m for m in data):
        yield "0", data, {}
    elif isinstance(data, list):
        for n, item in enumerate(data):
            if not isinstance(item, dict):
                continue
            msgs = item.get("traj") or item.get("messages") or item.get("trajectory")
            if isinstance(msgs, list):
                tid = item.get("task_id", item.get("id", n))
                yield str(tid), msgs, {"task_id": tid, "reward": item.get("reward")}


def guess_domain(tool_names: set[str]) -> str:
    from sundry.evals.domains import DOMAINS

    scored = [(len(tool_names & set(d.tool_names())), name) for name, d in DOMAINS.items()]
    best = max(scored, default=(0, "unknown"))
    return best[1] if best[0] else "unknown"


def openai_file(path: str | Path, *, domain: str | None = None) -> list[RecordedTicket]:
    path = Path(path)
    text = path.read_text()
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        data = []
        for n, line in enumerate(text.splitlines(), 1):
            try:
                data += [json.loads(line)] if line.strip() else []
            except json.JSONDecodeError as exc:
                raise ImportFailed(f"{path} is neither JSON nor JSON lines (line {n}: {exc.msg})") from None
    trajectories = [(tid, msgs, meta, _tool_names(msgs)) for tid, msgs, meta in _trajectories(data)]
    if not trajectories:
        raise ImportFailed(f"{path} holds no OpenAI message list (expected messages with 'role', or items with 'traj')")
    # A trajectory without tool calls (the customer gave up, or nothing needed doing) takes the
    # domain the file's other trajectories show.
    whole = domain or guess_domain(set().union(*(names for *_, names in trajectories)))
    out = []
    for tid, msgs, meta, names in trajectories:
        dom = domain or (guess_domain(names) if names else whole)
        if dom == "unknown":
            raise ImportFailed(
                f"{path}, ticket {tid}: no tool call names a known domain ({', '.join(sorted(names)) or 'no tool calls'}); "
                f"pass --domain with one of: {', '.join(_domain_names())}"
            )
        out.append(
            openai_messages(
                msgs,
                ticket_id=f"{dom}-{tid}",
                domain=dom,
                meta={"file": path.name, "source_id": f"{dom}-{tid}", **meta},
            )
        )
    return unique_ids(out)


def _tool_names(msgs: list[dict]) -> set[str]:
    return {
        str((c.get("function") or c).get("name"))
        for m in msgs
        if isinstance(m, dict)
        for c in (m.get("tool_calls") or [])
    }


def _domain_names() -> list[str]:
    from sundry.evals.domains import DOMAINS

    return sorted(DOMAINS)


def load_any(path: str | Path, *, domain: str | None = None) -> list[RecordedTicket]:
    """Our recorded format, a τ²-bench results file, or OpenAI messages — whichever the file is."""
    path = Path(path)
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError:
        return openai_file(path, domain=domain)
    except (OSError, UnicodeDecodeError) as exc:
        raise ImportFailed(
            f"{path} cannot be read: {exc.strerror if isinstance(exc, OSError) else 'not UTF-8 text'}"
        ) from None
    if records.is_recorded(data):
        return records.load(path)
    if (isinstance(data, dict) and "simulations" in data) or is_tau2_simulations(data):
        return tau2_results(path, domain=domain)
    return openai_file(path, domain=domain)
