"""The Celery app. Configured from Django settings (CELERY_* names)."""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "sundry.settings")

# Every task's time limits are the worker's own settings (or passed explicitly): see tasklimits.
app = Celery("sundry", task_cls="sundry.core.tasklimits:WorkerLimits")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
