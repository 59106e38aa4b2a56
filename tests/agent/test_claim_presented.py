"""An action handed over in the sentence ("Here is your full refund for <order>:") is judged like a done-claim.

A real 0.5B model answered "I'd like a full refund for SU-21487 please." with "Sure, here is your full
refund for SU-21487:" and later "Could you check SU-20012 too?" with "Sure, here is your full refund for
SU-20012:" (docs/real-model.md, run 12): no refund, card or hold existed, and nothing read the sentence as
a claim. The sentences come from a grammar (opener × presentative × whose × how much × action noun ×
record named or not × ending); each is held when no action of its kind ran on the record it names, or when
only its card is open (a card awaiting the customer gives nothing yet), and passes when the action ran —
for a refund, for the figure it names. Look-alikes present something about the action, not the action,
and claim nothing. Through the real loop the run's words never reach the customer's page, with no card and
with an open one; the stream never shows them. Negative control: with the reading off, the same sentences
pass.
"""

from __future__ import annotations

import itertools

import pytest

from sundry.agent import answer
from sundry.agent.guards import presentclaims, provisional, replyclaims, unfinished
from sundry.agent.guards.replyclaims import OPEN, Proposal
from sundry.agent.loop import agent_run
from sundry.agent.models import Confirmation
from sundry.agent.provider.gateway import Gateway
from sundry.agent.provider.scripted import ScriptedModel
from sundry.agent.services import customer_message_post
from sundry.tickets.models import Ticket, Turn
from sundry.tooling.messages import ModelResponse
from tests.agent.claimcase import LOOKUP, REFUND, case, customer_reads  # noqa: F401  (case: the fixture)
from tests.agent.test_claim_modes import KINDS, ORDER, OTHER, TOOL, _action, _ledger

# What reached a customer's page in run 12, on this test's orders.
RUN = [f"Sure, here is your full refund for {ORDER}:", f"Sure, here is your full refund for {OTHER}:"]

OPENERS = ["", "Sure, ", "Thanks for waiting. ", "Great news! "]
HEADS = ["here is", "here's", "attached is", "please find attached"]
WHOSE = ["your", "the"]
HOW = {"refund": ["", "full ", "partial ", "15.00 USD "], "replace": ["", "free "], "return": ["", "prepaid "]}
NOUNS = {
    "refund": ["refund", "store credit", "money back"],
    "replace": ["replacement", "exchange"],
    "return": ["return label", "return"],
}
ENDS = ["{on}:", "{on}.", "{on}, as promised.", "{on} — it should reach you soon."]


def positives() -> list[tuple[str, bool, str, str]]:
    """(kind, whether a record is named, the amount said or "", sentence)."""
    out = []
    for kind, nouns in NOUNS.items():
        for opener, head, whose, how, noun, end, named in itertools.product(
            OPENERS, HEADS, WHOSE, HOW[kind], nouns, ENDS, (True, False)
        ):
            head = head if opener.endswith(", ") else head[0].upper() + head[1:]  # a sentence's first word
            text = f"{opener}{head} {whose} {how}{noun}" + end.format(on=f" for {ORDER}" if named else "")
            out.append((kind, named, "15.00" if how == "15.00 USD " else "", text))
    return list(dict.fromkeys(out))


LOOKALIKES = [
    f"Here is your order's status: {ORDER} is on its way.",
    "Here is the refund policy: refunds go back to the original payment method.",
    "Here's what I found about your refund.",
    "Here is how to request a refund.",
    "Here's your refund amount once it is approved: 15.00 USD.",
    "Here is the return window for your order: 30 days.",
    "Here's the credit card we have on file.",
    "Here is the replacement policy for damaged items.",
    "Here are the details of your order.",
    "Here's the return process, step by step.",
    "Here's a summary of the refund options.",
    "Would you like me to send you a return label?",
    "Here is your return label?",
    "Once it's approved, here is your refund.",
    "Here are your options: a refund or a replacement.",
]


def _held(text, **state):
    return replyclaims.unsupported(text, kinds=KINDS, ledger=_ledger(), **{"actions": [], **state})


def _card(kind, on=ORDER, cents=1500):
    return Proposal(TOOL[kind], (on,), OPEN, cents if kind == "refund" else None, "USD" if kind == "refund" else "")


def test_every_presentative_is_read_as_a_done_claim_of_its_kind():
    cases = positives()
    wrong = []
    for kind, named, _amount, text in cases:
        claims = [c for c in replyclaims.claims_of(text) if c.kind == kind and c.mode == replyclaims.DONE]
        if not claims or (named and ORDER not in claims[0].ids):
            wrong.append((text, replyclaims.claims_of(text)))
    print(f"presentatives: {len(cases)}, misread {len(wrong)}")
    assert len(cases) > 500 and not wrong, wrong[:5]


def test_each_is_held_unless_the_action_ran_on_its_record_for_its_figure():
    wrong = []
    for kind, named, amount, text in positives():
        ran = _action(TOOL[kind], cents=1500 if kind == "refund" else None)
        elsewhere = _action(TOOL[kind], target=OTHER, cents=1500 if kind == "refund" else None)
        states = {
            "nothing": ({}, True),
            "its card open": ({"proposals": [_card(kind)]}, True),
            "ran": ({"actions": [ran]}, False),
            # On another record: held only where the sentence names this one.
            "ran on another order": ({"actions": [elsewhere]}, named),
        }
        if kind == "refund":
            states["ran for another figure"] = ({"actions": [_action(TOOL[kind], cents=2000)]}, bool(amount))
        for name, (state, held) in states.items():
            if bool(_held(text, **state)) != held:
                wrong.append((text, name, _held(text, **state)))
    assert not wrong, wrong[:5]


def test_lookalikes_present_no_action():
    for text in LOOKALIKES:
        assert not presentclaims.kinds(text), text
        assert not _held(text), (text, _held(text))


def test_the_details_of_a_refund_we_issued_is_a_claim_that_we_did():
    """Named in passing, done by us: passes when the refund ran, held when it did not."""
    for text in (
        "Here are the details of the refund we issued.",
        f"Here are the details of the refund I processed on {ORDER}.",
        "The replacement we sent should arrive on Monday.",
    ):
        kind = "replace" if "replacement" in text else "refund"
        assert _held(text) and not _held(text, actions=[_action(TOOL[kind], cents=None)]), text
    assert not _held("Here are the details of the refund you asked about.")


def test_the_runs_sentences_are_held_each_on_its_own_order():
    assert all(_held(s) for s in RUN)
    assert all(_held(s, proposals=[_card("refund", cents=None)]) for s in RUN)  # a card is not a refund given
    refunded = [_action("issue_refund", cents=None)]
    assert not _held(RUN[0], actions=refunded) and _held(RUN[1], actions=refunded)  # SU-…02 had none


def test_negative_control_with_the_reading_off_the_presentatives_pass(monkeypatch):
    monkeypatch.setattr(replyclaims.presentclaims, "kinds", lambda sentence: [])
    cases = positives()
    passed = [text for *_, text in cases if not _held(text)]
    print(f"with the reading off: {len(passed)} of {len(cases)} pass with nothing on the ticket")
    assert not _held(RUN[0]) and not _held(RUN[1])
    assert len(passed) == len(cases)


def test_no_presentative_is_streamed():
    records = replyclaims.Records(kinds=KINDS, ledger=tuple(_ledger()))
    for *_, text in positives()[::5]:
        said = f"I checked {ORDER}. {text} Anything else?"
        shown = provisional.shown(
            said, known={ORDER}, final=True, sentence_ok=lambda upto: answer.sentence_passes(upto, records, None)
        )
        # What shows is what came before it ("I checked …", "Thanks for waiting."), never the sentence or after.
        assert shown.startswith(f"I checked {ORDER}.") and not _held(shown) and "else" not in shown, (text, shown)


# --- through the loop ------------------------------------------------------------------------------------


@pytest.mark.django_db
@pytest.mark.parametrize("with_card", [False, True])
def test_the_runs_refund_handed_over_never_reaches_the_customer(case, with_card):
    """ "Sure, here is your full refund for <order>:" is asked again, then held: with no refund, and with its
    card open — a card awaiting the customer's confirmation has given them nothing."""
    said = ModelResponse(text=RUN[0])
    script = [LOOKUP, REFUND, said, said] if with_card else [LOOKUP, said, said]
    agent_run(case["ticket"].pk, gateway=Gateway(override=ScriptedModel(script)))
    assert "here is your full refund" not in customer_reads(case)
    assert Confirmation.objects.filter(ticket=case["ticket"]).exists() == with_card
    held = Turn.objects.filter(ticket=case["ticket"], kind=Turn.Kind.ERROR).last()
    assert "unsupported_claim" in held.text and "here is your full refund" in held.text
    assert "unsupported_claim" in Ticket.objects.get(pk=case["ticket"].pk).attention


@pytest.mark.django_db
def test_negative_control_with_the_reading_off_the_refund_handed_over_is_posted(case, monkeypatch):
    """The run's words also end on a colon, introducing nothing (`unfinished`): with this reading off they are
    held for that alone, and with that one off too they are posted."""
    monkeypatch.setattr(replyclaims.presentclaims, "kinds", lambda sentence: [])
    said = ModelResponse(text=RUN[0])
    agent_run(case["ticket"].pk, gateway=Gateway(override=ScriptedModel([LOOKUP, said, said])))
    held = Turn.objects.filter(ticket=case["ticket"], kind=Turn.Kind.ERROR).last()
    assert held.payload["reply_check"]["reasons"] == ["unfinished"]
    monkeypatch.setattr(unfinished, "ending", lambda text: "")
    customer_message_post(ticket=case["ticket"], text="And?", wake=False)
    agent_run(case["ticket"].pk, gateway=Gateway(override=ScriptedModel([said])))
    assert "here is your full refund" in customer_reads(case)
