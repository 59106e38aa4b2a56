"""A customer's new conversation opens in the deployment's entry class (SUNDRY_DEFAULT_TICKET_CLASS),
so a class with tool servers can serve customers, not only the class with slug `standard`."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from sundry.tickets.models import Ticket
from tests.factories import CustomerFactory, TicketClassFactory

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    "entry,expected",
    [("retail", "retail"), ("standard", "standard"), ("gone", "standard")],
    ids=["named", "control-default", "unknown-slug-falls-back-to-oldest"],
)
def test_a_new_conversation_opens_in_the_deployments_entry_class(settings, entry, expected):
    settings.DEFAULT_TICKET_CLASS = entry
    TicketClassFactory(name="Standard", slug="standard")
    TicketClassFactory(name="Retail", slug="retail")
    user = get_user_model().objects.create_user("ana", password="pw")
    CustomerFactory(user=user)
    client = Client()
    client.force_login(user)
    assert client.post("/help/tickets/new", {"text": "Where is my parcel?"}).status_code == 302
    assert Ticket.objects.get().ticket_class.slug == expected
