"""An htmx request from someone whose session has ended is answered 401, not with the
sign-in page.

`login_required` answers such a request with a redirect to the sign-in page; the
browser follows it inside the XHR and htmx sees a 200 — a success — so a composer
would empty itself and the message would vanish unsent. A 401 is an error to htmx:
nothing is swapped, the text stays, and the page offers to sign in again
(static/sundry-live.js).
"""

from __future__ import annotations

from urllib.parse import urlsplit

from django.conf import settings
from django.http import HttpResponse
from django.shortcuts import resolve_url

SESSION_ENDED = "Your session has ended. Sign in again to send this — your text is kept."


class HtmxSignInMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        response = self.get_response(request)
        if (
            request.headers.get("HX-Request") == "true"
            and response.status_code in (301, 302, 303)
            and urlsplit(response.get("Location", "")).path == resolve_url(settings.LOGIN_URL)
        ):
            ended = HttpResponse(SESSION_ENDED, status=401, content_type="text/plain; charset=utf-8")
            ended["HX-Reswap"] = "none"
            return ended
        return response
