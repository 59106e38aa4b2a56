"""The web process's entry point, not the ASGI module, decides about the garbage collector and the allocator."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

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


ARENAS_PROBE = """
import ctypes, sys, threading
from sundry.web import cap_malloc_arenas
if sys.argv[1] == "capped":
    assert cap_malloc_arenas()
together = threading.Barrier(8)  # all eight alive at once: a thread that has ended hands its heap on
def work():
    together.wait()
    for _ in range(50):
        blocks = [bytes(4096) for _ in range(64)]  # past the small-object allocator: malloc's own heaps
    together.wait()
threads = [threading.Thread(target=work) for _ in range(8)]
[t.start() for t in threads]
[t.join() for t in threads]
ctypes.CDLL("libc.so.6").malloc_stats()  # one "Arena N:" block per heap, on stderr
"""


def _arenas(mode: str) -> int:
    done = subprocess.run([sys.executable, "-c", ARENAS_PROBE, mode], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stderr.count("Arena ")


def test_the_web_process_caps_the_allocators_heaps_where_the_c_library_is_glibc():
    if not os.path.exists("/lib/x86_64-linux-gnu/libc.so.6") and not os.path.exists("/lib/aarch64-linux-gnu/libc.so.6"):
        pytest.skip("glibc's allocator only")
    assert _arenas("capped") <= 2
    assert _arenas("default") > 2  # the control: eight threads get heaps of their own otherwise
