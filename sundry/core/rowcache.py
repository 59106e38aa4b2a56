"""A per-process cache of rows that are only ever appended, numbered 1, 2, 3, … per ticket.

Turns are such rows: a turn never changes once written, and turns become
visible in number order (each is numbered under the ticket's row lock, held to
commit). So a reader that has seen a ticket's turns up to N needs only those
after N. `key_for` serves only outside transactions, so nothing cached can still
roll back; keys carry the ticket's creation time, so a reused id in another
database (tests, throwaway evaluation databases) never matches. Callers check
that what they get runs on without a gap and `refuse()` it if not.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict

from sundry.core import sql

log = logging.getLogger("sundry.core")


class AppendOnlyRows:
    def __init__(self, *, what: str, tickets: int, rows_per_ticket: int, rows: int):
        self.what = what
        self.tickets, self.rows_per_ticket, self.rows = tickets, rows_per_ticket, rows
        self._lock = threading.Lock()
        self._data: OrderedDict = OrderedDict()
        self._held = 0  # rows held across tickets
        self.refused = 0  # times what it held did not run on (never expected)

    @staticmethod
    def key(ticket) -> tuple:
        return sql.db().settings_dict["NAME"], ticket.pk, ticket.created_at

    def key_for(self, ticket) -> tuple | None:
        """The ticket's key, or None where the cache must not serve: inside a transaction
        (rows read there may still roll back) or for an unsaved ticket."""
        if ticket.created_at is None or sql.db().in_atomic_block:
            return None
        return self.key(ticket)

    def key_by_id(self, ticket_id: int) -> tuple | None:
        """The key held for this ticket id in this database, if any, for a reader that has not
        loaded the ticket yet; it must check the key against the ticket once loaded."""
        name = sql.db().settings_dict["NAME"]
        with self._lock:
            return next((k for k in reversed(self._data) if k[0] == name and k[1] == ticket_id), None)

    def get(self, key) -> list:
        with self._lock:
            rows = self._data.get(key)
            if rows is not None:
                self._data.move_to_end(key)
            return rows or []

    def put(self, key, rows: list) -> None:
        """Hold these rows for the ticket (a new list: callers never mutate one they were given)."""
        with self._lock:
            self._held -= len(self._data.pop(key, ()))
            if not rows or len(rows) > self.rows_per_ticket:
                return  # beyond this many the ticket is read whole each time
            self._data[key] = rows
            self._held += len(rows)
            while len(self._data) > self.tickets or self._held > self.rows:
                _, dropped = self._data.popitem(last=False)
                self._held -= len(dropped)

    def clear(self) -> None:
        with self._lock:
            self._data.clear()
            self._held = 0

    def refuse(self) -> None:
        log.warning("cached %s did not run on; reading them whole", self.what)
        self.refused += 1
        self.clear()
