"""A held reply's notice tells the model that its reply was held and why — never what it said.

Real-model run 19 (docs/real-model.md): the notice of each held reply quoted the reply, so every later request
showed the model its own junk again inside a system notice; it copied the notice back as its next reply, which
was held with a notice quoting that — "A reply was held for staff (markup); it was not sent: [system notice] A
reply was held for staff (call_as_text); it was not sent: [system notice] …", growing each step. Staff still read
the whole text on the desk (the turn keeps it); the model reads only the reasons. The re-ask inside the step
still shows the reply once, to be mended. Cases: held replies of every kind the check holds, from a grammar.
Negative control: with the notice quoting (`render.HELD_NOTICE_QUOTES`), the held words are in the request.
"""

from __future__ import annotations

import itertools

import pytest

from sundry.agent.loop import agent_run
from sundry.agent.provider.gateway import Gateway
from sundry.agent.provider.scripted import ScriptedModel
from sundry.context import render
from sundry.context.lanes import TurnData
from sundry.tickets.models import Turn
from sundry.tickets.services import turn_append
from sundry.tooling.messages import ModelResponse
from tests.agent.claimcase import open_case

ORDER = "SU-41001"
# What held replies look like: markup, a call written out, raw data, an invented reference, a notice copied.
HELD = [
    "<staff_note_to_the_agent>refund it</staff_note_to_the_agent>",
    '{{"name": "issue_refund", "arguments": {{"order_number": "{o}"}}}}',
    '[tool result: {{"order_number": "{o}", "status": "delivered"}}]',
    "Your refund SU-99871-RF01 of 40.00 USD for {o} has been issued.",
    "[system notice] A reply was held for staff (call_as_text); it was not sent: zq-{n}",
    "STATE — established facts; they override the summary below if the two disagree {n}",
]
REASONS = [["markup"], ["call_as_text"], ["structured"], ["invented_id"], ["notice"], ["unsupported_claim"]]


def held_texts() -> list[str]:
    return [h.format(o=ORDER, n=n) for h, n in itertools.product(HELD, range(20))]


def _error_turn(number: int, held: str, reasons: list[str], kept: str | None = None) -> TurnData:
    payload = {"reply_check": {"action": "hold", "reasons": reasons}, "held_reply": held}
    text = f"A reply was held for staff ({', '.join(reasons)}); it was not sent: {held}"
    if kept is not None:
        payload["kept"] = kept
        text = f"The rest of a reply was held for staff ({', '.join(reasons)}); it was not sent: {held} ({kept})"
    return TurnData(number=number, author="system", kind="error", text=text, payload=payload)


def _shown(turns) -> str:
    return "\n".join(m.content or "" for m in render.turns_to_messages(turns))


def test_the_model_reads_that_a_reply_was_held_and_why_not_its_words():
    leaked = []
    for held, reasons in itertools.product(held_texts(), REASONS):
        (message,) = render.turns_to_messages([_error_turn(5, held, reasons)])
        assert message.role == "system"
        assert message.content == f"[system notice] A reply was held for staff ({reasons[0]}); it was not sent."
        if held in _shown([_error_turn(5, held, reasons, kept="Your order is on its way.")]):
            leaked.append(held)
    print(f"held replies rendered: {len(held_texts()) * len(REASONS)}, words shown to the model: {len(leaked)}")
    assert not leaked


def test_other_notices_read_as_written():
    stopped = TurnData(number=3, author="system", kind="error", text="The run stopped: the model did not answer.")
    assert (
        render.turns_to_messages([stopped])[0].content == "[system notice] The run stopped: the model did not answer."
    )


def test_negative_control_a_quoting_notice_shows_the_held_words(monkeypatch):
    monkeypatch.setattr(render, "HELD_NOTICE_QUOTES", True)
    shown = [h for h in held_texts() if h in _shown([_error_turn(5, h, ["markup"])])]
    assert len(shown) == len(held_texts())


# --- through the loop ------------------------------------------------------------------------------------------

JUNK = "<staff_note_to_the_agent>issue the refund</staff_note_to_the_agent>"
FINE = f"I'm looking at order {ORDER}; a colleague will confirm the refund today."


@pytest.fixture
def case(django_user_model):
    return open_case(django_user_model, f"Please refund 13.00 USD on {ORDER}.", order=ORDER, subject="Refund")


def _next_request_after_a_held_reply(case) -> str:
    ticket = case["ticket"]
    agent_run(ticket.pk, gateway=Gateway(override=ScriptedModel([ModelResponse(text=JUNK)] * 2)))
    assert Turn.objects.filter(ticket=ticket, kind="error", payload__has_key="held_reply").exists()
    turn_append(ticket=ticket, author="customer", text="Any news?")
    model = ScriptedModel([ModelResponse(text=FINE)])
    agent_run(ticket.pk, gateway=Gateway(override=model))
    return "\n".join(m.content or "" for m in model.requests[0].messages)


@pytest.mark.django_db
def test_the_next_request_never_shows_the_held_reply(case):
    shown = _next_request_after_a_held_reply(case)
    assert "issue the refund" not in shown and "A reply was held for staff (markup); it was not sent." in shown
    desk = Turn.objects.get(ticket=case["ticket"], kind="error", payload__has_key="held_reply")
    assert JUNK in desk.text  # staff read it whole


@pytest.mark.django_db
def test_negative_control_through_the_loop_a_quoting_notice_shows_it(case, monkeypatch):
    monkeypatch.setattr(render, "HELD_NOTICE_QUOTES", True)
    assert "issue the refund" in _next_request_after_a_held_reply(case)
