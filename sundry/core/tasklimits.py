"""Celery tasks whose time limits are the worker's own.

Celery copies the queuing process's `task_time_limit` and `task_soft_time_limit` into each
message, and a worker obeys the message over its own configuration: a web process started with
other limits than the worker's would size every run (a worker given SUNDRY_TASK_HARD_LIMIT=1500
killed runs at the web process's 270 s, and said 1,470 s). Messages therefore carry no limits
unless the caller passes them, and the worker applies what its settings say.
"""

from __future__ import annotations

from celery import Task


class WorkerLimits(Task):
    def apply_async(
        self, args=None, kwargs=None, task_id=None, producer=None, link=None, link_error=None, shadow=None, **options
    ):
        # An explicit None clears what Celery would copy from this process's settings.
        options.setdefault("time_limit", None)
        options.setdefault("soft_time_limit", None)
        return super().apply_async(args, kwargs, task_id, producer, link, link_error, shadow, **options)

    def limits_in_force(self) -> tuple[float | None, float | None]:
        """(hard, soft) seconds for the running task: what the message asked for, else the worker's own."""
        hard, soft = (self.request.timelimit or (None, None)) if self.request else (None, None)
        return hard or self.time_limit, soft or self.soft_time_limit
