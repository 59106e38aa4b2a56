"""Live panels as components: a name, a template whose root id is `panel-<name>`,
and a context builder that checks the viewer itself.

Staff and customers get separate registries, built from separate selectors and
templates, so the customer's rendering never has internal lanes in its
context. The page and the websocket render through the same functions, so a
push is exactly what a reload would show.
"""

from __future__ import annotations

import functools
import hashlib
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Callable

from django.core.exceptions import PermissionDenied
from django.template.loader import render_to_string

STAFF = "staff"
CUSTOMER = "customer"


@dataclass(frozen=True)
class Viewer:
    user: object
    audience: str  # STAFF or CUSTOMER
    customer: object = None  # the shop customer, for CUSTOMER viewers


@dataclass(frozen=True)
class Panel:
    name: str
    template: str
    build: Callable[[object, Viewer], dict]

    @property
    def dom_id(self) -> str:
        return f"panel-{self.name}"


def _staff(viewer: Viewer) -> None:
    from sundry.core.people import is_desk_staff

    if viewer.audience != STAFF or not is_desk_staff(viewer.user):
        raise PermissionDenied("staff panel")


def _owner(ticket, viewer: Viewer) -> None:
    if viewer.audience != CUSTOMER or viewer.customer is None or ticket.customer_id != viewer.customer.pk:
        raise PermissionDenied("customer panel")


# --- staff builders ------------------------------------------------------------------------


def _staff_head(ticket, viewer):
    _staff(viewer)
    from sundry.agent.models import HeldAction

    return {"held_count": HeldAction.objects.filter(ticket=ticket, status="pending").count()}


def _staff_conversation(ticket, viewer):
    _staff(viewer)
    from sundry.tickets import selectors

    return selectors.conversation(ticket)


def _staff_held(ticket, viewer):
    _staff(viewer)
    from sundry.agent.models import HeldAction
    from sundry.tickets.selectors import pretty

    held = HeldAction.objects.filter(ticket=ticket, status="pending").order_by("id")
    return {"held": [{"h": h, "args": pretty(h.arguments)} for h in held]}


def _staff_rules(ticket, viewer):
    _staff(viewer)
    from sundry.context.models import PinnedRule

    from sundry.core.tokens import count_tokens

    rules = list(PinnedRule.objects.filter(ticket=ticket, status__in=["active", "candidate"]).order_by("turn", "id"))
    active = [r for r in rules if r.status == "active"]
    # The cap is a warning, never a reason to drop a rule.
    tokens = count_tokens("\n".join(r.text for r in active), ticket.ticket_class.working_model) if active else 0
    return {"active": active, "candidates": [r for r in rules if r.status == "candidate"],
            "scopes": PinnedRule.Scope.choices, "rules_tokens": tokens,
            "over_cap": tokens > ticket.ticket_class.pinned_rules_cap}


def _staff_ledger(ticket, viewer):
    _staff(viewer)
    from sundry.context.models import LedgerEntry

    entries = LedgerEntry.objects.filter(ticket=ticket)
    return {"ledger": list(entries.filter(status="active").order_by("first_seen_turn", "id")),
            "archived_count": entries.filter(status="archived").count()}


def _staff_state(ticket, viewer):
    _staff(viewer)
    from sundry.context.selectors import lane_snapshot
    from sundry.context.statefields import FIELDS
    from sundry.tickets import selectors

    snap = lane_snapshot(ticket, with_turns=False)
    return {"fields": selectors.state_fields(ticket), "all_fields": [(f.name, f.label) for f in FIELDS.values()],
            "actions": snap.actions, "money": snap.money, "questions": snap.questions}


def _staff_summary(ticket, viewer):
    _staff(viewer)
    from sundry.context.selectors import current_summary
    from sundry.tickets import selectors

    return {"summary": current_summary(ticket), "runs": selectors.compactions(ticket)}


def _staff_budget(ticket, viewer):
    _staff(viewer)
    from sundry.tickets import selectors

    return selectors.budget(ticket)


STAFF_PANELS: dict[str, Panel] = {p.name: p for p in [
    Panel("head", "tickets/panels/head.html", _staff_head),
    Panel("conversation", "tickets/panels/conversation.html", _staff_conversation),
    Panel("held", "tickets/panels/held.html", _staff_held),
    Panel("rules", "tickets/panels/rules.html", _staff_rules),
    Panel("state", "tickets/panels/state.html", _staff_state),
    Panel("ledger", "tickets/panels/ledger.html", _staff_ledger),
    Panel("summary", "tickets/panels/summary.html", _staff_summary),
    Panel("budget", "tickets/panels/budget.html", _staff_budget),
]}


# --- customer builders -----------------------------------------------------------------------


def _customer_conversation(ticket, viewer):
    _owner(ticket, viewer)
    from sundry.portal.selectors import customer_turns

    return {"turns": customer_turns(ticket)}


def _customer_details(ticket, viewer):
    _owner(ticket, viewer)
    from sundry.portal.selectors import confirmed_details

    return {"details": confirmed_details(ticket)}


def _customer_orders(ticket, viewer):
    _owner(ticket, viewer)
    from sundry.portal.selectors import order_choices

    return order_choices(ticket)


CUSTOMER_PANELS: dict[str, Panel] = {p.name: p for p in [
    Panel("details", "portal/panels/details.html", _customer_details),
    Panel("orders", "portal/panels/orders.html", _customer_orders),
    Panel("conversation", "portal/panels/conversation.html", _customer_conversation),
]}

REGISTRIES = {STAFF: STAFF_PANELS, CUSTOMER: CUSTOMER_PANELS}


# --- who may watch ---------------------------------------------------------------------------


def viewer_for(user, audience: str, ticket_id: int):
    """The ticket and viewer if `user` may watch it as `audience`; else (None, None).

    A ticket that does not exist and one the user may not see look the same.
    """
    from sundry.core.people import customer_of, is_desk_staff
    from sundry.tickets.models import Ticket

    tickets = Ticket.objects.select_related("customer", "ticket_class", "assigned_to")
    if audience == STAFF and is_desk_staff(user):
        ticket = tickets.filter(pk=ticket_id).first()
        return (ticket, Viewer(user, STAFF)) if ticket else (None, None)
    if audience == CUSTOMER:
        customer = customer_of(user)
        ticket = tickets.filter(pk=ticket_id, customer=customer).first() if customer else None
        return (ticket, Viewer(user, CUSTOMER, customer)) if ticket else (None, None)
    return None, None


# --- rendering -------------------------------------------------------------------------------


def render_panel(panel: Panel, ticket, viewer: Viewer, extra: dict | None = None) -> str:
    context = {"ticket": ticket, "viewer": viewer, "panel_id": panel.dom_id, **panel.build(ticket, viewer)}
    if extra:
        context.update(extra)
    return render_to_string(panel.template, context)


def render_all(ticket, viewer: Viewer) -> dict[str, str]:
    return {name: render_panel(panel, ticket, viewer) for name, panel in REGISTRIES[viewer.audience].items()}


# One rendering per (audience, ticket, version) serves every watcher in this
# process: staff panels do not vary by staff member and only the owning
# customer may watch the customer's. Access is still checked per connection.
_RENDERED: "OrderedDict[tuple, dict[str, str]]" = OrderedDict()
_RENDERED_MAX = 256
_RENDERED_LOCK = threading.Lock()


def _render_cached(ticket, viewer: Viewer, version: int) -> dict[str, str]:
    key = (viewer.audience, ticket.pk, ticket.created_at, version)  # created_at: a reused pk is another ticket
    with _RENDERED_LOCK:
        if key in _RENDERED:
            _RENDERED.move_to_end(key)
            return _RENDERED[key]
    rendered = render_all(ticket, viewer)
    with _RENDERED_LOCK:
        _RENDERED[key] = rendered
        while len(_RENDERED) > _RENDERED_MAX:
            _RENDERED.popitem(last=False)
    return rendered


def digest(html: str) -> str:
    return hashlib.blake2b(html.encode(), digest_size=12).hexdigest()


@dataclass
class Frame:
    version: int
    kind: str  # "snapshot" (every panel) or "diff" (changed panels only)
    base: int  # the version the receiving page must be at for a diff to apply
    html: str
    hashes: dict[str, str]
    panels: list[str]
    access: tuple | None = None  # (ticket, viewer) as checked for this frame


def cached_rendering(audience: str, ticket, version: int) -> dict[str, str] | None:
    with _RENDERED_LOCK:
        return _RENDERED.get((audience, ticket.pk, ticket.created_at, version))


def frame_for(user, audience: str, ticket_id: int, *, sent_version: int = -1,
              sent_hashes: dict[str, str] | None = None, version: int | None = None,
              access: tuple | None = None) -> Frame | None:
    """Render what this viewer should receive now, or None if they may not watch.

    The version is read before the panels, so the rendering is at least as new
    as the version it carries; a later commit brings its own push. A caller
    that checked access recently may pass it (`access=(ticket, viewer)`) with
    the pushed `version`: when that version is already rendered, the frame
    costs no query at all — what keeps a push to hundreds of watchers fast.
    """
    from sundry.tickets.models import Ticket

    if access is not None and version is not None:
        frame = cached_frame(access, version, sent_version=sent_version, sent_hashes=sent_hashes)
        if frame is not None:
            return frame
    version = Ticket.objects.filter(pk=ticket_id).values_list("version", flat=True).first()
    ticket, viewer = viewer_for(user, audience, ticket_id)
    if ticket is None or version is None:
        return None
    ticket.version = version
    rendered = _render_cached(ticket, viewer, version)
    return _compose((ticket, viewer), rendered, version, sent_version, sent_hashes)


def render_current(access: tuple) -> int | None:
    """Render the ticket as it is now for an already-checked viewer, into the shared cache.

    The ticket row is read afresh (panels show its fields), still limited to
    what the viewer may see; returns the version rendered, or None if the
    ticket is gone from the viewer's reach.
    """
    from sundry.tickets.models import Ticket

    checked, viewer = access
    tickets = Ticket.objects.select_related("customer", "ticket_class", "assigned_to").filter(pk=checked.pk)
    if viewer.audience == CUSTOMER:
        tickets = tickets.filter(customer=viewer.customer)
    ticket = tickets.first()
    if ticket is None or ticket.created_at != checked.created_at:
        return None
    _render_cached(ticket, viewer, ticket.version)
    return ticket.version


def cached_frame(access: tuple, version: int, *, sent_version: int, sent_hashes) -> Frame | None:
    """The frame for an already-rendered version, without touching the database (None if not cached)."""
    ticket, viewer = access
    rendered = cached_rendering(viewer.audience, ticket, version)
    return None if rendered is None else _compose(access, rendered, version, sent_version, sent_hashes)


@functools.lru_cache(maxsize=1024)
def _marker(version: int, base: int, kind: str) -> str:
    return render_to_string("live/marker.html", {"version": version, "base": base, "kind": kind})


_HASHES: "dict[int, dict[str, str]]" = {}


def _hashes(rendered: dict[str, str]) -> dict[str, str]:
    # One digest per rendering, not per watcher (renderings are shared objects).
    key = id(rendered)
    cached = _HASHES.get(key)
    if cached is None or cached.get("__for__") is not rendered:
        cached = {name: digest(html) for name, html in rendered.items()}
        cached["__for__"] = rendered  # guards against a reused id()
        if len(_HASHES) > 512:
            _HASHES.clear()
        _HASHES[key] = cached
    return {k: v for k, v in cached.items() if k != "__for__"}


def _compose(access, rendered, version, sent_version, sent_hashes) -> Frame:
    hashes = _hashes(rendered)
    snapshot = sent_hashes is None
    names = list(rendered) if snapshot else [n for n in rendered if sent_hashes.get(n) != hashes[n]]
    kind = "snapshot" if snapshot else "diff"
    html = _marker(version, sent_version, kind) + "".join(rendered[n] for n in names)
    return Frame(version=version, kind=kind, base=sent_version, html=html,
                 hashes=hashes, panels=names, access=access)
