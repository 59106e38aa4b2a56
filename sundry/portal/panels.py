"""The customer page's live panels: what a customer sees of their own ticket, registered with
the panel kit (`sundry.live.panels`) as the customer audience when the portal app loads. Built
from the portal's own selectors: no internal lane reaches their context."""

from __future__ import annotations

from django.core.exceptions import PermissionDenied

from sundry.agent import cardstore
from sundry.context.models import PinnedRule
from sundry.live import fingerprint
from sundry.live.panels import CUSTOMER, Audience, Panel, Viewer, register, shared_read, turns_after, window
from sundry.people.selectors import customer_of
from sundry.portal.selectors import (
    completed_actions,
    confirmed_details,
    confirmed_values,
    customer_conversation,
    customer_messages,
    order_choices,
    staff_decisions,
    staff_names,
)
from sundry.tickets import satisfaction
from sundry.tickets.models import Ticket
from sundry.tickets.versions import (
    ACTIONS,
    ATTACHMENTS,
    CARDS,
    HELD,
    LEDGER,
    MONEY,
    RATING,
    RULES,
    STATE,
    SUMMARY,
    TURNS,
)


def _owner(ticket, viewer: Viewer) -> None:
    if viewer.audience != CUSTOMER or viewer.customer is None or ticket.customer_id != viewer.customer.pk:
        raise PermissionDenied("customer panel")


def _customer_conversation(ticket, viewer, previous=None):
    _owner(ticket, viewer)

    n = window()
    if not n:
        return customer_conversation(ticket)
    if previous is not None and previous["items"]:
        # A message never changes: read only the ones after the last one shown.
        new = turns_after(customer_messages(ticket), previous["items"][-1].number, n)
        if not new:
            return previous  # a message never changes: the panel as it was
        if len(new) <= n:
            items = previous["items"] + new
            return {
                "items": items[-n:],
                "names": staff_names(new, previous["names"]),
                "earlier": previous["earlier"] or len(items) > n,
            }
    return customer_conversation(ticket, last=n)


def _customer_turn_key(turn, context):
    return f"msg-{turn.number}", turn.pk


def _confirmed(ticket) -> list:
    """The current, confirmed values: the details show them, the order picker names its one."""
    return shared_read(("confirmed_values", ticket.pk), lambda: confirmed_values(ticket))


def _customer_details(ticket, viewer):
    _owner(ticket, viewer)

    return {
        "details": confirmed_details(ticket, _confirmed(ticket)),
        "done": completed_actions(ticket),
        "decisions": staff_decisions(ticket),
    }


def _customer_cards(ticket, viewer):
    _owner(ticket, viewer)

    return {"cards": cardstore.open_cards(ticket)}


def _customer_instructions(ticket, viewer):
    _owner(ticket, viewer)

    # Their own words only: a rule staff or the model wrote is the desk's, not the customer's.
    return {
        "rules": list(
            PinnedRule.objects.filter(ticket=ticket, source="customer", status__in=["active", "candidate"]).order_by(
                "turn", "id"
            )
        )
    }


def _customer_orders(ticket, viewer):
    _owner(ticket, viewer)

    return order_choices(ticket, _confirmed(ticket))


def _customer_rating(ticket, viewer):
    _owner(ticket, viewer)

    rating = satisfaction.rating_as_read(ticket)
    return {
        "rating": rating,
        "rating_label": satisfaction.SCORES.get(rating.score) if rating else "",
        "ratable": ticket.status == Ticket.Status.RESOLVED,
        "scores": list(satisfaction.SCORES.items()),
        "comment_limit": satisfaction.COMMENT_LIMIT,
    }


CUSTOMER_PANELS: dict[str, Panel] = {
    p.name: p
    for p in [
        Panel(
            "details",
            "portal/panels/details.html",
            _customer_details,
            reads=frozenset({STATE, ACTIONS, HELD, TURNS, LEDGER, MONEY, RULES, SUMMARY}),
        ),
        # The customer's orders are the domain's (`outside`); which one is picked, the state lane's.
        Panel("orders", "portal/panels/orders.html", _customer_orders, reads=frozenset({STATE, ACTIONS}), outside=True),
        Panel("cards", "portal/panels/cards.html", _customer_cards, reads=frozenset({CARDS})),
        Panel("instructions", "portal/panels/instructions.html", _customer_instructions, reads=frozenset({RULES})),
        Panel("rating", "portal/panels/rating.html", _customer_rating, reads=frozenset({RATING})),
        Panel(
            "conversation",
            "portal/panels/conversation.html",
            _customer_conversation,
            item_template="portal/panels/message.html",
            item_key=_customer_turn_key,
            reads=frozenset({TURNS, ATTACHMENTS}),
        ),
    ]
}


def _watch(user, ticket_id: int):
    customer = customer_of(user)
    if customer is None:
        return None, None
    tickets = Ticket.objects.select_related("customer", "ticket_class", "assigned_to")
    ticket = tickets.filter(pk=ticket_id, customer=customer).first()
    return (ticket, Viewer(user, CUSTOMER, customer)) if ticket else (None, None)


def _earlier(ticket, viewer: Viewer, n: int):
    _owner(ticket, viewer)
    return (
        lambda before: customer_conversation(ticket, last=n, before=before),
        lambda item: item.number,
        customer_messages(ticket),
    )


fingerprint.read_with("tickets.ticket", {"rating"})  # the rating panel's context carries it


def _reach(tickets, viewer: Viewer):
    """A customer sees their own tickets; the one a rendering reads comes with its rating."""
    return tickets.filter(customer=viewer.customer).select_related(satisfaction.RATING_WITH_TICKET)


register(Audience(CUSTOMER, CUSTOMER_PANELS, _watch, _reach, _earlier))
