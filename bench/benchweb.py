"""The web process (`python -m sundry.web`), with the time of each task publish stamped on the
message (`bench_published`, a header the worker reads back), for the realistic benchmark's
breakdown: a message's POST → its task published → the task started.

    python -m bench.benchweb --host 127.0.0.1 --port 8000

Only Celery's documented `before_task_publish` signal is connected; the process is otherwise
`sundry.web` unchanged.
"""

from __future__ import annotations

import time

from celery.signals import before_task_publish

from sundry import web


@before_task_publish.connect
def _stamp(headers=None, **kwargs) -> None:
    if headers is not None:
        headers["bench_published"] = time.time()


if __name__ == "__main__":
    web.main()
