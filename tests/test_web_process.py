"""The web process's entry point, not the ASGI module, decides about the garbage collector."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROBE = "import gc; t = gc.get_threshold(); import sundry.asgi; print(gc.get_threshold() == t, gc.get_freeze_count())"


def test_importing_the_asgi_application_leaves_the_collector_alone():
    done = subprocess.run([sys.executable, "-c", PROBE], cwd=ROOT, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "DJANGO_SETTINGS_MODULE": "sundry.settings"})
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["True", "0"]


def test_the_web_process_tuning_freezes_the_startup_heap_and_spaces_young_collections():
    probe = "import gc; from sundry.web import tune_gc; tune_gc(); print(gc.get_threshold()[0], gc.get_freeze_count() > 0)"
    done = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["20000", "True"]
