"""A panel's context digest: equal for the same data, different when anything shown differs."""

from __future__ import annotations

from sundry.context.models import PinnedRule
from sundry.live.fingerprint import fingerprint
from sundry.tickets.models import Ticket


def test_the_same_rows_read_twice_digest_alike_and_a_changed_field_does_not():
    def context(text="Never email me", version=3):
        ticket = Ticket(pk=7, subject="Kettle", version=version, last_turn_number=version)
        rule = PinnedRule(pk=1, ticket_id=7, text=text, status="active")
        return {"ticket": ticket, "active": [rule], "rules_tokens": 4, "viewer": object()}

    assert fingerprint(context()) == fingerprint(context())
    assert fingerprint(context()) == fingerprint(context(version=9))  # the version alone: no panel shows it
    assert fingerprint(context()) != fingerprint(context(text="Never phone me"))  # control


def test_what_cannot_be_read_makes_the_panel_render():
    assert fingerprint({"rows": Ticket.objects.all()}) is None  # a queryset not yet evaluated
    assert fingerprint({"call": len}) is None
