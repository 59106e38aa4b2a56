"""A one-row model read whose SQL is compiled once per process (PostgreSQL).

Building and compiling a queryset with joins and subqueries costs more than running it: an agent
run's load of its ticket (`agent.loop`) took 4–6 ms of CPU to build for a statement the database
answers in under one. `CompiledRead` compiles such a queryset once, with placeholder values for
what changes from call to call, and hydrates the row as the queryset would have: the model with
its `select_related` objects cached on it, its annotations as attributes, every column through
the converters Django applies (JSON read as text, for one).
"""

from __future__ import annotations

from collections.abc import Callable

from django.db import connections
from django.db.models import QuerySet


class CompiledRead:
    """`build(*placeholders)` → a queryset reading at most one row; `sql` and `params` are its compiled
    statement, with each placeholder's parameter swapped for the call's value by `params_for`."""

    def __init__(self, build: Callable[..., QuerySet], placeholders: tuple, using: str = "default"):
        queryset = build(*placeholders)
        compiler = queryset.query.get_compiler(using=using)
        sql, params = compiler.as_sql()
        self.sql, self.using, self._placeholders = sql, using, placeholders
        self._params = list(params)
        # Every parameter equal to a placeholder is swapped: placeholders must be values no query
        # would hold otherwise (a constant equal to one would be swapped too).
        for p in placeholders:
            if self._params.count(p) < 1:
                raise ValueError(f"placeholder {p!r} is not among the compiled statement's parameters")
        select = compiler.select
        info = compiler.klass_info
        self._model, self._fields = info["model"], self._attnames(select, info["select_fields"])
        self._related = [
            (
                r["model"],
                self._attnames(select, r["select_fields"]),
                r["select_fields"],
                r["local_setter"],
                r["remote_setter"],
            )
            for r in info.get("related_klass_infos", ())
            if not r.get("related_klass_infos")  # one level of select_related is what is supported
        ]
        if len(self._related) != len(info.get("related_klass_infos", ())):
            raise ValueError("only one level of select_related is supported")
        self._own = info["select_fields"]
        self._annotations = dict(compiler.annotation_col_map)
        self._converters = compiler.get_converters([col for col, _, _ in select])

    @staticmethod
    def _attnames(select, indices) -> list[str]:
        return [select[i][0].target.attname for i in indices]

    def params_for(self, *values) -> list:
        swap = dict(zip(self._placeholders, values))
        return [swap.get(p, p) if _hashable(p) else p for p in self._params]

    def hydrate(self, row):
        """The model instance the queryset would have given for `row` (None for no row)."""
        if row is None:
            return None
        connection = connections[self.using]
        row = list(row)
        for i, (converters, expression) in self._converters.items():
            value = row[i]
            for converter in converters:
                value = converter(value, expression, connection)
            row[i] = value
        obj = self._model.from_db(self.using, self._fields, [row[i] for i in self._own])
        for model, fields, indices, local_setter, remote_setter in self._related:
            related = model.from_db(self.using, fields, [row[i] for i in indices])
            if related.pk is None:  # a nullable relation left empty by its outer join
                related = None
            local_setter(obj, related)
            if related is not None:
                remote_setter(related, obj)
        for name, i in self._annotations.items():
            setattr(obj, name, row[i])
        return obj

    def get(self, *values):
        """Run the read with `values` for its placeholders: the instance, or None."""
        with connections[self.using].cursor() as cursor:
            cursor.execute(self.sql, self.params_for(*values))
            return self.hydrate(cursor.fetchone())


def _hashable(value) -> bool:
    try:
        hash(value)
    except TypeError:
        return False
    return True
