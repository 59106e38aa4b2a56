"""What the model gateway adds to a model call beyond the model server's own time.

Benchmark, not a test: `python -m bench.gatewaybench [--calls 80] [--modes whole,streamed] [--profile FILE]`.

Starts the loopback model server (`sundry.evals.modelserver`, answering at once with the offline
model) as a process of its own, and sends it one fixed request through `Gateway.call` — the
shop's 15 tools and 38 messages (the lanes, then a conversation of questions, lookups and their
results, replies) — `--calls` times per mode after a few unmeasured ones: whole, and streamed to a
sink as a step does (`MODEL_STREAM`). Per call, the gateway's wall time less the server's own time
(its log) and this process's CPU time (`time.process_time`: the client alone, the server runs
elsewhere). Prints one JSON line per mode. `--memory` times the same calls instead without a socket or a server (an
in-memory transport answering with a short reply, through the gateway's own
conversion, model, SDK client and response repair): this thread's CPU a call, the gateway's work
alone. `--profile FILE` writes a cProfile of the measured calls;
`--server-path DIR` runs the model server of another checkout. Run it at each checkout with
PYTHONPATH and the cwd there.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

MODEL = "openai-compatible:bench"


def bench_request():
    """The fixed request: five lanes, eleven lookups with their results and replies, a last question."""
    from sundry.agent.toolbox import domain_specs
    from sundry.tooling.messages import Message, ModelRequest, ToolCall, ToolSpec

    lanes = [
        ("system", "# System\nYou are the support agent for the shop. Be brief, exact and kind. " * 6),
        ("rules", "# Rules\n- Never e-mail the customer; phone only.\n- Refunds over 100 USD need staff.\n"),
        ("ledger", "# Ledger\n" + "".join(f"- SU-2048{i}: order (verified, turn {i})\n" for i in range(8))),
        ("state", "# State\n- issue: a parcel that did not arrive\n- amount: 48.99 USD\n"),
        ("summary", "# Summary\nThe customer asked about several orders; two shipped, one is late. " * 4),
    ]
    messages = [Message(role="system", lane=lane, content=text) for lane, text in lanes]
    for i in range(11):
        call = ToolCall(id=f"call_{i:02d}", name="get_order", arguments={"order_number": f"SU-2048{i % 8}"})
        result = {
            "order_number": f"SU-2048{i % 8}",
            "status": "shipped",
            "items": [{"sku": f"SKU-{i}{j}", "name": "Air fryer, 4 l — black", "price": "48.99"} for j in range(3)],
            "tracking": [{"at": f"2026-12-0{1 + j}T10:00:00Z", "event": "in transit"} for j in range(3)],
        }
        messages += [
            Message(role="user", content=f"Où est ma commande SU-2048{i % 8} ? It was due on the {i + 3}rd. 📦"),
            Message(role="assistant", content="", tool_calls=[call]),
            Message(role="tool", tool_call_id=call.id, tool_name=call.name, content=json.dumps(result)),
        ]
    messages.append(Message(role="user", content="And when will the refund of 48.99 USD reach my card?"))
    tools = [ToolSpec(**spec) for spec in domain_specs()]
    return ModelRequest(model=MODEL, messages=messages, tools=tools)


class Sink:
    """Hears a streamed call as a step's reply stream does, doing nothing with it."""

    async def typing(self) -> None:
        pass

    async def written(self, text: str, *, final: bool = False) -> None:
        pass


def _start_server(log: Path, server_path: str | None) -> tuple[subprocess.Popen, str]:
    env = dict(os.environ)
    if server_path:  # another checkout's model server (its own modelserver.py)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (server_path, env.get("PYTHONPATH")) if p)
    argv = ["--port", "0", "--min", "0", "--max", "0", "--log", str(log)]
    proc = subprocess.Popen(
        [sys.executable, "-m", "sundry.evals.modelserver", *argv],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
        cwd=server_path or None,
    )
    line = proc.stdout.readline().split()
    if len(line) != 2 or line[0] != "listening":
        proc.kill()
        raise SystemExit(f"model server did not start: {line}")
    return proc, f"http://127.0.0.1:{line[1]}/v1"


def _server_seconds(log: Path, skip: int) -> list[float]:
    lines = [json.loads(x) for x in log.read_text().splitlines() if x.strip()]
    return [x["seconds"] for x in lines[skip:]]


def run(calls: int, modes: list[str], warmup: int, profile: str | None, server_path: str | None = None) -> list[dict]:
    from sundry.agent.provider.gateway import CallLimits, Gateway

    log = Path(tempfile.mkdtemp(prefix="sundry-gatewaybench-")) / "calls.jsonl"
    log.touch()
    proc, url = _start_server(log, server_path)
    os.environ["SUNDRY_OPENAI_COMPAT_BASE_URL"] = url
    os.environ.pop("SUNDRY_OPENAI_COMPAT_API_KEY", None)
    gateway = Gateway(limits=CallLimits(max_retries=0))
    request = bench_request()
    profiler = cProfile.Profile() if profile else None
    out = []
    done = 0
    try:
        for mode in modes:
            sink = Sink if mode == "streamed" else None
            for _ in range(warmup):
                gateway.call(request, stream=sink() if sink else None)
            done += warmup
            walls, cpus = [], []
            for _ in range(calls):
                stream = sink() if sink else None
                if profiler:
                    profiler.enable()
                cpu, wall = time.process_time(), time.perf_counter()
                got = gateway.call(request, stream=stream)
                wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
                if profiler:
                    profiler.disable()
                walls.append(wall)
                cpus.append(cpu)
            time.sleep(0.2)  # the server logs after it answers
            server = _server_seconds(log, done)
            done += calls
            beyond = [1000 * (w - s) for w, s in zip(walls, server, strict=True)]
            out.append(
                {
                    "mode": mode,
                    "calls": calls,
                    "beyond_server_ms_median": round(statistics.median(beyond), 2),
                    "beyond_server_ms_mean": round(statistics.fmean(beyond), 2),
                    "cpu_ms_mean": round(1000 * statistics.fmean(cpus), 2),
                    "cpu_ms_median": round(1000 * statistics.median(cpus), 2),
                    "server_ms_median": round(1000 * statistics.median(server), 2),
                    "answer": "calls" if got.response.tool_calls else "text",
                    "load": os.getloadavg()[0],
                }
            )
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    if profiler:
        profiler.dump_stats(profile)
    return out


def run_in_memory(calls: int, modes: list[str], warmup: int) -> list[dict]:
    import asyncio
    import inspect

    import httpx2

    from sundry.agent.provider import gateway as g
    from sundry.agent.provider.wire import NormalisingTransport
    from sundry.evals.modelserver import to_completion
    from sundry.tooling.messages import ModelResponse, Usage

    request = bench_request()
    text = "Your refund of 48.99 USD reaches your card within five working days."  # a short reply, as served
    answer = to_completion(ModelResponse(text=text, usage=Usage(input_tokens=9000, output_tokens=20)), "bench")
    transport = NormalisingTransport(httpx2.MockTransport(lambda _: httpx2.Response(200, json=answer)))
    os.environ["SUNDRY_OPENAI_COMPAT_BASE_URL"] = "http://127.0.0.1:9/v1"  # never dialled
    resolved = g.resolve_model(MODEL)
    limits = g.CallLimits(max_retries=0)
    client = httpx2.AsyncClient(transport=transport)
    if "max_retries" in inspect.signature(g._build_model).parameters:
        model = g._build_model(resolved, client, max_retries=0)
    else:  # a checkout from before the client carried the retries
        model = g._build_model(resolved, client)

    async def one(stream):
        messages, parameters = g.to_pai_messages(request), g.to_pai_parameters(request)
        result = await g._send(model, messages, g._request_settings(resolved, limits), parameters, stream)
        return g.from_pai_response(result, MODEL)

    loop = asyncio.new_event_loop()
    out = []
    for mode in modes:
        for _ in range(warmup):
            loop.run_until_complete(one(Sink() if mode == "streamed" else None))
        cpus = []
        for _ in range(calls):
            stream = Sink() if mode == "streamed" else None
            cpu = time.thread_time()
            loop.run_until_complete(one(stream))
            cpus.append(time.thread_time() - cpu)
        out.append(
            {
                "mode": f"{mode}, in memory",
                "calls": calls,
                "cpu_ms_mean": round(1000 * statistics.fmean(cpus), 2),
                "cpu_ms_median": round(1000 * statistics.median(cpus), 2),
                "load": os.getloadavg()[0],
            }
        )
    loop.run_until_complete(loop.shutdown_asyncgens())
    loop.close()
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=80)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--modes", default="whole,streamed")
    parser.add_argument("--profile", default=None, help="write a cProfile of the measured calls here")
    parser.add_argument("--server-path", default=None, help="run the model server of the checkout at this path")
    parser.add_argument("--memory", action="store_true", help="time the calls without a socket or a server instead")
    args = parser.parse_args(argv)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "sundry.settings")
    import django

    django.setup()  # the shop's tool declarations are read through the registry
    modes = args.modes.split(",")
    if args.memory:
        rows = run_in_memory(args.calls, modes, args.warmup)
    else:
        rows = run(args.calls, modes, args.warmup, args.profile, args.server_path)
    for row in rows:
        print(json.dumps(row), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
