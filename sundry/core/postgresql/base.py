"""Django's PostgreSQL backend, sending transaction control (and deferred writes) with the next statement.

Stock Django opens a transaction, makes a savepoint and releases one with a
round trip each: psycopg sends BEGIN (and waits) before a transaction's first
statement, and every `atomic()` inside a transaction sends SAVEPOINT on entry
and RELEASE on exit. An agent step spent a quarter of its round trips on them.

Here the driver stays in autocommit, and Django's own flag says whether a
transaction is open. BEGIN, SAVEPOINT and RELEASE wait in `pending` until a
statement is sent: `core.sql` sends them in the same pipeline as its group,
and any other cursor sends them first. Writes whose result nobody reads can
wait there too (`core.sql.defer`), to go with the next group or the COMMIT.
A transaction or savepoint that ran nothing costs nothing: its commit, release
or rollback just forgets what was pending. A rollback drops the writes that
never went out, exactly as if they had.

`commit_with_group` lets an outermost transaction's last group carry its COMMIT
(see `core.sql.run(commit=True)`): Django's commit then has nothing left to send.
"""

from __future__ import annotations

from django.db import DEFAULT_DB_ALIAS
from django.db.backends.postgresql import base
from django.db.transaction import TransactionManagementError

from sundry.core.pgwire import wire

# A pending entry is (sql, params): params None for transaction control, which is
# never prepared (PostgreSQL cannot prepare it).
Pending = tuple[str, "list | None"]


class DatabaseWrapper(base.DatabaseWrapper):
    def __init__(self, settings_dict, alias=DEFAULT_DB_ALIAS):
        super().__init__(settings_dict, alias)
        self.pending: list[Pending] = []  # not sent yet, in order
        self.committed_early = False  # the transaction's last group carried its COMMIT

    # --- the driver stays in autocommit; a transaction starts with a pending BEGIN ----------

    def _set_autocommit(self, autocommit):
        self.pending.clear()
        self.committed_early = False
        if not self.connection.autocommit:
            super()._set_autocommit(True)  # the driver must not send a BEGIN of its own
        if not autocommit:
            self.pending.append((self._begin_sql(), None))

    def _begin_sql(self) -> str:
        level = self.settings_dict["OPTIONS"].get("isolation_level")
        if level is None:
            return "BEGIN"
        return f"BEGIN ISOLATION LEVEL {base.IsolationLevel(level).name.replace('_', ' ')}"

    def _begin_unsent(self) -> bool:
        return bool(self.pending) and self.pending[0][1] is None and self.pending[0][0].startswith("BEGIN")

    def _commit(self):
        if self.committed_early:
            self.committed_early = False
            self.pending.clear()
            return
        if any(params is not None for _, params in self.pending):
            self.send_pending(then=("COMMIT", None))  # deferred writes go with the COMMIT
            return
        # Only control left: savepoint statements are moot (COMMIT releases every savepoint),
        # and a transaction whose BEGIN never went out has nothing to commit.
        unsent = self._begin_unsent()
        self.pending.clear()
        if not unsent:
            super()._commit()

    def _rollback(self):
        self.committed_early = False
        unsent = self._begin_unsent()
        self.pending.clear()  # never sent: as good as rolled back
        if not unsent:
            super()._rollback()

    # --- savepoints: sent with the next statement, or never if none comes ---------------------

    def _savepoint(self, sid):
        self.pending.append((self.ops.savepoint_create_sql(sid), None))

    def _savepoint_commit(self, sid):
        index = self._unsent(sid)
        if index is None:
            self.pending.append((self.ops.savepoint_commit_sql(sid), None))
        elif any(params is not None for _, params in self.pending[index:]):
            self.pending.append((self.ops.savepoint_commit_sql(sid), None))  # writes wait inside it
        else:  # never sent, and nothing ran since: releasing it is forgetting it
            del self.pending[index:]

    def _savepoint_rollback(self, sid):
        index = self._unsent(sid)
        if index is None:
            # Everything pending came after the savepoint went out: the rollback undoes it anyway.
            self.pending.clear()
            super()._savepoint_rollback(sid)
        else:  # nothing since it reached the server: nothing to undo (the savepoint stays, as after a rollback)
            del self.pending[index + 1:]

    def _unsent(self, sid) -> int | None:
        """Where the savepoint's SAVEPOINT waits in `pending`, if it was never sent."""
        create = (self.ops.savepoint_create_sql(sid), None)
        return self.pending.index(create) if create in self.pending else None

    # --- sending ----------------------------------------------------------------------------

    def defer(self, statements: list[tuple[str, list]]) -> bool:
        """Queue writes to go with the transaction's next statement or its COMMIT; False outside a transaction."""
        if self.get_autocommit() or self.committed_early:
            return False
        self.pending.extend(statements)
        return True

    def take_pending(self) -> list[Pending]:
        """What a caller now sends ahead of its own statements, in order."""
        if self.committed_early:
            raise TransactionManagementError(
                "This transaction's last group already committed it; nothing may run before it ends.")
        pending, self.pending = self.pending, []
        return pending

    def send_pending(self, then: Pending | None = None) -> None:
        pending = self.take_pending() + ([then] if then else [])
        if not pending:
            return
        with self.wrap_database_errors:
            wire(self.connection).run(pending)
        if self.queries_logged:
            self.queries_log.append({"sql": "; ".join(statement for statement, _ in pending), "time": "0.000"})

    def commit_with_group(self) -> bool:
        """May the group about to be sent carry the COMMIT? Only an outermost `atomic()` with
        nothing nested open, not marked for rollback, and not a test case's own wrapper."""
        return (len(self.atomic_blocks) == 1 and not self.savepoint_ids and self.commit_on_exit
                and not self.needs_rollback and not self.atomic_blocks[0]._from_testcase)

    def create_cursor(self, name=None):
        self.send_pending()
        if not name:
            return super().create_cursor()
        # Django makes a named cursor holdable when the driver is in autocommit; ours always
        # is, so Django's own flag says whether this cursor must outlive a transaction.
        withhold = self.get_autocommit()
        if self.settings_dict["OPTIONS"].get("server_side_binding") is not True:
            cursor = base.ServerSideCursor(self.connection, name=name, scrollable=False, withhold=withhold)
        else:
            cursor = self.connection.cursor(name, scrollable=False, withhold=withhold)
        tzloader = self.connection.adapters.get_loader(base.TIMESTAMPTZ_OID, base.Format.TEXT)
        if self.timezone != tzloader.timezone:
            base.register_tzloader(self.timezone, cursor)
        return cursor
