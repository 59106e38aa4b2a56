"""`manage.py benchmark`: figures, printed (never timed tests).

- request assembly time per step at 40, 200 and 1,000-turn tickets, with
  compaction when the trigger fires, against assembling the full history;
- tokens per request over a 1,000-turn ticket's life: full history, Sundry,
  sliding window, prose-only;
- compaction overhead excluding the summariser call;
- steps per second through the whole agent loop with an instant model;
- push latency p50/p99 to N websocket clients over the Redis layer (only with
  REDIS_URL; loopback only; bounded), with the web process's peak memory.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand

from sundry.evals import benchmarks, sources


class Command(BaseCommand):
    help = "Print Sundry's performance figures: assembly, tokens, compaction overhead, loop steps/s, push latency."

    def add_arguments(self, parser):
        parser.add_argument("--lengths", default="40,200,1000", help="Ticket lengths in turns for the assembly figures")
        parser.add_argument("--messages", type=int, default=150, help="Customer messages through the loop")
        parser.add_argument("--clients", default="50,200,500", help="Websocket clients per push round")
        parser.add_argument("--pushes", type=int, default=20, help="Committed changes per push round")
        parser.add_argument("--skip", nargs="*", default=[], choices=["assembly", "tokens", "loop", "push"])
        parser.add_argument("--soak", type=float, default=None, metavar="MINUTES",
                            help="Only the soak: web-process memory and PostgreSQL connections over this many "
                                 "minutes of posts with 60 staff sockets on 6 tickets (sundry.evals.soakbench)")
        parser.add_argument("--out", default=None, help="Also write the figures as JSON here (default: var/reports/benchmark.json)")

    def handle(self, *args, **opts):
        say = self.stdout.write
        if opts["soak"] is not None:
            return self._soak(opts["soak"], say)
        figures: dict = {"machine": {"cpus": os.cpu_count()}}
        skip = set(opts["skip"])
        if not {"assembly", "tokens"} <= skip:
            say("Recording the demo tickets (throwaway database, offline model) to tile into long tickets …")
            demo = sources.fresh_demo_tickets(say=say)
            base = max(demo, key=lambda t: len(t.turns))
            say(f"  base ticket: {base.id}, {len(base.turns)} turns")
        if "assembly" not in skip:
            figures["assembly"] = self._assembly(base, [int(x) for x in opts["lengths"].split(",")], say)
        if "tokens" not in skip:
            figures["tokens"] = self._tokens(base, say)
        if "loop" not in skip:
            say("Steps through the agent worker's loop (agent_run: model, guards, tools, harvest, commits, pushes, "
                "compaction trigger) with an instant model …")
            loop = benchmarks.loop_run(messages=opts["messages"], say=say)
            say(f"  {loop['steps']} steps over {loop['turns']} turns: {loop['steps_per_second']} steps/s per worker "
                f"process ({loop['loop_ms_per_step']} ms a step; {loop['database']})")
            say(f"  timed apart: posting each customer message {loop['post_ms_per_message']} ms; "
                f"{loop['compactions']} compactions, {loop['compaction_ms_each']} ms each; "
                f"all together {loop['overall_steps_per_second']} steps/s")
            say("  the same with no compaction trigger registered:")
            bare = benchmarks.loop_run(messages=opts["messages"], compaction=False, say=say)
            say(f"  {bare['steps_per_second']} steps/s per worker process ({bare['loop_ms_per_step']} ms a step)")
            figures["loop"] = {"with_compaction": loop, "without_compaction": bare}
        if "push" not in skip:
            figures["push"] = self._push(opts, say)
        out = Path(opts["out"] or Path(settings.VAR_DIR) / "reports" / "benchmark.json")
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(figures, indent=1))
        say(f"Figures written to {out}")

    def _assembly(self, base, lengths, say) -> list[dict]:
        say("Request assembly per step (compaction when the trigger fires; standard class: 8,000 tokens, 8 recent turns):")
        rows = []
        for n in lengths:
            fig = benchmarks.assembly_run(benchmarks.tile(base, n))
            over = fig.overhead_ms
            rows.append({"turns": fig.turns, "steps": fig.steps, "compactions": fig.compactions,
                         "median_ms": fig.median_ms, "p95_ms": fig.p95_ms, "late_median_ms": fig.late_median_ms,
                         "full_history_late_median_ms": fig.full_late_median_ms, "late_tokens": fig.late_tokens,
                         "full_history_late_tokens": fig.full_late_tokens,
                         "compaction_overhead_median_ms": round(statistics.median(over), 2) if over else None,
                         "compaction_overhead_max_ms": round(max(over), 2) if over else None,
                         "final_request_repeat_ms": fig.final_repeat_ms, "final_request_tokens": fig.final_tokens})
            r = rows[-1]
            say(f"  {r['turns']:>5} turns: median {r['median_ms']:.2f} ms, p95 {r['p95_ms']:.2f} ms per step; last fifth "
                f"{r['late_median_ms']:.2f} ms ({r['late_tokens']:.0f} tokens) vs full history "
                f"{r['full_history_late_median_ms']:.2f} ms ({r['full_history_late_tokens']:.0f} tokens); "
                f"{r['compactions']} compactions, overhead excluding the summariser "
                f"median {r['compaction_overhead_median_ms']} ms, max {r['compaction_overhead_max_ms']} ms; "
                f"the last request assembled {benchmarks.REPEATS}× again: median {r['final_request_repeat_ms']:.3f} ms "
                f"({r['final_request_tokens']} tokens)")
        if len(rows) > 1:
            first, final = rows[0], rows[-1]
            say(f"  ratio at {final['turns']} vs {first['turns']} turns: last fifth "
                f"{final['late_median_ms'] / first['late_median_ms']:.2f}×, last request repeated "
                f"{final['final_request_repeat_ms'] / first['final_request_repeat_ms']:.2f}× "
                f"({final['final_request_tokens'] / first['final_request_tokens']:.2f}× the tokens; flat is 1×)")
        return rows

    def _tokens(self, base, say) -> dict:
        ticket = benchmarks.tile(base, 1000)
        say(f"Tokens per request over a {len(ticket.turns)}-turn ticket's life (same budget for the baselines):")
        life = benchmarks.token_life(ticket)
        full = life["full"]["median"]
        for name, label in (("full", "full history"), ("triggered", "Sundry, compaction when triggered"),
                            ("sundry", "Sundry, compacted every step"), ("window", "sliding window"),
                            ("prose", "prose-only summary")):
            v = life[name]
            say(f"  {label:<36} median {v['median']:>7.0f}  max {v['max']:>7.0f}  last {v['last']:>7.0f}  "
                f"({v['median'] / full:.2f}× full history)")
        say(f"  {life['steps']} steps, {life['triggered_compactions']} triggered compactions")
        return life

    def _soak(self, minutes: float, say) -> None:
        say(f"Soak: {minutes:g} minutes of posts (3 a second over 6 tickets), 60 staff sockets; "
            "web-process RSS and PostgreSQL backends every 30 s …")
        result = subprocess.run([sys.executable, "-m", "sundry.evals.soakbench", "--minutes", str(minutes),
                                 "--rate", "3"], capture_output=True, text=True, timeout=minutes * 60 + 600)
        if result.returncode != 0:
            say(result.stderr[-3000:])
            raise SystemExit(result.returncode)
        figures = json.loads(result.stdout.strip().splitlines()[-1])
        if "skipped" in figures:
            say(f"  skipped: {figures['skipped']}")
            return
        say(f"  {'t (s)':>6} {'RSS MB':>8} {'peak MB':>8} {'PG backends (max)':>18} {'turns':>7}")
        for s in figures["samples"]:
            say(f"  {s['t_s']:>6} {s['rss_mb']:>8} {s['peak_mb']:>8} {s['pg_backends_max']:>18} {s['turns']:>7}")
        say(f"  answers: {figures['statuses']}; RSS grew {figures['rss_growth_first_half_mb']} MB in the first half, "
            f"{figures['rss_growth_second_half_mb']} MB in the second; at most {figures['pg_backends_max']} backends")
        out = Path(settings.VAR_DIR) / "reports" / "soak.json"
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(figures, indent=1))
        say(f"Figures written to {out}")

    def _push(self, opts, say) -> dict:
        if not os.environ.get("REDIS_URL"):
            say("Push latency: skipped (REDIS_URL is not set; the Redis channel layer is what this measures).")
            return {"skipped": "REDIS_URL not set"}
        out = {}
        # Two kinds of change: a customer message on a ticket with a 200-turn conversation (what a
        # desk sees all day: the conversation grows by one item), and a bare version bump.
        for label, change, history in (("a new message on a 200-turn ticket", "turn", 200),
                                       ("a version bump alone", "touch", 0)):
            where = "a throwaway PostgreSQL database" if settings.DATABASES["default"]["ENGINE"].endswith(
                "postgresql") else "a throwaway SQLite file"
            say(f"Push latency over the Redis layer, {label}: clients {opts['clients']}, {opts['pushes']} "
                f"committed changes each (python -m sundry.web on 127.0.0.1, {where}) …")
            proc = subprocess.run([sys.executable, "-m", "sundry.evals.pushbench", "--clients", opts["clients"],
                                   "--pushes", str(opts["pushes"]), "--timeout", "60", "--change", change,
                                   "--history", str(history)],
                                  capture_output=True, text=True, timeout=1800, cwd=settings.BASE_DIR)
            try:
                data = json.loads(proc.stdout.strip().splitlines()[-1])
            except (IndexError, ValueError):
                say(self.style.ERROR(f"  push benchmark failed: {proc.stderr[-2000:]}"))
                out[change] = {"error": proc.stderr[-2000:]}
                continue
            for r in data.get("rounds", []):
                mem = data["server_memory_kb"].get(str(r["clients"])) or {}
                say(f"  {r['clients']:>4} clients: p50 {r['p50_ms']} ms, p99 {r['p99_ms']} ms, max {r['max_ms']} ms; "
                    f"{r['deliveries']} deliveries, {r['lost']} lost; web process peak {mem.get('VmHWM', 0) / 1024:.0f} MiB")
            out[change] = data
        return out
