"""Whether each item a summary writes is a statement about its ticket.

Pure. A summary's lists hold statements — a decision, an action taken, a constraint, an open
question — and its narrative is an account: each names something of the ticket in words. It names
an entity by its [role], an action (a refund, a cancellation … `faithful.MENTIONS`), a tool the
class offers, an amount or a date, a party to the ticket (the customer, staff, the agent), or it
uses words the ticket's own text holds (its turns, rules, ledger, the summary before). A model
with nothing to say writes none of that: a placeholder ("N/A", "...", "<decision>", "none"), the
request's words about its own form said back ("decisions already made"), an error it was shown
("not a JSON object: Expecting value …"), a JSON fragment, a single word, or text about nothing it
was given. Any such item makes the summary be rejected (asked again, then the deterministic trim):
it is never stored as what the ticket decided.
"""

from __future__ import annotations

import re

from sundry.compaction import faithful

# Words about a summary's own form — its fields, JSON, the schema, validation and decoding errors, the
# request's instructions ("copy each line, word for word, as one item of …") — which say nothing about any
# ticket. (Entity words — order, refund, customer — are not among them.)
FORM_WORDS = frozenset(
    """
    decision decisions action actions taken constraint constraints pinned unpinned open question questions
    narrative narratives json object objects string strings key keys required require field fields list lists
    array arrays schema schemas summary summaries summarise summarised summarize summarized record records
    compacted compaction format formatted output outputs valid invalid validation validate validated error
    errors rejected reject rejection reason reasons corrected correct expecting expected property properties
    delimiter column columns line lines char chars character characters unterminated extra data placeholder
    placeholders example examples type types null undefined none nothing empty item items entry entries
    value values text texture relitigated litigated thread turns sentence sentences quote quotes quoted
    copied word words ledger lane lanes role roles structured answer answers reply name enclosed double
    starting escape control input least length token tokens tool tools call calls copy copies one exactly
    """.split()
)
# Parties to every ticket: naming one is naming something of the ticket.
PARTIES = frozenset("customer customers staff agent agents team shop store support".split())
# Function words: they carry no content of their own.
STOP = frozenset(
    """
    a an the and or but if then than so as of to in on at by for from with without into onto over under
    about after before during while until up down out off again further here there when where why how all
    any both each few more most other some such no nor not only own same too very can will just should now
    is are was were be been being have has had having do does did doing done make makes made already yet
    still also this that these those it its they them their theirs he him his she her we us our you your
    yours i me my mine who whom which what would could may might must shall per via etc ok okay yes
    """.split()
)
_TURN_PREFIX = re.compile(r"^\s*(?:turn|turns)\s+\d+(?:\s*[–-]\s*\d+)?\s*:\s*", re.I)
_ROLE = re.compile(r"\[([A-Za-z0-9_ .-]+)\]")
_WORD = re.compile(r"[A-Za-z][A-Za-z']*[A-Za-z]|[A-Za-z]|\d+(?:[.,]\d+)*")
# Data, not words: braces, a quoted key, a bracketed list opening, an escaped newline.
_DATA = re.compile(r'[{}]|"[^"\n]{0,60}"\s*:|^\s*\[\s*(?:["\]\d{]|$)|\\n')
# A template slot: `<decision>`, `<string>`, `{{reason}}`.
_SLOT = re.compile(r"<[^<>\n]{1,40}>|\{\{[^{}]*\}\}")
# An error or status line, not an account of the ticket.
_ERROR = re.compile(
    r"^\s*(?:error|exception|traceback|warning|failed to|failure|invalid|undefined|null|nan|none|n/?a|todo|tbd)\b",
    re.I,
)
_SUFFIX = re.compile(r"(?:'s|ing|ed|es|s)$")


def stem(word: str) -> str:
    """A word's crude stem, so "refunded" and "refunds" meet "refund"."""
    w = word.lower().replace("\u2019", "'")
    return _SUFFIX.sub("", w) if len(w) > 4 else w


def vocabulary(texts) -> set[str]:
    """The stems of the content words in `texts` (what the ticket's own text holds)."""
    out: set[str] = set()
    for text in texts:
        for w in _WORD.findall(text or ""):
            if w[0].isalpha() and len(w) >= 3 and w.lower() not in STOP:
                out.add(stem(w))
    return out


def why_not(
    item: str,
    *,
    roles: set[str] | frozenset[str] = frozenset(),
    tools: set[str] | frozenset[str] = frozenset(),
    vocab: set[str] | None = None,
    amounts: re.Pattern | None = None,
) -> str:
    """Why `item` is not a statement about the ticket ("" when it is one).

    `roles`: the ledger's roles (named `[role]`); `tools`: the tools the class offers; `vocab`: the
    stems of the ticket's own text (`vocabulary`), None when not known (then only its form is judged);
    `amounts`: what an amount or a date looks like."""
    text = _TURN_PREFIX.sub("", (item or "").strip())
    if _DATA.search(text):
        return "a fragment of JSON, not a sentence"
    if _SLOT.search(text):
        return "a template placeholder"
    named = {m.group(1) for m in _ROLE.finditer(text) if m.group(1) in roles}
    plain = _ROLE.sub(lambda m: " " if m.group(1) in roles else m.group(0), text)
    if amounts is not None and amounts.search(plain):
        named.add("amount or date")
        plain = amounts.sub(" ", plain)
    words = [w for w in _WORD.findall(plain) if len(w) > 1 or w.isdigit()]
    if len(words) + len(named) < 2:
        return "a single word or none, not a statement"
    named |= {t for t in tools if re.search(rf"\b{re.escape(t)}\b", plain)}
    named |= {c for c, pattern in faithful.MENTIONS.items() if pattern.search(plain)}
    lowered = (w.lower().replace("\u2019", "'").removesuffix("'s") for w in words if w[0].isalpha())
    content = {w for w in lowered if len(w) >= 3 and w not in STOP}
    if not named and not content:
        return "says nothing: a placeholder"
    if not named and _ERROR.match(plain):
        return "an error or placeholder line"
    own = content - PARTIES
    if not named and own and all(w in FORM_WORDS or stem(w) in FORM_WORDS for w in own):
        return "the request's words about the summary's form or its errors, not about the ticket"
    if named or content & PARTIES or vocab is None:
        return ""
    if {stem(w) for w in own} & vocab:
        return ""
    return "names nothing of this ticket: no role, action, tool, amount, party or word of its turns"


def not_statements(
    items: list[tuple[str, str]],
    *,
    roles=frozenset(),
    tools=frozenset(),
    vocab: set[str] | None = None,
    amounts: re.Pattern | None = None,
) -> list[str]:
    """`items`: (field, text) pairs; a line for each that is not a statement about the ticket."""
    found = []
    for name, text in items:
        why = why_not(text, roles=set(roles), tools=set(tools), vocab=vocab, amounts=amounts)
        if why:
            found.append(f'{name} item "{(text or "")[:120]}": {why}')
    return found
