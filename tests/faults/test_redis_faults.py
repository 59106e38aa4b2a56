"""Redis faults under the real product: the web process and a prefork Celery worker on a
redis-server the test owns (broker, channel layer and cache), PostgreSQL private too.

What must hold: a Redis restart while the worker holds an unacknowledged task leaves the
worker running and the customer answered; a message posted while Redis is down is stored,
its sender is told so, and it is answered once Redis is back (the outbox sweep).
"""

from __future__ import annotations

import time

import pytest

from tests.faults.servers import PrivateRedis, wait_for
from tests.faults.test_database_faults import (
    answered_after,
    assert_whole,
    message_mid_step,
    sent,
    turn_number,
    wait_answered,
)

pytestmark = [pytest.mark.faults, pytest.mark.timeout(300)]


@pytest.fixture
def private_redis(request):
    # Without persistence unless a test asks: a restart comes back empty, as a crashed or
    # replaced Redis does, so nothing queued before it survives.
    server = PrivateRedis(appendonly=getattr(request, "param", False))
    yield server
    server.destroy()


@pytest.fixture
def redis_url(private_redis):
    return private_redis.url


@pytest.fixture
def route():
    return None  # straight to the private PostgreSQL


@pytest.mark.parametrize("down_while_finishing", [False, True], ids=["restart", "down-while-finishing"])
def test_a_redis_restart_under_a_running_task_keeps_the_worker_and_answers(
    stack, model, private_redis, down_while_finishing
):
    s = stack(as_compose=True)
    ticket, order = s.seeded["tickets"][0], s.seeded["orders"][0]
    client = s.login()
    for attempt in range(3):
        hold = model.hold()
        text = f"Attempt {attempt}: where is my order {order}?"
        assert sent(s.post(client, ticket, text))
        number = turn_number(s, ticket, text)
        assert hold.arrived.wait(60), f"the agent never called the model:\n{s.worker.text()[-3000:]}"
        # The worker holds the task, unacknowledged (acks_late) when Redis restarts; the step
        # ends (and the task with it) after Redis is back, or while it is still down.
        private_redis.stop(kill=attempt % 2 == 1)
        if down_while_finishing:
            hold.release()
            time.sleep(3 + attempt)
            private_redis.start()
        else:
            private_redis.start()
            time.sleep(1 + attempt)
            hold.release()
        wait_answered(s, ticket, number, f"the message posted before restart {attempt}")
        assert s.worker.alive(), s.worker.text()[-4000:]
    assert "Unrecoverable error" not in s.worker.text(), s.worker.text()[-4000:]
    # And the worker still takes new work after the restarts.
    text = f"After the restarts: where is {order}?"
    wait_for(lambda: sent(s.post(client, ticket, text)), 30, "a post after the restarts", interval=1)
    wait_answered(s, ticket, turn_number(s, ticket, text), "the message after the restarts")
    assert_whole(s, ticket)
    replies = [t for t in s.turns(ticket) if t[1] == "agent" and t[2] == "message"]
    assert len(replies) == 4, replies


OUTAGE = 10


@pytest.mark.parametrize("how, finish", [("sigterm", "during"), ("sigkill", "after"), ("network", "during")])
def test_a_long_redis_outage_under_a_running_task_keeps_the_worker_and_answers(
    stack, model, private_redis, how, finish
):
    """Redis away for ten seconds while the worker — started as bin/serve starts it, gossip,
    mingle, heartbeats and beat on — holds an unacknowledged task: stopped in order, killed,
    or silent (frozen, as a dropped network is), the task ending while Redis is away or once
    it is back. The worker's main process stays up and the customer is answered once."""
    s = stack(as_compose=True, beat=True)
    ticket, order, client, hold, number = message_mid_step(s, model)
    private_redis.freeze() if how == "network" else private_redis.stop(kill=how == "sigkill")
    started = time.monotonic()
    if finish == "during":
        time.sleep(2)
        hold.release()  # the step finishes, and its task with it, while Redis is away
        time.sleep(OUTAGE - 2)
    else:
        time.sleep(OUTAGE)
    assert s.worker.alive(), f"the worker exited during the outage:\n{s.worker.text()[-4000:]}"
    private_redis.thaw() if how == "network" else private_redis.start()
    if finish == "after":
        time.sleep(1)
        hold.release()  # the step finishes once Redis is back
    replies = wait_answered(s, ticket, number, f"the message after a {OUTAGE} s outage ({how})")
    print(f"\n{how}: answered {time.monotonic() - started:.1f} s after Redis went away ({OUTAGE} s outage)")
    assert len(replies) == 1, replies
    assert s.worker.alive() and "Unrecoverable error" not in s.worker.text(), s.worker.text()[-4000:]
    # And it still takes new work.
    later = f"After the outage: where is {order}?"
    wait_for(lambda: sent(s.post(client, ticket, later)), 30, "a post after the outage", interval=1)
    wait_answered(s, ticket, turn_number(s, ticket, later), "the message after the outage")
    assert_whole(s, ticket)


PROMPT = 10


def test_a_message_posted_while_redis_is_down_is_stored_said_sent_and_answered_once_it_is_back(
    stack, model, private_redis
):
    s = stack(beat=True)
    ticket, order = s.seeded["tickets"][0], s.seeded["orders"][0]
    client = s.login()
    assert client.get(f"{s.url}/help/tickets/{ticket}/", timeout=10).status_code == 200

    private_redis.stop()
    texts = [f"Posted while Redis is down ({i}): where is my order {order}?" for i in range(3)]
    for i, text in enumerate(texts):
        started = time.monotonic()
        response = client.post(
            f"{s.url}/help/tickets/{ticket}/message", timeout=30, data={"text": text, "client_key": f"down-{i}"}
        )
        seconds = time.monotonic() - started
        assert sent(response), f"post {i} while Redis is down: {response.status_code} {response.text[:300]!r}"
        assert seconds < PROMPT, f"post {i} took {seconds:.1f}s"
    numbers = [turn_number(s, ticket, text) for text in texts]  # each stored once
    ((mark,),) = s.rows("SELECT agent_wake_turn FROM tickets_ticket WHERE id = %s", (ticket,))
    assert mark == numbers[-1], "the wake-up is not on record with the message"
    time.sleep(2)
    assert not answered_after(s, ticket, numbers[0]), "answered while the broker was down?"

    private_redis.start()  # empty: the wake-ups queued while it was down never reached it
    wait_answered(s, ticket, numbers[-1], "the messages posted while Redis was down")
    assert "sweep: queued" in s.worker.text(), "answered, but not by the sweep?"
    assert_whole(s, ticket)
    wait_for(
        lambda: s.rows("SELECT agent_wake_turn IS NULL FROM tickets_ticket WHERE id = %s", (ticket,))[0][0],
        10,
        "the outbox mark to be settled",
    )
