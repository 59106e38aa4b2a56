"""A conversation's earlier items, for a page that opened at the latest ones.

sundry-live.js asks for them with `?before=<the first turn on the page>` and a
header naming the fragment it wants, when the "Show earlier" link comes into
view or is pressed, and puts them in place. Without JavaScript the same link
opens them as a page of their own, with a link to the ones before those.
"""

from __future__ import annotations

from django.http import HttpResponse, HttpResponseBadRequest
from django.shortcuts import render

from sundry.live import panels

FRAGMENT_HEADER = "HTTP_X_SUNDRY_FRAGMENT"  # sent as X-Sundry-Fragment by sundry-live.js


def earlier_response(request, ticket, viewer: panels.Viewer, back: str):
    """The items before `?before=` for an already-checked viewer of `ticket`."""
    raw = request.GET.get("before", "")
    before = None
    if raw:
        try:
            before = int(raw)
        except ValueError:
            return HttpResponseBadRequest("before must be a turn number.")
        if before < 1:
            return HttpResponseBadRequest("before must be a turn number.")
    found = panels.earlier_items(ticket, viewer, before)
    if request.META.get(FRAGMENT_HEADER):
        response = HttpResponse(found["items_html"])
        response["X-Sundry-Earlier"] = "1" if found["earlier"] else "0"
        return response
    noun = "turns" if viewer.audience == panels.STAFF else "messages"
    return render(
        request, "live/earlier_page.html", {"ticket": ticket, "viewer": viewer, "noun": noun, "back": back, **found}
    )
