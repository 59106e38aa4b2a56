"""The panel kit: live panels as components, and how a ticket's panels are rendered and diffed.

A panel is a name, a template whose root id is `panel-<name>`, and a context builder that checks
the viewer itself. Each audience (staff, customers) registers its own panels, who may watch a
ticket as that audience, and how its conversation reads earlier items (`register`; the desk and
the customer page do so when their apps load), so this module knows no audience's data and the
customer's rendering never has internal lanes in its context. The page and the websocket render
through the same functions, so a push is exactly what a reload would show.
"""

from __future__ import annotations

import functools
import hashlib
import re
import sys
import time
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Callable

from django.conf import settings
from django.template.loader import render_to_string
from django.utils.safestring import mark_safe

from sundry.live.fingerprint import fingerprint
from sundry.live.rendercache import ByteBoundedCache
from sundry.tickets.models import Ticket
from sundry.tickets.versions import ALL

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
    # The tables the panel shows (model labels, as the writes stamp them: `sundry.tickets.versions`)
    # besides the ticket row: a push whose writes stamped none of them since the rendering before
    # neither reads nor renders the panel. None: read on every push.
    reads: frozenset[str] | None = None
    # It also shows records kept outside the ticket (the domain's, the customer's other tickets),
    # which no write of this ticket stamps: a push re-reads it when it is older than
    # `settings.LIVE_OUTSIDE_SECONDS` even with nothing of its own stamped.
    outside: bool = False

    @property
    def dom_id(self) -> str:
        return f"panel-{self.name}"


def window() -> int:
    """How many items a list panel shows at first (the latest); 0: every item, re-read on every push
    (the way the conversation was rendered before, kept as the benchmarks' control)."""
    return settings.LIVE_CONVERSATION_WINDOW


# --- audiences -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Audience:
    """One kind of watcher: its panels, who may watch which ticket, and its conversation's reads.

    `watch(user, ticket_id)`: the ticket and viewer if the user may watch it, else (None, None) —
    a ticket that does not exist and one the user may not see look the same. `reach(tickets,
    viewer)`: the tickets the viewer may still see, to re-read a ticket before a render.
    `earlier(ticket, viewer, n)`: for the conversation's earlier items, (read(before) → the
    panel's context, number(item) → its turn number, the turns it is made of).
    """

    name: str
    panels: dict[str, Panel]
    watch: Callable[[object, int], tuple]
    reach: Callable[[object, Viewer], object]
    earlier: Callable[[object, Viewer, int], tuple]


AUDIENCES: dict[str, Audience] = {}


def register(audience: Audience) -> None:
    AUDIENCES[audience.name] = audience


def panels_of(audience: str) -> dict[str, Panel]:
    return AUDIENCES[audience].panels


def viewer_for(user, audience: str, ticket_id: int):
    """The ticket and viewer if `user` may watch it as `audience`; else (None, None)."""
    known = AUDIENCES.get(audience)
    return known.watch(user, ticket_id) if known is not None else (None, None)


def latest_turns(turns_of, n: int, before: int | None = None) -> tuple[list, bool]:
    """The last `n` of a queryset of turns (before turn number `before`, if given) in number
    order, and whether earlier ones exist: a long conversation opens at its end."""
    if before is not None:
        turns_of = turns_of.filter(number__lt=before)
    got = list(turns_of.order_by("-number")[: n + 1])
    return got[:n][::-1], len(got) > n


def turns_after(turns_of, number: int, n: int) -> list:
    """Up to `n + 1` of a queryset of turns after turn `number`, in number order (more than `n`
    tells the caller that a window of `n` cannot be extended, only re-read)."""
    return list(turns_of.filter(number__gt=number).order_by("number")[: n + 1])


# --- rendering -------------------------------------------------------------------------------

# What the panels of one rendering read in common (set by `render_all` for its duration).
_SHARED_READS: ContextVar[dict | None] = ContextVar("panel_shared_reads", default=None)


def shared_read(key: tuple, read: Callable[[], object]):
    """`read()`, made once for all the panels of one rendering: two panels showing the same rows
    (the pending holds, the current summary, the compaction runs) read them in one statement.
    Outside a rendering of every panel (one panel, the earlier items) it is simply `read()`.
    What it returns is shared by those panels: they must not change it."""
    reads = _SHARED_READS.get()
    if reads is None:
        return read()
    if key not in reads:
        reads[key] = read()
    return reads[key]


@dataclass(eq=False)
class Parts:
    """A rendered panel: its HTML and, for a list panel, its shell (the panel with no
    items) and each item's (DOM id, HTML) in order. `basis`, kept for the next rendering:
    the context's fingerprint (a panel), or the context itself (a list panel, to extend).
    `row` and `read_at`: the ticket row's digest and the time when its data was last read
    (`unchanged`)."""

    html: str
    shell: str = ""
    items: tuple[tuple[str, str], ...] | None = None
    basis: object = None
    item_digests: tuple[str, ...] = ()
    row: str | None = None
    read_at: float = 0.0

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


def row_digest(ticket) -> str | None:
    """The digest of the ticket row as the panels see it (with the rows read with it: its class,
    customer, handler), without what changes on every write (`fingerprint.VOLATILE`): every panel
    is given the row, so one that changed re-reads them all."""
    return fingerprint({"ticket": ticket})


def unchanged(panel: Panel, previous: Parts | None, since: int | None, ticket, row: str | None, now: float) -> bool:
    """Whether `previous` (this panel's parts in the rendering of version `since`) still shows
    the data as it is: no write stamped a table the panel reads after `since`, the ticket row
    reads the same, and records kept outside the ticket were read recently enough."""
    if panel.reads is None or previous is None or since is None or row is None or previous.row != row:
        return False
    stamps = getattr(ticket, "stamps", None) or {}
    # Every bump stamps the version it sets; a version none stamped was written past
    # `tickets.versions` (a raw update, a script): what changed is unknown, so everything is read.
    if max(stamps.values(), default=0) < ticket.version:
        return False
    if any(stamps.get(label, 0) > since for label in (ALL, *panel.reads)):
        return False
    return not panel.outside or now - previous.read_at < settings.LIVE_OUTSIDE_SECONDS


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
    joined = "\n".join(h for _, h in items)
    # The panel is rendered once, with a mark where its items go: the shell is the panel with the
    # mark taken out, the panel the one with the items put in (rendered twice, were the mark not
    # placed exactly once).
    marked = render_to_string(panel.template, {**context, "items_html": mark_safe(_ITEMS_MARK)})
    if marked.count(_ITEMS_MARK) == 1:
        before, after = marked.split(_ITEMS_MARK)
        shell, html = mark_safe(before + after), mark_safe(before + joined + after)  # as rendered: safe
    else:
        shell = render_to_string(panel.template, {**context, "items_html": ""})
        html = render_to_string(panel.template, {**context, "items_html": mark_safe(joined)})
    return Parts(html, shell, items, basis=built if keep else None, item_digests=tuple(d for _, _, d in rendered))


_ITEMS_MARK = "\x00sundry-items\x00"  # never in a rendered template (NUL is not valid in HTML text)


def render_panel(panel: Panel, ticket, viewer: Viewer, extra: dict | None = None) -> str:
    return render_panel_parts(panel, ticket, viewer, extra).html


def render_all(ticket, viewer: Viewer, previous: "Rendering | None" = None, keep: bool = False) -> Rendering:
    """Every panel of the viewer's audience. With `keep` and the rendering before (`previous`),
    a panel whose data no write changed since (`unchanged`) is carried over unread; the others
    are read, and reuse their HTML where it reads the same."""
    prior = previous.parts if previous is not None else {}
    since = previous.version if previous is not None else None
    row, now = (row_digest(ticket), time.monotonic()) if keep else (None, 0.0)
    token = _SHARED_READS.set({})
    try:
        parts = {}
        for name, panel in AUDIENCES[viewer.audience].panels.items():
            before = prior.get(name)
            if keep and unchanged(panel, before, since, ticket, row, now):
                parts[name] = before
                continue
            got = render_panel_parts(panel, ticket, viewer, previous=before, keep=keep)
            if keep:
                got.row, got.read_at = row, now  # read now (even when it kept its HTML)
            parts[name] = got
        return Rendering(parts)
    finally:
        _SHARED_READS.reset(token)


def earlier_items(ticket, viewer: Viewer, before: int | None) -> dict:
    """The conversation's items before turn `before` (a window of them, oldest first; with no
    `before`, the window before the one the page opens at), rendered as the panel renders them:
    `items_html`, `first` (the first one's turn number), `earlier` (whether there are more)."""
    panel = AUDIENCES[viewer.audience].panels["conversation"]
    n = window() or 50
    read, number, turns_of = AUDIENCES[viewer.audience].earlier(ticket, viewer, n)
    if before is None:
        latest, _ = latest_turns(turns_of, n)
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
    tickets = AUDIENCES[viewer.audience].reach(tickets, viewer)
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
