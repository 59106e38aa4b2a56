"""A plain reply's work after the model, the old way and the new, alternated in one process.

    python -m bench.stepcommit --rounds 4 --messages 30

Each block posts `messages` customer messages on a fresh ticket and runs the agent on each with a
scripted model that replies at once. Timed: the step's writes after the model (`step._commit`: wall,
the process's CPU, statements and transactions), and the reply check's reading of the request's
identifiers (`answer.known_identifiers`). "before": the reply's turn and the step's record written in
the step's transaction (`step._reply_at_once` off) and every text's tokens read afresh each step;
"after": as shipped. Blocks alternate before, after, so a loaded machine weighs on both alike.
Needs PostgreSQL (`DATABASE_URL`); a throwaway database is made and dropped.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

_COMMITS = [0]  # transactions committed (each a BEGIN and a COMMIT round trip)


def _timed(owner, name: str, into: dict, key: str, counted: list | None = None):
    real = getattr(owner, name)

    def timed(*args, **kwargs):
        t0, c0, s0 = time.perf_counter(), time.process_time(), len(counted) if counted is not None else 0
        commits0 = _COMMITS[0]
        try:
            return real(*args, **kwargs)
        finally:
            into.setdefault(key, []).append(
                (
                    time.perf_counter() - t0,
                    time.process_time() - c0,
                    (len(counted) - s0) if counted is not None else 0,
                    _COMMITS[0] - commits0,
                )
            )

    setattr(owner, name, timed)
    return real


def _block(mode: str, messages: int, tclass, customer) -> None:
    from sundry.agent.guards import replycheck
    from sundry.agent.loop import agent_run
    from sundry.agent.provider.gateway import Gateway
    from sundry.agent.provider.scripted import ScriptedModel
    from sundry.agent.services import customer_message_post
    from sundry.desk.lifecycle import ticket_create
    from sundry.tooling.messages import ModelResponse

    ticket = ticket_create(customer=customer, ticket_class=tclass, subject=f"Commit {mode}")
    for i in range(messages):
        customer_message_post(ticket=ticket, text=f"Any news on my parcel? (message {i + 1})", wake=False)
        if mode == "before":
            replycheck._READ = ((), {})  # every text read afresh, as each step did
        agent_run(ticket.pk, gateway=Gateway(override=ScriptedModel([ModelResponse(text="Thank you for writing.")])))


def run(rounds: int, messages: int) -> dict:
    from django.db import connection
    from django.test.utils import override_settings

    from sundry.agent import answer, loop, step
    from sundry.evals.sources import throwaway_database
    from sundry.shop.models import Order
    from sundry.shop.seed import generate_shop
    from sundry.tickets.models import TicketClass

    figures: dict = {}
    counted: list = []
    saved_listeners = list(loop.resolution_listeners)
    loop.resolution_listeners[:] = []  # the compaction check is not this benchmark's
    real_commit, real_known, real_at_once = step._commit, answer.known_identifiers, step._reply_at_once
    try:
        with throwaway_database(), override_settings(DEBUG=False, BACKGROUND_MODE="deferred"):
            generate_shop(seed=1, customers=3, orders=10)
            tclass = TicketClass.objects.create(
                name="Commit", slug="commit", token_budget=100000, recent_turns_kept=8, approval_rules={}
            )
            customer = Order.objects.select_related("customer").order_by("number").first().customer.person
            real_db_commit = connection.commit

            def db_commit():
                if connection.connection is not None and not connection.get_autocommit():
                    _COMMITS[0] += 1
                return real_db_commit()

            connection.commit = db_commit
            with connection.execute_wrapper(
                lambda ex, sql, p, many, ctx: (counted.append(1), ex(sql, p, many, ctx))[1]
            ):
                _block("after", 3, tclass, customer)  # warm the process
                for r in range(rounds):
                    for mode in ("before", "after"):
                        step._reply_at_once = (lambda *a, **k: None) if mode == "before" else real_at_once
                        step._commit, answer.known_identifiers, per = real_commit, real_known, {}
                        _timed(step, "_commit", per, "commit", counted)
                        _timed(answer, "known_identifiers", per, "known")
                        load = os.getloadavg()[0]
                        _block(mode, messages, tclass, customer)
                        figures[f"r{r + 1}_{mode}"] = _summary(per, load, os.getloadavg()[0])
                        print(_line(r + 1, mode, figures[f"r{r + 1}_{mode}"]), flush=True)
            del connection.commit
    finally:
        step._commit, answer.known_identifiers, step._reply_at_once = real_commit, real_known, real_at_once
        loop.resolution_listeners[:] = saved_listeners
    return figures


def _summary(per: dict, load0: float, load1: float) -> dict:
    commit, known = per.get("commit", []), per.get("known", [])
    return {
        "load": (load0, load1),
        "commit_ms": round(1000 * statistics.median(c[0] for c in commit), 3),
        "commit_cpu_ms": round(1000 * statistics.median(c[1] for c in commit), 3),
        "commit_statements": statistics.median(c[2] for c in commit),
        "commit_transactions": statistics.median(c[3] for c in commit),
        "known_cpu_ms": round(1000 * statistics.median(k[1] for k in known), 3),
        "steps": len(commit),
    }


def _line(r: int, mode: str, s: dict) -> str:
    return (
        f"round {r} {mode:<6} (load {s['load'][0]:.2f} → {s['load'][1]:.2f}): the reply's writes "
        f"{s['commit_ms']:.2f} ms wall, {s['commit_cpu_ms']:.2f} ms CPU, {s['commit_statements']:.0f} statements "
        f"in {s['commit_transactions']:.0f} transactions; identifiers read {s['known_cpu_ms']:.2f} ms CPU "
        f"({s['steps']} steps, medians)"
    )


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "sundry.settings")
    import django

    django.setup()
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--messages", type=int, default=30)
    args = parser.parse_args()
    run(args.rounds, args.messages)


if __name__ == "__main__":
    main()
