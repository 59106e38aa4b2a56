"""`python -m bench`: figures, printed (never timed tests).

- request assembly time per step at 40, 200 and 1,000-turn tickets, with
  compaction when the trigger fires, against assembling the full history;
- tokens per request over a 1,000-turn ticket's life: full history, Sundry,
  sliding window, prose-only;
- compaction overhead excluding the summariser call;
- steps per second through the whole agent loop with an instant model;
- push latency p50/p99 to N websocket clients over the Redis layer (only with
  REDIS_URL; loopback only; bounded), with the web process's peak memory; and
  the same 500 clients spread over tickets: all on one, 20 on each of 25, 2 on
  each of 250 (a fresh web process per spread, so its peak memory is its own).

`--realistic` instead runs `bench.realbench` once per `--slots` value:
the web process, prefork Celery workers and a loopback OpenAI-compatible model
that takes 1–3 s a call, with `--tickets` customers posting over HTTP and a desk
socket per ticket; it prints message → reply push latency, model time per step
and Sundry's share of step time beside their targets, then the instant-model
steps/s as a regression figure.
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

from bench import benchmarks
from sundry.evals import sources


class Command(BaseCommand):
    help = "Print Sundry's performance figures: assembly, tokens, compaction overhead, loop steps/s, push latency."

    def add_arguments(self, parser):
        parser.add_argument("--lengths", default="40,200,1000", help="Ticket lengths in turns for the assembly figures")
        parser.add_argument("--messages", type=int, default=150, help="Customer messages through the loop")
        parser.add_argument("--clients", default="50,200,500", help="Websocket clients per push round")
        parser.add_argument("--pushes", type=int, default=20, help="Committed changes per push round")
        parser.add_argument("--spread-clients", type=int, default=500, help="Websocket clients in the spread rounds")
        parser.add_argument(
            "--spreads", default="0,20,2", help="Clients per ticket in the spread rounds (0: all on one ticket)"
        )
        parser.add_argument("--spread-pushes", type=int, default=60, help="Committed changes per spread round")
        parser.add_argument("--skip", nargs="*", default=[], choices=["assembly", "tokens", "loop", "push", "spread"])
        parser.add_argument(
            "--soak",
            type=float,
            default=None,
            metavar="MINUTES",
            help="Only the soak: web-process memory and PostgreSQL connections over this many "
            "minutes of posts with 60 staff sockets on 6 tickets (bench.soakbench)",
        )
        parser.add_argument(
            "--soak-rotate",
            type=int,
            default=0,
            metavar="POSTS",
            help="With --soak: replace each ticket by a new one after this many posts, so "
            "conversations stop growing (tells a leak from longer renderings)",
        )
        parser.add_argument(
            "--profile",
            default=None,
            metavar="TURNS",
            help="Only the per-step profile by stage, at these ticket lengths (e.g. 10,100,1000)",
        )
        parser.add_argument("--profile-messages", type=int, default=12, help="Customer messages per length")
        parser.add_argument(
            "--profile-clock",
            choices=("wall", "cpu"),
            default="wall",
            help="Time each stage by wall clock or by the worker thread's CPU time",
        )
        parser.add_argument(
            "--profile-reconnect",
            choices=["close", "close_pool", ""],
            default="close",
            help="A fresh connection per run (close), with the pool closed too (close_pool), or none",
        )
        parser.add_argument(
            "--out", default=None, help="Also write the figures as JSON here (default: var/reports/benchmark.json)"
        )
        real = parser.add_argument_group("realistic mode")
        real.add_argument(
            "--realistic",
            action="store_true",
            help="Real web process, Celery workers and a 1-3 s loopback model; customers over HTTP",
        )
        real.add_argument("--slots", default="4,16", help="Celery worker slots (prefork processes), one run each")
        real.add_argument(
            "--tickets", type=int, default=50, help="Concurrent tickets, one customer and desk socket each"
        )
        real.add_argument("--duration", type=float, default=150.0, help="Seconds during which customers post")
        real.add_argument("--model-min", type=float, default=1.0, help="Shortest model call, seconds")
        real.add_argument("--model-max", type=float, default=3.0, help="Longest model call, seconds")
        real.add_argument("--think-median", type=float, default=20.0, help="Customers' median think time, seconds")
        real.add_argument("--seed", type=int, default=1)
        real.add_argument(
            "--postgres",
            choices=["private", "configured"],
            default="private",
            help="A PostgreSQL server of the run's own (default), or a throwaway database on DATABASE_URL's",
        )
        real.add_argument(
            "--stages",
            type=int,
            default=1,
            help="Time each message's stages in the run (1, the default) for the breakdown; 0: plain processes",
        )

    def handle(self, *args, **opts):
        say = self.stdout.write
        if opts["soak"] is not None:
            return self._soak(opts["soak"], say, rotate=opts["soak_rotate"])
        figures: dict = {"machine": {"cpus": os.cpu_count()}}
        if opts["profile"]:
            say("Per-step profile by stage (loopback model server answering at once; ms a step, medians) …")
            figures["profile"] = benchmarks.step_profile(
                lengths=[int(x) for x in opts["profile"].split(",")],
                messages=opts["profile_messages"],
                reconnect=opts["profile_reconnect"],
                clock=opts["profile_clock"],
                say=say,
            )
            return self._write(figures, opts, say)
        skip = set(opts["skip"])
        if opts["realistic"]:
            return self._realistic(opts, skip, figures, say)
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
            say(
                "Steps through the agent worker's loop (agent_run: model, guards, tools, harvest, commits, pushes, "
                "compaction trigger) with an instant model …"
            )
            loop = benchmarks.loop_run(messages=opts["messages"], say=say)
            say(
                f"  {loop['steps']} steps over {loop['turns']} turns: {loop['steps_per_second']} steps/s per worker "
                f"process ({loop['loop_ms_per_step']} ms a step; {loop['database']})"
            )
            say(
                f"  timed apart: posting each customer message {loop['post_ms_per_message']} ms; "
                f"{loop['compactions']} compactions, {loop['compaction_ms_each']} ms each; "
                f"all together {loop['overall_steps_per_second']} steps/s"
            )
            say("  the same with no compaction trigger registered:")
            bare = benchmarks.loop_run(messages=opts["messages"], compaction=False, say=say)
            say(f"  {bare['steps_per_second']} steps/s per worker process ({bare['loop_ms_per_step']} ms a step)")
            figures["loop"] = {"with_compaction": loop, "without_compaction": bare}
        if "push" not in skip:
            figures["push"] = self._push(opts, say)
        if "spread" not in skip:
            figures["spread"] = self._spread(opts, say)
        self._write(figures, opts, say)

    def _assembly(self, base, lengths, say) -> list[dict]:
        say(
            "Request assembly per step (compaction when the trigger fires; standard class: 8,000 tokens, 8 recent turns):"
        )
        rows = []
        for n in lengths:
            fig = benchmarks.assembly_run(benchmarks.tile(base, n))
            over = fig.overhead_ms
            rows.append(
                {
                    "turns": fig.turns,
                    "steps": fig.steps,
                    "compactions": fig.compactions,
                    "median_ms": fig.median_ms,
                    "p95_ms": fig.p95_ms,
                    "late_median_ms": fig.late_median_ms,
                    "full_history_late_median_ms": fig.full_late_median_ms,
                    "late_tokens": fig.late_tokens,
                    "full_history_late_tokens": fig.full_late_tokens,
                    "compaction_overhead_median_ms": round(statistics.median(over), 2) if over else None,
                    "compaction_overhead_max_ms": round(max(over), 2) if over else None,
                    "final_request_repeat_ms": fig.final_repeat_ms,
                    "final_request_tokens": fig.final_tokens,
                }
            )
            r = rows[-1]
            say(
                f"  {r['turns']:>5} turns: median {r['median_ms']:.2f} ms, p95 {r['p95_ms']:.2f} ms per step; last fifth "
                f"{r['late_median_ms']:.2f} ms ({r['late_tokens']:.0f} tokens) vs full history "
                f"{r['full_history_late_median_ms']:.2f} ms ({r['full_history_late_tokens']:.0f} tokens); "
                f"{r['compactions']} compactions, overhead excluding the summariser "
                f"median {r['compaction_overhead_median_ms']} ms, max {r['compaction_overhead_max_ms']} ms; "
                f"the last request assembled {benchmarks.REPEATS}× again: median {r['final_request_repeat_ms']:.3f} ms "
                f"({r['final_request_tokens']} tokens)"
            )
        if len(rows) > 1:
            first, final = rows[0], rows[-1]
            say(
                f"  ratio at {final['turns']} vs {first['turns']} turns: last fifth "
                f"{final['late_median_ms'] / first['late_median_ms']:.2f}×, last request repeated "
                f"{final['final_request_repeat_ms'] / first['final_request_repeat_ms']:.2f}× "
                f"({final['final_request_tokens'] / first['final_request_tokens']:.2f}× the tokens; flat is 1×)"
            )
        return rows

    def _tokens(self, base, say) -> dict:
        ticket = benchmarks.tile(base, 1000)
        say(f"Tokens per request over a {len(ticket.turns)}-turn ticket's life (same budget for the baselines):")
        life = benchmarks.token_life(ticket)
        full = life["full"]["median"]
        for name, label in (
            ("full", "full history"),
            ("triggered", "Sundry, compaction when triggered"),
            ("sundry", "Sundry, compacted every step"),
            ("window", "sliding window"),
            ("prose", "prose-only summary"),
        ):
            v = life[name]
            say(
                f"  {label:<36} median {v['median']:>7.0f}  max {v['max']:>7.0f}  last {v['last']:>7.0f}  "
                f"({v['median'] / full:.2f}× full history)"
            )
        say(f"  {life['steps']} steps, {life['triggered_compactions']} triggered compactions")
        return life

    def _soak(self, minutes: float, say, rotate: int = 0) -> None:
        say(
            f"Soak: {minutes:g} minutes of posts (3 a second over 6 tickets), 60 staff sockets"
            + (f", each ticket replaced by a new one after {rotate} posts" if rotate else "")
            + "; web-process RSS and PostgreSQL backends every 30 s …"
        )
        result = subprocess.run(
            [
                sys.executable,
                "-m",
                "bench.soakbench",
                "--minutes",
                str(minutes),
                "--rate",
                "3",
                "--rotate",
                str(rotate),
            ],
            capture_output=True,
            text=True,
            timeout=minutes * 60 + 600,
        )
        if result.returncode != 0:
            say(result.stderr[-3000:])
            raise SystemExit(result.returncode)
        figures = json.loads(result.stdout.strip().splitlines()[-1])
        if "skipped" in figures:
            say(f"  skipped: {figures['skipped']}")
            return
        say(f"  {'t (s)':>6} {'RSS MB':>8} {'peak MB':>8} {'PG backends (max)':>18} {'turns':>7} {'sockets':>8}")
        for s in figures["samples"]:
            say(
                f"  {s['t_s']:>6} {s['rss_mb']:>8} {s['peak_mb']:>8} {s['pg_backends_max']:>18} {s['turns']:>7} "
                f"{s['sockets_open']:>8}"
            )
        say(
            f"  answers: {figures['statuses']}; RSS {figures['rss_first_mb']} → {figures['rss_last_mb']} MB; "
            f"slope {figures['rss_slope_first_third_mb_per_min']} MB/min over the first third, "
            f"{figures['rss_slope_last_third_mb_per_min']} over the last; steady state {figures['rss_steady_mb']} MB; "
            f"{'levelled off' if figures['levelled_off'] else 'NOT levelled off'}; "
            f"at most {figures['pg_backends_max']} backends"
        )
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
        for label, change, history in (
            ("a new message on a 200-turn ticket", "turn", 200),
            ("a version bump alone", "touch", 0),
        ):
            where = (
                "a throwaway PostgreSQL database"
                if settings.DATABASES["default"]["ENGINE"].endswith("postgresql")
                else "a throwaway SQLite file"
            )
            say(
                f"Push latency over the Redis layer, {label}: clients {opts['clients']}, {opts['pushes']} "
                f"committed changes each (python -m sundry.web on 127.0.0.1, {where}) …"
            )
            proc = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "bench.pushbench",
                    "--clients",
                    opts["clients"],
                    "--pushes",
                    str(opts["pushes"]),
                    "--timeout",
                    "60",
                    "--change",
                    change,
                    "--history",
                    str(history),
                ],
                capture_output=True,
                text=True,
                timeout=1800,
                cwd=settings.BASE_DIR,
            )
            try:
                data = json.loads(proc.stdout.strip().splitlines()[-1])
            except (IndexError, ValueError):
                say(self.style.ERROR(f"  push benchmark failed: {proc.stderr[-2000:]}"))
                out[change] = {"error": proc.stderr[-2000:]}
                continue
            for r in data.get("rounds", []):
                mem = data["server_memory_kb"].get(str(r["clients"])) or {}
                say(
                    f"  {r['clients']:>4} clients: p50 {r['p50_ms']} ms, p99 {r['p99_ms']} ms, max {r['max_ms']} ms; "
                    f"{r['deliveries']} deliveries, {r['lost']} lost; web process peak {mem.get('VmHWM', 0) / 1024:.0f} MiB"
                )
            out[change] = data
        return out

    def _write(self, figures: dict, opts, say) -> None:
        out = Path(opts["out"] or Path(settings.VAR_DIR) / "reports" / "benchmark.json")
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(figures, indent=1))
        say(f"Figures written to {out}")

    def _realistic(self, opts, skip, figures: dict, say) -> None:
        runs = []
        for slots in [int(x) for x in opts["slots"].split(",")]:
            say(
                f"Realistic run: {slots} worker slots, {opts['tickets']} tickets, model "
                f"{opts['model_min']}–{opts['model_max']} s a call, customers thinking ~{opts['think_median']} s "
                f"(web process, prefork Celery, loopback model server, {opts['postgres']} PostgreSQL) …"
            )
            proc = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "bench.realbench",
                    "--slots",
                    str(slots),
                    "--tickets",
                    str(opts["tickets"]),
                    "--duration",
                    str(opts["duration"]),
                    "--model-min",
                    str(opts["model_min"]),
                    "--model-max",
                    str(opts["model_max"]),
                    "--think-median",
                    str(opts["think_median"]),
                    "--seed",
                    str(opts["seed"]),
                    "--postgres",
                    opts["postgres"],
                    "--stages",
                    str(opts.get("stages", 1)),
                ],
                capture_output=True,
                text=True,
                timeout=opts["duration"] + 900,
                cwd=settings.BASE_DIR,
            )
            try:
                data = json.loads(proc.stdout.strip().splitlines()[-1])
            except (IndexError, ValueError):
                say(self.style.ERROR(f"  realistic run failed: {proc.stderr[-3000:]}"))
                runs.append({"slots": slots, "error": proc.stderr[-3000:]})
                continue
            runs.append({"slots": slots, **data})
            if "skipped" in data:
                say(f"  skipped: {data['skipped']}")
                continue
            self._say_realistic(data, say)
        figures["realistic"] = runs
        if "loop" not in skip:
            say("Regression figure (not a target): steps/s through the agent loop with an instant model …")
            loop = benchmarks.loop_run(messages=opts["messages"], say=lambda *_: None)
            say(
                f"  {loop['steps_per_second']} steps/s per worker process ({loop['loop_ms_per_step']} ms a step; "
                f"{loop['database']})"
            )
            figures["loop"] = {"with_compaction": loop}
        self._write(figures, opts, say)

    def _say_realistic(self, d: dict, say) -> None:
        m, t = d["messages"], d["targets"]

        def mark(ok: bool) -> str:
            return "met" if ok else "NOT met"

        say(
            f"  {m['posted']} messages posted, {m['replied']} replied, {m['unanswered']} unanswered, "
            f"{m['http_errors']} refused; {m['steps_per_message']} steps a message; {d['steps']['model_calls']} "
            f"model calls ({d['steps']['offline']} offline), {d['wall_seconds']} s; at most "
            f"{d['database_connections_peak']} database connections open"
        )
        say(
            f"  message → reply push: p50 {d['reply_push_ms']['p50']} ms, p99 {d['reply_push_ms']['p99']} ms "
            f"(posting itself p50 {d['post_http_ms']['p50']} ms)"
        )
        say(
            f"  model time per step: p50 {d['model_ms_per_step']['server_p50']} ms at the model server, "
            f"{d['model_ms_per_step']['gateway_p50']} ms as the gateway saw it"
        )
        say(
            f"  Sundry's share of step time: {d['sundry_share_pct']} % of model time "
            f"({d['sundry_ms_per_step']} ms a step; SDK and HTTP {d['sundry_share_split_pct']['sdk_and_http']} %, "
            f"the rest of the worker {d['sundry_share_split_pct']['worker_rest']} %) — target ≤ "
            f"{t['sundry_share_pct_max']} %: {mark(t['sundry_share_met'])}"
        )
        say(
            f"  reply push beyond the model time of its steps: p50 {d['beyond_model_ms']['p50']} ms, p99 "
            f"{d['beyond_model_ms']['p99']} ms — target p99 ≤ {t['beyond_model_p99_ms_max']:.0f} ms: "
            f"{mark(t['reply_push_met'])}"
        )
        say(
            f"    of which waiting for a free worker slot: p50 {d['slot_wait_ms']['p50']} ms, p99 "
            f"{d['slot_wait_ms']['p99']} ms; without that wait: p50 "
            f"{d['beyond_model_without_slot_wait_ms']['p50']} ms, p99 {d['beyond_model_without_slot_wait_ms']['p99']} ms"
        )
        if d.get("breakdown"):
            from bench import breakdown

            say("  where a message's time goes (wall clock, this run; ms):")
            for row in breakdown.table(d["breakdown"]):
                say(f"    {row}")

    def _spread(self, opts, say) -> dict:
        """One push at a time, to the spread's tickets in turn; latency to that ticket's watchers."""
        if not os.environ.get("REDIS_URL"):
            say("Push latency by spread: skipped (REDIS_URL is not set).")
            return {"skipped": "REDIS_URL not set"}
        n, out = opts["spread_clients"], {}
        say(
            f"Push latency with {n} clients spread over tickets (a new customer message each push, "
            f"tickets of 20 turns, {opts['spread_pushes']} pushes, a fresh web process per spread) …"
        )
        for per in [int(x) for x in opts["spreads"].split(",") if x.strip()]:
            label = f"{n} on one ticket" if not per else f"{per} per ticket over {-(-n // per)} tickets"
            proc = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "bench.pushbench",
                    "--clients",
                    str(n),
                    "--per-ticket",
                    str(per),
                    "--pushes",
                    str(opts["spread_pushes"]),
                    "--timeout",
                    "60",
                    "--change",
                    "turn",
                    "--history",
                    "20",
                ],
                capture_output=True,
                text=True,
                timeout=3600,
                cwd=settings.BASE_DIR,
            )
            try:
                data = json.loads(proc.stdout.strip().splitlines()[-1])
                r = data["rounds"][0]
            except (IndexError, KeyError, ValueError):
                say(self.style.ERROR(f"  {label}: push benchmark failed: {proc.stderr[-2000:]}"))
                out[str(per)] = {"error": proc.stderr[-2000:]}
                continue
            peak = (data["server_memory_kb"].get(str(n)) or {}).get("VmHWM", 0) / 1024
            say(
                f"  {label:<32} p50 {r['p50_ms']} ms, p99 {r['p99_ms']} ms, max {r['max_ms']} ms; "
                f"{r['deliveries']} deliveries, {r['lost']} lost; web process peak {peak:.0f} MiB"
            )
            out[str(per)] = data
        return out
