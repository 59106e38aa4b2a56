"""JSON as the standard defines it: no NaN, Infinity or -Infinity.

Python's json module accepts those constants, PostgreSQL's jsonb refuses them,
and no tool argument means them. Arguments that carry one are kept as raw text
so the guards reject them as a schema error the model can read and fix.
"""

from __future__ import annotations

import json
import math
from typing import Any


class NonStandardJSON(ValueError):
    """The text is JSON only by Python's lenient reading (it holds NaN or an infinity)."""


def _refuse(constant: str):
    raise NonStandardJSON(f"{constant} is not a JSON value; send a number or a string")


def loads(text: str | bytes) -> Any:
    """`json.loads` that refuses NaN, Infinity and -Infinity (NonStandardJSON, a ValueError)."""
    return json.loads(text, parse_constant=_refuse)


def non_finite_path(value: Any, path: str = "") -> str | None:
    """Where in `value` a NaN or infinite float sits (e.g. "amount" or "items.0"), or None."""
    if isinstance(value, float) and not math.isfinite(value):
        return path or "(value)"
    if isinstance(value, dict):
        items = value.items()
    elif isinstance(value, (list, tuple)):
        items = enumerate(value)
    else:
        return None
    for key, item in items:
        found = non_finite_path(item, f"{path}.{key}" if path else str(key))
        if found:
            return found
    return None
