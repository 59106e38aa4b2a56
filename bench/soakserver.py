"""The web process as the soak benchmark runs it when asked to look inside: `python -m
bench.soakserver --trace DIR [--every S] [--leak] -- <sundry.web's options>`.

`--trace` starts tracemalloc before anything is imported and writes a snapshot of the
Python heap to DIR every `--every` seconds (plus what tracemalloc counts, beside the
process's RSS), so the soak can say what grew between two points of the run and whether
RSS grew with the Python heap or apart from it (the allocator keeping freed memory).
`--leak` is the soak's negative control: every rendering a push makes is kept for ever,
the leak the render cache exists to prevent, so the soak's levelling-off check must fail.
Then it serves exactly as `python -m sundry.web` does.
"""

from __future__ import annotations

import argparse
import json
import runpy
import sys
import threading
import time
import tracemalloc
from pathlib import Path


def _rss_kb() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS"):
            return int(line.split()[1])
    return 0


def _snapshots(directory: Path, every: float) -> None:
    n = 0
    while True:
        time.sleep(every)
        snapshot = tracemalloc.take_snapshot()
        snapshot.dump(str(directory / f"heap-{n:03d}.pickle"))
        traced, peak = tracemalloc.get_traced_memory()
        (directory / f"heap-{n:03d}.json").write_text(
            json.dumps(
                {"t": time.time(), "traced_kb": traced // 1024, "traced_peak_kb": peak // 1024, "rss_kb": _rss_kb()}
            )
        )
        n += 1


def _keep_every_rendering() -> None:
    from sundry.live import panels

    kept, render = [], panels.render_current

    def leaking(access):
        rendering = render(access)
        if rendering is not None:
            kept.append("".join(rendering.values()).encode())  # its own copy: nothing shared with the cache
        return rendering

    panels.render_current = leaking


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trace", type=Path, default=None)
    parser.add_argument("--every", type=float, default=30.0)
    parser.add_argument("--leak", action="store_true")
    parser.add_argument("web", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    if args.trace is not None:
        tracemalloc.start(4)
        threading.Thread(target=_snapshots, args=(args.trace, args.every), daemon=True).start()
    if args.leak:
        import django

        django.setup()
        _keep_every_rendering()
    sys.argv = ["sundry.web", *[a for a in args.web if a != "--"]]
    runpy.run_module("sundry.web", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main(sys.argv[1:])
