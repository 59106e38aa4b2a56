"""The canned-reply admin form checks placeholders before a reply is saved."""

from __future__ import annotations

import pytest

from sundry.desk.admin import CannedReplyForm

pytestmark = pytest.mark.django_db


def _errors(body: str) -> list[str]:
    form = CannedReplyForm(data={"title": "Refund sent", "body": body})
    form.is_valid()
    return form.errors.get("body", [])


def test_known_placeholders_pass_and_unknown_or_unbalanced_ones_are_named():
    assert _errors("Hi {customer_first_name}, your refund on {order_number} is on its way.") == []
    assert _errors("Hi {customer_nickname}") == ["Unknown placeholder(s): customer_nickname."]
    assert _errors("Hi {customer_first_name")[0].startswith("Unbalanced braces")
