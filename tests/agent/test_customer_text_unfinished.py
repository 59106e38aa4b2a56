"""What a tool sends the customer is read for an unfinished ending, as a plain reply is.

Issue 26: the reply check holds a reply that ends introducing what never follows ("…you can follow these
steps:", "the following", an empty list item), but `reply_to_customer`'s message — the same words, sent by a
tool — was never read for it. The call guards now read every argument the domain declares as customer text
(`Tool.customer_text`: the reply's message, an e-mail's subject and body) with the same reading
(`unfinished.ending`) and refuse it. The grammar is the reply check's (tests/agent/test_reply_unfinished.py):
every generated unfinished ending refused, every look-alike allowed, the same verdict as the reply check's on
each. Negative control: the reading off, all allowed. The 882 recorded replies sent as the tool's message:
counted. Through the loop, run 14's copied list is refused and never reaches the customer's page.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from sundry.agent.guards import callguards, replycheck, unfinished
from sundry.agent.guards.callguards import GuardInput
from sundry.agent.loop import agent_run
from sundry.agent.provider.gateway import Gateway
from sundry.agent.provider.scripted import ScriptedModel
from sundry.tickets.models import Turn
from sundry.tooling.messages import ModelResponse, ToolCall
from sundry.tooling.tools import REGISTRY
from tests.agent import recorded
from tests.agent.claimcase import customer_reads, open_case, reply_via
from tests.agent.test_reply_unfinished import ISSUE, ISSUE_ONE_LINE, LOOK_ALIKES, ORDER, UNFINISHED

REPLY = REGISTRY["reply_to_customer"]


def _refused(text, tool=REPLY, field="message"):
    return callguards._check_unfinished(GuardInput(tool=tool, arguments={}), SimpleNamespace(**{field: text}))


def _check(text):
    """The whole call guard on the tool's message, with the reply check's identifiers known."""
    known = frozenset(replycheck.known_identifiers([ORDER]))
    return callguards.check_call(GuardInput(tool=REPLY, arguments={"message": text}, known=known))


def test_every_generated_unfinished_ending_is_refused_naming_how_it_ends():
    missed = [t for t, _ in UNFINISHED if _refused(t) is None]
    verdicts = [_check(t) for t, _ in UNFINISHED[::9]]
    wrong = [v for v in verdicts if (v.decision, v.guard) != ("reject", unfinished.UNFINISHED)]
    print(f"unfinished endings refused as the tool's message: {len(UNFINISHED) - len(missed)}/{len(UNFINISHED)}")
    assert len(UNFINISHED) > 2000 and missed == [] and wrong == [], (missed[:3], [v.reason for v in wrong[:3]])
    verdict = _refused(ISSUE)
    assert verdict.details == {"field": "message", "ending": unfinished.ending(ISSUE)}
    assert unfinished.ending(ISSUE) in verdict.reason and "never gives" in verdict.reason


def test_every_look_alike_is_allowed():
    refused = [t for t in LOOK_ALIKES if _refused(t) is not None or not _check(t).allowed]
    print(f"look-alikes allowed: {len(LOOK_ALIKES) - len(refused)}/{len(LOOK_ALIKES)}")
    assert len(LOOK_ALIKES) > 150 and refused == [], refused[:5]


def test_the_call_guard_and_the_reply_check_agree_on_every_text():
    texts = [t for t, _ in UNFINISHED] + LOOK_ALIKES
    differ = [
        t
        for t in texts
        if (_refused(t) is not None) != (replycheck.UNFINISHED in replycheck.check_reply(t, known={ORDER}).reasons)
    ]
    assert differ == [], differ[:5]


def test_every_declared_customer_text_is_read_and_other_arguments_are_not():
    email = REGISTRY["send_email"]
    for field in email.customer_text:
        assert _refused(ISSUE_ONE_LINE, email, field).details["field"] == field
    # An argument the domain does not declare as customer text is not read, whatever it holds.
    lookup = REGISTRY["get_order"]
    assert not lookup.customer_text and _refused(ISSUE, lookup, "order_number") is None


def test_negative_control_with_the_reading_off_every_unfinished_ending_is_allowed(monkeypatch):
    monkeypatch.setattr(callguards, "UNFINISHED_IN_CUSTOMER_TEXT", False)
    allowed = [t for t, _ in UNFINISHED if _refused(t) is None]
    passed = [t for t, _ in UNFINISHED[::9] if _check(t).allowed]
    print(f"with the reading off, unfinished endings allowed: {len(allowed)}/{len(UNFINISHED)}")
    assert len(allowed) == len(UNFINISHED) and len(passed) == len(UNFINISHED[::9])


def test_the_recorded_replies_as_the_tools_message():
    replies = [text for _domain, text in recorded.replies()]
    refused = [t for t in replies if _refused(t) is not None]
    print(f"recorded replies refused as unfinished tool text: {len(refused)}/{len(replies)}")
    assert len(replies) == 882 and refused == [], refused[:3]


# --- through the loop ------------------------------------------------------------------------------------------

AFTER = f"Thanks for waiting. A colleague will write to you about {ORDER} shortly."


@pytest.fixture
def case(django_user_model):
    return open_case(
        django_user_model, f"Where is my order {ORDER}? It's been ages.", order=ORDER, subject="Lost", prices=(4000,)
    )


def _run(case):
    lookup = ModelResponse(tool_calls=[ToolCall(id="g1", name="get_order", arguments={"order_number": ORDER})])
    said = reply_via("reply_to_customer", ISSUE_ONE_LINE)
    agent_run(
        case["ticket"].pk, gateway=Gateway(override=ScriptedModel([lookup, said, said, ModelResponse(text=AFTER)]))
    )
    return Turn.objects.filter(ticket=case["ticket"], kind=Turn.Kind.REJECTION, payload__guard="unfinished")


@pytest.mark.django_db
def test_through_the_loop_run_14s_copied_list_is_refused_and_never_reaches_the_customer(case):
    refused = _run(case)
    assert refused.count() == 2 and "never gives" in refused[0].text
    reads = customer_reads(case)
    assert "follow these steps" not in reads and AFTER in reads


@pytest.mark.django_db
def test_negative_control_through_the_loop_with_the_reading_off_it_is_posted(case, monkeypatch):
    monkeypatch.setattr(callguards, "UNFINISHED_IN_CUSTOMER_TEXT", False)
    assert _run(case).count() == 0 and "follow these steps" in customer_reads(case)
