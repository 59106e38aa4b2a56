"""A number hyphenated to a measure word ("20-hour", "500-piece", "34-inch") is a measure, not an identifier.

Issue 26: on the 882 recorded GPT-4.1 replies of τ²-bench, `reply_to_customer`'s text was refused four times
for an invented identifier — "500-piece", "20-hour" twice, "34-inch" — and the reply check asked the same
four again. The reading (`guards/measures.py`) is a grammar on one token: a number (a range, an ordinal) and a
hyphen, a word from a general list of units and quantities (plural or capitalised), up to two lower-case words
after it; "2-in-1". Generated: frames × numbers × measure words × forms, each passing the reply check and
the call guard with nothing invented. Look-alikes that stay identifiers: the shop's and other references
with a hyphen and digits ("SO-1042", "SU-26675-RF01", "RF-000123", "ab12-cd34", "1Z-999-AA1"), generated
prefixes × digits × suffixes, and measure-shaped tokens that are not one ("20-HOUR", "500-piece-A1",
"48213-B", "1234567-day"), alone or beside a measure. Negative control: the reading off, the measures are
refused again. The recorded replies: counted before and after, both readings. Through the loop, a message
with measures posts.
"""

from __future__ import annotations

import itertools
from types import SimpleNamespace

import pytest

from sundry.agent import answer
from sundry.agent.guards import callguards, measures, replycheck
from sundry.agent.guards.callguards import GuardInput
from sundry.agent.loop import agent_run
from sundry.agent.provider.gateway import Gateway
from sundry.agent.provider.scripted import ScriptedModel
from sundry.context import render
from sundry.tickets.models import Turn
from sundry.tooling.messages import ModelRequest, ModelResponse, ToolCall
from sundry.tooling.tools import REGISTRY
from tests.agent import recorded
from tests.agent.claimcase import customer_reads, open_case, reply_via

REPLY = REGISTRY["reply_to_customer"]
ORDER = "SU-41001"
KNOWN = frozenset(replycheck.known_identifiers([f"order {ORDER} verified, item itm_4k2m9q7x"]))

# --- the grammar of a measure ----------------------------------------------------------------------------------

# Where a reply puts a measure: mid-sentence, first, in brackets, quoted, in a list, beside the order.
FRAMES = [
    "The lamp has a {m} battery.",
    "{m} warranty is included with every lamp.",
    "It comes with a return window ({m}) from delivery.",
    'The "{m}" option is in stock.',
    "Here is what you get:\n- a {m} set\n- the charger",
    f"Your order {ORDER} is the {{m}} model.",
]
NUMBERS = ["1", "3", "12", "20", "34", "500"]
WORDS = [
    "hour",
    "day",
    "week",
    "month",
    "year",
    "minute",
    "inch",
    "foot",
    "mile",
    "pound",
    "gallon",
    "watt",
    "piece",
    "pack",
    "count",
    "star",
    "speed",
    "person",
]
# How the word is written after the number: plain, plural, capitalised (a product's name), with a word after.
FORMS = [
    lambda n, w: f"{n}-{w}",
    lambda n, w: f"{n}-{w}{'es' if w.endswith('ch') else 's'}",
    lambda n, w: f"{n}-{w.capitalize()}",
    lambda n, w: f"{n}-{w}-long",
]
# Ranges, ordinals, "2-in-1", a thousands separator, and the four the recorded replies were refused for.
OTHERS = ["3-to-5-day", "5-7-day", "2-or-3-hour", "2nd-day", "2-in-1", "1,000-count", "2-year-old", "30-day-return"]
OTHERS += ["500-piece", "20-hour", "34-inch", "24/7", "5-star", "12-month", "2-pack", "3-day"]


def measure_words() -> list[str]:
    return list(dict.fromkeys([f(n, w) for f, n, w in itertools.product(FORMS, NUMBERS, WORDS)] + OTHERS))


MEASURES = measure_words()
MEASURE_TEXTS = [f.format(m=m) for m, f in itertools.product(MEASURES, FRAMES)]

# --- look-alikes that stay identifiers ---------------------------------------------------------------------------

NAMED = ["SO-1042", "SU-26675-RF01", "RF-000123", "ab12-cd34", "1Z-999-AA1", "SU-41002", "TRK-5531209"]
# Measure-shaped, not a measure: capitals, a code after it, a bare letter, a word no list holds, too long a number.
SHAPED = ["20-HOUR", "500-PIECE", "500-piece-A1", "12-monthX", "2-pack9", "3-day-B7", "20-hour9", "48213-B"]
SHAPED += ["1042-SO", "20-abc", "34-inchy", "1234567-day", "5-starz", "7-day2", "2-in-1A", "20-hour-RF01"]


def generated_ids() -> list[str]:
    prefixes, digits, suffixes = ["SO", "SU", "RF", "ORD", "ab"], ["1042", "26675", "000123"], ["", "-RF01", "-B"]
    return [f"{p}-{d}{s}" for p, d, s in itertools.product(prefixes, digits, suffixes)]


IDS = list(dict.fromkeys(NAMED + SHAPED + generated_ids()))
ID_TEXTS = [(i, f.format(m=i)) for i, f in itertools.product(IDS, FRAMES)]
# An identifier beside a measure: only the identifier is invented.
BESIDE = [(i, f"The {m} lamp is on {i}.") for i, m in zip(IDS, itertools.cycle(MEASURES))]


def _refused(text, known=KNOWN):
    verdict = callguards._check_invented(
        GuardInput(tool=REPLY, arguments={}, known=known), SimpleNamespace(message=text)
    )
    return verdict.details["invented"] if verdict is not None else []


def test_the_generated_measures_are_read_as_measures_by_both_readings():
    assert len(MEASURE_TEXTS) > 2000
    tokens = [t for m in MEASURES for t in replycheck.id_tokens(m)]
    refused = [t for t in MEASURE_TEXTS if _refused(t)]
    asked = [t for t in MEASURE_TEXTS[::3] if replycheck.check_reply(t, known=KNOWN).action != replycheck.POST]
    print(
        f"measures: {len(MEASURES)}, in texts: {len(MEASURE_TEXTS)}; read as IDs: {len(tokens)}, refused as tool "
        f"text: {len(refused)}, reply check not posting: {len(asked)}/{len(MEASURE_TEXTS[::3])}"
    )
    assert tokens == [] and refused == [] and asked == [], (tokens[:5], refused[:3], asked[:3])


def test_every_look_alike_identifier_is_still_refused_and_asked_again():
    # The identifier is named (with the shop's order inside "SU-26675-RF01" too), never the measure beside it.
    def named(i, invented):
        return i in invented and not set(invented) - set(replycheck.id_tokens(i))

    wrong = [(i, t, _refused(t)) for i, t in ID_TEXTS + BESIDE if not named(i, _refused(t))]
    asked = [(i, t) for i, t in ID_TEXTS[::2] + BESIDE if not named(i, replycheck.check_reply(t, known=KNOWN).invented)]
    print(f"look-alike identifiers: {len(IDS)}, in texts: {len(ID_TEXTS) + len(BESIDE)}; not refused: {len(wrong)}")
    assert len(ID_TEXTS) > 300 and wrong == [] and asked == [], (wrong[:3], asked[:3])
    assert not any(measures.is_measure(i) for i in IDS)


def test_a_domains_own_id_pattern_wins_over_the_measure_reading(monkeypatch):
    """A domain whose IDs look like measures still has them read: its patterns are read first (`find_ids`)."""
    from sundry.tooling.domain import Domain

    domain = Domain.from_data({"name": "m", "tools": [], "id_patterns": {"batch": r"\b\d{2}-hour\b"}})
    monkeypatch.setattr(replycheck, "find_ids", domain.find_ids)
    assert measures.is_measure("20-hour") and _refused("Your batch is 20-hour.") == ["20-hour"]
    assert _refused("The 3-day batch.") == []


def test_negative_control_with_the_reading_off_the_measures_are_refused(monkeypatch):
    monkeypatch.setattr(measures, "ON", False)
    # Every measure but "24/7" (no letter) is long enough to be read: "3-day" is five characters.
    readable = [m for m in MEASURES if len(replycheck.id_tokens(m)) == 1]
    texts = [f.format(m=m) for m, f in itertools.product(readable, FRAMES)]
    refused = [t for t in texts if _refused(t)]
    asked = [t for t in texts[::3] if "invented_id" in replycheck.check_reply(t, known=KNOWN).reasons]
    print(
        f"with the reading off: measures read as IDs {len(readable)}/{len(MEASURES)}; tool texts refused "
        f"{len(refused)}/{len(texts)}; replies asked again {len(asked)}/{len(texts[::3])}"
    )
    assert set(MEASURES) - set(readable) == {"24/7"}
    assert len(refused) == len(texts) and len(asked) == len(texts[::3])


# --- the recorded replies --------------------------------------------------------------------------------------


def _recorded_verdicts():
    """(tool text refused for, reply check reasons) of every recorded agent reply, on what its request showed."""
    from sundry.evals.importers import tau2_results

    out = []
    for path in sorted(recorded.traces().glob("*.json")):
        for ticket in tau2_results(path):
            turns = ticket.turn_data()
            for i, t in enumerate(turns):
                if t.author == "agent" and t.kind == "message" and t.text.strip():
                    request = ModelRequest(model="t", messages=render.turns_to_messages(turns[:i]))
                    known = frozenset(answer.known_identifiers(request))
                    out.append((_refused(t.text, known), replycheck.check_reply(t.text, known=known).reasons))
    return out


def test_the_recorded_replies_before_and_after(monkeypatch):
    after = _recorded_verdicts()
    monkeypatch.setattr(measures, "ON", False)
    before = _recorded_verdicts()
    monkeypatch.undo()

    def counts(verdicts):
        return sum(bool(r) for r, _ in verdicts), sum("invented_id" in reasons for _, reasons in verdicts)

    print(
        f"recorded replies: {len(after)}; tool text refused, reply check asked again: before {counts(before)}, after {counts(after)}"
    )
    print(f"refused before: {[r for r, _ in before if r]}")
    assert len(after) == 882 and counts(after) == (0, 0)
    assert counts(before) == (4, 4) and all(measures.is_measure(t) for r, _ in before for t in r)


# --- through the loop ------------------------------------------------------------------------------------------

SAID = "Your lamp has a 20-hour battery and a 2-year warranty; returns are open for 30-days, and it ships as a 2-pack."


@pytest.fixture
def case(django_user_model):
    return open_case(
        django_user_model, f"How long does the lamp on {ORDER} last?", order=ORDER, subject="Lamp", prices=(4000,)
    )


def _run(case):
    lookup = ModelResponse(tool_calls=[ToolCall(id="g1", name="get_order", arguments={"order_number": ORDER})])
    said = reply_via("reply_to_customer", SAID)
    after = ModelResponse(text=f"I looked at {ORDER}; a colleague will follow up.")
    agent_run(case["ticket"].pk, gateway=Gateway(override=ScriptedModel([lookup, said, said, after])))
    return Turn.objects.filter(ticket=case["ticket"], kind=Turn.Kind.REJECTION, payload__guard="invented_id").count()


@pytest.mark.django_db
def test_through_the_loop_a_message_with_measures_posts(case):
    assert _run(case) == 0 and SAID in customer_reads(case)


@pytest.mark.django_db
def test_negative_control_through_the_loop_with_the_reading_off_it_is_refused(case, monkeypatch):
    monkeypatch.setattr(measures, "ON", False)
    assert _run(case) == 2 and SAID not in customer_reads(case)
