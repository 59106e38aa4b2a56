"""A detail the customer flagged shows as "You reported this" on their page until staff handle the
flag (or correct the value); the "That's wrong" form gives way to it meanwhile."""

from __future__ import annotations

import pytest

from sundry.context import services as lanes
from sundry.portal.selectors import confirmed_details, reported_value_ids
from sundry.tickets.services import turn_append
from tests.portal.test_portal import HX, page  # noqa: F401  (page is a fixture)

pytestmark = pytest.mark.django_db


def _details(c, ticket) -> str:
    html = c.get(f"/help/tickets/{ticket.pk}/").content.decode()
    return html[html.index('id="panel-details"') :]


def test_a_flagged_detail_shows_as_reported_until_staff_handle_it(page):
    ticket, c = page["ticket"], page["c"]
    method = lanes.state_set(
        ticket=ticket, name="refund_method", value="store_credit", turn=1, source="staff", confirmed=True
    )
    lanes.state_set(ticket=ticket, name="order_number", value="SU-61111", turn=1, source="customer", confirmed=True)
    assert "You reported this" not in _details(c["alice"], ticket)
    answer = c["alice"].post(f"/help/tickets/{ticket.pk}/flag", {"value_id": method.pk, "note": "card"}, **HX)
    assert answer.status_code == 200 and "You reported this" in answer.content.decode()  # at once, in the answer
    details = _details(c["alice"], ticket)
    assert details.count("You reported this") == 1  # that detail only, the other can still be flagged
    assert details.count("That's wrong") == 1
    assert reported_value_ids(ticket) == {method.pk}

    c["staff"].post(f"/desk/tickets/{ticket.pk}/attention/clear", **HX)  # "Mark handled"
    assert reported_value_ids(ticket) == set()
    assert "You reported this" not in _details(c["alice"], ticket)


def test_a_corrected_value_is_no_longer_reported(page):
    ticket, c = page["ticket"], page["c"]
    method = lanes.state_set(
        ticket=ticket, name="refund_method", value="store_credit", turn=1, source="staff", confirmed=True
    )
    c["alice"].post(f"/help/tickets/{ticket.pk}/flag", {"value_id": method.pk}, **HX)
    assert [d["reported"] for d in confirmed_details(ticket)] == [True]
    lanes.state_set(
        ticket=ticket, name="refund_method", value="original_method", turn=2, source="staff", confirmed=True
    )
    assert [(d["value"], d["reported"]) for d in confirmed_details(ticket)] == [("original_method", False)]


def test_only_the_customers_own_flag_events_count(page):
    ticket = page["ticket"]
    method = lanes.state_set(
        ticket=ticket, name="refund_method", value="store_credit", turn=1, source="staff", confirmed=True
    )
    # A message that merely talks about a flag is not one.
    turn_append(ticket=ticket, author="customer", text=f'{{"flag": {{"value_id": {method.pk}}}}}')
    assert reported_value_ids(ticket) == set()
