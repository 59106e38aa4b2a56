"""What the ticket head and the customer sidebar on the desk show (reads only)."""

from __future__ import annotations

import json

from django.contrib.auth import get_user_model
from django.contrib.postgres.expressions import ArraySubquery
from django.db import connection
from django.db.models import OuterRef
from django.db.models.functions import JSONObject

from sundry.agent.guards import heldreason
from sundry.agent.models import HeldAction
from sundry.context.models import ActionTaken, PinnedRule, StateValue
from sundry.core import money
from sundry.desk import canned
from sundry.desk.selectors import FLAG_PREFIX, pretty, ticket_timer
from sundry.people.selectors import domain_of
from sundry.tickets import satisfaction
from sundry.tickets.attention import FOLLOW_UP_PREFIX, reasons
from sundry.tickets.models import CannedReply, Tag, Ticket, Turn
from sundry.tooling.domain import domain_for
from sundry.tooling.records import records_for
from sundry.tooling.tools import REGISTRY


def _colleagues():
    return get_user_model().objects.filter(is_staff=True, is_active=True).order_by("username")


HEAD_ANNOTATIONS = ("head_tag_names", "head_colleagues")


def with_head(tickets):
    """`tickets` with what the head shows beside the row, read in the same statement on
    PostgreSQL (as arrays): its tags and the colleagues it may be assigned to. `head_context`
    takes them from a ticket read so, and reads them itself from any other."""
    if connection.vendor != "postgresql":
        return tickets
    return tickets.annotate(
        head_tag_names=ArraySubquery(Tag.objects.filter(tickets=OuterRef("pk")).order_by("name").values("name")),
        head_colleagues=ArraySubquery(
            _colleagues().values(row=JSONObject(id="id", username="username", first_name="first_name"))
        ),
    )


def _head_colleagues(ticket) -> list:
    rows = getattr(ticket, "head_colleagues", None)
    if rows is None:
        return list(_colleagues().only("pk", "username", "first_name"))
    user, names = get_user_model(), ("id", "username", "first_name")
    # As `.only()` builds them: these fields set, the others deferred (not defaulted: a default
    # join date would be a new time on every rendering, and the head's digest with it).
    rows = [json.loads(r) if isinstance(r, str) else r for r in rows]
    return [user.from_db(connection.alias, names, [r[n] for n in names]) for r in rows]


def head_context(ticket) -> dict:
    tag_names = getattr(ticket, "head_tag_names", None)
    return {
        # Each reason on its own line with its own button: handling one never clears another.
        "attention_reasons": [
            {"text": r, "handled": r.startswith((FLAG_PREFIX, FOLLOW_UP_PREFIX))} for r in reasons(ticket.attention)
        ],
        "colleagues": _head_colleagues(ticket),
        "tag_names": list(ticket.tags.values_list("name", flat=True)) if tag_names is None else tag_names,
        "timer": ticket_timer(ticket),
        **_rating(ticket),
        "statuses": Ticket.Status.choices,
        "priorities": Ticket.Priority.choices,
    }


def _rating(ticket) -> dict:
    rating = satisfaction.rating_as_read(ticket)
    return {"rating": rating, "rating_label": satisfaction.SCORES.get(rating.score, "") if rating else ""}


def customer_context(ticket) -> dict:
    """The customer behind the ticket: contact details, their recent records in their domain (a shop's
    orders), other tickets, rules that carry over."""
    customer = ticket.customer
    records = records_for(domain_of(customer))
    recent = records.recent(customer.external_key, 5)
    return {
        "customer": customer,
        "records": records,
        "recent": recent,
        # Fewer than asked for: that is all of them, and counting them again is another statement.
        "record_count": len(recent) if len(recent) < 5 else records.count(customer.external_key),
        "past_tickets": list(
            Ticket.objects.filter(customer=customer)
            .exclude(pk=ticket.pk)
            .order_by("-updated_at")
            .only("pk", "subject", "status", "updated_at")[:5]
        ),
        "carried_rules": list(
            PinnedRule.objects.filter(
                ticket__customer=customer, scope=PinnedRule.Scope.CUSTOMER, status=PinnedRule.Status.ACTIVE
            )
            .exclude(ticket=ticket)
            .values_list("text", flat=True)
            .distinct()[:10]
        ),
    }


def canned_replies(ticket, user) -> list[dict]:
    """The canned replies offered on this ticket, placeholders filled from the ticket and the person
    (sundry.desk.canned: one without a value is left as a note to fill in, never dropped)."""
    from django.db.models import Q

    # {order_number} fills from the field that names the ticket's record in its customer's domain (the
    # picker's field); stored replies keep the placeholder's name.
    field = records_for(domain_of(ticket.customer)).pick_field
    order = (
        StateValue.objects.filter(ticket=ticket, name=field, is_current=True).values_list("value", flat=True).first()
        if field
        else None
    ) or ""
    name = ticket.customer.name or ""
    values = dict(
        customer_name=name,
        customer_first_name=name.split(" ")[0] if name else "",
        order_number=order,
        ticket_number=str(ticket.pk),
        my_first_name=user.first_name or user.get_username(),
    )
    return [
        {"title": reply.title, "text": canned.fill(reply.body, values)}
        for reply in CannedReply.objects.filter(Q(ticket_class__isnull=True) | Q(ticket_class=ticket.ticket_class))
    ]


def approval_cards(ticket, held_actions) -> list[dict]:
    """What a person needs to decide a held call: the record it acts on (an order's items, paid, already
    refunded — as the customer's domain words them), the customer's own words that led to it, equal
    actions pending or done, and whether it is reversible."""
    records = records_for(domain_of(ticket.customer))
    domain = domain_for(ticket.ticket_class)
    cards = []
    for h in held_actions:
        args = h.arguments or {}
        number = records.reference(args)
        amount = None
        if args.get("amount") not in (None, "") and args.get("currency"):
            try:
                amount = money.format_money(
                    money.parse_major(str(args["amount"]), str(args["currency"])), str(args["currency"])
                )
            except money.MoneyError:
                amount = f"{args['amount']} {args['currency']}"
        words = (
            Turn.objects.filter(ticket=ticket, author=Turn.Author.CUSTOMER, kind=Turn.Kind.MESSAGE, number__lte=h.turn)
            .order_by("-number")
            .values_list("text", flat=True)
            .first()
        )
        same = [
            {"what": f"{o.tool} {o.get_status_display().lower()}", "turn": o.turn}
            for o in HeldAction.objects.filter(ticket=ticket, tool=h.tool)
            .exclude(pk=h.pk)
            .exclude(status=HeldAction.Status.REJECTED)
            if records.reference_arg and (o.arguments or {}).get(records.reference_arg) == number
        ]
        same += (
            [
                {"what": f"{a.tool} done", "turn": a.turn}
                for a in ActionTaken.objects.filter(ticket=ticket, tool=h.tool, target=number)
            ]
            if number
            else []
        )
        tool = REGISTRY.get(h.tool)
        title = records.held_title(h.tool, amount, number)
        cards.append(
            {
                "h": h,
                "args": pretty(h.arguments),
                "record": records.facts(number) if number else None,
                "noun": records.noun,
                "amount": amount,
                "words": words,
                "reason": heldreason.for_people(h.reason),
                "same": same,
                "confirm": domain.moves_money(h.tool) or (tool is not None and not tool.reversible),
                "title": title[:1].upper() + title[1:],
                "confirm_label": "Confirm: " + title,
            }
        )
    return cards
