"""Desk search over tickets, customers, record references (a shop's order numbers) and message text.

PostgreSQL: message text by full-text search (websearch syntax, English
stemming, served by a GIN index) with a highlighted excerpt. Elsewhere (SQLite):
case-insensitive substring matching. Subjects and customers match by substring
on both; a record reference (an order number, which is not a word) is asked of
every domain's records hook (`tooling.records`), which names the customers who
own it.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.db import connection
from django.db.models import Q
from django.utils.html import escape

from sundry.tickets.models import Ticket, Turn
from sundry.tooling.records import all_records

MAX_QUERY = 200
LIMIT = 50


@dataclass
class Hit:
    ticket: Ticket
    why: list[str]
    excerpt: str = ""  # HTML-safe: escaped text with <mark> around what matched


def _excerpt_plain(text: str, q: str, width: int = 80) -> str:
    at = text.lower().find(q.lower())
    if at < 0:
        return escape(text[: 2 * width])
    start = max(0, at - width)
    before, found, after = text[start:at], text[at : at + len(q)], text[at + len(q) : at + len(q) + width]
    return f"{'…' if start else ''}{escape(before)}<mark>{escape(found)}</mark>{escape(after)}…"


def _message_matches(q: str) -> dict[int, str]:
    """ticket id → excerpt of its latest matching message."""
    turns = Turn.objects.filter(kind__in=[Turn.Kind.MESSAGE, Turn.Kind.NOTE])
    if connection.vendor == "postgresql":
        from django.contrib.postgres.search import SearchHeadline, SearchQuery, SearchVector

        query = SearchQuery(q, config="english", search_type="websearch")
        rows = (
            turns.annotate(search=SearchVector("text", config="english"))
            .filter(search=query)
            .annotate(
                excerpt=SearchHeadline(
                    "text", query, config="english", start_sel="\x02", stop_sel="\x03", max_words=24, min_words=8
                )
            )
            .order_by("ticket_id", "-number")
            .values_list("ticket_id", "excerpt")[:500]
        )
        out = {}
        for ticket_id, excerpt in rows:
            # The headline is built from raw text: escape it, then turn the markers into <mark>.
            out.setdefault(ticket_id, escape(excerpt).replace("\x02", "<mark>").replace("\x03", "</mark>"))
        # Substrings the stemmer cannot see (IDs, parts of words) still count.
        for ticket_id, text in (
            turns.filter(text__icontains=q).order_by("ticket_id", "-number").values_list("ticket_id", "text")[:500]
        ):
            out.setdefault(ticket_id, _excerpt_plain(text, q))
        return out
    out = {}
    for ticket_id, text in (
        turns.filter(text__icontains=q).order_by("ticket_id", "-number").values_list("ticket_id", "text")[:500]
    ):
        out.setdefault(ticket_id, _excerpt_plain(text, q))
    return out


def search(q: str) -> list[Hit]:
    q = (q or "").strip()[:MAX_QUERY]
    if not q:
        return []

    by_ticket = Q(subject__icontains=q)
    by_customer = (
        Q(customer__name__icontains=q)
        | Q(customer__email__icontains=q)
        | Q(customer__external_key__iexact=q)
        | Q(customer__phone__icontains=q)
    )
    # (domain, external key) of the customers who own a record of this reference, and what it is called.
    owners = {(r.domain, key): r.noun for r in all_records() for key in r.owners(q)}
    by_owner = Q(pk__in=[])
    for domain, key in owners:
        by_owner |= Q(customer__domain=domain, customer__external_key=key)
    messages = _message_matches(q)
    number = q.isascii() and q.isdigit()  # "²" is a digit to str.isdigit, not to int()
    if number:
        by_ticket |= Q(pk=int(q))
    tickets = (
        Ticket.objects.select_related("customer", "ticket_class", "assigned_to")
        .filter(by_ticket | by_customer | by_owner | Q(pk__in=list(messages)))
        .order_by("-updated_at")[:LIMIT]
    )
    hits = []
    needle = q.lower()
    for t in tickets:
        why = []
        if needle in t.subject.lower() or (number and t.pk == int(q)):
            why.append("ticket")
        if (
            needle in t.customer.name.lower()
            or needle in t.customer.email.lower()
            or needle == t.customer.external_key.lower()
        ):
            why.append("customer")
        owned = owners.get((t.customer.domain, t.customer.external_key))
        if owned:
            why.append(owned)
        if t.pk in messages:
            why.append("message")
        hits.append(Hit(t, why or ["customer"], messages.get(t.pk, "")))
    return hits
