"""A message typed on a page whose session has ended is never lost."""

from __future__ import annotations

import pytest
from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.hashers import make_password

from sundry.desk.lifecycle import ticket_create
from sundry.tickets.models import Turn
from tests.browser.test_live_desk import LIVE, open_as
from tests.factories import CustomerFactory, TicketClassFactory

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_send_after_the_session_ended_keeps_the_text_and_brings_it_back_after_signing_in(browser, live_server_url):
    from playwright.sync_api import expect

    user = get_user_model().objects.create_user("cora")
    # Hashed the way the server (production settings) verifies it, not with the suite's fast hasher.
    user.password = make_password("a-long-pass-7", hasher="pbkdf2_sha256")
    user.save(update_fields=["password"])
    ticket = ticket_create(
        customer=CustomerFactory(user=user).person, ticket_class=TicketClassFactory(), subject="Help"
    )
    page = open_as(browser, live_server_url, user, f"/help/tickets/{ticket.pk}/")
    # The session cookie is gone (expired, or signed out elsewhere); the CSRF cookie lives on.
    page.context.clear_cookies(name=settings.SESSION_COOKIE_NAME)
    text = "My lamp arrived broken, please call me."
    page.fill("#message-text", text)
    page.locator("button", has_text="Send").click()
    error = page.locator(".composer .form-error")
    expect(error).to_contain_text("session has ended", timeout=LIVE)
    expect(page.locator("#message-text")).to_have_value(text)
    assert not Turn.objects.filter(ticket=ticket, text=text).exists()

    error.locator("a", has_text="Sign in again").click()
    page.fill("input[name=username]", "cora")
    page.fill("input[name=password]", "a-long-pass-7")
    page.locator("button", has_text="Sign in").click()
    page.wait_for_url(f"**/help/tickets/{ticket.pk}/")
    expect(page.locator("#message-text")).to_have_value(text)  # put back, ready to send
    page.locator("button", has_text="Send").click()
    expect(page.locator("#message-text")).to_have_value("", timeout=LIVE)
    assert Turn.objects.filter(ticket=ticket, author="customer", text=text).count() == 1
