"""The Celery app. Configured from Django settings (CELERY_* names)."""

import os

from celery import Celery
from celery.signals import worker_init

from sundry.core import workerdb

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "sundry.settings")

# Every task's time limits are the worker's own settings (or passed explicitly): see tasklimits.
app = Celery("sundry", task_cls="sundry.core.tasklimits:WorkerLimits")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()

# A worker keeps its database connection between tasks, checked before each (core/workerdb.py).
worker_init.connect(workerdb.keep_connections, weak=False)
