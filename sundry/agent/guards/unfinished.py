"""A text that ends by introducing what never follows is not a reply. Pure.

Issue 26, run 14: an answer cut off at the length limit streamed as far as "To restore your
order <the order>, you can follow these steps: ⏎⏎ 1. **Check for Duplicate Orders:**". That part
was kept as the reply (it passed every other reading on its own) and the rest held for staff:
the customer's page showed a list announced, one bold heading and nothing under it. The model
then copied the text whole as its next four answers, and each posted as a complete reply.
Nothing in it is false about the records; it is false as a reply, which promises what it
does not give.

`ending` reads how a text ends. Unfinished when its last line (markup aside: a list marker, a
heading's #, bold or italic marks):

- ends with a colon — "you can follow these steps:", "**Check for Duplicate Orders:**",
  "### Options:", "Here is what I found: 1." (an empty item after it);
- is a list marker with nothing after it ("2.", "-"), or an inline list's next number with
  nothing after it ("You can: 1. ask for a refund 2.");
- is a markdown heading, with nothing under it;
- is a list item that is only a bold label, in a list whose earlier items carry a text under
  or after their label ("1. **Refund** ⏎ We pay it back. ⏎ 2. **Replacement**");
- ends on "the following" or "as follows", with nothing following.

A colon inside a line followed by its content passes — "Note: your parcel arrived.", "at
10:30", a URL, "3:1", "You can: 1. ask for a refund 2. ask for a replacement." — and so does
a list of labels alone ("1. **Refund** ⏎ 2. **Replacement**"). The reply check asks such a
reply again, then holds it (reason `unfinished`); the stream holds a sentence back while the
text up to it ends unfinished, so "…these steps:" shows only with the first step
(`provisional`); and of a reply whose streamed part ends unfinished only the part before the
introduction is kept (`finished_part`, `answer._keep_shown`).
"""

from __future__ import annotations

import re

UNFINISHED = "unfinished"  # the reply check's reason
# Only the end is read: enough lines for a list and its items' bodies.
TAIL_LINES = 60

# A list item's marker at a line's start: "1." "2)" "-" "*" "•" "+".
_MARKER = r"(?:\d{1,2}[.)]|[-*•+])"
_ITEM = re.compile(r"^\s*" + _MARKER + r"(?:\s+|$)")
_EMPTY_ITEM = re.compile(r"^\s*" + _MARKER + r"\s*$")
_HEADING = re.compile(r"^\s*#{1,6}\s+\S")
# What wraps a line's words without being one: a marker, a heading's #, a quote's >, bold or italic marks.
_LEAD = re.compile(r"^\s*(?:>\s*)*(?:#{1,6}\s+)?(?:" + _MARKER + r"\s+)?")
_MARKS = "*_~` \t"
# A colon ending what is left ("steps:", "Duplicate Orders:**", a full-width colon).
_COLON_END = re.compile(r"[:：]$")
# An empty item straight after a colon: "steps: 1." "options: -".
_AFTER_COLON = re.compile(r"[:：][*_]*\s+(?:\d{1,2}[.)]|[-•])$")
# An inline list's next number with nothing after it: "…: 1. ask for a refund 2."
_INLINE_OPEN = re.compile(r"[:：][*_]*\s*1[.)]\s")
_INLINE_NEXT = re.compile(r"\s(\d{1,2})[.)]$")
_FOLLOWING = re.compile(r"\b(?:the\s+following|as\s+follows)\s*[.:…]*$", re.I)
# A list item that is only a bold label: "2. **Replacement**", "- __Refund:__ ".
_LABEL_ONLY = re.compile(r"^\s*" + _MARKER + r"\s+(\*\*|__)[^*_\n]+?\1\s*[:—–-]?\s*$")
# A list item whose bold label has words after it: "1. **Refund:** we pay it back."
_LABEL_TEXT = re.compile(r"^\s*" + _MARKER + r"\s+(\*\*|__)[^*_\n]+?\1\s*[:—–-]?\s*\w")
# Where a sentence ends, for cutting one off: closing punctuation before whitespace, or a line break.
_BOUNDARY = re.compile(r"[.!?]+[\"')\]*_”’]*(?=\s)|\n")


def _core(line: str) -> str:
    """The line's words without the markup around them."""
    return _LEAD.sub("", line, count=1).strip(_MARKS)


def _labels_with_bodies(lines: list[str]) -> bool:
    """Whether an item of the list these lines end has a text after or under its bold label."""
    for i, line in enumerate(lines):
        if _LABEL_TEXT.match(line):
            return True
        if _LABEL_ONLY.match(line):
            after = next((n for n in lines[i + 1 :] if n.strip()), None)
            if after is not None and not _LABEL_ONLY.match(after):
                return True
    return False


def ending(text: str) -> str:
    """How `text` ends unfinished ("" if it does not): what staff read of why."""
    lines = [line.rstrip() for line in (text or "").rstrip().rsplit("\n", TAIL_LINES)[-TAIL_LINES:]]
    if not lines[-1].strip():
        return ""
    last = lines[-1]
    if _EMPTY_ITEM.match(last):
        return "an empty list item"
    if _HEADING.match(last):
        return "a heading with nothing under it"
    core = _core(last)
    if _COLON_END.search(core):
        return "an introduction with nothing after it"
    if _AFTER_COLON.search(core):
        return "an empty list item"
    number = _INLINE_NEXT.search(core)
    if number and int(number.group(1)) > 1 and _INLINE_OPEN.search(core):
        return "an empty list item"
    if _FOLLOWING.search(core):
        return "an introduction with nothing after it"
    if _LABEL_ONLY.match(last) and _labels_with_bodies(lines[:-1]):
        return "a list item that is only its heading"
    return ""


def finished_part(text: str) -> str:
    """`text` up to the last complete sentence before its unfinished end: each last sentence (or line) cut
    off while what is left still ends unfinished. "" when nothing before it is finished."""
    text = (text or "").rstrip()
    while text and ending(text):
        ends = [m.end() for m in _BOUNDARY.finditer(text) if m.end() < len(text)]
        text = text[: ends[-1]].rstrip() if ends else ""
    return text
