"""Canned replies' placeholders: which exist, and how a body is filled in for one ticket.

Staff edit the filled text before it is sent, so nothing is dropped on the way: a placeholder the
ticket has no value for, or one nobody knows, stays in the text as a bracketed note to fill in.
"""

from __future__ import annotations

import string

# name -> what staff read when the ticket has no value for it
PLACEHOLDERS = {
    "customer_first_name": "customer's first name",
    "customer_name": "customer's name",
    "order_number": "order number",
    "ticket_number": "ticket number",
    "my_first_name": "your first name",
}


def missing(name: str) -> str:
    return f"[fill in: {PLACEHOLDERS[name]}]"


def unknown(name: str) -> str:
    return f"[unknown placeholder: {{{name}}}]"  # as written, braces and all


def names_in(body: str) -> set[str]:
    """The placeholder names a body uses; ValueError on unbalanced braces."""
    return {name for _, name, _, _ in string.Formatter().parse(body) if name is not None}


def fill(body: str, values: dict[str, str]) -> str:
    """The body with each {placeholder} replaced: by its value, by a note saying what to fill in when the
    ticket has none, or by a note naming it when it is not a placeholder at all. A stray brace leaves the
    body as written."""
    try:
        parts = list(string.Formatter().parse(body))
    except ValueError:
        return body
    out = []
    for literal, name, spec, conversion in parts:
        out.append(literal)
        if name is None:
            continue
        if name not in PLACEHOLDERS:
            out.append(unknown(name))
        else:
            out.append(values.get(name) or missing(name))
    return "".join(out)
