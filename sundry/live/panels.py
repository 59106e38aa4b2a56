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
import sys
from dataclasses import dataclass
from typing import Callable

from django.conf import settings
from django.core.exceptions import PermissionDenied
from django.template.loader import render_to_string
from django.utils.safestring import mark_safe

from sundry.agent import cardstore
from sundry.agent.models import HeldAction
from sundry.context.models import LedgerEntry, PinnedRule
from sundry.context.selectors import current_summary, lane_snapshot
from sundry.context.statefields import fields_for
from sundry.core.people import is_desk_staff
from sundry.core.tokens import count_tokens
from sundry.live.fingerprint import fingerprint
from sundry.live.rendercache import ByteBoundedCache
from sundry.people.selectors import customer_of
from sundry.portal.selectors import (
    completed_actions,
    confirmed_details,
    customer_conversation,
    customer_messages,
    order_choices,
    staff_decisions,
    staff_names,
)
from sundry.tickets import satisfaction, selectors
from sundry.tickets.desk import approval_cards, customer_context, head_context
from sundry.tickets.models import Ticket, Turn
from sundry.tickets.selectors import pretty

STAFF = "staff"
CUSTOMER = "customer"


@dataclass(frozen=True)
class Viewer:
    user: object
    audience: str  # STAFF or CUSTOMER
    customer: object = None  # the desk's customer record (sundry.people), for CUSTOMER viewers


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
    # A list panel's `build(ticket, viewer, previous)` may extend the context of the rendering
    # before (`previous`, None when there is none) with what is new instead of reading it all.
    # It shows the latest `window()` items; older ones are fetched by the page (`earlier_html`).

    @property
    def dom_id(self) -> str:
        return f"panel-{self.name}"


def _staff(viewer: Viewer) -> None:
    if viewer.audience != STAFF or not is_desk_staff(viewer.user):
        raise PermissionDenied("staff panel")


def _owner(ticket, viewer: Viewer) -> None:
    if viewer.audience != CUSTOMER or viewer.customer is None or ticket.customer_id != viewer.customer.pk:
        raise PermissionDenied("customer panel")


# --- staff builders ------------------------------------------------------------------------


def _pending_held(ticket) -> list:
    return list(HeldAction.objects.filter(ticket=ticket, status="pending").order_by("id"))


def _staff_head(ticket, viewer):
    _staff(viewer)

    return {"held_count": len(_pending_held(ticket)), **head_context(ticket)}


def window() -> int:
    """How many items a list panel shows at first (the latest); 0: every item, re-read on every push
    (the way the conversation was rendered before, kept as the benchmarks' control)."""
    return settings.LIVE_CONVERSATION_WINDOW


def _marks_basis(marks: dict) -> tuple:
    """What the staff conversation's items show beside their turns, as plain data to compare."""
    runs = tuple(
        (through, r.pk, r.status, r.tokens_before, r.tokens_after, r.from_turn)
        for through, rs in sorted(marks["runs"].items())
        for r in rs
    )
    return marks["covered"], runs, tuple(marks["ledger"].items())


def _staff_conversation(ticket, viewer, previous=None):
    _staff(viewer)

    n = window()
    if not n:
        return selectors.conversation(ticket)
    marks = selectors.conversation_marks(ticket)
    basis = _marks_basis(marks)
    if previous is not None and previous.get("basis") == basis and previous["items"]:
        # Nothing the shown turns depend on changed: read only the turns after the last one shown.
        new = selectors.turns_after(Turn.objects.filter(ticket=ticket), previous["items"][-1].turn.number, n)
        if not new:
            return previous  # nothing new: the panel as it was
        if len(new) <= n:
            items = previous["items"] + selectors.conversation_items(new, previous["marks"])
            return {
                "items": items[-n:],
                "covered": marks["covered"],
                "earlier": previous["earlier"] or len(items) > n,
                "marks": previous["marks"],
                "basis": basis,
            }
    items, earlier = selectors.latest_turns(Turn.objects.filter(ticket=ticket), n)
    return {
        "items": selectors.conversation_items(items, marks),
        "covered": marks["covered"],
        "earlier": earlier,
        "marks": marks,
        "basis": basis,
    }


def _staff_turn_key(item, context):
    # A turn never changes; how it shows does: compacted or not, the compaction marks after it, and
    # the ledger's descriptions its result's card borrows.
    turn = item.turn
    marks = tuple((r.pk, r.status, r.tokens_before, r.tokens_after) for r in item.runs)
    borrowed = item.card.depends_on if item.card is not None else ()
    return f"turn-{turn.number}", (turn.pk, turn.number <= context["covered"], marks, borrowed)


def _cards(ticket) -> list:
    cards = cardstore.open_cards(ticket)
    for card in cards:
        card.pretty = pretty({"tool": card.tool, "arguments": card.arguments})
    return cards


def _staff_held(ticket, viewer):
    _staff(viewer)

    return {"held": approval_cards(ticket, _pending_held(ticket)), "cards": _cards(ticket)}


def _staff_rules(ticket, viewer):
    _staff(viewer)

    rules = list(PinnedRule.objects.filter(ticket=ticket, status__in=["active", "candidate"]).order_by("turn", "id"))
    active = [r for r in rules if r.status == "active"]
    # The cap is a warning, never a reason to drop a rule.
    tokens = count_tokens("\n".join(r.text for r in active), ticket.ticket_class.working_model) if active else 0
    return {
        "active": active,
        "candidates": [r for r in rules if r.status == "candidate"],
        "scopes": PinnedRule.Scope.choices,
        "rules_tokens": tokens,
        "over_cap": tokens > ticket.ticket_class.pinned_rules_cap,
    }


def _staff_ledger(ticket, viewer):
    _staff(viewer)

    entries = LedgerEntry.objects.filter(ticket=ticket)
    active = list(
        entries.filter(status="active").select_related("superseded_by_user").order_by("first_seen_turn", "id")
    )
    # Whose each record is, where a tool server's declaration says: another customer's is marked.
    ours = {e.value for e in active if e.identifies_customer}
    for e in active:
        e.someone_else = bool(e.customer) and e.customer not in ours and e.customer != e.value
    return {"ledger": active, "archived_count": entries.filter(status="archived").count()}


def _staff_state(ticket, viewer):
    _staff(viewer)

    snap = lane_snapshot(ticket, with_turns=False)
    return {
        "fields": selectors.state_fields(ticket),
        "all_fields": [(f.name, f.label) for f in fields_for(ticket).values()],
        "actions": snap.actions,
        "money": snap.money,
    }


def _staff_summary(ticket, viewer):
    _staff(viewer)

    return {"summary": current_summary(ticket), "runs": selectors.compactions(ticket)}


def _staff_budget(ticket, viewer):
    _staff(viewer)

    return selectors.budget(ticket)


def _staff_customer(ticket, viewer):
    _staff(viewer)

    return customer_context(ticket)


STAFF_PANELS: dict[str, Panel] = {
    p.name: p
    for p in [
        Panel("head", "tickets/panels/head.html", _staff_head),
        Panel(
            "conversation",
            "tickets/panels/conversation.html",
            _staff_conversation,
            item_template="tickets/panels/turn.html",
            item_key=_staff_turn_key,
        ),
        Panel("held", "tickets/panels/held.html", _staff_held),
        Panel("customer", "tickets/panels/customer.html", _staff_customer),
        Panel("rules", "tickets/panels/rules.html", _staff_rules),
        Panel("state", "tickets/panels/state.html", _staff_state),
        Panel("ledger", "tickets/panels/ledger.html", _staff_ledger),
        Panel("summary", "tickets/panels/summary.html", _staff_summary),
        Panel("budget", "tickets/panels/budget.html", _staff_budget),
    ]
}


# --- customer builders -----------------------------------------------------------------------


def _customer_conversation(ticket, viewer, previous=None):
    _owner(ticket, viewer)

    n = window()
    if not n:
        return customer_conversation(ticket)
    if previous is not None and previous["items"]:
        # A message never changes: read only the ones after the last one shown.
        new = selectors.turns_after(customer_messages(ticket), previous["items"][-1].number, n)
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


def _customer_details(ticket, viewer):
    _owner(ticket, viewer)

    return {
        "details": confirmed_details(ticket),
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

    return order_choices(ticket)


def _customer_rating(ticket, viewer):
    _owner(ticket, viewer)

    rating = satisfaction.rating_of(ticket)
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
        Panel("details", "portal/panels/details.html", _customer_details),
        Panel("orders", "portal/panels/orders.html", _customer_orders),
        Panel("cards", "portal/panels/cards.html", _customer_cards),
        Panel("instructions", "portal/panels/instructions.html", _customer_instructions),
        Panel("rating", "portal/panels/rating.html", _customer_rating),
        Panel(
            "conversation",
            "portal/panels/conversation.html",
            _customer_conversation,
            item_template="portal/panels/message.html",
            item_key=_customer_turn_key,
        ),
    ]
}

REGISTRIES = {STAFF: STAFF_PANELS, CUSTOMER: CUSTOMER_PANELS}


# --- who may watch ---------------------------------------------------------------------------


def viewer_for(user, audience: str, ticket_id: int):
    """The ticket and viewer if `user` may watch it as `audience`; else (None, None).

    A ticket that does not exist and one the user may not see look the same.
    """

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


@dataclass(frozen=True, eq=False)
class Parts:
    """A rendered panel: its HTML and, for a list panel, its shell (the panel with no
    items) and each item's (DOM id, HTML) in order. `basis`, kept for the next rendering:
    the context's fingerprint (a panel), or the context itself (a list panel, to extend)."""

    html: str
    shell: str = ""
    items: tuple[tuple[str, str], ...] | None = None
    basis: object = None
    item_digests: tuple[str, ...] = ()

    @functools.cached_property
    def digests(self) -> dict:
        """The panel's digest, and for a list panel its shell's and items': computed once, so a
        panel carried over unchanged into the next rendering is not digested again."""
        out = {"": digest(self.html)}
        if self.items is not None:
            out["#shell"] = digest(self.shell)
            out["#items"] = tuple((dom_id, d) for (dom_id, _), d in zip(self.items, self.item_digests))
        return out


class Rendering(dict):
    """name → panel HTML, as every caller reads it; `parts` keeps list panels' items.

    A rendering made for the websockets also knows the ticket version it shows
    and keeps the diff frames composed from it (see `compose`).
    """

    def __init__(self, parts: dict[str, Parts], version: int | None = None):
        super().__init__((name, p.html) for name, p in parts.items())
        self.parts = parts
        self.version = version
        self.cache_key = None
        self.frames: dict = {}

    @functools.cached_property
    def hashes(self) -> dict:
        """Digests: one per panel, and for list panels the shell's and each item's.

        The same dict is handed to every watcher sent a frame of this rendering
        (read-only): watchers at the same frame then hold the same object, which
        is what lets `compose` build each distinct diff only once.
        """
        hashes = {}
        for name, parts in self.parts.items():
            for suffix, value in parts.digests.items():
                hashes[name + suffix] = value
        return hashes

    def nbytes(self) -> int:
        """What the rendering holds, items counted even when shared with the item cache."""
        size = sum(sys.getsizeof(html) for html in self.values())
        for parts in self.parts.values():
            size += sys.getsizeof(parts.shell) + sum(sys.getsizeof(html) for _, html in parts.items or ())
        return size


# Renderings (keyed by audience, ticket and version) and conversation items (keyed
# by what their rendering depends on), bounded together by LIVE_RENDER_CACHE_BYTES.
CACHE = ByteBoundedCache(lambda: settings.LIVE_RENDER_CACHE_BYTES)


def _render_item(panel: Panel, ticket, viewer: Viewer, context: dict, item) -> tuple[str, str, str]:
    """(DOM id, HTML, digest): rendered and digested once per way the item shows."""
    dom_id, depends_on = panel.item_key(item, context)
    key = ("item", panel.item_template, viewer.audience, ticket.pk, ticket.created_at, dom_id, depends_on)
    hit = CACHE.get(key)
    if hit is None:
        html = render_to_string(panel.item_template, {**context, "item": item, "item_id": dom_id}).strip()
        hit = (html, digest(html))
        CACHE.put(key, hit, sys.getsizeof(html) + 80)
    return dom_id, hit[0], hit[1]


def render_panel_parts(
    panel: Panel, ticket, viewer: Viewer, extra: dict | None = None, previous: Parts | None = None, keep: bool = False
) -> Parts:
    """Render one panel. `keep`: note what the next rendering needs to skip or extend it, and
    reuse `previous` (this panel's parts in the rendering before) where its data is the same."""
    if panel.item_template is not None:
        built = panel.build(ticket, viewer, previous.basis if previous is not None else None)
        if keep and previous is not None and built is previous.basis and not extra:
            return previous
    else:
        built = panel.build(ticket, viewer)
    context = {"ticket": ticket, "viewer": viewer, "panel_id": panel.dom_id, "window": window(), **built}
    if extra:
        context.update(extra)
    if panel.item_template is None:
        if not keep:
            return Parts(render_to_string(panel.template, context))
        basis = fingerprint(context)
        if basis is not None and previous is not None and previous.basis == basis:
            return previous  # the same data: the same HTML
        return Parts(render_to_string(panel.template, context), basis=basis)
    rendered = [_render_item(panel, ticket, viewer, context, item) for item in context["items"]]
    items = tuple((dom_id, html) for dom_id, html, _ in rendered)
    shell = render_to_string(panel.template, {**context, "items_html": ""})
    html = render_to_string(panel.template, {**context, "items_html": mark_safe("\n".join(h for _, h in items))})
    return Parts(html, shell, items, basis=built if keep else None, item_digests=tuple(d for _, _, d in rendered))


def render_panel(panel: Panel, ticket, viewer: Viewer, extra: dict | None = None) -> str:
    return render_panel_parts(panel, ticket, viewer, extra).html


def render_all(ticket, viewer: Viewer, previous: "Rendering | None" = None, keep: bool = False) -> Rendering:
    prior = previous.parts if previous is not None else {}
    return Rendering(
        {
            name: render_panel_parts(panel, ticket, viewer, previous=prior.get(name), keep=keep)
            for name, panel in REGISTRIES[viewer.audience].items()
        }
    )


def earlier_items(ticket, viewer: Viewer, before: int | None) -> dict:
    """The conversation's items before turn `before` (a window of them, oldest first; with no
    `before`, the window before the one the page opens at), rendered as the panel renders them:
    `items_html`, `first` (the first one's turn number), `earlier` (whether there are more)."""
    panel = REGISTRIES[viewer.audience]["conversation"]
    n = window() or 50
    if viewer.audience == STAFF:
        _staff(viewer)
        read, number = (lambda b: selectors.conversation(ticket, last=n, before=b)), (lambda item: item.turn.number)
        turns_of = Turn.objects.filter(ticket=ticket)
    else:
        _owner(ticket, viewer)
        read, number = (lambda b: customer_conversation(ticket, last=n, before=b)), (lambda item: item.number)
        turns_of = customer_messages(ticket)
    if before is None:
        latest, _ = selectors.latest_turns(turns_of, n)
        before = latest[0].number if latest else 0
    context = {"ticket": ticket, "viewer": viewer, "panel_id": panel.dom_id, "window": n, **read(before)}
    items = [_render_item(panel, ticket, viewer, context, item)[1] for item in context["items"]]
    return {
        "items_html": mark_safe("\n".join(items)),
        "earlier": context["earlier"],
        "first": number(context["items"][0]) if context["items"] else before,
    }


def _rendering_key(audience: str, ticket) -> tuple:
    return ("rendering", audience, ticket.pk, ticket.created_at)  # created_at: a reused pk is another ticket


def render_current(access: tuple) -> Rendering | None:
    """Render the ticket as it is now for an already-checked viewer, and keep it for
    the other watchers of its version in this process.

    The ticket row is read afresh (panels show its fields), still limited to
    what the viewer may see, and before the panels: the rendering is at least
    as new as the version it carries, and a later commit brings its own push.
    None if the ticket is gone from the viewer's reach.
    """

    checked, viewer = access
    tickets = Ticket.objects.select_related("customer", "ticket_class", "assigned_to").filter(pk=checked.pk)
    if viewer.audience == CUSTOMER:
        tickets = tickets.filter(customer=viewer.customer)
    ticket = tickets.first()
    if ticket is None or ticket.created_at != checked.created_at:
        return None
    # Staff panels do not vary by staff member and only the owning customer may
    # watch the customer's: one rendering serves every watcher of the version. The
    # latest one is kept per ticket and audience; the next is made from it: panels
    # whose data is unchanged keep their HTML, the conversation reads only new turns.
    key = _rendering_key(viewer.audience, ticket)
    previous = CACHE.get(key)
    if previous is not None and previous.version > ticket.version:
        previous = None  # a rendering newer than this read (made meanwhile): never build on it
    rendering = render_all(ticket, viewer, previous=previous, keep=True)
    rendering.version = ticket.version
    rendering.cache_key = key
    latest = CACHE.get(key)
    if latest is None or latest.version <= rendering.version:
        CACHE.put(key, rendering, rendering.nbytes())
    return rendering


def cached_rendering(access: tuple, version: int) -> Rendering | None:
    """The latest rendering made in this process, if it is still kept and shows `version` or later."""
    ticket, viewer = access
    rendering = CACHE.get(_rendering_key(viewer.audience, ticket))
    return rendering if rendering is not None and rendering.version >= version else None


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


@functools.lru_cache(maxsize=1024)
def _marker(version: int, base: int, kind: str) -> str:
    return render_to_string("live/marker.html", {"version": version, "base": base, "kind": kind})


_FIRST_TAG = re.compile(r"^(\s*<[A-Za-z][\w-]*)")


def _list_update(rendered: Rendering, name: str, hashes: dict, sent: dict) -> str:
    """A changed list panel as the watcher needs it: the items that changed, replaced by id,
    and the new ones appended; the whole panel when it was not only items that changed
    (its shell differs, an item went away or moved, or the watcher holds no items yet)."""
    parts = rendered.parts.get(name)
    before, now = sent.get(f"{name}#items"), hashes.get(f"{name}#items")
    if parts is None or parts.items is None or not before or sent.get(f"{name}#shell") != hashes.get(f"{name}#shell"):
        return rendered[name]
    # The panel shows a window of the latest items: the ones that left it at the front stay on the
    # page as they are (with any older ones the page fetched); the rest must begin the new window.
    shown = {dom_id for dom_id, _ in now}
    drop = 0
    while drop < len(before) and before[drop][0] not in shown:
        drop += 1
    kept = before[drop:]
    if not kept or len(now) < len(kept) or any(old[0] != new[0] for old, new in zip(kept, now)):
        return rendered[name]
    replaced = [
        _FIRST_TAG.sub(r'\1 hx-swap-oob="true"', parts.items[i][1], count=1)
        for i, (old, new) in enumerate(zip(kept, now))
        if old[1] != new[1]
    ]
    added = [html for _, html in parts.items[len(kept) :]]
    out = "".join(replaced)
    if added:
        out += f'<div hx-swap-oob="beforeend:#panel-{name}">{"".join(added)}</div>'
    return out


_FRAMES_PER_RENDERING = 16


def compose(rendered: Rendering, sent_version: int, sent_hashes: dict | None) -> Frame:
    """The frame a watcher that was last sent `sent_version` (with `sent_hashes`; None for
    a snapshot) receives for this rendering: the marker and the panels that changed."""
    hashes = rendered.hashes
    version = rendered.version
    if sent_hashes is None:
        names = list(rendered)
        html = _marker(version, sent_version, "snapshot") + "".join(rendered.values())
        return Frame(version, "snapshot", sent_version, html, hashes, names)
    # The watchers a push wakes mostly hold the same previous frame (the same hashes
    # object): each distinct diff is built once and kept with the rendering.
    key = (sent_version, id(sent_hashes))
    hit = rendered.frames.get(key)
    if hit is not None and hit[0] is sent_hashes:
        names, html = hit[1], hit[2]
    else:
        names = [n for n in rendered if sent_hashes.get(n) != hashes[n]]
        body = "".join(_list_update(rendered, n, hashes, sent_hashes) for n in names)
        html = _marker(version, sent_version, "diff") + body
        if len(rendered.frames) >= _FRAMES_PER_RENDERING:
            freed = sum(sys.getsizeof(h[2]) for h in rendered.frames.values())
            rendered.frames.clear()
            CACHE.charge(rendered.cache_key, rendered, -freed)
        rendered.frames[key] = (sent_hashes, names, html)
        CACHE.charge(rendered.cache_key, rendered, sys.getsizeof(html))
    return Frame(version, "diff", sent_version, html, hashes, names)
