"""Response headers and error-report filtering that every page gets.

CSP itself comes from django-csp (settings.CONTENT_SECURITY_POLICY); this adds
what it does not cover.
"""

from __future__ import annotations

import re

from django.conf import settings
from django.core.exceptions import BadRequest
from django.db import DatabaseError
from django.http import HttpResponseBadRequest
from django.utils.cache import patch_cache_control
from django.views.debug import SafeExceptionReporterFilter


class SecurityHeadersMiddleware:
    """Permissions-Policy on every response; `Cache-Control: no-store` on whatever a
    signed-in person is shown, so a shared browser's cache or back button never hands
    a ticket, an order or a customer's details to the next person."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        response = self.get_response(request)
        response.setdefault("Permissions-Policy", settings.PERMISSIONS_POLICY)
        user = getattr(request, "user", None)
        try:
            signed_in = user is not None and user.is_authenticated
        except DatabaseError:
            # The session could not be read (the database went away during the request,
            # whose answer is already a 503): when in doubt, nothing is cached.
            signed_in = True
        if signed_in:
            patch_cache_control(response, no_store=True, private=True)
        return response


class CredentialsHidingFilter(SafeExceptionReporterFilter):
    """Django's filter also hides settings named like connection URLs and addresses
    (DATABASE_URL, REDIS_URL, CELERY_BROKER_URL, the channel layer's host address),
    which carry passwords but escape its default pattern."""

    hidden_settings = re.compile("API|AUTH|TOKEN|KEY|SECRET|PASS|SIGNATURE|HTTP_COOKIE|URL|ADDRESS", flags=re.I)


class RefuseNulBytesMiddleware:
    """A NUL byte in a query or form value is refused with 400 before any view runs.

    No person types one, PostgreSQL refuses to store or compare text holding one, and
    without this check such a value reached a query and answered 500.
    """

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        fields = [request.GET]
        if request.method == "POST" and request.content_type in (
            "application/x-www-form-urlencoded",
            "multipart/form-data",
        ):
            try:
                fields.append(request.POST)
            except (BadRequest, UnicodeDecodeError) as exc:
                # A body in another charset (UTF-16 …): refused here, plainly. Left to Django, the
                # development error page reads the body again while reporting and answers 500.
                return HttpResponseBadRequest(
                    f"This request's form body could not be read: {exc}", content_type="text/plain; charset=utf-8"
                )
        for data in fields:
            for key, values in data.lists():
                if "\x00" in key or any("\x00" in value for value in values):
                    return HttpResponseBadRequest(
                        "A value in this request holds a NUL character, which no field accepts.",
                        content_type="text/plain; charset=utf-8",
                    )
        return self.get_response(request)


# The longest username a login can name (Django's User.username); axes' own column is 255.
USERNAME_MAX = 150


def login_username(request, credentials=None):
    """The username django-axes counts failed logins under (`AXES_USERNAME_CALLABLE`).

    Axes' default reads the posted value whole and stores it in a 255-character column,
    so a longer one answered 500; no account has a longer name than 150, so the cut
    joins no two real usernames.
    """
    source = credentials if credentials else getattr(request, "POST", {})
    name = source.get("username") if hasattr(source, "get") else None
    return name[:USERNAME_MAX] if isinstance(name, str) else name
