"""Response headers and error-report filtering that every page gets.

CSP itself comes from django-csp (settings.CONTENT_SECURITY_POLICY); this adds
what it does not cover.
"""

from __future__ import annotations

import re

from django.conf import settings
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
        if user is not None and user.is_authenticated:
            patch_cache_control(response, no_store=True, private=True)
        return response


class CredentialsHidingFilter(SafeExceptionReporterFilter):
    """Django's filter also hides settings named like connection URLs and addresses
    (DATABASE_URL, REDIS_URL, CELERY_BROKER_URL, the channel layer's host address),
    which carry passwords but escape its default pattern."""

    hidden_settings = re.compile(
        "API|AUTH|TOKEN|KEY|SECRET|PASS|SIGNATURE|HTTP_COOKIE|URL|ADDRESS", flags=re.I)
