"""Counting a step's database round trips by the module that made each one (a test helper).

`count_queries()` records every statement Django sends on the default connection, with the
innermost Sundry module on the stack when it was sent (`agent/step.py`, `tickets/versions.py`,
…), and every COMMIT — a round trip of its own that Django's query log does not show.
"""

from __future__ import annotations

import re
import traceback
from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass, field

from django.db import connection

_SUNDRY = re.compile(r"[/\\]sundry[/\\](.+\.py)$")


@dataclass
class Counted:
    statements: list[tuple[str, str]] = field(default_factory=list)  # (module, sql)
    commits: int = 0

    @property
    def round_trips(self) -> int:
        """Statements, plus each transaction's BEGIN and COMMIT: psycopg sends BEGIN on its own
        before a transaction's first statement, and neither is in Django's query log."""
        return len(self.statements) + 2 * self.commits

    def slice(self, start: tuple[int, int], end: tuple[int, int]) -> Counted:
        """What was counted between two (statements, commits) marks."""
        return Counted(self.statements[start[0] : end[0]], end[1] - start[1])

    def by_module(self) -> Counter:
        return Counter(module for module, _ in self.statements)

    def matching(self, pattern: str) -> list[str]:
        return [sql for _, sql in self.statements if re.search(pattern, sql)]

    def report(self) -> str:
        lines = [f"{n:3d}  {module}" for module, n in self.by_module().most_common()]
        return "\n".join([*lines, f"{2 * self.commits:3d}  BEGIN and COMMIT", f"{self.round_trips:3d}  round trips"])


def _module() -> str:
    for frame in reversed(traceback.extract_stack()):
        hit = _SUNDRY.search(frame.filename)
        if hit and "/evals/" not in frame.filename:
            return hit.group(1)
    return "?"


@contextmanager
def count_queries():
    counted = Counted()

    def wrapper(execute, sql, params, many, context):
        counted.statements.append((_module(), sql))
        return execute(sql, params, many, context)

    real_commit = connection.commit

    def commit():
        if connection.connection is not None and not connection.get_autocommit():
            counted.commits += 1
        return real_commit()

    connection.commit = commit
    try:
        with connection.execute_wrapper(wrapper):
            yield counted
    finally:
        del connection.commit
