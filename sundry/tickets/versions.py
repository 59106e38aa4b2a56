"""The ticket row's version and turn counter: every write to a ticket or its lanes bumps the version.

Its own module, below both tickets.services and context.services, so each can
use it without importing the other.
"""

from __future__ import annotations

import functools

from sundry.core import sql
from sundry.tickets.models import Ticket


@functools.lru_cache(maxsize=4)
def _bump_sql(vendor: str) -> str:
    return (f"UPDATE {sql.table(Ticket)} SET version = version + 1, last_turn_number = last_turn_number + %s"
            f" WHERE id = %s RETURNING last_turn_number, version")


@functools.lru_cache(maxsize=4)
def _version_sql(vendor: str) -> str:
    return f"SELECT version FROM {sql.table(Ticket)} WHERE id = %s"


def version_statement(ticket_id: int) -> tuple[str, list]:
    """Reading the version as (sql, params), for `core.sql.run`."""
    return _version_sql(sql.vendor()), [ticket_id]


def bump_statement(ticket_id: int, *, turn: bool = False) -> tuple[str, list]:
    """The bump as (sql, params), for callers that send it with other statements (`core.sql.run`)."""
    return _bump_sql(sql.vendor()), [1 if turn else 0, ticket_id]


def bump(ticket_id: int, *, turn: bool = False) -> tuple[int, int]:
    """Bump the version (and the turn counter when `turn`) in one statement; returns both.

    The UPDATE also takes the ticket's row lock until the caller's transaction
    ends, which is what keeps concurrent writers' turn numbers apart.
    """
    [rows] = sql.run([bump_statement(ticket_id, turn=turn)])
    if not rows:
        raise Ticket.DoesNotExist(f"ticket {ticket_id} does not exist")
    return rows[0][0], rows[0][1]


def ticket_touch(ticket_id: int) -> int:
    """Bump the ticket's version (inside the caller's transaction) and return it."""
    return bump(ticket_id)[1]
