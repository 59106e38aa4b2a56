"""A group of statements sent straight through libpq (psycopg's `pq` layer), for the hot path.

psycopg's cursors and pipeline object spend about 50 µs of Python per
statement and as much again per pipeline on bookkeeping this path never needs
(result sets held per cursor, a command queue, generators). Measured on a
pipeline of nine small reads: 600 µs of client CPU through cursors, 150 µs
here. What stays psycopg's own: the adapters (so every value is dumped and
loaded exactly as a cursor would), the error classes, the libpq connection.

A group goes as one libpq pipeline: one round trip, however many statements.
A statement sent often is prepared once per connection (after the
connection's `prepare_threshold` uses, as psycopg would) under a name of its
own, and marked prepared only once the server has said so. Waiting happens in
`select`, never inside libpq, so other threads keep the GIL meanwhile.
"""

from __future__ import annotations

import re
import select

from psycopg import adapt, errors, pq
from psycopg.pq import ExecStatus

_TUPLES_OK, _COMMAND_OK = ExecStatus.TUPLES_OK, ExecStatus.COMMAND_OK
_FATAL, _ABORTED, _SYNC = ExecStatus.FATAL_ERROR, ExecStatus.PIPELINE_ABORTED, ExecStatus.PIPELINE_SYNC
_PLACEHOLDER = re.compile(r"%s|%%|%")
MAX_PREPARED = 512  # per connection; past it, statements run unnamed


def wire(conn) -> Wire:
    """The wire of a psycopg connection, made on first use and kept with it."""
    found = getattr(conn, "_sundry_wire", None)
    if found is None:
        found = conn._sundry_wire = Wire(conn)
    return found


class Wire:
    def __init__(self, conn):
        self.conn, self.pgconn = conn, conn.pgconn
        self.tx = adapt.Transformer(conn)
        self.queries: dict[str, bytes] = {}  # "%s" SQL -> "$n" SQL
        self.uses: dict[tuple, int] = {}  # (query, param types) -> times sent unprepared
        self.prepared: dict[tuple, bytes] = {}  # (query, param types) -> statement name
        self.preparing: dict[tuple, bytes] = {}  # prepared by the trip under way, not yet confirmed
        self.names = 0

    def run(self, statements: list[tuple[str, list | None]]) -> list[list[tuple] | None]:
        """Each statement's rows (None for one that returns none), in order. `params` None: sent as is,
        never prepared (transaction control). Raises psycopg's error for the first statement that failed."""
        pg, conn = self.pgconn, self.conn
        if not conn.autocommit and pg.transaction_status == pq.TransactionStatus.IDLE:
            statements = [("BEGIN", None), *statements]  # what psycopg would send first
            skip = 1
        else:
            skip = 0
        threshold = conn.prepare_threshold
        sent = []  # per statement: (prepare key, name) if this trip prepares it, else None
        self.preparing.clear()
        synced = False
        pg.enter_pipeline_mode()
        try:
            for sql, params in statements:
                sent.append(self._send(sql, params, threshold))
            pg.pipeline_sync()
            synced = True
            self._flush()
            results, error = self._collect(sent)
        except BaseException:
            self._abandon(synced)
            raise
        pg.exit_pipeline_mode()
        if error is not None:
            raise error
        return results[skip:]

    # --- sending ----------------------------------------------------------------------------

    def _query(self, sql: str) -> bytes:
        query = self.queries.get(sql)
        if query is None:
            n = 0

            def number(match):
                nonlocal n
                if match.group() == "%%":
                    return "%"
                if match.group() == "%":
                    raise ValueError(f"only %s placeholders are supported: {sql[:80]!r}")
                n += 1
                return f"${n}"

            query = self.queries[sql] = _PLACEHOLDER.sub(number, sql).encode(self.conn.info.encoding)
        return query

    def _send(self, sql: str, params, threshold: int | None) -> tuple | None:
        pg = self.pgconn
        if params is None:
            pg.send_query_params(sql.encode(self.conn.info.encoding), None)
            return None
        query = self._query(sql)
        tx = self.tx
        values = tx.dump_sequence(params, [adapt.PyFormat.AUTO] * len(params))
        types, formats = tuple(tx.types), tx.formats
        key = (query, types)
        name = self.prepared.get(key) or self.preparing.get(key)  # the latter parsed earlier in this pipeline
        if name is not None:
            pg.send_query_prepared(name, values, param_formats=formats)
            return None
        uses = self.uses.get(key, 0)
        if threshold is None or uses < threshold or len(self.prepared) >= MAX_PREPARED:
            if len(self.uses) > 4 * MAX_PREPARED:
                self.uses.clear()  # statements whose text varies (IN lists) never reach the threshold
            self.uses[key] = uses + 1
            pg.send_query_params(query, values, param_types=types, param_formats=formats)
            return None
        self.names += 1
        name = self.preparing[key] = f"_sundry_{self.names}".encode()
        pg.send_prepare(name, query, param_types=types)
        pg.send_query_prepared(name, values, param_formats=formats)
        return (key, name)

    def _flush(self) -> None:
        pg = self.pgconn
        while pg.flush():  # not all sent: wait to write, reading meanwhile so the server never stalls
            readable, _, _ = select.select([pg.socket], [pg.socket], [])
            if readable:
                pg.consume_input()

    # --- receiving ----------------------------------------------------------------------------

    def _result(self):
        pg = self.pgconn
        while pg.is_busy():
            select.select([pg.socket], [], [])
            pg.consume_input()
        return pg.get_result()

    def _collect(self, sent: list):
        results, error = [], None
        for preparing in sent:
            if preparing is not None:
                parsed = self._result()
                self._result()  # the end of the Parse's results
                if parsed.status == _COMMAND_OK:
                    self.prepared[preparing[0]] = preparing[1]
                elif error is None and parsed.status == _FATAL:
                    error = self._error(parsed)
            res = self._result()
            rows = None
            if res.status == _TUPLES_OK:
                tx = self.tx
                tx.set_pgresult(res)
                rows = tx.load_rows(0, res.ntuples, tuple)
            elif res.status not in (_COMMAND_OK, _ABORTED) and error is None:
                error = self._error(res)
            results.append(rows)
            while self._result() is not None:  # the end of this statement's results
                pass
        synced = self._result()
        if synced is None or synced.status != _SYNC:
            raise errors.InterfaceError("the pipeline's results did not end where it was synced")
        return results, error

    def _error(self, res) -> errors.Error:
        if res.status == _FATAL:
            return errors.error_from_result(res, encoding=self.conn.info.encoding)
        return errors.InterfaceError(f"unexpected result from the server: {ExecStatus(res.status).name}")

    def _abandon(self, synced: bool) -> None:
        """After a failure mid-group (a value that cannot be sent, a lost connection): finish the
        pipeline — the server answers nothing until it sees its sync — and leave pipeline mode."""
        pg = self.pgconn
        try:
            if not synced:
                pg.pipeline_sync()
                self._flush()
            while (res := self._result()) is None or res.status != _SYNC:
                pass
            pg.exit_pipeline_mode()
        except Exception:
            pass
