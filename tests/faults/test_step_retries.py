"""An agent step the database refuses, under the real product (web process, prefork Celery
worker, private PostgreSQL): the task is retried with backoff, and once its retries are used
up it leaves an error turn, an attention flag and a released claim — the customer's message
stays stored and is never left without a word to staff.

The fault is a trigger on the table every agent step writes (`agent_agentstep`), scoped to
the test's ticket, raising a serialization failure (SQLSTATE 40001, an OperationalError to
Django) for its first N inserts. The error turn and the flag write other tables and go
through. A sequence counts the attempts: unlike a table, it is not rolled back with the
step that failed.
"""

from __future__ import annotations

import time

import pytest

from tests.faults.servers import wait_for
from tests.faults.test_database_faults import (
    answered_after,
    assert_whole,
    handed_off_after,
    sent,
    turn_number,
    wait_answered,
)
from tests.faults.test_run_faults import ticket_row

pytestmark = [pytest.mark.faults, pytest.mark.timeout(180)]

# Backoff short enough for a test (production: 2, 5, 15, 30, 60 s).
COUNTDOWNS = "0.5,1"
ALWAYS = 1_000_000


@pytest.fixture
def route():
    return None  # straight to the private PostgreSQL


def refuse_steps(s, ticket: int, times: int) -> None:
    """The ticket's next `times` agent steps fail at their record (the whole step rolls back)."""
    s.rows(f"CREATE SEQUENCE fault_attempts_{ticket}")
    s.rows(f"""
        CREATE FUNCTION fault_refused_{ticket}() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            IF nextval('fault_attempts_{ticket}') <= {int(times)} THEN
                RAISE EXCEPTION 'injected serialization failure' USING ERRCODE = '40001';
            END IF;
            RETURN NEW;
        END $$""")
    s.rows(f"""CREATE TRIGGER fault_refused_{ticket} BEFORE INSERT ON agent_agentstep FOR EACH ROW
               WHEN (NEW.ticket_id = {int(ticket)}) EXECUTE FUNCTION fault_refused_{ticket}()""")


def attempts(s, ticket: int) -> int:
    """The ticket's steps that reached their record (refused or not)."""
    ((last, called),) = s.rows(f"SELECT last_value, is_called FROM fault_attempts_{ticket}")
    return last if called else 0


def errors_after(s, ticket: int, number: int) -> list[tuple]:
    return [t for t in s.turns(ticket) if t[0] > number and t[2] == "error"]


def ask(s, ticket: int, order: str) -> int:
    text = f"Where is my order {order}?"
    assert sent(s.post(s.login(), ticket, text))
    return turn_number(s, ticket, text)  # stored, once


def test_a_refused_step_is_retried_with_backoff_then_leaves_an_error_turn_and_a_flag(stack):
    # One ticket the database keeps refusing, one it refuses twice (within the two retries);
    # the third is the negative control's.
    s = stack(tickets=3, SUNDRY_AGENT_DB_RETRIES="2", SUNDRY_AGENT_DB_RETRY_COUNTDOWNS=COUNTDOWNS)
    (lost, transient, control), orders = s.seeded["tickets"], s.seeded["orders"]
    refuse_steps(s, lost, ALWAYS)
    refuse_steps(s, transient, 2)
    lost_at, transient_at = ask(s, lost, orders[0]), ask(s, transient, orders[1])

    # Refused twice: tried again, and answered with no error turn and no flag.
    replies = wait_answered(s, transient, transient_at, "the message the database refused twice")
    assert len(replies) == 1, replies
    assert not errors_after(s, transient, transient_at), s.turns(transient)
    assert attempts(s, transient) >= 3  # two refused, then the steps that answered
    # The run lets go and settles the wake-up just after its reply commits.
    row = wait_for(lambda: (r := ticket_row(s, transient))["agent_wake_turn"] is None and r, 10, "the run to let go")
    assert row["attention"] == "" and row["agent_claimed_at"] is None, row
    assert_whole(s, transient)

    # Refused every time: the first try and two retries, then the run stops where staff look.
    errors = wait_for(lambda: errors_after(s, lost, lost_at), 60, "the error turn", interval=0.3)
    assert len(errors) == 1, errors
    assert "the database failed 3 times" in errors[0][3] and "serialization failure" in errors[0][3], errors
    row = ticket_row(s, lost)
    assert "Agent run stopped: the database failed 3 times" in row["attention"], row
    assert row["agent_claimed_at"] is None, row  # released: staff or a handed-back run may take it
    assert row["agent_wake_turn"] is None, "staff have the ticket: the sweep must not start it over"
    assert attempts(s, lost) == 3
    log = s.worker.text()
    # The backoff, for each ticket: its first retry after 0.5 s, its second after 1 s.
    assert log.count("Retry in 0.5s") == 2 and log.count("Retry in 1.0s") == 2, log[-3000:]

    time.sleep(2)  # nothing tries again once it gave up
    assert attempts(s, lost) == 3
    assert not answered_after(s, lost, lost_at) and len(handed_off_after(s, lost, lost_at)) == 1
    assert [t[3] for t in s.turns(lost) if t[1] == "customer"] == [f"Where is my order {orders[0]}?"]
    assert not s.rows("SELECT id FROM agent_agentstep WHERE ticket_id = %s", (lost,))  # no half-step
    assert s.worker.alive(), s.worker.text()[-3000:]
    assert_whole(s, lost)

    # Negative control: the answer above is the retries' doing. The same fault under a worker
    # with none: the first refusal ends the run, and the customer is not answered.
    s.worker.stop()
    s.start_worker("no-retries", env={"SUNDRY_AGENT_DB_RETRIES": "0"})
    refuse_steps(s, control, 2)
    control_at = ask(s, control, orders[2])
    errors = wait_for(lambda: errors_after(s, control, control_at), 60, "the control's error turn", interval=0.3)
    assert "the database failed 1 time:" in errors[0][3], errors
    time.sleep(2)
    assert not answered_after(s, control, control_at)
    assert attempts(s, control) == 1
    assert "Agent run stopped" in ticket_row(s, control)["attention"]
