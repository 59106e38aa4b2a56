"""A run that stops without replying never leaves the customer silent: Sundry's hand-off, as after a hold.

Through the agent loop with a scripted model, each way a run ends with the customer's latest message
unanswered and the ticket flagged for staff: the repeat guard after calls only, the run's step cap, its
deadline, a model that cannot be reached, one that answers nothing twice, one not configured, and a run
the task gives up on. The customer reads `handoff.TEXT` (code's words, marked `via: handoff`, naming the
stop's turn) and staff the cause's flag; a later message stopped the same way while the flag stands gets
`handoff.STILL_WITH_TEAM`. Nothing when words posted with a call or a card on the page answered the
message, and nothing under takeover. The scorecard counts such a message handed to staff, not unanswered.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from sundry.agent import failures, handoff, loop, tasks
from sundry.agent.loop import agent_run
from sundry.agent.provider.gateway import Gateway, ModelCallError
from sundry.agent.provider.scripted import ScriptedModel
from sundry.agent.services import customer_message_post, ticket_set_handler
from sundry.agent.step import agent_step
from sundry.agent.tasks import agent_run_task
from sundry.evals import scorecard
from sundry.portal.selectors import customer_turns
from sundry.tickets import attention
from sundry.tickets.attention import reasons
from sundry.tickets.models import Ticket, Turn
from sundry.tooling.messages import ModelResponse, ToolCall
from tests.agent.test_handoff import case  # noqa: F401  (the fixture: a customer, a paid order, staff, their pages)

pytestmark = pytest.mark.django_db

ASK = "Did my refund for SU-26675 go through?"


def _call(name: str, _id: str, text: str = "", **arguments) -> ModelResponse:
    return ModelResponse(text=text, tool_calls=[ToolCall(id=_id, name=name, arguments=arguments)])


# A call the schema guard refuses every time (no order number): the third is the repeat guard's stop.
def bad(n: int) -> ModelResponse:
    return _call("get_order", f"b{n}")


def lookup(n: int, text: str = "") -> ModelResponse:
    return _call("get_order", f"g{n}", text, order_number="SU-26675")


SAID = "Let me look at order SU-26675."
NOTHING = ModelResponse(text="")


@dataclass(frozen=True)
class Stop:
    """One way a run ends without replying: the model's answers that lead there, and how it is run."""

    script: tuple
    flag: str  # the cause's reason on the attention line
    max_steps: int = loop.MAX_STEPS_PER_RUN
    deadline: bool = False  # the run's deadline has passed once its first step is done
    task: bool = False  # run by the Celery task, which gives the run up
    again: bool = True  # a later message reaches a run again (not once the ticket went to staff)


STOPS = {
    "repeat guard": Stop((bad(1), bad(2), bad(3)), attention.REPEATED_CALL),
    "step cap": Stop((lookup(1), lookup(2)), attention.RUN_STOPPED, max_steps=2),
    "run deadline": Stop((lookup(1),), attention.RUN_STOPPED, deadline=True),
    "model unavailable": Stop((ModelCallError("HTTP 503 from provider", retryable=True),), attention.MODEL_UNAVAILABLE),
    "no answer twice": Stop((NOTHING, NOTHING), attention.NO_ANSWER),
    "run given up": Stop((RuntimeError("boom"),), attention.RUN_FAILED, task=True),
    "model not configured": Stop(
        (ModelCallError("no model is configured", retryable=False, unresolved=True),),
        attention.NOT_CONFIGURED,
        again=False,
    ),
}


def stopped(case, stop: Stop, text: str = ASK, *, before=(), settings=None) -> ScriptedModel:
    """The customer writes `text`; the run answers with `before`, then the stop's script."""
    customer_message_post(ticket=case["ticket"], text=text, wake=False)
    model = ScriptedModel([*before, *stop.script])
    if stop.deadline:
        settings.AGENT_RUN_DEADLINE_SECONDS = 0
    if stop.task:
        # The task's own way: a run that raised is given up (`failures.run_failed`) and recorded.
        original = tasks.run_slice
        tasks.run_slice = lambda ticket_id, **kw: original(ticket_id, gateway=Gateway(override=model), **kw)
        agent_run_task.push_request(id="t-stop", retries=0, is_eager=False, timelimit=(None, None))
        try:
            assert agent_run_task.run(case["ticket"].pk) == 0
        finally:
            agent_run_task.pop_request()
            tasks.run_slice = original
    else:
        agent_run(case["ticket"].pk, gateway=Gateway(override=model), max_steps=stop.max_steps + len(before))
    return model


def handoffs(case) -> list[Turn]:
    return list(
        Turn.objects.filter(ticket=case["ticket"], kind=Turn.Kind.MESSAGE, payload__via="handoff").order_by("number")
    )


def said(case) -> list[str]:
    return [t.text for t in customer_turns(case["ticket"]) if t.author != Turn.Author.CUSTOMER]


def line(case) -> str:
    return Ticket.objects.values_list("attention", flat=True).get(pk=case["ticket"].pk)


@pytest.mark.parametrize("name", list(STOPS))
def test_a_run_that_stops_without_replying_tells_the_customer_and_flags_staff(case, name, settings):
    stop = STOPS[name]
    stopped(case, stop, settings=settings)
    [turn] = handoffs(case)
    assert turn.text == handoff.TEXT and turn.author == Turn.Author.AGENT
    assert said(case) == [handoff.TEXT]
    # It names the stop's own turn: the one that ended the run, just before it.
    stop_turn = Turn.objects.get(ticket=case["ticket"], number=turn.payload["stopped_turn"])
    assert stop_turn.kind in (Turn.Kind.REJECTION, Turn.Kind.ERROR) and stop_turn.number == turn.number - 1
    assert any(r.startswith(stop.flag) for r in reasons(line(case))), line(case)  # staff still flagged
    page = case["page"].get(f"/help/tickets/{case['ticket'].pk}/").content.decode()
    assert "passed your message to our team" in page
    desk = case["desk"].get(f"/desk/tickets/{case['ticket'].pk}/").content.decode()
    assert "hand-off" in desk and "a run that stopped without replying" in desk


@pytest.mark.parametrize("name", [n for n, s in STOPS.items() if s.again])
def test_a_later_message_stopped_alike_while_the_flag_stands_gets_the_short_line(case, name, settings):
    stop = STOPS[name]
    stopped(case, stop, settings=settings)
    stopped(case, stop, "Hello? Is anyone there?", settings=settings)
    assert [t.text for t in handoffs(case)] == [handoff.TEXT, handoff.STILL_WITH_TEAM]
    read = scorecard.read_by_customers(case["ticket"].pk)
    assert read["unanswered"] == 0 and read["handed_off"] == 2


@pytest.mark.parametrize("name", list(STOPS))
def test_a_run_that_stops_after_its_posted_words_tells_nothing(case, name, settings):
    """Words the model wrote with its first call were checked and posted: the message is answered."""
    stop = STOPS[name]
    stopped(case, stop, before=(lookup(0, SAID),), settings=settings)
    assert any(r.startswith(stop.flag) for r in reasons(line(case))), line(case)  # it did stop so
    assert not handoffs(case) and said(case) == [SAID]


def test_a_card_on_the_page_answers_the_message_and_the_stop_tells_nothing(case):
    """A refund the customer must confirm shows as a card: the repeat stop after it adds nothing."""
    refund = _call("issue_refund", "r1", order_number="SU-26675", amount="40.00", currency="USD", reason="damaged")
    stopped(case, STOPS["repeat guard"], before=(lookup(0), refund))
    assert Turn.objects.filter(ticket=case["ticket"], payload__has_key="confirmation").exists()
    assert not handoffs(case)
    read = scorecard.read_by_customers(case["ticket"].pk)
    assert read["unanswered"] == 0 and read["handed_off"] == 0


def test_replies_held_beside_calls_then_the_repeat_stop_tell_the_customer(case):
    """Run 15's shape: the words written with each refused call are held, so nothing answered the
    message when the repeat guard stopped the run."""
    invented = "Your refund SU-26675-RF01 for 40.00 USD has been issued."
    script = [_call("get_order", f"b{n}", invented) for n in range(1, 4)]
    stopped(case, Stop(tuple(script), attention.REPEATED_CALL))
    assert Turn.objects.filter(ticket=case["ticket"], payload__has_key="held_reply").exists()
    assert [t.text for t in handoffs(case)] == [handoff.TEXT]
    assert "SU-26675-RF01" not in " ".join(said(case))


def test_the_model_never_reads_the_stops_hand_off_as_its_own_words(case):
    stopped(case, STOPS["repeat guard"])
    customer_message_post(ticket=case["ticket"], text="Hello? Any news?", wake=False)
    model = ScriptedModel([ModelResponse(text="Thanks for waiting; I have your order SU-26675 here.")])
    agent_run(case["ticket"].pk, gateway=Gateway(override=model))
    shown = " ".join(m.content or "" for m in model.requests[0].messages)
    assert "passed your message to our team" not in shown
    assert said(case) == [handoff.TEXT, "Thanks for waiting; I have your order SU-26675 here."]


def test_after_the_stops_hand_off_a_wake_with_no_new_input_leaves_the_ticket_to_staff(case):
    stopped(case, STOPS["repeat guard"])
    idle = ScriptedModel([])
    agent_run(case["ticket"].pk, gateway=Gateway(override=idle))
    assert idle.requests == []


def test_a_held_reply_after_the_stops_hand_off_gets_the_short_line(case):
    """One standing flag or the other: the full line is not said twice while staff have not acted. (Not
    after a model that could not be reached: the next answer clears that flag, and the full line is due.)"""
    stopped(case, STOPS["repeat guard"])
    customer_message_post(ticket=case["ticket"], text="Hello?", wake=False)
    invented = ModelResponse(text="Your refund SU-26675-RF01 for 40.00 USD has been issued.")
    agent_run(case["ticket"].pk, gateway=Gateway(override=ScriptedModel([invented, invented])))
    assert [t.text for t in handoffs(case)] == [handoff.TEXT, handoff.STILL_WITH_TEAM]


# --- under takeover: a person has the ticket, Sundry says nothing -------------------------------------


def _taken_over(case) -> Ticket:
    customer_message_post(ticket=case["ticket"], text=ASK, wake=False)
    ticket_set_handler(ticket=case["ticket"], handler=Ticket.Handler.STAFF, user=case["staff"])
    return Ticket.objects.select_related("ticket_class", "customer").get(pk=case["ticket"].pk)


@pytest.mark.parametrize("name", ["repeat guard", "model unavailable", "no answer twice", "model not configured"])
def test_nothing_under_takeover_when_a_step_stops(case, name):
    """A step that still ends in the stop once staff hold the ticket (it was under way)."""
    ticket = _taken_over(case)
    model = ScriptedModel(list(STOPS[name].script))
    while model.remaining:
        agent_step(ticket, gateway=Gateway(override=model))
    assert any(r.startswith(STOPS[name].flag) for r in reasons(line(case)))
    assert not handoffs(case)


@pytest.mark.parametrize("name", ["step cap", "run given up"])
def test_nothing_under_takeover_when_the_run_stops_or_is_given_up(case, name):
    """The run's stop as it would land after its last step, or the task's give-up, once staff hold the ticket."""
    ticket = _taken_over(case)
    if name == "step cap":
        loop._stop_run(ticket, "The agent stopped at the run's 2-step cap without replying.", "Run stopped at the cap")
    else:
        assert failures.run_failed(ticket.pk, "unexpected error: RuntimeError")
    assert STOPS[name].flag in line(case) and not handoffs(case)


# --- what the scorecard reads, and the negative control --------------------------------------------


def test_the_scorecard_counts_the_stopped_message_handed_to_staff_not_unanswered(case):
    stopped(case, STOPS["repeat guard"])
    read = scorecard.read_by_customers(case["ticket"].pk)
    assert read["unanswered"] == 0 and read["handed_off"] == 1 and read["false_claims"] == 0


def test_negative_control_switched_off_the_stopped_run_leaves_the_customer_silent(case, monkeypatch):
    monkeypatch.setattr(handoff, "AFTER_STOPS", False)
    stopped(case, STOPS["repeat guard"])
    assert not handoffs(case) and said(case) == []
    assert attention.REPEATED_CALL in line(case)
    read = scorecard.read_by_customers(case["ticket"].pk)
    assert read["unanswered"] == 1 and read["handed_off"] == 0
