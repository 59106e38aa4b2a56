"""Servers a fault test owns, so it may stop them: a private PostgreSQL, PgBouncer in front of
it, a stand-in model speaking the OpenAI chat API, the web process and a Celery worker.

PostgreSQL and PgBouncer refuse to run as root; when the suite runs as root they run as the
`postgres` user (runuser). Everything listens on loopback ports picked free at start.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from contextlib import closing
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import psycopg

ROOT = Path(__file__).resolve().parents[2]
PG_USER = "postgres"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def postgres_bindir() -> Path | None:
    """The newest /usr/lib/postgresql/<version>/bin with initdb and pg_ctl, if any."""
    base = Path("/usr/lib/postgresql")
    versions = sorted(
        (p for p in base.glob("*/bin") if (p / "initdb").exists() and (p / "pg_ctl").exists()),
        key=lambda p: int(p.parent.name) if p.parent.name.isdigit() else 0,
    )
    return versions[-1] if versions else None


def _as_server_user(cmd: list[str]) -> list[str]:
    if os.geteuid() == 0:
        return ["runuser", "-u", PG_USER, "--", *cmd]
    return cmd


def _private_dir(prefix: str) -> Path:
    """A directory the server user can write (pytest's tmp_path is root's own when run as root)."""
    path = Path(tempfile.mkdtemp(prefix=prefix))
    if os.geteuid() == 0:
        shutil.chown(path, PG_USER, PG_USER)
    return path


def wait_for(predicate, timeout: float, what: str, interval: float = 0.1):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


class PrivatePostgres:
    """A PostgreSQL cluster in a temporary directory on a free port, trust auth, TCP only."""

    def __init__(self, bindir: Path):
        self.bindir = bindir
        self.dir = _private_dir("sundry-faults-pg-")
        self.data = self.dir / "data"
        self.log = self.dir / "server.log"
        self.port = free_port()
        self._run(
            [
                str(bindir / "initdb"),
                "-D",
                str(self.data),
                "-U",
                PG_USER,
                "--auth=trust",
                "-E",
                "UTF8",
                "--no-sync",
                "--locale=C.UTF-8",
            ]
        )
        settings = {
            "listen_addresses": "'127.0.0.1'",
            "port": self.port,
            "unix_socket_directories": "''",
            # A throwaway cluster: durability is not under test, restarts are.
            "fsync": "off",
            "synchronous_commit": "off",
            "full_page_writes": "off",
            "max_connections": 200,
            "shared_buffers": "32MB",
            "log_min_messages": "warning",
        }
        with open(self.data / "postgresql.conf", "a") as conf:
            conf.writelines(f"{key} = {value}\n" for key, value in settings.items())

    def _run(self, cmd: list[str], timeout: float = 60) -> None:
        result = subprocess.run(_as_server_user(cmd), capture_output=True, text=True, timeout=timeout)
        if result.returncode != 0:
            raise RuntimeError(
                f"{' '.join(cmd)} failed ({result.returncode}):\n{result.stdout}\n{result.stderr}\n"
                f"{self.log.read_text()[-2000:] if self.log.exists() else ''}"
            )

    def _ctl(self, *args: str) -> None:
        self._run([str(self.bindir / "pg_ctl"), "-D", str(self.data), "-l", str(self.log), "-w", "-t", "30", *args])

    def start(self) -> None:
        self._ctl("start")

    def stop(self) -> None:
        """A fast shutdown: open sessions are ended, as when the server is restarted for an upgrade."""
        self._ctl("stop", "-m", "fast")

    def restart(self) -> None:
        self._ctl("restart", "-m", "fast")

    def is_up(self) -> bool:
        try:
            with closing(self.connect("postgres", connect_timeout=1)):
                return True
        except psycopg.OperationalError:
            return False

    def url(self, dbname: str, port: int | None = None) -> str:
        return f"postgres://{PG_USER}@127.0.0.1:{port or self.port}/{dbname}"

    def connect(self, dbname: str, **kwargs) -> psycopg.Connection:
        return psycopg.connect(host="127.0.0.1", port=self.port, user=PG_USER, dbname=dbname, autocommit=True, **kwargs)

    def execute(self, dbname: str, sql: str, params=()) -> list[tuple]:
        with closing(self.connect(dbname)) as conn:
            cur = conn.execute(sql, params)
            return cur.fetchall() if cur.description else []

    def terminate_backends(self, dbname: str) -> int:
        """pg_terminate_backend for every session on `dbname` (from a session on another database)."""
        rows = self.execute(
            "postgres",
            "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM pg_stat_activity"
            " WHERE datname = %s AND pid <> pg_backend_pid()",
            (dbname,),
        )
        return rows[0][0]

    def destroy(self) -> None:
        try:
            if (self.data / "postmaster.pid").exists():
                self._ctl("stop", "-m", "immediate")
        finally:
            shutil.rmtree(self.dir, ignore_errors=True)


class PgBouncer:
    """PgBouncer in transaction mode in front of a PrivatePostgres, every database passed through."""

    def __init__(self, pg: PrivatePostgres):
        self.exe = shutil.which("pgbouncer") or "/usr/sbin/pgbouncer"
        self.pg = pg
        self.dir = _private_dir("sundry-faults-pgbouncer-")
        self.port = free_port()
        self.log = self.dir / "pgbouncer.log"
        (self.dir / "userlist.txt").write_text(f'"{PG_USER}" ""\n')
        (self.dir / "pgbouncer.ini").write_text(f"""[databases]
* = host=127.0.0.1 port={pg.port}

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = {self.port}
unix_socket_dir =
auth_type = trust
auth_file = {self.dir / "userlist.txt"}
pool_mode = transaction
max_client_conn = 500
default_pool_size = 20
logfile = {self.log}
pidfile = {self.dir / "pgbouncer.pid"}
; a server that went away is retried within a second, and a client waits at most 5 s for one
server_login_retry = 1
query_wait_timeout = 5
server_connect_timeout = 3
ignore_startup_parameters = extra_float_digits,options
""")
        for name in ("userlist.txt", "pgbouncer.ini"):
            if os.geteuid() == 0:
                shutil.chown(self.dir / name, PG_USER, PG_USER)
        self.proc = subprocess.Popen(
            _as_server_user([self.exe, str(self.dir / "pgbouncer.ini")]),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        wait_for(self._answers, 15, "PgBouncer to listen")

    def _answers(self) -> bool:
        if self.proc.poll() is not None:
            raise RuntimeError(f"pgbouncer exited:\n{self.log.read_text() if self.log.exists() else ''}")
        try:
            with closing(
                psycopg.connect(
                    host="127.0.0.1",
                    port=self.port,
                    user=PG_USER,
                    dbname="postgres",
                    connect_timeout=2,
                    prepare_threshold=None,
                )
            ):
                return True
        except psycopg.OperationalError:
            return False

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=5)
        shutil.rmtree(self.dir, ignore_errors=True)


class PrivateRedis:
    """A redis-server on a free loopback port, no persistence: `restart()` loses nothing a test
    relies on except what Redis held in memory (as a restart without appendonly would)."""

    def __init__(self, appendonly: bool = True):
        self.exe = shutil.which("redis-server") or "/usr/bin/redis-server"
        self.dir = Path(tempfile.mkdtemp(prefix="sundry-faults-redis-"))
        self.port = free_port()
        self.appendonly = appendonly
        self.proc: subprocess.Popen | None = None
        self.log = self.dir / "redis.log"
        self.start()

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        self.proc = subprocess.Popen(
            [
                self.exe,
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--dir",
                str(self.dir),
                "--save",
                "",
                "--appendonly",
                "yes" if self.appendonly else "no",
                "--logfile",
                str(self.log),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        wait_for(self.is_up, 15, "redis-server to answer")

    def is_up(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=1) as s:
                s.sendall(b"PING\r\n")
                return s.recv(16).startswith(b"+PONG")
        except OSError:
            return False

    def stop(self, kill: bool = False) -> None:
        """Shut down: SIGTERM (an orderly restart, as `docker restart` does), or SIGKILL (a crash)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill() if kill else self.proc.terminate()
            self.proc.wait(timeout=15)

    def freeze(self) -> None:
        """Stop answering without closing a connection (SIGSTOP), as a dropped network does."""
        self.proc.send_signal(signal.SIGSTOP)

    def thaw(self) -> None:
        self.proc.send_signal(signal.SIGCONT)

    def restart(self) -> None:
        self.stop()
        self.start()

    def destroy(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=5)
        shutil.rmtree(self.dir, ignore_errors=True)


# --- the stand-in model ------------------------------------------------------------------------

ORDER = re.compile(r"\bSU-\d{5}\b")


def completion(*, content=None, tool_calls=None):
    message = {"role": "assistant", "content": content}
    if tool_calls:
        message["tool_calls"] = tool_calls
    return {
        "id": "chatcmpl-faults",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": "faults",
        "choices": [{"index": 0, "finish_reason": "tool_calls" if tool_calls else "stop", "message": message}],
        "usage": {"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110},
    }


def scripted_answer(body: dict) -> dict:
    """Look the order up, then answer: two steps per customer message, as a real agent works.

    After the last customer message: no tool result yet → call get_order for the order it
    names; a tool result → reply, quoting the message so a test can match reply to message.
    """
    messages = body.get("messages", [])
    last_user = max((i for i, m in enumerate(messages) if m.get("role") == "user"), default=-1)
    text = str(messages[last_user].get("content", "")) if last_user >= 0 else ""
    looked_up = any(m.get("role") == "tool" for m in messages[last_user + 1 :])
    order = ORDER.findall(text)
    if order and not looked_up:
        call_id = f"call_{abs(hash(text)) % 10**8}_{len(messages)}"
        return completion(
            tool_calls=[
                {
                    "id": call_id,
                    "type": "function",
                    "function": {"name": "get_order", "arguments": json.dumps({"order_number": order[-1]})},
                }
            ]
        )
    return completion(content=f"Thanks for waiting: I have looked into {order[-1] if order else 'this'} for you.")


class Hold:
    """One model request held until the test releases it (so a fault lands mid-step)."""

    def __init__(self):
        self.arrived = threading.Event()
        self.released = threading.Event()

    def release(self) -> None:
        self.released.set()


class ModelServer:
    """An OpenAI-compatible chat endpoint on loopback answering with `scripted_answer`.
    `hold()` makes a coming request wait for the test before it is answered."""

    def __init__(self):
        self.requests: list[dict] = []
        self._holds: dict[int, Hold] = {}  # by the number of the request they hold (1-based)
        self._every_hold: list[Hold] = []
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
                with server._lock:
                    server.requests.append(body)
                    hold = server._holds.pop(len(server.requests), None)
                if hold is not None:
                    hold.arrived.set()
                    hold.released.wait(60)
                data = json.dumps(scripted_answer(body)).encode()
                try:
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except OSError:
                    pass  # the caller gave up

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_port}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()

    def hold(self, ahead: int = 0) -> Hold:
        """Hold the next request (`ahead`=0), or the one after that many more."""
        hold = Hold()
        with self._lock:
            self._holds[len(self.requests) + 1 + ahead] = hold
            self._every_hold.append(hold)
        return hold

    def close(self) -> None:
        with self._lock:
            for hold in self._every_hold:
                hold.release()
        self.httpd.shutdown()
        self.httpd.server_close()


# --- the product's processes -------------------------------------------------------------------


class Process:
    """A product process in its own session (so it and its children stop together), logging to a file."""

    def __init__(self, cmd: list[str], env: dict, log: Path):
        self.log = log
        self._out = open(log, "ab")
        self.proc = subprocess.Popen(
            cmd, cwd=ROOT, env=env, stdout=self._out, stderr=subprocess.STDOUT, start_new_session=True
        )

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc.poll() is None

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=5)
        self._out.close()


def web_process(env: dict, log: Path) -> tuple[Process, str]:
    port = free_port()
    proc = Process(
        [sys.executable, "-m", "sundry.web", "--host", "127.0.0.1", "--port", str(port), "--log-level", "warning"],
        env,
        log,
    )
    url = f"http://127.0.0.1:{port}"

    def answers():
        if not proc.alive():
            raise RuntimeError(f"the web process exited:\n{proc.text()[-3000:]}")
        try:
            with urllib.request.urlopen(url + "/healthz", timeout=1) as r:
                return r.status == 200
        except OSError:
            return False

    wait_for(answers, 60, "the web process to answer")
    return proc, url


def worker_process(
    env: dict, log: Path, *, as_compose: bool = False, beat: bool = False, concurrency: int = 1
) -> Process:
    """A Celery worker (prefork) on the test's own queue. `as_compose`: with gossip, mingle and
    heartbeats on, as docker-compose.yml starts it; `beat`: with the beat scheduler inside
    (the outbox sweep), as bin/serve starts it."""
    celery = str(Path(sys.executable).parent / "celery")
    quiet = [] if as_compose else ["--without-gossip", "--without-mingle", "--without-heartbeat"]
    scheduler = ["-B", "--schedule", str(log.with_suffix(".beat"))] if beat else []
    proc = Process(
        [
            celery,
            "-A",
            "sundry",
            "worker",
            "-Q",
            env["SUNDRY_TASK_QUEUE"],
            "--pool",
            "prefork",
            "--concurrency",
            str(concurrency),
            *quiet,
            *scheduler,
            "--loglevel",
            "INFO",
        ],
        env,
        log,
    )

    def ready():
        if not proc.alive():
            raise RuntimeError(f"the worker exited:\n{proc.text()[-3000:]}")
        return " ready." in proc.text()

    wait_for(ready, 90, "the worker to start", interval=0.2)
    return proc


# --- CPU: is anything spinning? ----------------------------------------------------------------

TICKS = os.sysconf("SC_CLK_TCK")


def _tree(pid: int) -> list[int]:
    """`pid` and its descendants."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(children.get(p, []))
    return out


def _thread_ticks(pid: int) -> dict[str, int]:
    ticks = {}
    for p in _tree(pid):
        for task in Path(f"/proc/{p}/task").glob("*"):
            try:
                head, tail = (task / "stat").read_text().rsplit(")", 1)
            except OSError:
                continue
            fields = tail.split()
            name = head.split("(", 1)[1]
            ticks[f"{p}/{task.name} ({name})"] = int(fields[11]) + int(fields[12])  # utime + stime
    return ticks


def busiest_threads(pid: int, seconds: float = 2.0) -> dict[str, float]:
    """Share of one core each thread of the process tree used over `seconds` (busiest first)."""
    before = _thread_ticks(pid)
    time.sleep(seconds)
    after = _thread_ticks(pid)
    shares = {name: (after[name] - before.get(name, 0)) / TICKS / seconds for name in after}
    return dict(sorted(shares.items(), key=lambda kv: -kv[1]))


def assert_nothing_spins(pid: int, what: str, seconds: float = 3.0, limit: float = 0.2) -> None:
    """No thread of an idle process tree uses more than `limit` of a core (idle threads use ~0;
    the limit leaves room for a busy shared machine slowing a spinning thread down)."""
    shares = busiest_threads(pid, seconds)
    spinning = {name: round(share, 2) for name, share in shares.items() if share > limit}
    assert not spinning, f"{what}: threads busy while idle (share of a core over {seconds}s): {spinning}"


# --- what a process holds open to a server ---------------------------------------------------------

_TCP_CLOSE_WAIT = "08"


def close_wait_sockets(pid: int, port: int) -> int:
    """TCP sockets `pid` holds in CLOSE-WAIT to `port`: the server closed them (a terminated
    backend) and the process never did — a leaked connection."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    count = 0
    for table in ("tcp", "tcp6"):
        path = Path(f"/proc/{pid}/net/{table}")
        if not path.exists():
            continue
        for line in path.read_text().splitlines()[1:]:
            fields = line.split()
            remote_port = int(fields[2].rsplit(":", 1)[1], 16)
            if fields[3] == _TCP_CLOSE_WAIT and remote_port == port and fields[9] in inodes:
                count += 1
    return count


def backends(pg: "PrivatePostgres", dbname: str) -> int:
    """Sessions on `dbname` other than the one asking."""
    return pg.execute(
        dbname, "SELECT count(*) FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()", (dbname,)
    )[0][0]
