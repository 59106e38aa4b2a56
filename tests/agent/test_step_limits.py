"""A step's model time holds its re-ask: a reply asked for again gets only what the first answer left.

Against a model served over HTTP on 127.0.0.1 whose second answer never comes (it waits until the
test ends), so only the step's own deadline can end the wait."""

from __future__ import annotations

import threading
import time

import pytest

from sundry.agent import answer
from sundry.agent.loop import agent_run
from sundry.agent.models import AgentStep
from sundry.agent.provider.gateway import CallLimits, Gateway
from sundry.tickets.models import Turn
from tests.agent.test_gateway import completion, no_internet, serve  # noqa: F401  (fixtures)
from tests.agent.test_loop_real_model import desk, say  # noqa: F401  (fixture)

pytestmark = pytest.mark.django_db
INVENTED = "Your refund SU-26675-RF01 for 40.00 USD has been issued."  # asked for again by the reply check


@pytest.fixture
def never():
    """An answer that comes only when the test ends."""
    released = threading.Event()
    yield lambda body: (released.wait(60), (200, completion(content="too late")))[1]
    released.set()


class Recording(Gateway):
    """The real gateway, noting the deadline each call was given."""

    def __init__(self, **kw):
        super().__init__(**kw)
        self.timeouts: list[float | None] = []

    def call(self, request, **kw):
        self.timeouts.append(kw.get("timeout"))
        return super().call(request, **kw)


def step_seconds(desk, settings, model_seconds: float, call_timeout: float) -> tuple[float, Recording]:
    settings.AGENT_STEP_MODEL_SECONDS = model_seconds
    gateway = Recording(limits=CallLimits(max_retries=0, call_timeout=call_timeout, read_timeout=call_timeout))
    started = time.monotonic()
    agent_run(desk["ticket"].pk, gateway=gateway, max_steps=1)
    return time.monotonic() - started, gateway


def held(desk) -> Turn:
    return Turn.objects.get(ticket=desk["ticket"], kind="error", payload__has_key="held_reply")


def test_the_re_ask_gets_only_what_the_step_has_left(desk, never, settings):
    desk["answers"] += [say(INVENTED), never]
    # The call's own timeout is ten times the step's model time, so a loaded machine's slower step
    # (seen: over 6 s of preparation, and at load 12 a first answer that left no time for the re-ask
    # of a 4 s step) still falls clearly on one side.
    took, gateway = step_seconds(desk, settings, model_seconds=10.0, call_timeout=100.0)
    assert len(gateway.timeouts) == 2  # it was asked again ...
    assert gateway.timeouts[1] is not None and gateway.timeouts[1] < 10.0  # ... within the step's time
    assert took < 60.0, took  # not the call's own 100 s
    step = AgentStep.objects.get(ticket=desk["ticket"])
    assert step.outcome == "held_reply" and "held for staff" in held(desk).text


def test_negative_control_without_the_step_deadline_the_re_ask_waits_out_the_call(desk, never, settings, monkeypatch):
    monkeypatch.setattr(answer, "_left", lambda deadline: None)
    desk["answers"] += [say(INVENTED), never]
    took, gateway = step_seconds(desk, settings, model_seconds=2.0, call_timeout=4.0)
    assert gateway.timeouts == [None, None] and took >= 3.9, took


def test_with_no_time_left_the_reply_is_held_without_asking_again_and_says_why(desk, settings, monkeypatch):
    # The first answer takes 1.5 s of a 6 s step, leaving under the (raised) minimum a re-ask needs.
    # A step of 0.5 s with an instant answer meant the same, but on a loaded machine the step's own
    # preparation used up those 0.5 s before the first call was sent.
    monkeypatch.setattr(answer, "MIN_REASK_SECONDS", 5.0)
    desk["answers"] += [lambda body: (time.sleep(1.5), say(INVENTED)(body))[1]]
    took, gateway = step_seconds(desk, settings, model_seconds=6.0, call_timeout=8.0)
    assert len(desk["server"].bodies) == 1 and len(gateway.timeouts) == 1
    turn = held(desk)
    assert "no_time_to_ask_again" in turn.text and INVENTED not in Turn.objects.filter(
        ticket=desk["ticket"], author="agent", kind="message"
    ).values_list("text", flat=True)


def test_a_reply_corrected_in_time_is_posted(desk, settings):
    desk["answers"] += [say(INVENTED), say("I can see order SU-26675; no refund has been made yet.")]
    step_seconds(desk, settings, model_seconds=30.0, call_timeout=8.0)
    assert Turn.objects.filter(ticket=desk["ticket"], author="agent", kind="message").count() == 1
