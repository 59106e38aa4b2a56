"""E-mail notices to customers: only if they asked, once per waiting period, never against a rule
forbidding e-mail, never for what is already on their screen, and never with the case in them.

Replies and cards are made by the real services (a staff reply, a scripted agent run); the task
runs as the worker would run it, after commit (`background` in its deferred mode, drained in the
test). `tests/portal/test_notices_worker.py` sends one through a real Celery worker.
"""

from __future__ import annotations

import pytest
from asgiref.sync import async_to_sync
from django.contrib.auth import get_user_model
from django.core import mail
from django.test import Client

from sundry.agent.loop import agent_run
from sundry.agent.provider.gateway import Gateway
from sundry.agent.provider.scripted import ScriptedModel
from sundry.agent.services import customer_message_post
from sundry.context.models import PinnedRule
from sundry.context.services import rule_decide
from sundry.core import background
from sundry.desk.lifecycle import ticket_create
from sundry.live import presence
from sundry.portal import notices
from sundry.portal.models import NoticePreference, TicketNotice
from sundry.tickets.services import turn_append
from sundry.tooling.messages import ModelResponse, ToolCall
from tests.factories import CustomerFactory, TicketClassFactory, paid_order
from tests.querystages import count_queries

pytestmark = pytest.mark.django_db
HX = {"HTTP_HX_REQUEST": "true"}
CASE_WORDS = ("SU-61111", "48.99", "Lamp arrived broken")  # the order, the amount, the ticket's subject


@pytest.fixture
def desk(settings):
    settings.BACKGROUND_MODE = "deferred"  # tasks run after commit, when the test drains them
    settings.PUBLIC_URL = "https://help.example.test"
    users = get_user_model().objects
    alice_user, bob_user = users.create_user("alice"), users.create_user("bob")
    staff = users.create_user("sam", is_staff=True)  # no passwords: logins are forced, hashing is slow
    alice, bob = CustomerFactory(user=alice_user), CustomerFactory(user=bob_user)
    paid_order(customer=alice, number="SU-61111", prices=(4899,))
    ticket = ticket_create(customer=alice.person, ticket_class=TicketClassFactory(), subject="Lamp arrived broken")
    customer_message_post(ticket=ticket, text="My lamp arrived broken.", wake=False)
    clients = {}
    for name, user in (("alice", alice_user), ("bob", bob_user), ("staff", staff)):
        clients[name] = Client()
        clients[name].force_login(user)
    return {"ticket": ticket, "alice": alice, "bob": bob, "c": clients, "staff": staff}


def opt_in(desk, who="alice"):
    r = desk["c"][who].post("/help/notices", {"email": "on"})
    assert r.status_code == 302 and "notices=on" in r["Location"]


def after_commit(capture, action):
    """Run `action` as a request or step would: its after-commit work runs, then the queued tasks."""
    with capture(execute=True):
        action()
    background.wait_idle()


def staff_reply(desk, capture, text="Your refund of 48.99 USD for order SU-61111 is on its way."):
    after_commit(capture, lambda: turn_append(ticket=desk["ticket"], author="staff", text=text, payload={"by": "sam"}))


def test_an_opted_in_customer_is_told_of_a_reply_once_in_neutral_words(desk, django_capture_on_commit_callbacks):
    opt_in(desk)
    staff_reply(desk, django_capture_on_commit_callbacks)
    assert len(mail.outbox) == 1
    sent = mail.outbox[0]
    assert sent.to == [desk["alice"].email] and sent.subject == notices.SUBJECTS[notices.REPLY]
    assert f"https://help.example.test/help/tickets/{desk['ticket'].pk}/" in sent.body
    for word in CASE_WORDS:
        assert word not in sent.body and word not in sent.subject, word
    # The same waiting period: a second reply sends nothing more.
    staff_reply(desk, django_capture_on_commit_callbacks, text="One more thing about SU-61111.")
    assert len(mail.outbox) == 1
    # She opens the page: the next reply starts a new waiting period and is e-mailed.
    assert desk["c"]["alice"].get(f"/help/tickets/{desk['ticket'].pk}/").status_code == 200
    staff_reply(desk, django_capture_on_commit_callbacks, text="It has been sent.")
    assert len(mail.outbox) == 2


def test_replying_ends_the_waiting_period_too(desk, django_capture_on_commit_callbacks):
    opt_in(desk)
    staff_reply(desk, django_capture_on_commit_callbacks)
    ticket = desk["ticket"]
    r = desk["c"]["alice"].post(f"/help/tickets/{ticket.pk}/message", {"text": "Thanks, when?"}, **HX)
    assert r.status_code == 200
    staff_reply(desk, django_capture_on_commit_callbacks, text="Tomorrow.")
    assert len(mail.outbox) == 2


def test_a_card_waiting_for_confirmation_is_e_mailed_without_its_order_or_amount(
    desk, django_capture_on_commit_callbacks
):
    opt_in(desk)
    ticket, alice = desk["ticket"], desk["alice"]

    def call(name, _id, **arguments):
        return ModelResponse(tool_calls=[ToolCall(id=_id, name=name, arguments=arguments)])

    after_commit(
        django_capture_on_commit_callbacks,
        lambda: agent_run(
            ticket.pk,
            gateway=Gateway(
                override=ScriptedModel(
                    [
                        call("search_orders", "s1", customer_id=alice.customer_id),
                        call("get_order", "g1", order_number="SU-61111"),
                        call(
                            "issue_refund",
                            "r1",
                            order_number="SU-61111",
                            amount="48.99",
                            currency="USD",
                            reason="damaged",
                        ),
                        ModelResponse(text="Please check the card for SU-61111."),
                    ]
                )
            ),
        ),
    )
    assert ticket.confirmations.filter(status="pending").count() == 1  # the card is there
    assert len(mail.outbox) == 1  # the card and the reply beside it: one waiting period
    sent = mail.outbox[0]
    assert sent.subject == notices.SUBJECTS[notices.CARD] and notices.LEADS[notices.CARD] in sent.body
    for word in CASE_WORDS + ("refund", "Refund"):
        assert word not in sent.body and word not in sent.subject, word


@pytest.mark.parametrize("chose", [True, False], ids=["opted in", "not opted in"])
def test_an_agent_reply_reads_the_choice_with_the_runs_load(desk, django_capture_on_commit_callbacks, chose):
    """The run reads the customer's choice with its one load of the ticket (`loop.LOAD_ALSO`):
    its reply queues the notice, or not, with no read of the preference of its own.
    Negative control: without the registration (`signals.connect`) the reply reads it apart."""
    if chose:
        opt_in(desk)
    ticket = desk["ticket"]
    with count_queries() as counted, django_capture_on_commit_callbacks(execute=True):
        agent_run(ticket.pk, gateway=Gateway(override=ScriptedModel([ModelResponse(text="On it.")])))
    background.wait_idle()  # the task, which reads the choice afresh before it sends
    assert len(mail.outbox) == (1 if chose else 0)
    reading = [sql for _, sql in counted.statements if "portal_noticepreference" in sql]
    # The run's load, sent with its claim (`claims.claim_and_read`), nothing else.
    assert len(reading) == 1 and reading[0].startswith("UPDATE") and "agent_claimed_by" in reading[0], counted.report()


def test_no_e_mail_for_a_customer_who_did_not_opt_in(desk, django_capture_on_commit_callbacks):
    opt_in(desk, "bob")  # another customer's choice is not hers
    staff_reply(desk, django_capture_on_commit_callbacks)
    assert mail.outbox == []
    assert notices.notify(desk["ticket"].pk) == notices.NOT_OPTED_IN
    # Opted in, then out again: still nothing.
    opt_in(desk)
    assert desk["c"]["alice"].post("/help/notices", {"email": "off"}).status_code == 302
    staff_reply(desk, django_capture_on_commit_callbacks, text="Another.")
    assert mail.outbox == []


def test_a_rule_forbidding_e_mail_stops_the_notice(desk, django_capture_on_commit_callbacks):
    opt_in(desk)
    ticket = desk["ticket"]
    customer_message_post(ticket=ticket, text="Phone only, never email me.", wake=False)
    rule = PinnedRule.objects.get(ticket=ticket)
    assert rule.enforcement.get("block_tools")  # the structured check the notifier reads
    rule_decide(ticket=ticket, rule_id=rule.pk, decision="confirm", user=desk["staff"], turn=3)
    staff_reply(desk, django_capture_on_commit_callbacks)
    assert mail.outbox == []
    assert notices.notify(ticket.pk) == notices.FORBIDDEN
    # Control: staff dismiss the rule, and the same reply would be e-mailed.
    rule_decide(ticket=ticket, rule_id=rule.pk, decision="dismiss", user=desk["staff"], turn=4)
    assert notices.notify(ticket.pk) == notices.SENT and len(mail.outbox) == 1


def test_a_customer_wide_rule_from_another_ticket_and_an_unconfirmed_one_both_hold(desk):
    opt_in(desk)
    ticket, alice = desk["ticket"], desk["alice"]
    turn_append(ticket=ticket, author="staff", text="Checked.", payload={"by": "sam"})
    other = ticket_create(customer=alice.person, ticket_class=ticket.ticket_class, subject="Earlier")
    PinnedRule.objects.create(
        ticket=other,
        text="Do not e-mail me, ever.",
        turn=1,
        source="customer",
        scope=PinnedRule.Scope.CUSTOMER,
        status=PinnedRule.Status.ACTIVE,
    )
    assert notices.notify(ticket.pk) == notices.FORBIDDEN
    PinnedRule.objects.filter(ticket=other).update(scope=PinnedRule.Scope.TICKET)  # that ticket's alone
    assert notices.email_forbidden(ticket) is False
    PinnedRule.objects.create(
        ticket=ticket, text="no emails please", turn=2, source="customer", status=PinnedRule.Status.CANDIDATE
    )  # no stored check: read by the classifier
    assert notices.email_forbidden(ticket) is True
    assert mail.outbox == []


def test_nothing_is_sent_for_a_reply_on_the_open_page(desk, django_capture_on_commit_callbacks):
    opt_in(desk)
    ticket = desk["ticket"]
    watcher = presence.Mark(desk["alice"].user_id, "alice", "socket-1")
    async_to_sync(presence.mark)(ticket.pk, presence.CUSTOMER_VIEWING, watcher)
    try:
        staff_reply(desk, django_capture_on_commit_callbacks)
        assert mail.outbox == []
        assert TicketNotice.objects.get(ticket=ticket).seen_at is not None
    finally:
        async_to_sync(presence.unmark)(ticket.pk, presence.CUSTOMER_VIEWING, watcher)
    # She closed the page: the next reply is news.
    staff_reply(desk, django_capture_on_commit_callbacks, text="Another.")
    assert len(mail.outbox) == 1


def test_nothing_waits_once_the_customer_wrote_last(desk):
    opt_in(desk)
    assert notices.notify(desk["ticket"].pk) == notices.NOTHING_WAITING  # only her own message so far
    assert mail.outbox == []


def test_the_setting_is_the_customers_own_and_refuses_bad_input(desk):
    c = desk["c"]
    home = c["alice"].get("/help/").content.decode()
    assert "E-mail notices are off" in home and 'value="on"' in home  # off by default
    assert not NoticePreference.objects.exists()
    for bad in ({"email": "yes"}, {"email": ""}, {}, {"email": ["off", "maybe"]}):
        r = c["alice"].post("/help/notices", bad)
        assert r.status_code == 302 and "error=" in r["Location"], bad
        r = c["alice"].post("/help/notices", bad, **HX)
        assert r.status_code == 422 and "Choose on or off" in r.content.decode()
    assert c["alice"].post("/help/notices", {"email": "on\x00"}).status_code == 400  # refused before the view
    assert not NoticePreference.objects.exists()
    assert c["alice"].get("/help/notices").status_code == 405
    assert c["staff"].post("/help/notices", {"email": "on"}).status_code == 403  # staff are no customer
    anonymous = Client().post("/help/notices", {"email": "on"})
    assert anonymous.status_code == 302 and "/login" in anonymous["Location"]
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(desk["alice"].user)
    assert strict.post("/help/notices", {"email": "on"}).status_code == 403
    assert not NoticePreference.objects.exists()
    opt_in(desk, "bob")
    assert list(NoticePreference.objects.values_list("customer", "email")) == [(desk["bob"].person.pk, True)]
    assert "E-mail notices are off" in c["alice"].get("/help/").content.decode()  # Bob's choice is his
