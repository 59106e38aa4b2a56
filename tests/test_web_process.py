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
    done = subprocess.run(
        [sys.executable, "-c", PROBE],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "DJANGO_SETTINGS_MODULE": "sundry.settings"},
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["True", "0"]


def test_the_web_process_tuning_freezes_the_startup_heap_and_spaces_young_collections():
    probe = (
        "import gc; from sundry.web import tune_gc; tune_gc(); print(gc.get_threshold()[0], gc.get_freeze_count() > 0)"
    )
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
    done = subprocess.run(
        [sys.executable, "-c", ARENAS_PROBE, mode], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return done.stderr.count("Arena ")


def test_the_web_process_caps_the_allocators_heaps_where_the_c_library_is_glibc():
    if not os.path.exists("/lib/x86_64-linux-gnu/libc.so.6") and not os.path.exists("/lib/aarch64-linux-gnu/libc.so.6"):
        pytest.skip("glibc's allocator only")
    assert _arenas("capped") <= 2
    assert _arenas("default") > 2  # the control: eight threads get heaps of their own otherwise


async def _client_seen(options: dict, xff: str, peer: str = "127.0.0.1") -> str:
    """The client address the app sees through uvicorn's proxy-header handling as `options` configure it."""
    from uvicorn.middleware.proxy_headers import ProxyHeadersMiddleware

    seen = {}

    async def app(scope, receive, send):
        seen["client"] = scope["client"][0]

    wrapped = (
        ProxyHeadersMiddleware(app, trusted_hosts=options["forwarded_allow_ips"])
        if options.get("proxy_headers")
        else app
    )
    scope = {"type": "http", "client": (peer, 5000), "scheme": "http", "headers": [(b"x-forwarded-for", xff.encode())]}
    await wrapped(scope, None, None)
    return seen["client"]


async def test_forwarded_addresses_are_believed_only_from_the_proxies_a_deployment_names():
    """Rotating X-Forwarded-For cannot make one client many (and step around the login lockout):
    with no proxy named nothing in the header is taken; behind a named proxy, only what the proxy
    itself appended (the right-most address that is not a proxy's)."""
    from sundry.web import proxy_options

    none = proxy_options([])
    assert {await _client_seen(none, f"203.0.113.{n}") for n in range(5)} == {"127.0.0.1"}
    named = proxy_options(["10.0.0.2"])
    # The proxy appends the address it saw; whatever the client wrote before it is ignored.
    assert {await _client_seen(named, f"203.0.113.{n}, 198.51.100.7", peer="10.0.0.2") for n in range(5)} == {
        "198.51.100.7"
    }
    # Behind the named proxy, two clients are two addresses (no shared lockout).
    assert await _client_seen(named, "198.51.100.8", peer="10.0.0.2") == "198.51.100.8"
    # A connection that is not from the named proxy is itself the client.
    assert await _client_seen(named, "203.0.113.9", peer="192.0.2.50") == "192.0.2.50"
    # Control: uvicorn's own default (127.0.0.1 trusted) would have taken each made-up address.
    default = {"proxy_headers": True, "forwarded_allow_ips": "127.0.0.1"}
    assert len({await _client_seen(default, f"203.0.113.{n}") for n in range(5)}) == 5
