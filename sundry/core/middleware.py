"""A database that is briefly out of reach (a restart, a failover, a dropped connection)
answers 503 with words and a Retry-After, not a 500 page.

Django closes the broken connection when the request finishes, so the next request
connects afresh. Views whose write may already have committed before the failure say so
themselves (the customer's message post answers "Sent." once the message is stored).
"""

from __future__ import annotations

import logging
import sys

from django.db import InterfaceError, InternalError, OperationalError
from django.http import HttpResponse
from django.template.loader import render_to_string
from django.views.defaults import server_error as django_server_error

log = logging.getLogger("sundry.db")

# What a connection lost under a request raises: a server that went away or was terminated
# (OperationalError, InterfaceError), or a pooler relaying a terminated server's error in
# the middle of a command (psycopg's "received 2 results from command …", an InternalError).
# The request's connection is closed when it ends (CONN_MAX_AGE=0); the next one connects afresh.
UNREACHABLE = (OperationalError, InterfaceError, InternalError)

UNAVAILABLE = "Sundry cannot reach its database for a moment. Please try again in a few seconds."


def unavailable(request) -> HttpResponse:
    if getattr(request, "htmx", False):
        body = render_to_string("desk/_flash.html", {"message": UNAVAILABLE, "level": "bad"})
        content_type = "text/html; charset=utf-8"
    else:
        body, content_type = UNAVAILABLE + "\n", "text/plain; charset=utf-8"
    return HttpResponse(body, status=503, content_type=content_type, headers={"Retry-After": "5"})


class DatabaseUnavailableMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        return self.get_response(request)

    def process_exception(self, request, exception):
        if isinstance(exception, UNREACHABLE):
            log.warning("database unavailable during %s %s: %s", request.method, request.path, exception)
            return unavailable(request)
        return None


def server_error(request):
    """Django's 500 handler: a database out of reach anywhere in the request — a
    middleware's session or user read included, which `process_exception` never sees —
    is a 503 with words, not a 500 page. Django calls this inside its exception handler."""
    exc = sys.exc_info()[1]
    if isinstance(exc, UNREACHABLE):
        log.warning("database unavailable during %s %s: %s", request.method, request.path, exc)
        return unavailable(request)
    return django_server_error(request)
