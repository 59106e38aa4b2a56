"""A JSON form field with bounds: admin forms take JSON from people, and Python's reader
recurses once per nesting level, so a deeply nested value would end in a server error
instead of a message. Refused before parsing: more than MAX_DEPTH levels or MAX_CHARS."""

from __future__ import annotations

from django import forms
from django.core.exceptions import ValidationError
from django.forms.fields import InvalidJSONInput

MAX_DEPTH = 32
MAX_CHARS = 64 * 1024


def nesting_depth(text: str) -> int:
    """The deepest nesting of [ and { in JSON text, strings skipped (no parsing, no recursion)."""
    depth = deepest = 0
    in_string = escaped = False
    for ch in text:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif ch in "]}":
            depth -= 1
    return deepest


def _too_big(value) -> bool:
    return isinstance(value, str) and (len(value) > MAX_CHARS or nesting_depth(value) > MAX_DEPTH)


class BoundedJSONField(forms.JSONField):
    def bound_data(self, data, initial):
        # The form shown again with its errors re-reads what was typed: kept as typed, never parsed.
        if _too_big(data):
            return InvalidJSONInput(data)
        return super().bound_data(data, initial)

    def to_python(self, value):
        if isinstance(value, str):
            if len(value) > MAX_CHARS:
                raise ValidationError(f"At most {MAX_CHARS:,} characters of JSON.", code="invalid")
            if nesting_depth(value) > MAX_DEPTH:
                raise ValidationError(f"JSON nested more than {MAX_DEPTH} levels deep is not accepted.", code="invalid")
        try:
            return super().to_python(value)
        except RecursionError:  # belt and braces: the scan above should make this unreachable
            raise ValidationError("This JSON is nested too deeply.", code="invalid") from None
