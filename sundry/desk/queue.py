"""The queue page's content for one staff member and one query: what the page shows at load and
what its live socket pushes (sundry.desk.live_queue), built by the same code so a push is what a reload
would show."""

from __future__ import annotations

from django.http import QueryDict
from django.template.loader import render_to_string

from sundry.agent import claims
from sundry.desk import selectors
from sundry.tickets.models import TicketClass

MAX_QUERY_CHARS = 500  # a queue query is a handful of short parameters


def queue_params(query: QueryDict) -> dict:
    """The view, filters, sort and page a query asks for, each one of the values the queue knows."""
    view = query.get("view", "all")
    sort = query.get("sort", "updated")
    return {
        "view": view if view in selectors.QUEUE_VIEWS else "all",
        "sort": sort if sort in selectors.QUEUE_SORTS else "updated",
        "filters": {k: query.get(k, "") for k in ("status", "ticket_class", "needs")},
        "page": query.get("page") or 1,
    }


def _without(query: QueryDict, *names) -> str:
    query = query.copy()
    for name in names:
        query.pop(name, None)
    return query.urlencode()


def queue_context(user, query: QueryDict) -> dict:
    params = queue_params(query)
    page = selectors.queue_page(
        user, view=params["view"], sort=params["sort"], page=params["page"], **params["filters"]
    )
    for t in page.object_list:
        t.recovering = claims.stale(t.agent_claimed_at)  # a claim lapses without a new version
    return {
        "tickets": page.object_list,
        "page": page,
        "filters": params["filters"],
        "view": params["view"],
        "sort": params["sort"],
        "counts": selectors.queue_counts(user),
        "classes": TicketClass.objects.all(),
        "query_without_page": _without(query, "page"),
        "query": query.urlencode(),
    }


def queue_update(user, query_string: str) -> str:
    """The parts of the queue page a push replaces: its counts and badges, and its table."""
    query = QueryDict(query_string[:MAX_QUERY_CHARS])
    context = queue_context(user, query)
    return render_to_string("desk/_queue_counts.html", context) + render_to_string("desk/_queue_table.html", context)
