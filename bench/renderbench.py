"""A ticket's first render, alone: statements and CPU per render, in one process.

    python -m bench.renderbench --tickets 120 --history 20 [--audience staff|customer] [--profile N]

It seeds the push benchmark's tickets (`bench.pushbench._setup`: the same shop, class and
conversation) in a throwaway database, then renders each ticket's panels once as a socket's
first snapshot does (`panels.render_current`), with nothing kept from the render before (the
render cache emptied each time), and counts the statements each render sends and the CPU it
takes (`time.process_time`). The templates are loaded once before timing (the web process's
loaders are cached). Prints one JSON object with the 1-minute load average at start and end
and a digest of every rendering's HTML, so two versions of the code can be compared on the
same data (`--database` reuses a database seeded by an earlier run instead of a throwaway one).
"""

from __future__ import annotations

import argparse
import cProfile
import hashlib
import io
import json
import os
import pstats
import statistics
import time


def _load() -> float:
    return os.getloadavg()[0]


def _viewer(audience: str, ticket_id: int):
    from django.contrib.auth import get_user_model

    from sundry.live import panels
    from sundry.tickets.models import Ticket

    if audience == "staff":
        user = get_user_model().objects.get(username="bench-staff")
    else:
        person = Ticket.objects.get(pk=ticket_id).customer
        user = person.user or get_user_model().objects.create_user(f"bench-customer-{person.pk}", password="x")
        if person.user_id is None:
            person.user = user
            person.save(update_fields=["user"])
    return panels.viewer_for(user, audience, ticket_id)


def _renders(audience: str, tickets: list[int], profile: int) -> dict:
    from django.db import connection

    from sundry.live import panels

    accesses = [_viewer(audience, pk) for pk in tickets]
    sent = []
    connection.execute_wrappers.append(
        lambda run, sql, params, many, context: sent.append(sql) or run(sql, params, many, context)
    )
    panels.CACHE.clear()
    panels.render_current(accesses[0])  # templates loaded and compiled, as in a running web process
    cpu, wall, statements, digests, sizes = [], [], [], [], []
    profiler = cProfile.Profile() if profile else None
    for i, access in enumerate(accesses):
        panels.CACHE.clear()  # nothing kept: every render is a first one
        sent.clear()
        if profiler is not None and i < profile:
            profiler.enable()
        c, w = time.process_time(), time.perf_counter()
        rendering = panels.render_current(access)
        cpu.append(time.process_time() - c)
        wall.append(time.perf_counter() - w)
        if profiler is not None:
            profiler.disable()
        statements.append(len(sent))
        if i == 0 and os.environ.get("RENDERBENCH_SQL"):
            print("\n".join(sql[:160] for sql in sent))
        html = "".join(rendering.values())
        sizes.append(len(html.encode()))
        digests.append(hashlib.blake2b(html.encode(), digest_size=12).hexdigest())
    out = {
        "audience": audience,
        "renders": len(accesses),
        "statements_per_render": statistics.mean(statements),
        "statements_max": max(statements),
        "cpu_ms_mean": round(1000 * statistics.mean(cpu), 2),
        "cpu_ms_median": round(1000 * statistics.median(cpu), 2),
        "wall_ms_mean": round(1000 * statistics.mean(wall), 2),
        "bytes": sorted(set(sizes)),
        "html_digest": hashlib.blake2b("".join(digests).encode(), digest_size=12).hexdigest(),
    }
    if profiler is not None:
        text = io.StringIO()
        pstats.Stats(profiler, stream=text).sort_stats("cumulative").print_stats(40)
        out["profile"] = text.getvalue()
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tickets", type=int, default=120)
    parser.add_argument("--history", type=int, default=20)
    parser.add_argument("--audience", choices=["staff", "customer", "both"], default="both")
    parser.add_argument("--profile", type=int, default=0, help="profile the first N renders (cProfile)")
    parser.add_argument("--database", default="", help="a database URL seeded by an earlier run, reused as it is")
    args = parser.parse_args(argv)
    os.environ.update({"DJANGO_SETTINGS_MODULE": "sundry.settings", "SUNDRY_LOG_LEVEL": "ERROR", "SUNDRY_DEBUG": "0"})
    from contextlib import nullcontext
    from pathlib import Path
    from tempfile import mkdtemp

    from bench import pushbench

    context = nullcontext((args.database, "given")) if args.database else pushbench._database(Path(mkdtemp()))
    load_start = _load()
    with context as (url, _):
        os.environ["DATABASE_URL"] = url
        import django

        django.setup()
        from django.contrib.auth import get_user_model
        from django.core.management import call_command

        from sundry.tickets.models import Ticket

        call_command("migrate", verbosity=0)
        if not get_user_model().objects.filter(username="bench-staff").exists():
            pushbench._setup(history=args.history, tickets=args.tickets)
        tickets = list(Ticket.objects.order_by("pk").values_list("pk", flat=True)[: args.tickets])
        audiences = ["staff", "customer"] if args.audience == "both" else [args.audience]
        results = [_renders(a, tickets, args.profile) for a in audiences]
    print(json.dumps({"load": [round(load_start, 2), round(_load(), 2)], "results": results}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
