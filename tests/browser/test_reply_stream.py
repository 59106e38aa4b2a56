"""The customer page shows the agent typing, then its reply as it is written, then exactly one stored message.

The class's model is a local OpenAI-compatible server streaming server-sent events (tests/agent/sse.py),
started before the live server and its Celery worker so the worker's gateway talks to it over HTTP.
"""

from __future__ import annotations

import os

import pytest

from sundry.desk.lifecycle import ticket_create
from sundry.tickets.models import Turn
from tests.agent.sse import Streamed, StreamingServer
from tests.browser.test_live_desk import LIVE, LIVE_FRAME, open_as, people  # noqa: F401  (people: fixture)
from tests.factories import TicketClassFactory, paid_order

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

# Provisional text goes out a whole sentence at a time, each checked (agent.provisional).
REPLY = [
    "Thanks for waiting. ",
    "I checked ",
    "order SU-40111. ",
    "It left ",
    "the Leeds hub ",
    "this morning ",
    "and should ",
    "arrive tomorrow.",
]
HELD = ["Good news. ", "Your refund ", "SU-40111-RF01 ", "has been ", "issued today."]
SCRIPT = {"answer": REPLY}


@pytest.fixture(scope="module")
def model_server():
    server = StreamingServer(
        lambda path, body: Streamed(chunks=SCRIPT["answer"], first_delay=1.5, usage=(900, 20)), pause=0.45
    )
    saved = os.environ.get("SUNDRY_OPENAI_COMPAT_BASE_URL")
    os.environ["SUNDRY_OPENAI_COMPAT_BASE_URL"] = server.url + "/v1"  # read by the worker the live server starts
    yield server
    server.close()
    if saved is None:
        os.environ.pop("SUNDRY_OPENAI_COMPAT_BASE_URL", None)
    else:
        os.environ["SUNDRY_OPENAI_COMPAT_BASE_URL"] = saved


@pytest.fixture(scope="module")
def live_server_url(model_server, private_live_server_url):  # a server of its own, started after the model server
    return private_live_server_url


def _ask(browser, live_server_url, people, subject, text):
    tclass = TicketClassFactory(
        name="Streamed",
        slug="streamed",
        approval_rules={},
        working_model="openai-compatible:streamer",
        summariser_model="offline",
    )
    paid_order(customer=people["alice"], number="SU-40111", prices=(4500,))
    ticket = ticket_create(customer=people["alice"].person, ticket_class=tclass, subject=subject)
    page = open_as(browser, live_server_url, people["alice_user"], f"/help/tickets/{ticket.pk}/")
    # Every text the provisional reply shows, kept as it appears: a transient state (one streamed
    # ask before the reply is asked for again) is judged from this record, not by catching it
    # on screen in time on a busy machine.
    page.evaluate("""() => {
        window.__streamSeen = [];
        window.__streamStates = [];
        const note = () => {
            document.querySelectorAll('#reply-stream .stream-text').forEach(
                el => { if (el.textContent) window.__streamSeen.push(el.textContent); });
            const state = document.querySelector('#reply-stream')?.getAttribute('data-state');
            if (state && window.__streamStates.at(-1) !== state) window.__streamStates.push(state);
        };
        new MutationObserver(note).observe(document.body, {subtree: true, childList: true, characterData: true,
                                                           attributes: true, attributeFilter: ['data-state']});
    }""")
    page.fill("#message-text", text)
    page.locator("button", has_text="Send").click()
    return ticket, page


def test_typing_then_the_streamed_text_then_exactly_one_final_message(browser, live_server_url, people, screenshots):
    from playwright.sync_api import expect

    SCRIPT["answer"] = REPLY
    final = "".join(REPLY)
    ticket, page = _ask(browser, live_server_url, people, "Where is it?", "Where is my order SU-40111?")
    stream = page.locator("#reply-stream")
    # The text as it is written: a part of the reply, shown before the whole of it exists anywhere.
    expect(stream).to_have_attribute("data-state", "text", timeout=LIVE)
    expect(stream).to_be_visible()
    # Typing came first, while nothing was written (judged from the record of every state the page
    # showed: on a busy machine the 1.5 s of typing can pass between two looks at the screen).
    states = page.evaluate("window.__streamStates")
    assert "typing" in states and states.index("typing") < states.index("text"), states
    assert not page.evaluate("window.__streamSeen.length && window.__streamSeen[0] === ''")
    expect(stream.locator(".stream-text")).to_contain_text("I checked order SU-40111", timeout=LIVE)
    partial = stream.locator(".stream-text").inner_text()
    assert final.startswith(partial) and partial != final
    assert page.locator("#panel-conversation .turn.agent").count() == 0
    assert not Turn.objects.filter(ticket=ticket, author="agent", kind="message").exists()
    page.screenshot(path=str(screenshots / "reply-stream-partial.png"))
    # Then the stored turn replaces it: one message with the whole reply, and no provisional copy.
    agent = page.locator("#panel-conversation .turn.agent")
    expect(agent).to_have_count(1, timeout=15000)
    expect(agent).to_contain_text(final)
    expect(stream).to_be_hidden(timeout=LIVE)
    page.wait_for_timeout(1000)  # nothing more arrives to double it
    expect(agent).to_have_count(1)
    expect(page.locator("#panel-conversation")).to_contain_text(final)
    assert page.locator(".turn.agent", has_text="arrive tomorrow").count() == 1
    stored = Turn.objects.get(ticket=ticket, author="agent", kind="message")
    assert stored.text == final
    page.reload()
    page.wait_for_selector(LIVE_FRAME, state="attached")
    expect(page.locator(".turn.agent", has_text="arrive tomorrow")).to_have_count(1)


def test_a_held_sentence_is_never_rendered_and_the_shown_sentence_stays_as_the_reply(browser, live_server_url, people):
    """ "Good news." streams (checked); the next sentence names an invented refund reference and would be
    held. The customer keeps what they read: "Good news." becomes the stored message in place, the held
    sentence is never rendered, and it is held for staff."""
    from playwright.sync_api import expect

    SCRIPT["answer"] = HELD
    ticket, page = _ask(browser, live_server_url, people, "Refund?", "Did my refund for SU-40111 go through?")
    stream = page.locator("#reply-stream")
    agent = page.locator("#panel-conversation .turn.agent")
    expect(agent).to_have_count(1, timeout=60000)
    expect(agent).to_contain_text("Good news.")
    expect(stream).to_be_hidden(timeout=LIVE)
    page.wait_for_timeout(1000)  # nothing more arrives to take it back or add to it
    assert agent.count() == 1, (
        agent.all_inner_texts(),
        list(Turn.objects.filter(ticket=ticket).values_list("author", "kind", "text")),
    )
    seen = page.evaluate("() => window.__streamSeen")
    assert seen and all(t == "Good news." for t in seen), seen  # the kept sentence only, never the held one
    assert "SU-40111-RF01" not in page.locator("body").inner_text()
    assert "Your refund" not in page.locator("#panel-conversation").inner_text()
    stored = Turn.objects.get(ticket=ticket, author="agent", kind="message")
    assert stored.text == "Good news."
    held = Turn.objects.get(ticket=ticket, kind="error")
    assert "held for staff" in held.text and held.payload["held_reply"].startswith("Your refund SU-40111-RF01")
    page.reload()
    page.wait_for_selector(LIVE_FRAME, state="attached")
    expect(page.locator("#panel-conversation .turn.agent")).to_have_count(1)
    assert "SU-40111-RF01" not in page.locator("body").inner_text()
