"""A reply that is a declared tool's or parameter's description is Sundry's own words: asked again, then held.

A small model copied `reply_to_customer`'s `message` description as its message (docs/real-model.md,
run 8) and tool descriptions as its reply (run 3). The cases come from the declarations themselves: every
tool the shop's domain offers the model and every tool of the example tool server (its docstrings, which
the server declares as descriptions), each description and parameter description said back exactly, with
case and punctuation changed, with a word swapped, or wrapped in a greeting. A genuine reply that shares
a few words with a description is posted. Through the real loop: neither a plain reply nor
`reply_to_customer`'s message of such words reaches the customer's page. Negative control: with the
declarations not passed to the checks, the same words are posted.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from sundry.agent import answer, calls
from sundry.agent.guards import addressee, ownterms, replycheck
from sundry.agent.loop import agent_run
from sundry.agent.provider.gateway import Gateway
from sundry.agent.provider.scripted import ScriptedModel
from sundry.agent.toolbox import domain_specs
from sundry.tickets.models import Turn
from tests.agent.claimcase import customer_reads, open_case, reply_via

ROOT = Path(__file__).resolve().parents[2]
ORDER = "SU-26675"


def server_specs() -> list[dict]:
    """The example tool server's tools as it declares them: the docstring's summary is the tool's
    description, its "Args:" lines the parameters'."""
    tree = ast.parse((ROOT / "examples" / "tau2_retail_mcp" / "server.py").read_text())
    out = []
    for node in ast.walk(tree):
        doc = ast.get_docstring(node) if isinstance(node, ast.FunctionDef) else None
        if not doc or node.name.startswith("_"):
            continue
        summary, _, rest = doc.partition("Args:")
        args_part = re.split(r"\n\s*(?:Returns|Raises):", rest)[0]
        params = {
            m[1]: {"type": "string", "description": re.sub(r"\s+", " ", m[2]).strip()}
            for m in re.finditer(r"^\s*(\w+)(?:\s*\([^)]*\))?:\s*(.+(?:\n\s{8,}.+)*)", args_part, re.M)
        }
        out.append({"name": node.name, "description": " ".join(summary.split()), "parameters": {"properties": params}})
    return out


def declared() -> list[str]:
    return [t for t in replycheck.declared_texts([*domain_specs(), *server_specs()]) if len(t.split()) >= 5]


def _variants(text: str) -> list[str]:
    words = text.split()
    swapped = " ".join([*words[:2], "kindly" if words[2].lower() != "kindly" else "please", *words[3:]])
    return [text, text.upper().rstrip("."), text.lower() + "!", swapped, f"Hello! {text}", f"Hi there, {text} Thanks."]


def check(text, **kw):
    return replycheck.check_reply(text, known={ORDER}, declared=declared(), **kw)


@pytest.mark.django_db
def test_every_declared_description_said_back_is_asked_again_then_held():
    texts = declared()
    assert len(texts) > 40 and any("reply to the customer" in t for t in texts)
    assert any("cancel" in t.lower() for t in map(str.lower, texts) if "pending order" in t)  # the server's
    missed = []
    for text in texts:
        for variant in _variants(text):
            first = check(variant)
            if first.action != replycheck.RETRY or first.reasons != ["notice"]:
                missed.append((variant, first.action, first.reasons))
            elif check(variant, retried=True).action != replycheck.HOLD:
                missed.append((variant, "not held"))
    print(f"descriptions said back: {len(texts)} × {len(_variants('a b c d'))} variants, missed {len(missed)}")
    assert not missed, missed[:5]


GENUINE = [
    # share a few words with `reply_to_customer`'s, `get_order`'s, `issue_refund`'s descriptions
    f"Thanks for your patience — your order {ORDER} has shipped and should reach you this week.",
    f"I've looked up order {ORDER}: it is on its way, and I'll reply here as soon as I hear more.",
    "The refund will go back to the original payment method once it is confirmed.",
    "Please tell me the exact order number and I'll check it for you.",
    "You can reply to this chat any time.",
]


@pytest.mark.django_db
@pytest.mark.parametrize("text", GENUINE)
def test_a_genuine_reply_sharing_words_with_a_description_is_posted(text):
    assert check(text).action == replycheck.POST, check(text)
    assert replycheck.copied(text, (), declared()) == ""


@pytest.mark.django_db
def test_the_tool_guard_refuses_such_text_and_not_a_genuine_one():
    texts = declared()
    assert all(replycheck.copied(t, (), texts) == "notice" for t in texts)
    # Control: without the declarations only those naming Sundry's own workings ("in the state", "the ID
    # ledger": `ownterms`), its instructions or a program's names ("order_number") are still refused.
    assert not any(
        replycheck.copied(t, (), ()) == "notice"
        for t in texts
        if "instructions" not in t and not ownterms.used(t) and not replycheck.program_word(t)
    )


# --- through the loop ------------------------------------------------------------------------------------

POSTED = "Your reply to the customer in the ticket's chat. Refer to orders by their exact order number."
FINAL = f"Your order {ORDER} has shipped; I'll keep an eye on it."


@pytest.fixture
def case(django_user_model):
    return open_case(django_user_model, "Thanks.", order=ORDER, subject="Hi", prices=(4000,))


@pytest.mark.django_db
def test_the_posted_description_is_the_reply_tools_own():
    # "Send your reply to the customer …", a word short: nearly the description, as the model posted it
    assert POSTED not in replycheck.declared_texts(domain_specs())
    assert replycheck.declares(POSTED, replycheck.declared_texts(domain_specs()))


@pytest.mark.django_db
@pytest.mark.parametrize("via", ["reply", "reply_to_customer"])
def test_a_description_as_the_reply_never_reaches_the_customer(case, via):
    agent_run(
        case["ticket"].pk,
        gateway=Gateway(override=ScriptedModel([reply_via(via, POSTED)] * 2 + [reply_via("reply", FINAL)] * 3)),
    )
    reads = customer_reads(case)
    assert "Refer to orders by their exact order number" not in reads
    if via == "reply_to_customer":
        rejection = Turn.objects.filter(ticket=case["ticket"], kind=Turn.Kind.REJECTION).first()
        assert rejection.payload["guard"] == "notice"
    else:
        held = Turn.objects.filter(ticket=case["ticket"], kind=Turn.Kind.ERROR).last()
        assert "notice" in held.text


@pytest.mark.django_db
@pytest.mark.parametrize("via", ["reply", "reply_to_customer"])
def test_negative_control_without_the_declarations_the_description_is_posted(case, via, monkeypatch):
    monkeypatch.setattr(replycheck, "declared_texts", lambda specs: ())
    monkeypatch.setattr(answer.replycheck, "declared_texts", lambda specs: ())
    assert calls.replycheck.declared_texts([]) == ()
    # The description speaks of "the customer", which the addressee check holds on its own: off too, so
    # this shows what the declarations alone do.
    monkeypatch.setattr(addressee, "about_customer", lambda text, customer_messages=(): [])
    agent_run(
        case["ticket"].pk,
        gateway=Gateway(override=ScriptedModel([reply_via(via, POSTED)] * 2 + [reply_via("reply", FINAL)] * 3)),
    )
    assert "Refer to orders by their exact order number" in customer_reads(case)
