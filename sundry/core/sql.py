"""Plain SQL for the agent step's hot path, written in the models' own names.

An agent step reads and writes a couple of dozen rows. Through the ORM, most of
its time went on compiling querysets and building model instances that were
dropped at once; a database round trip costs a fraction of one compile. The
statements here are built once per process from each model's table and column
names (so a renamed field still renames the SQL). On PostgreSQL `run` sends a
group in one round trip, `read_together` reads several sets of rows as one
statement, and `defer` lets writes nobody reads back wait for the next group.

Only hot paths use this; everything else stays on the ORM.
"""

from __future__ import annotations

import functools
import json
import logging
import time
from datetime import datetime, timezone

from django.db import DEFAULT_DB_ALIAS, connections

_db_log = logging.getLogger("django.db.backends")


def db():
    """The default connection itself. `django.db.connection` is a proxy that looks the
    connection up again on every attribute read; a step reads hundreds."""
    return connections[DEFAULT_DB_ALIAS]


@functools.cache
def vendor() -> str:
    return connections[DEFAULT_DB_ALIAS].vendor  # fixed by the settings for the process's life


def name(identifier: str) -> str:
    return db().ops.quote_name(identifier)


def table(model) -> str:
    return _table(model, vendor())


def column(model, field: str) -> str:
    return _column(model, field, vendor())


# Memoised per vendor: statements that vary per call (IN lists) still name their
# tables and columns many times a step.
@functools.lru_cache(maxsize=256)
def _table(model, vendor: str) -> str:
    return name(model._meta.db_table)


@functools.lru_cache(maxsize=2048)
def _column(model, field: str, vendor: str) -> str:
    return name(model._meta.get_field(field).column)


def columns(model, fields: tuple[str, ...]) -> str:
    return ", ".join(column(model, f) for f in fields)


def aliased(alias: str, model, fields: tuple[str, ...]) -> str:
    """`alias.col1, alias.col2 …`, for statements that join."""
    return ", ".join(f"{alias}.{column(model, f)}" for f in fields)


def select(model, fields: tuple[str, ...], where: str, order: tuple[str, ...] = (), limit: str = "") -> str:
    """`SELECT fields FROM model WHERE where ORDER BY order` ("-field" sorts descending)."""
    ordering = ", ".join(f"{column(model, f.lstrip('-'))}{' DESC' if f.startswith('-') else ''}" for f in order)
    sql = f"SELECT {columns(model, fields)} FROM {table(model)} WHERE {where}"
    return f"{sql} ORDER BY {ordering} {limit}".strip() if ordering else f"{sql} {limit}".strip()


def json_rows(model, fields: tuple[str, ...], where: str, order: tuple[str, ...] = (), limit: str = "") -> str:
    """The rows `select(...)` returns, as one JSON array of arrays: an expression, so that one
    statement can read several sets (PostgreSQL; see `read_together`). `limit` is "" or "LIMIT 1"."""
    if limit:
        assert limit == "LIMIT 1", "only LIMIT 1: a longer limited set would need its order kept"
        return (f"(SELECT coalesce(json_agg(json_build_array({columns(model, fields)})), '[]'::json)"
                f" FROM ({select(model, fields, where, order, limit)}) q)")
    ordering = ", ".join(f"{column(model, f.lstrip('-'))}{' DESC' if f.startswith('-') else ''}" for f in order)
    return json_select(columns(model, fields), f"{table(model)} WHERE {where}", ordering)


def json_select(columns_sql: str, from_sql: str, order_sql: str = "") -> str:
    """`SELECT columns FROM … ORDER BY …` as one JSON array of arrays (an expression, PostgreSQL)."""
    ordering = f" ORDER BY {order_sql}" if order_sql else ""
    return f"(SELECT coalesce(json_agg(json_build_array({columns_sql}){ordering}), '[]'::json) FROM {from_sql})"


def plain_select(columns_sql: str, from_sql: str, order_sql: str = "") -> str:
    """The same read as `json_select`, as rows."""
    return f"SELECT {columns_sql} FROM {from_sql}" + (f" ORDER BY {order_sql}" if order_sql else "")


def json_time(value) -> datetime | None:
    """A timestamp read as JSON (`read_together` on PostgreSQL) or as a column, as an aware datetime."""
    if isinstance(value, str):
        return datetime.fromisoformat(value)
    return aware(value)


def read_together(reads: list[tuple[str, str, list]]) -> list[list]:
    """Several sets of rows, each given as (`select` sql, `json_rows` sql, params).

    On PostgreSQL one statement reads them all (`SELECT json_rows, json_rows, …`):
    a statement costs the driver ~50 µs however little it returns, a JSON array
    next to nothing. Elsewhere each `select` runs as its own statement. Either
    way each set comes back as a list of rows; a JSON row is a list, not a tuple,
    and its JSON columns arrive decoded, its timestamps as text (`json_time`).
    """
    return run_then_read([], reads)[1]


def run_then_read(statements: list[tuple[str, list]], reads: list[tuple[str, str, list]], *,
                  durable: bool = True) -> tuple[list, list[list]]:
    """`run(statements)`, then `read_together(reads)`, in the same group: (their results, the sets)."""
    if vendor() == "postgresql":
        combined = ("SELECT " + ", ".join(as_json for _, as_json, _ in reads),
                    [p for _, _, params in reads for p in params])
        *results, [row] = run([*statements, combined], durable=durable)
        return results, list(row)
    results = run([*statements, *((plain, params) for plain, _, params in reads)], durable=durable)
    return results[:len(statements)], results[len(statements):]


def insert(model, fields: tuple[str, ...], *, rows: int = 1, returning: tuple[str, ...] = ("id",)) -> str:
    """`INSERT INTO model (fields) VALUES (%s, …)[, …] RETURNING returning`."""
    one = "(" + ", ".join(["%s"] * len(fields)) + ")"
    sql = f"INSERT INTO {table(model)} ({columns(model, fields)}) VALUES {', '.join([one] * rows)}"
    return f"{sql} RETURNING {columns(model, returning)}" if returning else sql


@functools.lru_cache(maxsize=32)
def _insert_fields(model, vendor: str) -> tuple[tuple, str, str]:
    """The fields an INSERT fills, its `INSERT INTO t (cols)` head and its `RETURNING pk` tail."""
    fields = tuple(f for f in model._meta.concrete_fields if not f.primary_key)
    head = f"INSERT INTO {table(model)} ({', '.join(name(f.column) for f in fields)})"
    return fields, head, f"RETURNING {name(model._meta.pk.column)}"


def insert_statement(obj, **computed: tuple[str, list]) -> tuple[str, list]:
    """The INSERT (returning the pk) that saves a new model instance, as (sql, params).

    Values go through each field's own `pre_save` and database preparation
    (auto_now_add, JSON, decimals), as `Model.save()` would. `computed` gives a
    field an SQL expression instead, e.g. `number=("(SELECT …)", [ticket_id])`.
    """
    conn = db()
    fields, head, tail = _insert_fields(type(obj), conn.vendor)
    values, params = [], []
    for f in fields:
        if f.name in computed:
            expression, extra = computed[f.name]
            values.append(expression)
            params += extra
        else:
            values.append("%s")
            params.append(f.get_db_prep_save(f.pre_save(obj, True), conn))
    return f"{head} VALUES ({', '.join(values)}) {tail}", params


def saved(obj, pk):
    """Mark an instance inserted by one of these statements as saved, with its pk."""
    obj.pk = pk
    obj._state.adding, obj._state.db = False, DEFAULT_DB_ALIAS
    return obj


def insert_instance(obj):
    """Save a new model instance without compiling a queryset; returns it with its pk. Signals do not fire."""
    [[(pk,)]] = run([insert_statement(obj)])
    return saved(obj, pk)


@functools.lru_cache(maxsize=32)
def _loaders(model, vendor: str) -> tuple[tuple[str, ...], tuple]:
    """Each concrete field's attname and the converters the ORM would apply to its column."""
    conn, fields = db(), model._meta.concrete_fields
    loaders = []
    for f in fields:
        col = f.get_col(model._meta.db_table)
        loaders.append((col, tuple(conn.ops.get_db_converters(col) + f.get_db_converters(conn))))
    return tuple(f.attname for f in fields), tuple(loaders)


def all_columns(alias: str, model) -> str:
    """Every concrete column of `model` under `alias`, in the order `instance` expects."""
    return ", ".join(f"{alias}.{name(f.column)}" for f in model._meta.concrete_fields)


def instance(model, values):
    """A model instance from a row of `all_columns(…, model)`, converted as the ORM converts it."""
    conn = db()
    attnames, loaders = _loaders(model, conn.vendor)
    converted = []
    for value, (col, converters) in zip(values, loaders):
        for converter in converters:
            value = converter(value, col, conn)
        converted.append(value)
    return model.from_db(DEFAULT_DB_ALIAS, attnames, converted)


def json_value(value, default=None):
    """A JSON column read by plain SQL: PostgreSQL's driver decodes it, SQLite hands back the text."""
    if value is None:
        return default
    return json.loads(value) if isinstance(value, str) else value


def aware(value: datetime) -> datetime:
    """A datetime read by plain SQL: SQLite hands back naive UTC where the ORM would convert it."""
    return value.replace(tzinfo=timezone.utc) if value is not None and value.tzinfo is None else value


def in_list(values) -> str:
    """`(%s, %s, …)` for a non-empty `IN` list."""
    return "(" + ", ".join(["%s"] * len(values)) + ")"


def one_of(values) -> tuple[str, list]:
    """`column <this>` matches any of the values: (SQL, params). On PostgreSQL one array
    parameter (`= ANY(%s)`), so the statement's text does not vary with the count and it can
    be prepared; elsewhere an `IN` list."""
    values = list(values)
    if vendor() == "postgresql":
        return "= ANY(%s)", [values]
    return f"IN {in_list(values)}", values


try:
    from sundry.core.pgwire import wire
except ImportError:  # no psycopg: SQLite only
    wire = None


_NO_FSYNC_WAIT = "SELECT set_config('synchronous_commit', 'off', true)"


def run(statements: list[tuple[str, list]], *, durable: bool = True, commit: bool = False) -> list[list[tuple] | None]:
    """Run statements in order on the default database; each one's rows (None for a statement that returns none).

    PostgreSQL takes them as one pipeline (`core.pgwire`): sent together,
    answered together, one round trip instead of one each, with whatever the
    transaction still has waiting (`core.postgresql`: BEGIN, savepoints,
    deferred writes) in front. Parameters are bound on the server, so a
    statement this process sends often is parsed and planned once (prepared
    after the connection's `prepare_threshold` uses; None behind a pooler that
    cannot keep prepared statements). Inside a transaction the group is part of
    it; outside one, PostgreSQL runs the group as one. Other databases run the
    statements one by one.

    `durable=False`, outside a transaction on PostgreSQL, commits the group
    without waiting for the disk: for writes a crash may lose harmlessly (a
    lease that would lapse anyway), never for anything a user was told about.

    `commit=True` says this group is the last thing its transaction does: on
    PostgreSQL, in an outermost `atomic()` with nothing nested open, the COMMIT
    goes in the same round trip and the `atomic()` exit has nothing left to send
    (its on-commit hooks run as usual). Anywhere else the transaction commits
    when it ends, as ever. Running anything after such a group, before the
    `atomic()` ends, is an error.
    """
    if not statements:
        return []
    conn = db()
    if conn.vendor == "postgresql":
        if not durable and not conn.in_atomic_block:
            return _pipeline(conn, [(_NO_FSYNC_WAIT, []), *statements])[1:]
        if commit and _commits_here(conn):
            return _run_committing(conn, statements, [])[0]
        return _pipeline(conn, statements)
    out = []
    with conn.cursor() as cursor:
        for sql, params in statements:
            cursor.execute(sql, params)
            out.append(cursor.fetchall() if cursor.description is not None else None)
    return out


def _commits_here(conn) -> bool:
    return bool(getattr(conn, "commit_with_group", None)) and conn.commit_with_group()


def _run_committing(conn, statements, then) -> tuple[list, list]:
    """The group, its transaction's COMMIT, then `then` as an implicit transaction of its own
    that does not wait for the disk — all in one round trip."""
    after = [(_NO_FSYNC_WAIT, []), *then] if then else []
    results = _pipeline(conn, [*statements, ("COMMIT", None), *after])
    conn.committed_early = True
    return results[:len(statements)], results[len(statements) + 2:]


def run_commit_then(statements: list[tuple[str, list]], then: list[tuple[str, list]]) -> tuple[list, list | None]:
    """`run(statements, commit=True)`, and where that group carries the COMMIT, `then` after it in the
    same round trip, as a group of its own that does not wait for the disk (as `durable=False`).
    Returns (the statements' results, then's results or None if then was not sent)."""
    conn = db()
    if conn.vendor != "postgresql" or not _commits_here(conn):
        return run(statements, commit=True), None
    return _run_committing(conn, statements, then)


def defer(statements: list[tuple[str, list]]) -> None:
    """Writes whose results nobody reads: inside a transaction on PostgreSQL they go with the
    transaction's next statement or its COMMIT (one round trip fewer); elsewhere they run now.

    An error in one surfaces where it is finally sent, still inside the same
    transaction, which then rolls back as a whole; a rollback drops them unsent.
    """
    conn = db()
    queue = getattr(conn, "defer", None)
    if not (queue and queue(statements)):
        run(statements)


def _pipeline(conn, statements: list[tuple[str, list]]) -> list[list[tuple] | None]:
    if not conn.execute_wrappers and not conn.queries_logged:
        return _send(conn, statements)
    # Someone is watching (DEBUG, a test capturing queries, an execute wrapper): the group
    # passes through Django's execute wrappers and query log as one entry, as it is one round trip.
    joined = "; ".join(sql for sql, _ in statements)
    params = [p for _, group in statements for p in group or ()]
    cursor = conn.cursor() if conn.execute_wrappers else None  # a wrapper may look at it

    def executor(*_):
        return _send(conn, statements)

    for wrapper in reversed(conn.execute_wrappers):
        executor = functools.partial(wrapper, executor)
    start = time.monotonic()
    try:
        return executor(joined, params, False, {"connection": conn, "cursor": cursor})
    finally:
        if conn.queries_logged:
            duration = time.monotonic() - start
            conn.queries_log.append({"sql": joined, "time": f"{duration:.3f}"})
            _db_log.debug("(%.3f) %s; args=%s; alias=%s", duration, joined, params, conn.alias,
                          extra={"duration": duration, "sql": joined, "params": params, "alias": conn.alias})
        if cursor is not None:
            cursor.close()


def _send(conn, statements: list[tuple[str, list]]) -> list[list[tuple] | None]:
    # What Django's cursor() checks before handing out a cursor, without building one.
    conn.close_if_health_check_failed()
    conn.ensure_connection()
    conn.validate_thread_sharing()
    conn.validate_no_broken_transaction()
    # What the transaction still has waiting (core.postgresql: BEGIN, savepoints, deferred
    # writes) goes first, in the same round trip. Control statements come with params None.
    take = getattr(conn, "take_pending", None)
    pending = take() if take else None
    if pending:
        statements = [*pending, *statements]
    with conn.wrap_database_errors:
        results = wire(conn.connection).run(statements)
    return results[len(pending):] if pending else results
