"""The statuses, dates and figures of a ticket's records now, for a reply that states them.

Read through the domain's records hook (`tooling.records.Records.state`), found by the
domain the ticket's customer belongs to, for the records the ticket's lanes name (the
ledger's records of the domain's owner kind, the money lane's, the actions'). A domain
whose hook states none gives None: its replies' statements of status are not judged
(`guards.statusclaims`).
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Iterable
from datetime import UTC, date, datetime

from django.db import DEFAULT_DB_ALIAS, connections
from django.utils import timezone

from sundry.agent.guards import statusclaims
from sundry.people.selectors import domain_of
from sundry.tooling import records as hooks


def read(ticket, references: Iterable[str]) -> tuple | None:
    """`RecordState` of each of `references` the domain knows; None when the domain states none."""
    hook = hooks.records_for(domain_of(ticket.customer))
    if type(hook).state is hooks.Records.state:
        return None
    out = []
    for ref in dict.fromkeys(r for r in references if r):
        state = hook.state(ref)
        if state is not None:
            out.append(state)
    return tuple(out)


def reader(ticket, references: Iterable[str]) -> Callable[[], tuple | None]:
    """`read`, deferred and done at most once: most replies state no status, date or figure, and their
    step then makes no read of the records."""
    refs = tuple(references)
    return functools.cache(lambda: read(ticket, refs))


def today(at: datetime | None = None) -> tuple[date, ...]:
    """The day of a reply written at `at` (now, by default), in the shop's time zone and in UTC — as the
    records' days are given (`tooling.records.RecordState`): what "15 days ago" in it counts from."""
    at = at or timezone.now()
    return tuple(dict.fromkeys((timezone.localtime(at).date(), at.astimezone(UTC).date())))


def referenced(ledger=(), money=(), actions=(), owner_kind: str = "order") -> list[str]:
    """The records a ticket's lanes name: the ledger's of the owner kind, the money lane's, the actions'."""
    return [
        *(e.value for e in ledger if e.kind == owner_kind),
        *(m.order for m in money),
        *(a.target for a in actions if a.target),
    ]


def shown(turns) -> str:
    """The text of the tool results among `turns` (`TurnData`, or rows with `kind` and `text`)."""
    return statusclaims.RESULT_BREAK.join(t.text or "" for t in turns if t.kind == "tool_result")


class Ahead:
    """A records read made while the model writes, for a streamed reply whose sentences are judged inside
    the network call's event loop, where Django reads nothing. It runs on a thread that borrows this
    thread's connection (PostgreSQL's driver serialises its use; the step reads nothing else while it
    waits on the model, and its transaction, a test's included, is the one read), so its time is hidden
    behind the model's instead of added before the call. Other databases read at once, here.

    Calling it gives the states (waiting for the read if a sentence needs them sooner); `join()`, due
    before this thread uses the connection again, waits for the read to end and lends nothing after."""

    def __init__(self, read_states: Callable[[], tuple | None]):
        connection = connections[DEFAULT_DB_ALIAS]  # the wrapper itself, not the per-thread proxy
        self._read, self._error, self._thread = read_states, None, None
        if connection.vendor != "postgresql":
            self._states = read_states()
            return
        self._states = None
        connection.ensure_connection()
        connection.inc_thread_sharing()
        self._thread = threading.Thread(target=self._run, args=(connection,), name="sundry-records", daemon=True)
        self._thread.start()

    def _run(self, conn) -> None:
        connections[DEFAULT_DB_ALIAS] = conn  # this thread's reads go over the step's connection
        try:
            self._states = self._read()
        except BaseException as e:  # re-raised where the states are wanted
            self._error = e
        finally:
            conn.dec_thread_sharing()

    def join(self) -> None:
        if self._thread is not None:
            self._thread.join()

    def __call__(self) -> tuple | None:
        self.join()
        if self._error is not None:
            raise self._error
        return self._states
