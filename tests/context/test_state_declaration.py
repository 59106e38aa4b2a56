"""The state lane's fields and the ledger's live kinds are the domain's to declare; generic code reads
them from the declaration (pydantic-validated), not from a list of one shop's fields."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from sundry.agent.guards.consent import state_from
from sundry.agent.toolbox import domain_specs
from sundry.context.lanes import StateFieldData
from sundry.context.statefields import StateValueInvalid, fields, validate_field
from sundry.shop.domain import DOMAIN as SHOP
from sundry.tooling.domain import GENERIC_STATE_FIELDS, Domain
from sundry.tooling.tools import REGISTRY
from sundry.toolservers.catalog import ClassTools

BOOKINGS = {
    "name": "bookings",
    "id_patterns": {"booking": r"BK-\d{4}", "guest": r"G\d{3}"},
    "id_examples": {"booking": "BK-1234"},
    "owner_kind": "booking",
    "customer_kind": "guest",
    "state_fields": [
        {"name": "booking", "label": "Booking", "kind": "id", "id_kind": "booking", "consent": "target"},
        {"name": "remedy", "label": "Remedy", "kind": "choice", "choices": ["refund", "rebook"], "consent": "action"},
        {"name": "nights", "label": "Nights", "max_length": 3},
    ],
}


def test_a_domain_declares_its_fields_and_validation_follows_the_declaration():
    bookings = Domain.from_data(BOOKINGS)
    assert list(fields(bookings)) == ["booking", "remedy", "nights"]
    assert validate_field("booking", " bk-1234 ", domain=bookings) == "BK-1234"
    with pytest.raises(StateValueInvalid, match="not a valid booking .format BK-1234"):
        validate_field("booking", "SU-12345", domain=bookings)
    seen = []
    with pytest.raises(StateValueInvalid, match="Booking BK-9999 does not exist for this customer"):
        validate_field("booking", "BK-9999", domain=bookings, exists=lambda kind, v: seen.append(kind) or False)
    assert seen == ["booking"]
    with pytest.raises(StateValueInvalid, match="not one of: refund, rebook"):
        validate_field("remedy", "replacement", domain=bookings)
    # The shop's fields are not the bookings domain's.
    with pytest.raises(StateValueInvalid, match="Unknown state field 'order_number'. Known fields: booking, remedy"):
        validate_field("order_number", "SU-12345", domain=bookings)
    assert validate_field("order_number", "su-12345", domain=SHOP) == "SU-12345"


def test_a_domain_that_declares_no_fields_gets_the_generic_ones():
    bare = Domain.from_data({"name": "bare"})
    assert [f.name for f in bare.state_fields] == [f.name for f in GENERIC_STATE_FIELDS]
    assert not {"order_number", "refund_method", "resolution"} & set(fields(bare))
    assert bare.live_id_kinds() == {"order"}  # the owner kind, with no customer kind


@pytest.mark.parametrize(
    "change, says",
    [
        ({"state_fields": [{"name": "r", "label": "R", "kind": "choice"}]}, "a choice needs its choices"),
        ({"state_fields": [{"name": "b", "label": "B", "kind": "id"}]}, "an id field needs its id_kind"),
        ({"state_fields": [{"name": "b", "label": "B", "kind": "id", "id_kind": "room"}]}, "id kind 'room' has no"),
        ({"state_fields": [{"name": "b", "label": "B"}, {"name": "b", "label": "C"}]}, "'b' is declared twice"),
        ({"state_fields": [{"name": "Bad Name", "label": "B"}]}, "should match pattern"),
        ({"state_fields": [{"name": "b", "label": "B", "kind": "colour"}]}, "Input should be"),
        ({"live_kinds": ["room"]}, "live kind 'room' has no id pattern"),
        (
            {
                "state_fields": [
                    {"name": "a", "label": "A", "consent": "action"},
                    {"name": "b", "label": "B", "consent": "action"},
                ]
            },
            "more than one state field has consent role 'action'",
        ),
    ],
)
def test_a_bad_declaration_is_refused_saying_what_is_wrong(change, says):
    with pytest.raises((ValidationError, ValueError), match=says):
        Domain.from_data({**BOOKINGS, **change})


def test_live_kinds_and_consent_roles_come_from_the_declaration():
    bookings = Domain.from_data(BOOKINGS)
    assert bookings.live_id_kinds() == {"booking", "guest"}
    assert SHOP.live_id_kinds() == {"customer", "order"}
    state = [StateFieldData("remedy", "refund", 2, "customer", True), StateFieldData("nights", "2", 2, "model", False)]
    assert state_from(state, bookings) == {"action": ("refund", True)}
    shop_state = [StateFieldData("resolution", "refund", 2, "customer", True)]
    assert state_from(shop_state, SHOP) == {"action": ("refund", True)} and state_from(shop_state, bookings) == {}


# record_fact as the shop's tickets have always been offered it: requests (and their token counts) stay as they were.
SHOP_FACT = (
    "Record an established fact of this case in the state (order_number, issue, item, amount with currency, "
    "refund_method, contact_preference, resolution, delivery_date). Values are validated; a changed value "
    "supersedes the old one and both are kept. Staff confirm facts before the customer sees them."
)
SHOP_FACT_NAME = (
    "One of the state fields: order_number, issue, item, amount, refund_method, contact_preference, resolution, "
    "delivery_date"
)


def _fact(spec: dict) -> tuple[str, str]:
    return spec["description"], spec["parameters"]["properties"]["name"]["description"]


def test_record_fact_names_the_fields_of_the_tickets_domain():
    record_fact = REGISTRY["record_fact"]
    assert _fact(record_fact.spec(SHOP)) == (SHOP_FACT, SHOP_FACT_NAME)
    bookings = Domain.from_data(BOOKINGS)
    description, name = _fact(record_fact.spec(bookings))
    assert "in the state (booking, remedy, nights). Values" in description
    assert name == "One of the state fields: booking, remedy, nights"
    # A domain that declares none: the generic fields the customer sees (an internal note is staff's).
    description, name = _fact(record_fact.spec(Domain.from_data({"name": "bare"})))
    assert "(issue, amount with currency, contact_preference)" in description and "internal_note" not in name
    # Every way a ticket's tools are listed passes its domain: in-process, and with tool servers.
    listed = next(s for s in domain_specs(bookings) if s["name"] == "record_fact")
    assert _fact(listed) == _fact(record_fact.spec(bookings))
    served = ClassTools(tools={"record_fact": record_fact}, remote={}, declarations=[], fields_domain=bookings)
    assert _fact(served.spec_list[0]) == _fact(record_fact.spec(bookings))
