"""The web process: HTTP and websockets on one port, `python -m sundry.web --host H --port P`.

uvicorn on uvloop, with httptools for HTTP and the websockets library's
sans-I/O protocol for sockets. A push to hundreds of watchers is one write per socket; here each
write goes straight to the socket, where daphne (still used by `manage.py
runserver`) registered every socket with the event loop for every write.
Measured with `python -m bench.pushbench --server daphne|uvicorn`.

Every way Sundry is served (bin/serve, the Docker image, docker-compose, the
browser tests) starts it through here, so they all run the same server.
"""

from __future__ import annotations

import argparse
import os

SERVER_OPTIONS = dict(
    # Channels' router has no lifespan handler; uvicorn would only log that it is missing.
    lifespan="off",
    loop="uvloop",
    http="httptools",
    ws="websockets-sansio",
    # A frame is compressed per socket: the same push compressed for each of hundreds of
    # watchers costs more CPU than the few KB it saves on a page update.
    ws_per_message_deflate=False,
    # Pages send frames of a few dozen bytes (live.limits refuses any over 1 KB); the server
    # closes a socket sending more than this (1009) before the frame is even assembled.
    ws_max_size=64 * 1024,
    # Open sockets are closed (1012: the pages reconnect) rather than waited for.
    timeout_graceful_shutdown=10,
)


def proxy_options(trusted: list[str]) -> dict:
    """Whose X-Forwarded-For the server believes: only the proxies the deployment names
    (SUNDRY_TRUSTED_PROXIES), and none by default — uvicorn's own default trusts 127.0.0.1, so
    anything on the host could name any client address and step around the login lockout.
    Behind a named proxy, the client is the right-most address in the header that is not a
    proxy's own, so a client's made-up header values are never taken."""
    if not trusted:
        return {"proxy_headers": False}
    return {"proxy_headers": True, "forwarded_allow_ips": ",".join(trusted)}


def tune_gc() -> None:
    """Keep what the process loaded at start out of the collector's full passes, which
    otherwise stall every socket for tens of ms, and run young collections every
    20,000 allocations rather than 700: a push to hundreds of sockets allocates in
    bursts, and each extra pass lands in one. Off with SUNDRY_WEB_GC_TUNING=0 (with the
    allocator's arena cap)."""
    import gc

    gc.collect()
    gc.freeze()
    gc.set_threshold(20_000, 20, 20)


# PostgreSQL connections the web process's sockets keep for reuse (SUNDRY_LIVE_DB_POOL overrides;
# 0: none). Their calls run one at a time on one thread: a second is for a call made meanwhile.
LIVE_DB_POOL = 2

# glibc's M_ARENA_MAX (malloc.h): how many heaps ("arenas") threads may allocate from.
_M_ARENA_MAX = -8
MALLOC_ARENAS = 2


def cap_malloc_arenas(arenas: int = MALLOC_ARENAS) -> bool:
    """Let glibc's allocator use at most `arenas` heaps. Django serves each request's sync
    part on a thread of its own; glibc gives threads their own heaps (up to 8 per core), and
    each keeps what it freed, so the renders of long conversations spread over many heaps
    held about 40 MB more with no more in use (the soak, docs/benchmarks.md). Returns False
    where the C library is not glibc (nothing to tune)."""
    import ctypes
    import ctypes.util

    try:
        mallopt = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").mallopt
    except (OSError, AttributeError):
        return False
    return bool(mallopt(_M_ARENA_MAX, arenas))


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--log-level", default="info")
    args = parser.parse_args(argv)
    # This process's sockets take their PostgreSQL connections from a pool (sundry.live.dbtrips)
    # unless the deployment says otherwise; read when the settings load, just below.
    os.environ.setdefault("SUNDRY_LIVE_DB_POOL", str(LIVE_DB_POOL))
    import uvicorn
    from django.conf import settings

    from sundry.asgi import application  # loads Django and the whole app before the collector is tuned

    if settings.WEB_GC_TUNING:
        cap_malloc_arenas()  # before uvicorn and the request threads start
        tune_gc()
    uvicorn.run(
        application,
        host=args.host,
        port=args.port,
        log_level=args.log_level,
        **SERVER_OPTIONS,
        **proxy_options(settings.TRUSTED_PROXIES),
    )


if __name__ == "__main__":
    main()
