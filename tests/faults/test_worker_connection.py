"""A worker's PostgreSQL connection kept from task to task (`sundry/core/workerdb.py`), and what a
kept connection must survive: the server restarting while the worker is idle.

Controls: `SUNDRY_WORKER_CONN_MAX_AGE=0` (a connection per task, as before) fails the first test;
`SUNDRY_WORKER_CONN_HEALTH_CHECKS=0` (kept, never checked) fails the second — the task's first
statement meets the dead connection and the run is retried.
"""

from __future__ import annotations

import os

import pytest

from tests.faults.test_database_faults import sent, turn_number, wait_answered

pytestmark = [pytest.mark.faults, pytest.mark.timeout(300)]

# The controls, for a run by hand: e.g. WORKER_CONNECTION_CONTROL=SUNDRY_WORKER_CONN_MAX_AGE=0
CONTROL = (
    dict([os.environ["WORKER_CONNECTION_CONTROL"].split("=", 1)]) if os.environ.get("WORKER_CONNECTION_CONTROL") else {}
)


def idle_backends(stack) -> dict[int, str]:
    """The test database's idle backends (not the query's own), with when each was started."""
    return {
        pid: str(started)
        for pid, started in stack.rows(
            "SELECT pid, backend_start FROM pg_stat_activity WHERE datname = current_database()"
            " AND pid <> pg_backend_pid() AND state = 'idle'"
        )
    }


def ask(stack, client, ticket: int, text: str, what: str) -> None:
    assert sent(stack.post(client, ticket, text))
    number = turn_number(stack, ticket, text)
    assert len(wait_answered(stack, ticket, number, what)) == 1


def test_two_runs_on_one_worker_share_one_connection(stack, route):
    if route is not None:
        pytest.skip("behind PgBouncer the server's backends are PgBouncer's own pool")
    s = stack(**CONTROL)
    ticket, order = s.seeded["tickets"][0], s.seeded["orders"][0]
    client = s.login()
    ask(s, client, ticket, f"Where is my order {order}?", "the first message")
    # The web process closes its request's connection; the worker's is left open, idle.
    kept = idle_backends(s)
    assert kept, "no connection was left open after the run: a connection per task"
    ask(s, client, ticket, f"And is {order} paid?", "the second message")
    again = idle_backends(s)
    assert set(kept.items()) & set(again.items()), f"the second run connected afresh: {kept} then {again}"


def test_a_restart_while_the_worker_is_idle_is_met_before_the_next_run_uses_its_connection(stack, pg):
    s = stack(**CONTROL)
    ticket, order = s.seeded["tickets"][0], s.seeded["orders"][0]
    client = s.login()
    ask(s, client, ticket, f"Where is my order {order}?", "the first message")

    pg.stop()  # the worker's kept connection dies with the server
    pg.start()

    ask(s, client, ticket, f"And is {order} paid?", "the message after the restart")
    log = s.worker.text()
    # The run's first statement never met the dead connection: no retry, no failure on the ticket.
    assert "retry: Retry in" not in log, log[-3000:]
    assert not [t for t in s.turns(ticket) if t[2] == "error"], s.turns(ticket)
