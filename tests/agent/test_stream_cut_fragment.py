"""Words a streamed reply breaks off with markup never show as a sentence of their own.

A real 0.5B model streamed "You should check if you have actually refunded the order by calling the `track_parcel`
function …" (docs/real-model.md, run 18). The stream cut before the backtick, as it cuts before any markup, and
showed what stood before it as the reply's last sentence; the check then held the rest and kept what was shown,
so the customer's page carried "…by calling the" twice. Now the words before a cut show only up to their last
complete sentence. The cases come from a grammar (complete sentences × broken-off words × what breaks them off ×
whether the model has finished); through a real stream and real sockets, the page never shows the fragment.
Negative control: with the fragment shown as before, it shows and is kept as the reply.
"""

from __future__ import annotations

import itertools

from sundry.agent.guards import provisional
from sundry.tickets.models import Turn
from tests.agent.sse import Streamed
from tests.agent.test_gateway import no_internet  # noqa: F401  (fixture)
from tests.agent.test_streaming import _run_watched, _streamed, streaming, watched  # noqa: F401  (fixtures)

ORDER = "SU-20481"
LEADS = ["", f"I checked your order {ORDER}. ", "Thanks for waiting! ", "Sorry for the delay.\n"]
FRAGMENTS = [
    "You should check it by calling the ",
    "You can track it with ",
    "Your order is ",
    "Please confirm the refund through",
    f"The order {ORDER} shows ",
]
OPENERS = ["`track_parcel` function.", '{"name": "get_order"}', "<tool_call>", "[system notice] x", "```json\n{}"]


def cases():
    return list(itertools.product(LEADS, FRAGMENTS, OPENERS, [True, False]))


def test_only_the_complete_sentences_before_a_cut_show():
    wrong = [
        (lead + fragment + opener, final, got)
        for lead, fragment, opener, final in cases()
        if (got := provisional.shown(lead + fragment + opener, known={ORDER}, final=final)) != lead.strip()
    ]
    print(f"broken-off replies: {len(cases())}, showing more than their complete sentences: {len(wrong)}")
    assert not wrong, wrong[:5]


def test_a_reply_that_ends_before_any_markup_still_shows_whole():
    for lead, fragment in itertools.product(LEADS, FRAGMENTS):
        text = lead + fragment.strip()
        assert provisional.shown(text, known={ORDER}, final=True) == text.strip()


def test_negative_control_with_the_fragment_shown_it_shows(monkeypatch):
    monkeypatch.setattr(provisional, "SHOW_CUT_FRAGMENT", True)
    shown = [
        provisional.shown(lead + fragment + opener, known={ORDER}, final=final)
        for lead, fragment, opener, final in cases()
    ]
    broken = sum(s.endswith(fragment.strip()) for s, (_, fragment, _, _) in zip(shown, cases()))
    print(f"with the fragment shown: {broken} of {len(cases())} show it")
    assert broken == len(cases())


# --- through a real stream ------------------------------------------------------------------------------

RUN_18 = [
    "You should check if you have actually ",
    "refunded the order by calling the ",
    "`track_parcel` ",
    "function.",
]


async def test_run_18s_broken_off_words_never_reach_a_screen(watched):  # noqa: F811
    customer, staff = await _run_watched(watched, lambda p, b: Streamed(chunks=RUN_18, usage=(900, 12)))
    for got in (customer, staff):
        assert all("calling the" not in m["text"] for m in _streamed(got))
    said = [t.text async for t in Turn.objects.filter(ticket=watched["ticket"], author="agent", kind="message")]
    assert said and not any("calling the" in t for t in said)


async def test_negative_control_shown_as_before_the_fragment_is_kept_as_the_reply(watched, monkeypatch):  # noqa: F811
    monkeypatch.setattr(provisional, "SHOW_CUT_FRAGMENT", True)
    customer, _staff = await _run_watched(watched, lambda p, b: Streamed(chunks=RUN_18, usage=(900, 12)))
    assert any("calling the" in m["text"] for m in _streamed(customer))
    said = [t.text async for t in Turn.objects.filter(ticket=watched["ticket"], author="agent", kind="message")]
    assert any(t.endswith("calling the") for t in said)
