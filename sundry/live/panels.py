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
import re
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Callable

from django.core.exceptions import PermissionDenied
from django.template.loader import render_to_string
from django.utils.safestring import mark_safe


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
    # A list panel (the conversation) renders item by item: `build` returns
    # `items`, `item_key(item, context)` gives each one's DOM id and what its
    # rendering depends on, and the panel template places `items_html`. A push
    # then appends new items and replaces changed ones instead of re-sending
    # the list, and an unchanged item is never rendered twice.
    item_template: str | None = None
    item_key: Callable[[object, dict], tuple[str, object]] | None = None

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


def _pending_held(ticket) -> list:
    from sundry.agent.models import HeldAction

    return list(HeldAction.objects.filter(ticket=ticket, status="pending").order_by("id"))


def _staff_head(ticket, viewer):
    _staff(viewer)
    return {"held_count": len(_pending_held(ticket))}


def _staff_conversation(ticket, viewer):
    _staff(viewer)
    from sundry.tickets import selectors

    return selectors.conversation(ticket)


def _staff_turn_key(item, context):
    # A turn never changes; how it shows does: compacted or not, and the compaction marks after it.
    turn = item.turn
    marks = tuple((r.pk, r.status, r.tokens_before, r.tokens_after) for r in item.runs)
    return f"turn-{turn.number}", (turn.pk, turn.number <= context["covered"], marks)


def _staff_held(ticket, viewer):
    _staff(viewer)
    from sundry.tickets.selectors import pretty

    return {"held": [{"h": h, "args": pretty(h.arguments)} for h in _pending_held(ticket)]}


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
    Panel("conversation", "tickets/panels/conversation.html", _staff_conversation,
          item_template="tickets/panels/turn.html", item_key=_staff_turn_key),
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

    return {"items": customer_turns(ticket)}


def _customer_turn_key(turn, context):
    return f"msg-{turn.number}", turn.pk


def _customer_details(ticket, viewer):
    _owner(ticket, viewer)
    from sundry.portal.selectors import completed_actions, confirmed_details

    return {"details": confirmed_details(ticket), "done": completed_actions(ticket)}


def _customer_orders(ticket, viewer):
    _owner(ticket, viewer)
    from sundry.portal.selectors import order_choices

    return order_choices(ticket)


CUSTOMER_PANELS: dict[str, Panel] = {p.name: p for p in [
    Panel("details", "portal/panels/details.html", _customer_details),
    Panel("orders", "portal/panels/orders.html", _customer_orders),
    Panel("conversation", "portal/panels/conversation.html", _customer_conversation,
          item_template="portal/panels/message.html", item_key=_customer_turn_key),
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


@dataclass(frozen=True)
class Parts:
    """A rendered panel: its HTML and, for a list panel, its shell (the panel with no
    items) and each item's (DOM id, HTML) in order."""

    html: str
    shell: str = ""
    items: tuple[tuple[str, str], ...] | None = None


class Rendering(dict):
    """name → panel HTML, as every caller reads it; `parts` keeps list panels' items."""

    def __init__(self, parts: dict[str, Parts]):
        super().__init__((name, p.html) for name, p in parts.items())
        self.parts = parts


# Rendered items, shared by every version and watcher that shows them unchanged.
_ITEMS: "OrderedDict[tuple, str]" = OrderedDict()
_ITEMS_MAX = 20000
_ITEMS_LOCK = threading.Lock()


def _render_item(panel: Panel, ticket, viewer: Viewer, context: dict, item) -> tuple[str, str]:
    dom_id, depends_on = panel.item_key(item, context)
    key = (panel.item_template, viewer.audience, ticket.pk, ticket.created_at, dom_id, depends_on)
    with _ITEMS_LOCK:
        html = _ITEMS.get(key)
        if html is not None:
            _ITEMS.move_to_end(key)
            return dom_id, html
    html = render_to_string(panel.item_template, {**context, "item": item, "item_id": dom_id}).strip()
    with _ITEMS_LOCK:
        _ITEMS[key] = html
        while len(_ITEMS) > _ITEMS_MAX:
            _ITEMS.popitem(last=False)
    return dom_id, html


def render_panel_parts(panel: Panel, ticket, viewer: Viewer, extra: dict | None = None) -> Parts:
    context = {"ticket": ticket, "viewer": viewer, "panel_id": panel.dom_id, **panel.build(ticket, viewer)}
    if extra:
        context.update(extra)
    if panel.item_template is None:
        return Parts(render_to_string(panel.template, context))
    items = tuple(_render_item(panel, ticket, viewer, context, item) for item in context["items"])
    shell = render_to_string(panel.template, {**context, "items_html": ""})
    html = render_to_string(panel.template, {**context, "items_html": mark_safe("\n".join(h for _, h in items))})
    return Parts(html, shell, items)


def render_panel(panel: Panel, ticket, viewer: Viewer, extra: dict | None = None) -> str:
    return render_panel_parts(panel, ticket, viewer, extra).html


def render_all(ticket, viewer: Viewer) -> Rendering:
    return Rendering({name: render_panel_parts(panel, ticket, viewer)
                      for name, panel in REGISTRIES[viewer.audience].items()})


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


_HASHES: "dict[int, tuple[dict, dict]]" = {}


def _hashes(rendered: dict[str, str]) -> dict:
    """Digests of a rendering: one per panel, and for list panels the shell's and each item's.

    Computed once per rendering, and the same dict is handed to every watcher
    (read-only): watchers that were sent the same frame then hold the same
    object, which is what lets `_compose` build each distinct frame only once.
    """
    key = id(rendered)
    cached = _HASHES.get(key)
    if cached is None or cached[0] is not rendered:  # the identity check guards against a reused id()
        hashes = {name: digest(html) for name, html in rendered.items()}
        for name, parts in getattr(rendered, "parts", {}).items():
            if parts.items is not None:
                hashes[f"{name}#shell"] = digest(parts.shell)
                hashes[f"{name}#items"] = tuple((dom_id, digest(html)) for dom_id, html in parts.items)
        if len(_HASHES) > 512:
            _HASHES.clear()
        cached = _HASHES[key] = (rendered, hashes)
    return cached[1]


_FIRST_TAG = re.compile(r"^(\s*<[A-Za-z][\w-]*)")


def _list_update(rendered, name: str, hashes: dict, sent: dict) -> str:
    """A changed list panel as the watcher needs it: the items that changed, replaced by id,
    and the new ones appended; the whole panel when it was not only items that changed
    (its shell differs, an item went away or moved, or the watcher holds no items yet)."""
    parts = getattr(rendered, "parts", {}).get(name)
    before, now = sent.get(f"{name}#items"), hashes.get(f"{name}#items")
    if (parts is None or parts.items is None or not before or len(now) < len(before)
            or sent.get(f"{name}#shell") != hashes.get(f"{name}#shell")
            or any(old[0] != new[0] for old, new in zip(before, now))):
        return rendered[name]
    replaced = [_FIRST_TAG.sub(r'\1 hx-swap-oob="true"', parts.items[i][1], count=1)
                for i, (old, new) in enumerate(zip(before, now)) if old[1] != new[1]]
    added = [html for _, html in parts.items[len(before):]]
    out = "".join(replaced)
    if added:
        out += f'<div hx-swap-oob="beforeend:#panel-{name}">{"".join(added)}</div>'
    return out


_BODIES: "dict[tuple, tuple]" = {}


def _compose(access, rendered, version, sent_version, sent_hashes) -> Frame:
    hashes = _hashes(rendered)
    # Hundreds of watchers a push wakes mostly hold the same previous frame (the same
    # hashes object): build each distinct frame once.
    key = (id(rendered), version, sent_version, id(sent_hashes))
    hit = _BODIES.get(key)
    if hit is not None and hit[0] is rendered and hit[1] is sent_hashes:
        kind, names, html = hit[2]
    else:
        snapshot = sent_hashes is None
        names = list(rendered) if snapshot else [n for n in rendered if sent_hashes.get(n) != hashes[n]]
        kind = "snapshot" if snapshot else "diff"
        body = "".join(rendered[n] if snapshot else _list_update(rendered, n, hashes, sent_hashes) for n in names)
        html = _marker(version, sent_version, kind) + body
        if len(_BODIES) > 1024:
            _BODIES.clear()
        _BODIES[key] = (rendered, sent_hashes, (kind, names, html))
    return Frame(version=version, kind=kind, base=sent_version, html=html,
                 hashes=hashes, panels=names, access=access)
