"""A second domain gets its own cards and words on the desk and the customer's page; the shop's stay the same.

The desk names no domain's tools or records: a tool's result card is the template
its declaration names (`ToolDecl.card`), which writes move money is the
declaration's (`Domain.moves_money`), and all the desk and the customer's page
show of a domain's records — recent ones, search by reference, a held call's
figures and title, what was done, the picker — comes from the domain's records
hook (`tooling.records`). Here a small hotel domain, declared in this test with
its own hook and one card template, works a ticket beside a shop ticket.
"""

from __future__ import annotations

import copy
import json
import re
from dataclasses import dataclass, field
from datetime import datetime
from datetime import timezone as tz

import pytest
from django.contrib.auth import get_user_model

from sundry.agent.models import HeldAction
from sundry.agent.step import assemble_request
from sundry.context import services as lanes
from sundry.context.models import ActionTaken, StateValue
from sundry.context.selectors import lane_snapshot
from sundry.desk.lifecycle import ticket_create
from sundry.desk.sidebar import canned_replies
from sundry.people.models import Customer as Person
from sundry.tickets.models import CannedReply, Turn
from sundry.tickets.services import turn_append
from sundry.tooling import domain as domains
from sundry.tooling.domain import Domain, StateFieldDecl
from sundry.tooling.records import Done, RecordFacts, RecordRow, Records, register_records, unregister_records
from tests.factories import CustomerFactory, TicketClassFactory, paid_order

pytestmark = pytest.mark.django_db
HTMX = {"HTTP_HX_REQUEST": "true"}
NAME = "hotel_test"

BOOKING_CARD = (
    '<div class="tool-card booking-card"><b>Booking <code class="id">{{ r.booking_ref }}</b>'
    " · {{ r.nights }} nights at {{ r.hotel }}</div>\n"
)


def hotel_domain(card: str = "hotel/cards/booking.html") -> Domain:
    return Domain.from_data(
        {
            "name": NAME,
            "id_patterns": {"booking": r"BK\d{4}"},
            "owner_kind": "booking",
            "state_fields": [
                StateFieldDecl(name="booking_ref", label="Booking", kind="id", id_kind="booking").model_dump(),
                StateFieldDecl(name="issue", label="Issue").model_dump(),
            ],
            "tools": {
                "find_booking": {"lookup": True, "args": {"booking_ref": "booking"}, "card": card},
                "refund_stay": {
                    "write": True,
                    "reversible": True,  # reversible: only its money makes the approval ask to confirm
                    "args": {"booking_ref": "booking"},
                    "target": "booking_ref",
                    "money": [{"amount": "amount_cents", "currency": "currency", "target": "booking_ref"}],
                },
                "move_booking": {"write": True, "args": {"booking_ref": "booking"}, "target": "booking_ref"},
            },
        }
    )


@dataclass
class HotelRecords(Records):
    """The hotel's bookings, kept in memory: reference → (guest, nights, hotel, price)."""

    bookings: dict = field(default_factory=dict)

    def _theirs(self, key):
        return [ref for ref, b in self.bookings.items() if b[0] == key]

    def recent(self, external_key, limit):
        at = datetime(2026, 5, 1, tzinfo=tz.utc)
        return [
            RecordRow(ref, at, "Booked", self.bookings[ref][3]) for ref in sorted(self._theirs(external_key))[:limit]
        ]

    def count(self, external_key):
        return len(self._theirs(external_key))

    def owners(self, reference):
        return {b[0] for ref, b in self.bookings.items() if ref.lower() == reference.strip().lower()}

    def normalize(self, reference):
        return reference.strip().upper()

    def owned(self, external_key, references):
        return [r for r in references if r in self._theirs(external_key)]

    def facts(self, reference):
        b = self.bookings.get(reference)
        if b is None:
            return None
        return RecordFacts(reference, "Booked", (), (("Nights", str(b[1])), ("Hotel", b[2]), ("Price", b[3])))

    def done(self, tool, result, amount_cents, currency):
        if tool == "move_booking":
            ref = result.get("booking_ref", "")
            return Done(f"Booking {ref} moved to {result.get('to')}", ref)
        return None

    def held_title(self, tool, amount, reference):
        if tool == "refund_stay":
            return f"give back {amount} for stay {reference}"
        return super().held_title(tool, amount, reference)


def _hotel_records() -> HotelRecords:
    return HotelRecords(
        domain=NAME,
        noun="booking",
        plural="bookings",
        reference_arg="booking_ref",
        pick_field="booking_ref",
        bookings={"BK1234": ("guest_1", 3, "Seaview", "240.00 EUR"), "BK5678": ("guest_1", 1, "Dunes", "90.00 EUR")},
    )


def _page(client, url) -> str:
    html = client.get(url).content.decode()
    # What differs between two renderings of the same data: a form's fresh keys, a running timer.
    html = re.sub(r'name="csrfmiddlewaretoken" value="[^"]+"', "CSRF", html)
    html = re.sub(r'"X-CSRFToken": "[^"]+"', "CSRF", html)
    html = re.sub(r'name="client_key" value="[0-9a-f]+"', "KEY", html)
    return re.sub(r"first response \d+m", "first response Nm", html)


@pytest.fixture
def hotel(settings, tmp_path):
    """The hotel domain registered with its hook and its card template; forgotten afterwards."""
    (tmp_path / "hotel" / "cards").mkdir(parents=True)
    (tmp_path / "hotel" / "cards" / "booking.html").write_text(BOOKING_CARD)
    templates = copy.deepcopy(settings.TEMPLATES)
    templates[0]["DIRS"] = [*templates[0]["DIRS"], tmp_path]
    settings.TEMPLATES = templates
    records = register_records(_hotel_records())
    domains.register_domain(hotel_domain())
    yield records
    unregister_records(NAME)
    domains._DOMAINS.pop(NAME, None)  # the registry has no unregister: a test's domain leaves by hand


@pytest.fixture
def staff(client):
    user = get_user_model().objects.create_user("desk", password="pw", is_staff=True)
    client.force_login(user)
    return user


def hotel_ticket():
    """A hotel guest's ticket: a booking looked up, a refund held, a move done."""
    login = get_user_model().objects.create_user("guest", password="pw")
    guest = Person.objects.create(name="Gita Guest", domain=NAME, external_key="guest_1", user=login)
    ticket = ticket_create(customer=guest, ticket_class=TicketClassFactory(), subject="My stay")
    turn_append(ticket=ticket, author=Turn.Author.CUSTOMER, text="About BK5678 please.")
    turn_append(
        ticket=ticket,
        author=Turn.Author.TOOL,
        kind=Turn.Kind.TOOL_RESULT,
        text="{}",
        payload={
            "name": "find_booking",
            "ok": True,
            "result": {"booking_ref": "BK1234", "nights": 3, "hotel": "Seaview"},
        },
    )
    for i, (tool, args) in enumerate(
        [
            ("refund_stay", {"booking_ref": "BK1234", "amount": "80.00", "currency": "EUR"}),
            ("move_booking", {"booking_ref": "BK1234", "to": "2026-06-01"}),
        ]
    ):
        HeldAction.objects.create(
            ticket=ticket,
            tool=tool,
            arguments=args,
            call_id=f"c{i}",
            reason="Held for approval.",
            idempotency_key=f"hotel-{i}",
            turn=1,
        )
    ActionTaken.objects.create(
        ticket=ticket,
        tool="move_booking",
        target="BK5678",
        result={"booking_ref": "BK5678", "to": "12 May"},
        idempotency_key="hotel-done",
        turn=2,
    )
    return ticket


def test_a_second_domain_gets_its_own_cards_and_words_on_the_desk(client, staff, hotel, settings):
    settings.SUNDRY_DEFAULT_DOMAIN = NAME  # the class works in the hotel's domain
    ticket = hotel_ticket()
    page = _page(client, f"/desk/tickets/{ticket.pk}/")
    # The tool's card is the template the hotel's declaration names.
    assert '<div class="tool-card booking-card"><b>Booking <code class="id">BK1234</b> · 3 nights at Seaview' in page
    # The customer card lists the guest's bookings from the hook.
    assert 'Recent bookings <span class="muted">(2)</span>' in page
    assert '<code class="id">BK1234</code> <span class="muted">· 1 May 2026 · Booked ·</span> 240.00 EUR' in page
    # The held refund: the hook's title and figures; its declared money asks to confirm, the move does not.
    assert "<h3>Give back 80.00 EUR for stay BK1234</h3>" in page
    assert '<dt>Booking</dt><dd><code class="id">BK1234</code> · Booked</dd>' in page
    assert "<dt>Nights</dt><dd>3</dd>" in page and "<dt>Price</dt><dd>240.00 EUR</dd>" in page
    assert "Confirm: give back 80.00 EUR for stay BK1234" in page
    assert "<h3>Move booking on BK1234</h3>" in page
    assert page.count("This moves money or cannot be undone.") == 1
    # Nothing of the shop's.
    for shop_word in ("Recent orders", "order-card", "Already refunded", "No orders."):
        assert shop_word not in page, shop_word


def test_a_second_domain_gets_its_own_words_on_the_customer_page_and_in_search(client, hotel, settings):
    settings.SUNDRY_DEFAULT_DOMAIN = NAME
    ticket = hotel_ticket()
    client.force_login(ticket.customer.user)
    page = _page(client, f"/help/tickets/{ticket.pk}/")
    assert 'Booking <span class="whole">BK5678</span> moved to 12 May' in page
    # The first message names BK5678, one of theirs: nothing to ask.
    assert "Which booking is this about?" not in page
    Turn.objects.filter(ticket=ticket, text="About BK5678 please.").update(text="About my stay.")
    page = _page(client, f"/help/tickets/{ticket.pk}/")
    assert "Which booking is this about?" in page and 'value="BK5678"' in page and "Your bookings" in page
    assert "Which order" not in page
    # The pick is checked by the hook and lands in the domain's pick field.
    bad = client.post(f"/help/tickets/{ticket.pk}/order", {"reference": "BK9999"}, **HTMX)
    assert bad.status_code == 422 and "Pick one of your own bookings." in bad.content.decode()
    good = client.post(f"/help/tickets/{ticket.pk}/order", {"reference": " bk5678 "}, **HTMX)
    assert good.status_code == 200 and "we noted which booking this is about" in good.content.decode()
    assert StateValue.objects.get(ticket=ticket, name="booking_ref", is_current=True).value == "BK5678"
    # Search by a booking reference asks the hook who owns it.
    staff = get_user_model().objects.create_user("desk", password="pw", is_staff=True)
    client.force_login(staff)
    found = client.get("/desk/search/", {"q": "bk1234"}).content.decode()
    assert f"/desk/tickets/{ticket.pk}/" in found and "matched booking" in found


def test_a_second_domains_request_and_desk_name_its_own_state_fields(client, staff, hotel, settings):
    # The model is told the hotel's fields, not the shop's; the picker and a canned reply use the hotel's
    # record field. Control: the same request for a shop ticket names the shop's fields.
    settings.SUNDRY_DEFAULT_DOMAIN = NAME
    ticket = hotel_ticket()
    tools = {t.name: t for t in assemble_request(ticket, lane_snapshot(ticket, with_turns=False)).request.tools}
    fact = tools["record_fact"]
    assert "in the state (booking_ref, issue). Values are validated" in fact.description
    assert fact.parameters["properties"]["name"]["description"] == "One of the state fields: booking_ref, issue"
    told = json.dumps(fact.model_dump())
    assert [f for f in ("order_number", "item", "refund_method", "resolution", "delivery_date") if f in told] == []
    CannedReply.objects.create(title="About it", body="About {order_number}: noted.")
    lanes.state_set(ticket=ticket, name="booking_ref", value="BK5678", turn=1, source="customer", confirmed=True)
    assert {r["title"]: r["text"] for r in canned_replies(ticket, staff)}["About it"] == "About BK5678: noted."
    client.force_login(ticket.customer.user)
    Turn.objects.filter(ticket=ticket, text="About BK5678 please.").update(text="About my stay.")
    StateValue.objects.filter(ticket=ticket).delete()
    page = _page(client, f"/help/tickets/{ticket.pk}/")
    assert 'name="reference" value="BK5678"' in page and 'name="order_number"' not in page

    settings.SUNDRY_DEFAULT_DOMAIN = "demo_shop"
    shop_ticket = ticket_create(customer=CustomerFactory().person, ticket_class=TicketClassFactory(), subject="x")
    shop_fact = {t.name: t for t in assemble_request(shop_ticket, lane_snapshot(shop_ticket)).request.tools}
    assert "order_number, issue, item, amount with currency" in shop_fact["record_fact"].description


def test_without_the_hook_and_the_card_the_desk_falls_back_to_generic_words(client, staff, hotel, settings):
    # Negative control: the words above come from the hotel's hook and declaration, not from the desk.
    settings.SUNDRY_DEFAULT_DOMAIN = NAME
    ticket = hotel_ticket()
    unregister_records(NAME)
    domains._DOMAINS[NAME] = hotel_domain(card="")
    page = _page(client, f"/desk/tickets/{ticket.pk}/")
    assert "booking-card" not in page and "Recent bookings" not in page
    assert 'Recent records <span class="muted">(0)</span>' in page and "No records." in page
    assert "<h3>Refund stay</h3>" in page and "<dt>Price</dt>" not in page  # no reference, no figures
    assert "Find booking" in page  # the generic result card, read from the declaration
    found = client.get("/desk/search/", {"q": "BK1234"}).content.decode()
    assert f"/desk/tickets/{ticket.pk}/" not in found
    client.force_login(ticket.customer.user)
    page = _page(client, f"/help/tickets/{ticket.pk}/")
    assert "moved to 12 May" not in page and "Which booking" not in page and "Which record" not in page
    bad = client.post(f"/help/tickets/{ticket.pk}/order", {"reference": "BK5678"}, **HTMX)
    assert bad.status_code == 422 and "Pick one of your own records." in bad.content.decode()


def test_the_shops_pages_render_the_same_beside_a_second_domain(client, staff):
    alice = CustomerFactory()
    order = paid_order(customer=alice, number="SU-30200", prices=(5000,))
    ticket = ticket_create(customer=alice.person, ticket_class=TicketClassFactory(), subject="Refund")
    turn_append(
        ticket=ticket,
        author=Turn.Author.TOOL,
        kind=Turn.Kind.TOOL_RESULT,
        text="{}",
        payload={
            "name": "issue_refund",
            "ok": True,
            "result": {
                "order_number": order.number,
                "amount_cents": 1000,
                "currency": "USD",
                "status": "issued",
                "refunded_cents": 1000,
                "refundable_cents": 4000,
            },
        },
    )
    HeldAction.objects.create(
        ticket=ticket,
        tool="cancel_order",
        arguments={"order_number": order.number},
        call_id="c",
        reason="Held for approval.",
        idempotency_key="shop-held",
        turn=1,
    )
    before = _page(client, f"/desk/tickets/{ticket.pk}/")
    # The shop's own card, order figures and words.
    assert 'class="tool-card refund-card"><p><b>Refund 10.00 USD</b> on <code class="id">SU-30200</code>' in before
    assert 'Recent orders <span class="muted">(1)</span>' in before and "<h3>Cancel order SU-30200</h3>" in before
    assert "<dt>Order</dt>" in before and "<dt>Already refunded</dt><dd>0.00 USD</dd>" in before
    # A second domain registered beside it changes nothing on the shop's ticket.
    register_records(_hotel_records())
    domains.register_domain(hotel_domain())
    try:
        assert _page(client, f"/desk/tickets/{ticket.pk}/") == before
    finally:
        unregister_records(NAME)
        domains._DOMAINS.pop(NAME, None)


def test_every_declared_card_template_exists():
    from django.template.loader import get_template

    from sundry.tooling.domain import domains as all_domains

    cards = {d.card for dom in all_domains().values() for d in dom.tools.values() if d.card}
    assert {"shop/cards/order.html", "shop/cards/refund.html", "shop/cards/parcel.html"} <= cards
    for name in cards:
        get_template(name)


def test_a_card_must_be_a_template_name():
    with pytest.raises(ValueError, match="card"):
        hotel_domain(card="../../etc/passwd")
    with pytest.raises(ValueError, match="card"):
        hotel_domain(card="{% evil %}")
    with pytest.raises(ValueError, match="card"):
        hotel_domain(card="../shop/cards/order.html")
