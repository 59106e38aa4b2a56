"""What actually crossed the wire to PostgreSQL, from libpq's own protocol trace.

Django's query log records what the code asked for; this records the messages
the client sent, so a test can count round trips (each simple Query or
pipeline Sync is answered by one ReadyForQuery) and see whether a statement
was parsed again or ran prepared.
"""

from __future__ import annotations

import contextlib
import re
import tempfile
from dataclasses import dataclass, field


@dataclass
class Wire:
    lines: list[str] = field(default_factory=list)

    def sent(self, *kinds: str) -> list[str]:
        """The frontend messages of these kinds (e.g. "Parse", "Bind", "Sync", "Query")."""
        out = []
        for line in self.lines:
            parts = line.split("\t")
            if len(parts) >= 3 and parts[0] == "F" and parts[2].split(" ", 1)[0] in kinds:
                out.append(parts[2])
        return out

    def statements(self) -> list[str]:
        """The SQL the client sent for parsing or as a simple query, in order."""
        out = []
        for line in self.lines:
            parts = line.split("\t")
            if len(parts) >= 4 and parts[0] == "F" and parts[2] in ("Parse", "Query"):
                # libpq prints the text between quotes unescaped: Parse ' "name" "sql" n oid…', Query ' "sql"'.
                pattern = r'^ "[^"]*" "(.*)"(?: \d+)*$' if parts[2] == "Parse" else r'^ "(.*)"$'
                found = re.match(pattern, "\t".join(parts[3:]))
                if found:
                    out.append(found.group(1))
        return out

    @property
    def round_trips(self) -> int:
        return len(self.sent("Sync", "Query"))


@contextlib.contextmanager
def wire(connection):
    """Trace the Django connection's libpq connection while the block runs."""
    from psycopg import pq

    connection.ensure_connection()
    pgconn = connection.connection.pgconn
    record = Wire()
    with tempfile.TemporaryFile("w+") as f:
        pgconn.trace(f.fileno())
        pgconn.set_trace_flags(pq.Trace.SUPPRESS_TIMESTAMPS | pq.Trace.REGRESS_MODE)
        try:
            yield record
        finally:
            pgconn.untrace()
            f.seek(0)
            record.lines = f.read().splitlines()
