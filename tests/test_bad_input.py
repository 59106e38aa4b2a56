"""Bad input over every form, query parameter and websocket frame: never a 500, never half-written.

Generated from tables: every endpoint of sundry/*/urls.py (and the admin's class form and
change lists) with its fields and a good value for each, crossed with a table of bad values
(NUL bytes, huge strings, 290-digit numbers, non-ASCII digits, NaN and Infinity, wrong types,
JSON where text is expected …; number fields get every way a number can be wrong); then per endpoint unknown and other customers' IDs in the URL,
undecodable and oversized bodies, a missing CSRF token and no session. The websocket table
sends each frame type the page sends with bad values, and frames no page sends (malformed,
10,000 deep, oversized, binary).

Judged on PostgreSQL through Django's test client and Channels' communicator:
- no response is 5xx (a 503 here is a database error in disguise, so it counts);
- a refused input answers 4xx with words (or, for a plain form post, a redirect that
  carries the error), and leaves every watched table's row count and the ticket rows as
  they were;
- a websocket never raises; a frame no page sends closes the socket with 1007/1009 and
  a reason.
Each test prints its counts; `test_the_suite_is_at_least_500_inputs` holds the total.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from datetime import timedelta

import pytest
from channels.testing import WebsocketCommunicator
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import connection, transaction
from django.test import Client
from django.utils import timezone

from sundry.agent.guards import cards
from sundry.agent.models import AgentStep, Confirmation, HeldAction
from sundry.agent.services import customer_message_post
from sundry.asgi import application
from sundry.attachments.models import Attachment
from sundry.context import services as lanes
from sundry.context.models import ActionTaken, LedgerEntry, MoneyTotal, PinnedRule, StateValue
from sundry.context.statefields import fields
from sundry.desk.lifecycle import ticket_create, ticket_set_status
from sundry.live import limits
from sundry.portal.models import NoticePreference, TicketNotice
from sundry.shop.models import Cancellation, Contact, Refund, Return
from sundry.tickets.models import Rating, Tag, Ticket, TicketClass, Turn
from sundry.tickets.services import turn_append
from tests.attachments import samples
from tests.factories import CustomerFactory, TicketClassFactory, paid_order

# One worker runs this module in order (pytest-xdist --dist loadgroup): the last test sums the others.
pytestmark = [pytest.mark.django_db, pytest.mark.xdist_group("bad_input")]
HX = {"HTTP_HX_REQUEST": "true"}
TOTALS: Counter = Counter()

# --- the bad values ------------------------------------------------------------------------------

HUGE = "x" * 100_000
# For every field: what no form sends.
TEXT_BAD = [
    "a\x00b",
    HUGE,
    "",
    " ",
    "\t\r\n",
    "9" * 290,
    "²",
    "NaN",
    "{}",
    "[]",
    '{"a":' * 50,
    "<script>alert(1)</script>",
    "' OR 1=1 --",
    "\u202egnp.exe",
    "😀" * 50,
    "\ufeff",
]
# For fields that carry a number or an ID, the ways a number can be wrong as well.
NUMBER_BAD = TEXT_BAD[:3] + [
    "9" * 290,
    "-" + "9" * 290,
    "0." + "9" * 290,
    "9" * 20,
    "²",
    "١٢٣",
    "１２３",
    "𝟗",
    "Ⅻ",
    "-1",
    "-0",
    "0",
    "NaN",
    "Infinity",
    "-Infinity",
    "1e309",
    "0x1F",
    "7.5",
    " 7 ",
    "null",
    "true",
    "[]",
]
NUMBER_FIELDS = {
    "page",
    "p",
    "o",
    "value_id",
    "version",
    "token_budget",
    "trigger_fraction",
    "recent_turns_kept",
    "ledger_share",
    "pinned_rules_cap",
    "approval_window_hours",
    "first_response_minutes",
    "next_response_minutes",
    "class",
    "budget",
    "trigger",
    "kept",
    "ledger",
    "tickets",
}


def bad_values(endpoint, name: str) -> list[str]:
    numeric = name in NUMBER_FIELDS or (
        name == "value"
        and endpoint.name in ("ticket assignee", "state amount", "state delivery_date", "state order_number")
    )
    return NUMBER_BAD if numeric else TEXT_BAD


# Raw bodies no form produces.
RAW_BODIES = [
    ("application/x-www-form-urlencoded", b"text=%ff%fe&value=%ED%A0%80&q=%C0%AF"),
    ("application/x-www-form-urlencoded", b"=&&=&%%%=%"),
    ("application/x-www-form-urlencoded", b"&".join(b"f%d=1" % i for i in range(1500))),  # too many fields
    ("application/x-www-form-urlencoded", b"text=" + b"x" * (3 * 1024 * 1024)),  # past the upload limit
    ("multipart/form-data; boundary=zz", b'--zz\r\nContent-Disposition: form-data; name="text"\r\n\r\nhi'),
    ("multipart/form-data", b"no boundary"),
    ("application/json", b'{"text": "hi", "value": NaN}'),
    ("text/plain", b"\x00\xff\xfe"),
]


@dataclass(frozen=True)
class Endpoint:
    name: str
    method: str
    path: str  # {ticket} {held} {rule} {run} {klass} are filled from the world
    who: str  # staff, admin, customer, anon
    fields: dict = field(default_factory=dict)  # good values; {order}, {value_id} … are filled too
    htmx: bool = True
    ids: tuple[str, ...] = ()  # path parts that take an ID, tried with unknown and foreign ones
    admin_form: bool = False  # the admin answers a refused form with the form and its errors (200)
    fuzz: tuple[str, ...] = ()  # the fields given bad values (default: all); the rest keep good ones


ENDPOINTS = [
    Endpoint(
        "desk queue",
        "GET",
        "/desk/",
        "staff",
        {"status": "open", "ticket_class": "", "needs": "", "view": "all", "sort": "updated", "page": "1"},
        htmx=False,
    ),
    Endpoint("desk queue (htmx)", "GET", "/desk/", "staff", {"view": "mine", "page": "2"}),
    Endpoint("desk search", "GET", "/desk/search/", "staff", {"q": "kettle"}, htmx=False),
    Endpoint("desk figures", "GET", "/desk/figures/", "admin", {"class": "1"}, htmx=False),
    Endpoint(
        "budget lab",
        "GET",
        "/desk/figures/lab/{klass}/",
        "admin",
        {
            "budget": "6000",
            "trigger": "0.8",
            "kept": "8",
            "ledger": "0.3",
            "tickets": "50",
            "price_as": "openai:gpt-4.1-mini",
        },
        htmx=False,
    ),
    Endpoint("desk ticket", "GET", "/desk/tickets/{ticket}/", "staff", {"error": "x"}, htmx=False, ids=("ticket",)),
    Endpoint(
        "ticket status",
        "POST",
        "/desk/tickets/{ticket}/update",
        "staff",
        {"field": "status", "value": "open"},
        ids=("ticket",),
    ),
    Endpoint(
        "ticket priority", "POST", "/desk/tickets/{ticket}/update", "staff", {"field": "priority", "value": "high"}
    ),
    Endpoint("ticket tags", "POST", "/desk/tickets/{ticket}/update", "staff", {"field": "tags", "value": "vip"}),
    Endpoint("ticket assignee", "POST", "/desk/tickets/{ticket}/update", "staff", {"field": "assignee", "value": "me"}),
    Endpoint(
        "staff note",
        "POST",
        "/desk/tickets/{ticket}/post",
        "staff",
        {"action": "note", "text": "Checked the carrier.", "client_key": "k-note"},
        ids=("ticket",),
    ),
    Endpoint(
        "staff reply",
        "POST",
        "/desk/tickets/{ticket}/post",
        "staff",
        {"action": "reply", "text": "On its way.", "client_key": "k-reply"},
    ),
    Endpoint(
        "attention clear", "POST", "/desk/tickets/{ticket}/attention/clear", "staff", {"shown": "x"}, ids=("ticket",)
    ),
    Endpoint(
        "held decision",
        "POST",
        "/desk/tickets/{ticket}/held/{held}",
        "staff",
        {"decision": "reject"},
        ids=("ticket", "held"),
    ),
    *[
        Endpoint(
            f"state {name}",
            "POST",
            "/desk/tickets/{ticket}/state",
            "staff",
            {"name": name, "action": "correct", "value": "{good_" + name + "}", "value_id": "{value_id}"},
            ids=("ticket",) if name == "order_number" else (),
            # Each field's value; the other fields of the form once, on the first.
            fuzz=() if name == "order_number" else ("value",),
        )
        for name in fields()
    ],
    Endpoint(
        "state confirm",
        "POST",
        "/desk/tickets/{ticket}/state",
        "staff",
        {"name": "order_number", "action": "confirm", "value_id": "{value_id}"},
    ),
    Endpoint(
        "rule decision",
        "POST",
        "/desk/tickets/{ticket}/rules/{rule}",
        "staff",
        {"decision": "scope", "version": "{rule_version}", "scope": "ticket", "scope_ref": ""},
        ids=("ticket", "rule"),
    ),
    Endpoint(
        "ledger rename",
        "POST",
        "/desk/tickets/{ticket}/ledger/rename",
        "staff",
        {"value": "{order}", "role": "kettle_order", "version": "{ledger_version}"},
        ids=("ticket",),
    ),
    Endpoint(
        "ledger correct",
        "POST",
        "/desk/tickets/{ticket}/ledger/correct",
        "staff",
        {"value": "{order}", "correct_to": "SU-51112"},
        ids=("ticket",),
    ),
    Endpoint(
        "ledger archived", "GET", "/desk/tickets/{ticket}/ledger/archived", "staff", {"page": "1"}, ids=("ticket",)
    ),
    Endpoint("compaction", "GET", "/desk/tickets/{ticket}/compactions/{run}", "staff", {}, ids=("ticket", "run")),
    Endpoint("help home", "GET", "/help/", "customer", {"error": "x"}, htmx=False),
    Endpoint("e-mail notices", "POST", "/help/notices", "customer", {"email": "on"}, htmx=False),
    Endpoint("new conversation", "POST", "/help/tickets/new", "customer", {"text": "My kettle is broken."}, htmx=False),
    Endpoint("help ticket", "GET", "/help/tickets/{ticket}/", "customer", {"error": "x"}, htmx=False, ids=("ticket",)),
    Endpoint(
        "customer message",
        "POST",
        "/help/tickets/{ticket}/message",
        "customer",
        {"text": "Any news?", "client_key": "k-msg"},
        ids=("ticket",),
    ),
    Endpoint(
        "order pick", "POST", "/help/tickets/{ticket}/order", "customer", {"order_number": "{order}"}, ids=("ticket",)
    ),
    Endpoint(
        "card decision",
        "POST",
        "/help/tickets/{ticket}/cards/{card}",
        "customer",
        {"decision": "decline", "digest": "{card_digest}"},
        ids=("ticket", "card"),
    ),
    Endpoint(
        "instruction withdraw",
        "POST",
        "/help/tickets/{ticket}/instructions/{rule}/withdraw",
        "customer",
        {},
        ids=("ticket", "rule"),
    ),
    Endpoint(
        "desk card decision",
        "POST",
        "/desk/tickets/{ticket}/cards/{card}",
        "staff",
        {"decision": "confirm", "digest": "{card_digest}", "reason": "Confirmed on the phone"},
        ids=("ticket", "card"),
        fuzz=("decision", "digest", "reason"),
    ),
    Endpoint(
        "internal note",
        "POST",
        "/desk/tickets/{ticket}/post",
        "staff",
        {"action": "internal", "text": "Checked with the carrier."},
    ),
    Endpoint(
        "rating",
        "POST",
        "/help/tickets/{resolved}/rating",
        "customer",
        {"score": "4", "comment": "Quick and kind."},
        ids=("resolved",),
    ),
    Endpoint(
        "detail flag",
        "POST",
        "/help/tickets/{ticket}/flag",
        "customer",
        {"value_id": "{value_id}", "note": "wrong order"},
        ids=("ticket",),
    ),
    *[
        Endpoint(
            f"{who} {variant}",
            "GET",
            f"/{area}/tickets/{{ticket}}/files/{{attachment}}{suffix}",
            who,
            {},
            htmx=False,
            ids=("ticket", "attachment"),
        )
        for who, area in (("customer", "help"), ("staff", "desk"))
        for variant, suffix in (("file", ""), ("thumbnail", "/thumb"))
    ],
    Endpoint(
        "login", "POST", "/login/", "anon", {"username": "nobody", "password": "wrong", "next": "/desk/"}, htmx=False
    ),
    Endpoint("healthz", "GET", "/healthz", "anon", {"probe": "1"}, htmx=False),
    Endpoint(
        "admin class form",
        "POST",
        "/admin/tickets/ticketclass/{klass}/change/",
        "admin",
        {
            "name": "Standard",
            "slug": "standard",
            "description": "",
            "token_budget": "8000",
            "trigger_fraction": "0.8",
            "recent_turns_kept": "8",
            "ledger_share": "0.3",
            "pinned_rules_cap": "600",
            "working_model": "offline",
            "summariser_model": "offline",
            "approval_rules": "{}",
            "approval_window_hours": "24",
            "first_response_minutes": "60",
            "next_response_minutes": "240",
        },
        htmx=False,
        admin_form=True,
        fuzz=("slug", "token_budget", "trigger_fraction", "working_model", "approval_rules", "approval_window_hours"),
    ),
    Endpoint(
        "admin tickets list",
        "GET",
        "/admin/tickets/ticket/",
        "admin",
        {"q": "kettle", "o": "1", "p": "0", "status__exact": "open"},
        htmx=False,
    ),
    Endpoint("admin orders list", "GET", "/admin/shop/order/", "admin", {"q": "SU-1", "o": "2"}, htmx=False),
    Endpoint(
        "admin login",
        "POST",
        "/admin/login/",
        "anon",
        {"username": "nobody", "password": "wrong", "next": "/admin/"},
        htmx=False,
    ),
]

WATCHED = [
    Turn,
    Ticket,
    Tag,
    Ticket.tags.through,
    StateValue,
    PinnedRule,
    LedgerEntry,
    HeldAction,
    ActionTaken,
    MoneyTotal,
    AgentStep,
    Refund,
    Cancellation,
    Contact,
    Return,
    TicketClass,
    Confirmation,
    NoticePreference,
    TicketNotice,
    Rating,
]
WATCHED += [Attachment]  # files on a message (sundry/attachments)


def snapshot() -> tuple:
    """Row counts of every watched table, and what the ticket and class rows hold."""
    counts = ", ".join(f'(SELECT count(*) FROM "{m._meta.db_table}")' for m in WATCHED)
    with connection.cursor() as cur:
        cur.execute(f"SELECT {counts}")
        rows = cur.fetchone()
    tickets = tuple(
        Ticket.objects.order_by("pk").values_list(
            "status", "priority", "handler", "assigned_to_id", "attention", "version"
        )
    )
    classes = tuple(
        TicketClass.objects.order_by("pk").values_list(
            "token_budget", "trigger_fraction", "approval_rules", "approval_window_hours"
        )
    )
    held = tuple(HeldAction.objects.order_by("pk").values_list("status", flat=True))
    cards = tuple(Confirmation.objects.order_by("pk").values_list("status", flat=True))
    return rows, tickets, classes, held, cards


# --- the world --------------------------------------------------------------------------------------


@pytest.fixture(autouse=True)
def _fast_passwords(settings):
    # Each failed login hashes a password (for unknown users too); the default hasher's
    # iterations are the point in production and a minute of CPU here.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def world(settings, tmp_path):
    # Attachments go to this test's folder, not var/.
    settings.STORAGES = {
        **settings.STORAGES,
        "attachments": {
            "BACKEND": "django.core.files.storage.FileSystemStorage",
            "OPTIONS": {"location": str(tmp_path / "files")},
        },
    }
    users = get_user_model().objects
    staff = users.create_user("sam", password="x-staff-pw", is_staff=True)
    admin = users.create_superuser("ada", password="x-admin-pw")
    alice_user, bob_user = users.create_user("alice", password="x-alice-pw"), users.create_user("bob", password="x-bob")
    alice, bob = CustomerFactory(user=alice_user), CustomerFactory(user=bob_user)
    order = paid_order(customer=alice, number="SU-41234")
    tclass = TicketClassFactory(slug="standard", name="Standard")
    ticket = ticket_create(customer=alice.person, ticket_class=tclass, subject="Broken kettle")
    turn_append(ticket=ticket, author="customer", text="My kettle arrived broken, order SU-41234")
    lanes.ledger_record_system_id(ticket=ticket, kind="order", value=order.number, role="order", turn=1)
    value = lanes.state_set(
        ticket=ticket, name="order_number", value=order.number, turn=1, source="customer", confirmed=True
    )
    rule = PinnedRule.objects.create(
        ticket=ticket,
        text="Phone only, never email",
        turn=1,
        scope="ticket",
        source="customer",
        status=PinnedRule.Status.CANDIDATE,
    )
    held = HeldAction.objects.create(
        ticket=ticket,
        tool="issue_refund",
        call_id="c1",
        reason="held",
        turn=1,
        idempotency_key="bad-input-held",
        arguments={"order_number": order.number, "amount": "10.00", "currency": "USD", "reason": "broken"},
    )
    # A resolved one, for the rating.
    done = ticket_create(customer=alice.person, ticket_class=tclass, subject="Kettle replaced")
    ticket_set_status(ticket=done, status="resolved", user=staff)
    # Bob's ticket, with its own hold and rule: IDs another customer (or ticket) must not reach.
    theirs = ticket_create(customer=bob.person, ticket_class=tclass, subject="Bob's")
    their_rule = PinnedRule.objects.create(
        ticket=theirs, text="Email only", turn=1, scope="ticket", source="customer", status=PinnedRule.Status.CANDIDATE
    )
    their_held = HeldAction.objects.create(
        ticket=theirs,
        tool="cancel_order",
        call_id="c9",
        reason="held",
        turn=1,
        idempotency_key="bad-input-their-held",
        arguments={},
    )
    entry = LedgerEntry.objects.get(ticket=ticket, value=order.number)
    card_args = {"order_number": order.number, "amount": "10.00", "currency": "USD", "reason": "broken"}
    card = Confirmation.objects.create(
        ticket=ticket,
        tool="issue_refund",
        arguments=card_args,
        call_id="c2",
        turn=1,
        digest=cards.digest("issue_refund", card_args),
        card={"title": "Refund 10.00 USD on order " + order.number},
        expires_at=timezone.now() + timedelta(hours=1),
    )
    their_card = Confirmation.objects.create(
        ticket=theirs,
        tool="cancel_order",
        arguments={},
        call_id="c8",
        turn=1,
        digest=cards.digest("cancel_order", {}),
        card={"title": "Cancel"},
        expires_at=timezone.now() + timedelta(hours=1),
    )
    # A photo on each customer's conversation: the file URLs' own and foreign IDs.
    mine_file, their_file = (
        Attachment.objects.get(
            turn=customer_message_post(
                ticket=t,
                text="Photo of the damage.",
                wake=False,
                uploads=[SimpleUploadedFile("box.png", samples.png(), content_type="image/png")],
            )
        )
        for t in (ticket, theirs)
    )
    fill = {
        "ticket": ticket.pk,
        "held": held.pk,
        "rule": rule.pk,
        "run": 1,
        "klass": tclass.pk,
        "order": order.number,
        "card": card.pk,
        "card_digest": card.digest,
        "resolved": done.pk,
        "value_id": value.pk,
        "rule_version": rule.version,
        "ledger_version": entry.version,
        "good_order_number": order.number,
        "good_issue": "Kettle broken",
        "good_item": "Kettle",
        "good_amount": "10.00 USD",
        "good_refund_method": "store_credit",
        "good_contact_preference": "phone",
        "good_resolution": "refund",
        "good_delivery_date": "2026-11-30",
        "good_internal_note": "checked",
    }
    foreign = {
        "ticket": theirs.pk,
        "resolved": theirs.pk,
        "held": their_held.pk,
        "rule": their_rule.pk,
        "run": 1,
        "card": their_card.pk,
    }
    fill["attachment"], foreign["attachment"] = mine_file.pk, their_file.pk
    clients = {}
    for who, user in (("staff", staff), ("admin", admin), ("customer", alice_user)):
        clients[who] = Client(raise_request_exception=False)
        clients[who].force_login(user)
    clients["anon"] = Client(raise_request_exception=False)
    return {
        "fill": fill,
        "foreign": foreign,
        "clients": clients,
        "users": {"staff": staff, "admin": admin, "customer": alice_user},
    }


# --- one input -------------------------------------------------------------------------------------


@dataclass
class Tally:
    name: str
    tried: int = 0
    refused: int = 0
    failures: list = field(default_factory=list)

    def report(self):
        TOTALS["inputs"] += self.tried
        TOTALS["refused"] += self.refused
        print(f"{self.name}: {self.tried} inputs, {self.refused} refused, {len(self.failures)} failures")
        assert not self.failures, "\n".join(self.failures[:20])


def _refused(endpoint: Endpoint, response) -> bool:
    if 400 <= response.status_code < 500:
        return True
    if response.status_code == 302 and "error=" in response.get("Location", ""):
        return True
    return endpoint.admin_form and response.status_code == 200 and b"errornote" in response.content


def _has_words(response) -> bool:
    if response.status_code == 302:
        return True
    body = response.content.decode("utf-8", "replace")
    return len(" ".join(body.split())) >= 10


def attempt(tally: Tally, endpoint: Endpoint, client: Client, label: str, send):
    """One input in a savepoint, rolled back afterwards so every input meets the same world; the response."""
    tally.tried += 1
    with transaction.atomic():
        before = snapshot()
        response = send(client)
        status = response.status_code
        if status >= 500:
            tally.failures.append(f"{endpoint.name} {label}: {status}")
            transaction.set_rollback(True)
            return response
        if _refused(endpoint, response):
            tally.refused += 1
            if not _has_words(response):
                tally.failures.append(f"{endpoint.name} {label}: {status} without a message")
            after = snapshot()
            if after != before:
                tally.failures.append(
                    f"{endpoint.name} {label}: refused ({status}) but wrote something: {_difference(before, after)}"
                )
        transaction.set_rollback(True)
    return response


def _difference(before, after) -> str:
    names = [m._meta.db_table for m in WATCHED]
    rows = [f"{n} {a}→{b}" for n, a, b in zip(names, before[0], after[0]) if a != b]
    return ", ".join(rows) or "row values changed: " + repr([x != y for x, y in zip(before[1:], after[1:])])


def _fill(text: str, fill: dict) -> str:
    for key, value in fill.items():
        text = text.replace("{" + key + "}", str(value))
    return text


def _request(endpoint: Endpoint, path: str, data: dict | None):
    extra = HX if endpoint.htmx else {}

    def send(client):
        if endpoint.method == "GET":
            return client.get(path, data or {}, **extra)
        return client.post(path, data or {}, **extra)

    return send


# --- HTTP: fields × bad values ---------------------------------------------------------------------


@pytest.mark.parametrize("endpoint", ENDPOINTS, ids=[e.name for e in ENDPOINTS])
def test_every_field_refuses_bad_values_without_a_500_or_a_half_write(world, endpoint):
    tally = Tally(endpoint.name)
    fill = world["fill"]
    client = world["clients"][endpoint.who]
    path = _fill(endpoint.path, fill)
    good = {k: _fill(v, fill) for k, v in endpoint.fields.items()}
    attempt(tally, endpoint, client, "good values", _request(endpoint, path, good))
    for name in endpoint.fuzz or good:
        for value in bad_values(endpoint, name):
            attempt(tally, endpoint, client, f"{name}={value[:20]!r}", _request(endpoint, path, {**good, name: value}))
        attempt(
            tally,
            endpoint,
            client,
            f"{name} missing",
            _request(endpoint, path, {k: v for k, v in good.items() if k != name}),
        )
        attempt(tally, endpoint, client, f"{name} twice", _request(endpoint, path, {**good, name: [good[name], "²"]}))
    attempt(tally, endpoint, client, "unknown field", _request(endpoint, path, {**good, "\u00e9\x7f": "1"}))
    tally.report()


# --- HTTP: IDs, bodies, CSRF, sessions -------------------------------------------------------------


@pytest.mark.parametrize("endpoint", ENDPOINTS, ids=[e.name for e in ENDPOINTS])
def test_ids_bodies_csrf_and_sessions(world, endpoint):
    tally = Tally(endpoint.name + " (ids, bodies, csrf)")
    fill = world["fill"]
    client = world["clients"][endpoint.who]
    good = {k: _fill(v, fill) for k, v in endpoint.fields.items()}
    path = _fill(endpoint.path, fill)
    for part in endpoint.ids:
        for label, value in (
            ("unknown", 987654),
            ("zero", 0),
            ("huge", 10**20),
            ("another customer's", world["foreign"][part]),
        ):
            bad_path = _fill(endpoint.path, {**fill, part: value})
            response = attempt(tally, endpoint, client, f"{part} {label}", _request(endpoint, bad_path, good))
            # Refused, not merely answered: no one reaches an object that is not theirs, or none.
            # (Staff work every customer's tickets: another customer's ticket is theirs to open.)
            staff_may = endpoint.who in ("staff", "admin") and part == "ticket" and label == "another customer's"
            if response.status_code not in (403, 404) and not staff_may:
                tally.failures.append(f"{endpoint.name} {part} {label}: {response.status_code}, not 403/404")
    if endpoint.method == "POST":
        for content_type, body in RAW_BODIES:

            def send(c, content_type=content_type, body=body):
                return c.generic("POST", path, body, content_type=content_type, **(HX if endpoint.htmx else {}))

            attempt(tally, endpoint, client, f"raw {content_type[:20]} {body[:16]!r}", send)
        if endpoint.who != "anon":
            strict = Client(enforce_csrf_checks=True, raise_request_exception=False)
            strict.force_login(world["users"][endpoint.who])
            if attempt(tally, endpoint, strict, "no CSRF token", _request(endpoint, path, good)).status_code != 403:
                tally.failures.append(f"{endpoint.name}: a post without a CSRF token was not 403")
    if endpoint.who != "anon":
        response = attempt(
            tally, endpoint, Client(raise_request_exception=False), "no session", _request(endpoint, path, good)
        )
        if not _refused(endpoint, response) and response.status_code != 302:
            tally.failures.append(f"{endpoint.name}: answered {response.status_code} without a session")
        other = {"staff": "customer", "admin": "customer", "customer": "staff"}[endpoint.who]
        response = attempt(tally, endpoint, world["clients"][other], f"as {other}", _request(endpoint, path, good))
        if endpoint.who != "admin" and response.status_code not in (302, 403, 404):
            tally.failures.append(f"{endpoint.name}: answered {response.status_code} to a {other}")
    tally.report()


# --- HTTP: files on a message ----------------------------------------------------------------------

BAD_FILES = [
    ("HTML named .jpg", "damage.jpg", samples.HTML, "image/jpeg"),
    ("PNG magic, then HTML", "damage.png", samples.png_magic_then_html(), "image/png"),
    ("decompression bomb", "bomb.png", samples.png_bomb(), "image/png"),
    ("truncated JPEG", "cut.jpg", samples.photo_jpeg()[:300], "image/jpeg"),
    ("PDF with a script", "label.pdf", samples.pdf_with_javascript(), "application/pdf"),
    ("empty", "empty.jpg", b"", "image/jpeg"),
    ("over the size limit", "huge.png", samples.png() + b"\0" * (11 * 1024 * 1024), "image/png"),
    ("an executable", "setup.exe.jpg", b"MZ\x90\x00" + b"\0" * 200, "application/octet-stream"),
    ("a name of NULs and markup", "\x00<script>[system notice].jpg", samples.HTML, "image/jpeg"),
]


def _with_files(path: str, fields: dict, files: list, htmx: bool = True):
    def send(client):
        return client.post(path, {**fields, "file": files}, **(HX if htmx else {}))

    return send


@pytest.mark.parametrize("endpoint_name", ["customer message", "staff reply", "staff note"])
def test_bad_files_are_refused_with_words_and_write_nothing(world, endpoint_name):
    endpoint, fill = _endpoint(endpoint_name), world["fill"]
    client = world["clients"][endpoint.who]
    if endpoint.who == "staff":
        Ticket.objects.filter(pk=fill["ticket"]).update(handler="staff", assigned_to=world["users"]["staff"])
    path, good = _fill(endpoint.path, fill), {k: _fill(v, fill) for k, v in endpoint.fields.items()}
    tally = Tally(endpoint_name + " (files)")
    good_png = SimpleUploadedFile("ok.png", samples.png(), content_type="image/png")
    cases = [(label, [SimpleUploadedFile(name, data, content_type=ctype)]) for label, name, data, ctype in BAD_FILES]
    cases.append(
        ("five files", [SimpleUploadedFile(f"{n}.png", samples.png(), content_type="image/png") for n in range(5)])
    )
    cases.append(
        ("one good, one bad", [good_png, SimpleUploadedFile("x.jpg", samples.HTML, content_type="image/jpeg")])
    )
    for label, files in cases:
        response = attempt(tally, endpoint, client, label, _with_files(path, good, files))
        if response.status_code != 422:
            tally.failures.append(f"{endpoint_name} {label}: {response.status_code}, not refused (422)")
    tally.report()


def test_negative_control_a_file_let_through_is_caught(world, monkeypatch):
    from sundry.agent import services

    monkeypatch.setattr(services, "prepare_all", lambda uploads: [])  # no checks: the message goes, file unread
    endpoint, fill = _endpoint("customer message"), world["fill"]
    tally = Tally("control")
    files = [SimpleUploadedFile("damage.jpg", samples.HTML, content_type="image/jpeg")]
    response = attempt(
        tally,
        endpoint,
        world["clients"]["customer"],
        "HTML named .jpg",
        _with_files(_fill(endpoint.path, fill), {"text": "photo"}, files),
    )
    assert response.status_code == 200  # the judge of the files test would name it: not refused (422)


# --- websockets ----------------------------------------------------------------------------------


DEEP = "[" * 10_000 + "]" * 10_000
FRAMES_REFUSED = [
    "",
    " ",
    "null",
    "[]",
    '"resync"',
    "42",
    "{}",
    '{"type": null}',
    '{"type": 5}',
    '{"type": ["resync"]}',
    '{"type": "resync"',
    '{"type": "resync",}',
    "{'type': 'resync'}",
    "resync",
    DEEP,
    '{"a":' * 10_000 + "1" + "}" * 10_000,
    '{"type": "sync", "version": NaN}',
    '{"type": "sync", "version": Infinity}',
    '{"type": "sync", "version": -Infinity}',
    '{"type": "resync", "pad": "' + "x" * 5000 + '"}',
    "x" * 2_000_000,
    '{"type": "sync", "v": [[[[[[1]]]]]]}',
    "\x00",
    '{"type": "resync"}\x00',
]
FRAMES_ANSWERED = [
    '{"type": "resync"}',
    '{"type": "sync", "version": 0}',
    '{"type": "sync"}',
    '{"type": "sync", "version": "x"}',
    '{"type": "sync", "version": 1e309}',
    '{"type": "sync", "version": ' + "9" * 290 + "}",
    '{"type": "sync", "version": -1}',
    '{"type": "sync", "version": [1]}',
    '{"type": "sync", "version": {"a": 1}}',
    '{"type": "sync", "version": "²"}',
    '{"type": "sync", "version": true}',
    '{"type": "unknown"}',
    '{"type": "resync\\u0000"}',
    '{"type": "\u202eresync"}',
    '{"type": "resync", "extra": 1}',
]


def _cookie(client: Client) -> bytes:
    return f"{settings.SESSION_COOKIE_NAME}={client.cookies[settings.SESSION_COOKIE_NAME].value}".encode()


def _socket(path: str, cookie: bytes | None) -> WebsocketCommunicator:
    headers = [(b"origin", b"http://localhost")] + ([(b"cookie", cookie)] if cookie else [])
    return WebsocketCommunicator(application, path, headers=headers)


async def _send_frame(path: str, cookie: bytes, frame: str | bytes) -> tuple[str, object]:
    """('answered' | 'silent' | 'closed', close code or None) after one frame on a fresh socket."""
    socket = _socket(path, cookie)
    connected, _ = await socket.connect()
    assert connected
    await socket.receive_output(timeout=10)  # the snapshot
    # As the server hands a frame over (the communicator's send_to refuses an empty one).
    await socket.send_input(
        {"type": "websocket.receive", **({"bytes": frame} if isinstance(frame, bytes) else {"text": frame})}
    )
    # (receive_output's own timeout would cancel the consumer, so wait for nothing first.)
    if await socket.receive_nothing(timeout=1, interval=0.02):
        await socket.disconnect()
        return "silent", None
    out = await socket.receive_output(timeout=5)
    await socket.disconnect()
    if out["type"] == "websocket.close":
        return "closed", (out.get("code"), out.get("reason", ""))
    return "answered", None


@pytest.mark.django_db(transaction=True)
async def test_websocket_frames_are_parsed_with_depth_and_size_limits(world):
    from channels.db import database_sync_to_async

    fill = world["fill"]
    tally = Tally("websocket frames")
    sockets = {
        "staff": (f"/ws/desk/tickets/{fill['ticket']}/", _cookie(world["clients"]["staff"])),
        "customer": (f"/ws/help/tickets/{fill['ticket']}/", _cookie(world["clients"]["customer"])),
        "attention feed": ("/ws/desk/attention/", _cookie(world["clients"]["staff"])),
    }
    for who, (path, cookie) in sockets.items():
        before = await database_sync_to_async(snapshot)()
        for frame in FRAMES_REFUSED + [b'{"type": "resync"}', b"\x00\xff"]:
            tally.tried += 1
            try:
                outcome, close = await _send_frame(path, cookie, frame)
            except Exception as exc:  # the consumer raised: the socket would have died with 1011
                tally.failures.append(f"{who} {str(frame)[:30]!r}: {type(exc).__name__} {exc}")
                continue
            tally.refused += 1
            if (
                outcome != "closed"
                or close[0] not in (limits.CLOSE_FRAME_INVALID, limits.CLOSE_FRAME_TOO_BIG)
                or not close[1]
            ):
                tally.failures.append(f"{who} {str(frame)[:30]!r}: {outcome} {close}, not closed with a reason")
        for frame in FRAMES_ANSWERED:
            tally.tried += 1
            try:
                outcome, close = await _send_frame(path, cookie, frame)
            except Exception as exc:
                tally.failures.append(f"{who} {frame[:30]!r}: {type(exc).__name__} {exc}")
                continue
            if outcome == "closed":
                tally.failures.append(f"{who} {frame[:30]!r}: closed {close}; a request the page sends shape-wise")
        if await database_sync_to_async(snapshot)() != before:
            tally.failures.append(f"{who}: a frame wrote something")
    # Whose ticket: unknown, another customer's, huge IDs and no session are closed before any frame.
    for who, (path, cookie) in sockets.items():
        if f"/{fill['ticket']}/" not in path:
            continue  # the attention feed names no ticket: it reads its staff member's own
        for ticket_id in (987654, world["foreign"]["ticket"], 10**20, 0):
            for with_cookie in (cookie, None):
                if who == "staff" and with_cookie and ticket_id == world["foreign"]["ticket"]:
                    continue  # staff watch every customer's tickets
                tally.tried += 1
                socket = _socket(path.replace(f"/{fill['ticket']}/", f"/{ticket_id}/"), with_cookie)
                try:
                    connected, _ = await socket.connect()
                    out = await socket.receive_output(timeout=5) if connected else {"type": "websocket.close"}
                except Exception as exc:
                    tally.failures.append(f"{who} ticket {ticket_id}: {type(exc).__name__} {exc}")
                    continue
                tally.refused += 1
                if out["type"] != "websocket.close":
                    tally.failures.append(f"{who} ticket {ticket_id}: not closed ({out['type']})")
                await socket.disconnect()
    tally.report()


def test_the_frame_parser_refuses_before_parsing_and_names_the_limit():
    # Negative control for the consumer test: without the limits, the deep frame reaches the parser.
    with pytest.raises(limits.FrameRefused) as deep:
        limits.parse_frame(DEEP)
    assert deep.value.code == limits.CLOSE_FRAME_TOO_BIG  # 20,000 characters: refused on its size first
    with pytest.raises(limits.FrameRefused) as nested:
        limits.parse_frame("[" * 500 + "]" * 500)
    assert nested.value.code == limits.CLOSE_FRAME_INVALID and "deep" in str(nested.value)
    with pytest.raises(limits.FrameRefused):
        limits.parse_frame('{"type": "sync", "version": NaN}')
    assert limits.parse_frame('{"type": "sync", "version": 3, "s": "[[[[[["}') == {
        "type": "sync",
        "version": 3,
        "s": "[[[[[[",
    }  # brackets inside strings are text
    with pytest.raises(RecursionError):
        import json

        json.loads("[" * 100_000 + "]" * 100_000)  # what an unguarded parser does with such a frame


@pytest.mark.django_db(transaction=True)  # ordered with the websocket test, after the others
def test_the_suite_is_at_least_500_inputs():
    """Run last in this module: the totals of the tests above (when they ran in this session)."""
    if not TOTALS:
        pytest.skip("run with the rest of this module")
    print(f"bad-input suite: {TOTALS['inputs']} inputs, {TOTALS['refused']} refused, 0 failures")
    assert TOTALS["inputs"] >= 500


# --- negative controls: the judge catches a 500 and a half-write ----------------------------------


def _endpoint(name: str) -> Endpoint:
    return next(e for e in ENDPOINTS if e.name == name)


def test_negative_control_a_500_is_caught(world, monkeypatch):
    from sundry.desk import views

    # The ID reader as it was: "²" passes str.isdigit() and int() raises.
    monkeypatch.setattr(views, "_seen_id", lambda raw: int(raw) if raw and raw.isdigit() else None)
    endpoint, fill = _endpoint("state confirm"), world["fill"]
    tally = Tally("control")
    good = {k: _fill(v, fill) for k, v in endpoint.fields.items()}
    attempt(
        tally,
        endpoint,
        world["clients"]["staff"],
        "value_id=²",
        _request(endpoint, _fill(endpoint.path, fill), {**good, "value_id": "²"}),
    )
    assert tally.failures == ["state confirm value_id=²: 500"]


def test_negative_control_a_half_write_is_caught(world, monkeypatch):
    from sundry.portal import views
    from sundry.tickets.services import MessageRefused

    def store_then_refuse(**kwargs):
        turn_append(ticket=kwargs["ticket"], author="customer", text=kwargs["text"])
        raise MessageRefused("refused after storing")

    monkeypatch.setattr(views, "customer_message_post", store_then_refuse)
    endpoint, fill = _endpoint("customer message"), world["fill"]
    tally = Tally("control")
    attempt(
        tally,
        endpoint,
        world["clients"]["customer"],
        "stored, then refused",
        _request(endpoint, _fill(endpoint.path, fill), {"text": "hello"}),
    )
    assert len(tally.failures) == 1 and "wrote something: tickets_turn " in tally.failures[0], tally.failures


@pytest.mark.django_db(transaction=True)
async def test_negative_control_without_the_frame_limits_a_deep_frame_kills_the_socket(world, monkeypatch):
    # The consumer test can fail: with the limits lifted, a 100,000-deep frame reaches the parser,
    # whose RecursionError ends the consumer (a server would close the socket with 1011).
    monkeypatch.setattr(limits, "MAX_FRAME_CHARS", 10**9)
    monkeypatch.setattr(limits, "MAX_FRAME_DEPTH", 10**9)
    path = f"/ws/desk/tickets/{world['fill']['ticket']}/"
    with pytest.raises(RecursionError):
        await _send_frame(path, _cookie(world["clients"]["staff"]), "[" * 100_000 + "]" * 100_000)


@pytest.mark.django_db
@pytest.mark.parametrize("debug", [True, False])
def test_a_form_body_in_another_charset_is_refused_plainly_in_development_too(settings, debug):
    """A UTF-16 (or unknown-charset) form body is a 400 naming the problem, never a 500 — in
    development too, where Django's error page read the body again while reporting it."""
    settings.DEBUG = debug
    client = Client(raise_request_exception=False)
    for body in ("username=a&password=b".encode("utf-16"), b"username=a&password=b"):
        r = client.generic("POST", "/login/", body, content_type="application/x-www-form-urlencoded; charset=utf-16")
        assert r.status_code == 400 and "could not be read" in r.content.decode(), r.status_code
