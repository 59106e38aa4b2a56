"""A Celery worker's database connection, kept from task to task.

Celery's Django fixup closes every connection around each task, so each agent run connected
afresh (7–20 ms, and a backend started on the server). With `settings.WORKER_CONN_MAX_AGE` the
worker keeps its connection as a long-lived Django process would, and does per task what Django
does per request (`close_old_connections`, before and after): a connection past its age, or one
an error went through and that no longer answers, is closed. Before a task's first query the
connection is checked (`CONN_HEALTH_CHECKS`: an empty round trip), so one the server dropped
while the worker was idle — a restart, an idle timeout, a terminated backend — is replaced
before the task uses it, instead of failing the task's first statement.

Connected in the worker only (`worker_init`, before the pool forks: every pool process inherits
the settings); the web process and tasks run eagerly in a request keep their own rules.
"""

from __future__ import annotations

from celery.signals import task_postrun, task_prerun
from django.conf import settings
from django.db import close_old_connections, connections


def keep_connections(**kwargs) -> None:
    """`worker_init`: give the worker's connections an age and health checks, and check them around tasks."""
    age = getattr(settings, "WORKER_CONN_MAX_AGE", 0)
    if not age:
        return
    for alias, db in settings.DATABASES.items():
        if db.get("ENGINE", "").endswith("sqlite3"):
            continue  # the embedded default runs no Celery worker
        db["CONN_MAX_AGE"] = age
        db["CONN_HEALTH_CHECKS"] = settings.WORKER_CONN_HEALTH_CHECKS
        # A wrapper made before this point read the settings when it was made.
        if alias in connections.settings:
            connections.settings[alias].update(CONN_MAX_AGE=age, CONN_HEALTH_CHECKS=db["CONN_HEALTH_CHECKS"])
    task_prerun.connect(_between_tasks, weak=False)
    task_postrun.connect(_between_tasks, weak=False)


def _between_tasks(task=None, **kwargs) -> None:
    if getattr(getattr(task, "request", None), "is_eager", False):
        return  # run inside its caller's request or transaction: the caller's connection rules hold
    close_old_connections()
