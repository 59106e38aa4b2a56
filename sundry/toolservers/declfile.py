"""A tool server's declaration file: the domain its tools belong to, in the domain declaration format.

The file is JSON as `sundry.tooling.domain.Domain.from_data` reads it (`name`,
`prompt`, `id_patterns`, `id_nouns`, `typed_kinds`, `typed_forms`, `tools`: one entry per tool
with `args` and `results` — path → ID kind —, `bare` regexes for plain-string
results, `lookup`, `write`, `target`, `repeat_key`, `consent`, `describe`,
`money` …), so one format serves in-process and remote tools. The server supplies
each tool's JSON Schema when it lists its tools; the file adds what a schema
cannot say. This module only reads the file and says clearly what is wrong with it.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from pydantic import ValidationError

from sundry.tooling.domain import Domain, ToolDecl

_WHOLE = re.compile(r"^(?:\^|\\A).*(?:(?<!\\)\$|\\Z)$", re.S)


class DeclarationError(ValueError):
    """The file is missing, not JSON, or not in the format; the message says where."""


def undeclared(name: str, parameters: dict, *, read_only: bool) -> ToolDecl:
    """A listed tool the file does not declare: usable, nothing harvested; a write unless the
    server says it only reads, and then held for staff by default."""
    return ToolDecl(
        name=name,
        parameters=parameters or {"type": "object", "properties": {}},
        write=not read_only,
        approvable=not read_only,
        declared=False,
    )


def parse(text: str, *, where: str = "declaration file") -> Domain:
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise DeclarationError(f"{where}: not JSON ({exc})") from None
    try:
        domain = Domain.from_data(data)
    except ValidationError as exc:
        first = exc.errors()[:5]
        problems = "; ".join(f"{'.'.join(str(p) for p in e['loc']) or '(file)'}: {e['msg']}" for e in first)
        raise DeclarationError(f"{where}: {problems}") from None
    for name, tool in domain.tools.items():
        # A `bare` match counts as looked up, so it must be the whole result (an ID a tool returns
        # alone), never an ID found inside free text, which may quote what anyone wrote.
        loose = [p for p in tool.bare if not _WHOLE.match(p)]
        if loose:
            raise DeclarationError(
                f"{where}: tools.{name}.bare: '{loose[0]}' must match the whole result "
                "(begin with ^ and end with $). IDs inside free text are never counted as "
                "looked up; leave such a result without 'bare'."
            )
    return domain


def load(path: str | Path, base: Path | None = None, *, shown: str | None = None) -> Domain:
    """The file at `path` (relative to `base` when not absolute), validated; messages name it as `shown`
    (default: `path`). It reads any path it is given: a tool server's file is checked against the
    deployment's declarations folder first (`limits.declaration_file`)."""
    p = Path(path)
    if not p.is_absolute() and base is not None:
        p = base / p
    where = shown if shown is not None else str(path)
    try:
        text = p.read_text()
    except OSError as exc:
        raise DeclarationError(f"{where}: cannot read it ({exc.strerror or exc})") from None
    return parse(text, where=where)
