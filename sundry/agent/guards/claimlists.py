"""Claims a reply makes as a list: a lead-in that says what became of the items, then the items. Pure.

    Your requests have been processed:
    - Refund of 48.99 USD on <order>
    - Order <order> cancelled

Each item names an action ("refund", "cancelled", a write's own words) and its
record, but no verb of its own says what became of it: the lead-in does, for
every item — done ("have been processed", "Here's what I did:", "Completed:"),
pending ("submitted", "awaiting your confirmation"), promised ("I'll do the
following once you confirm:", "will be processed") or refused ("were declined",
"could not be processed"). So each item is a claim of its action in the
lead-in's mode, unless the item says its own mode ("— pending your
confirmation"), and `replyclaims` judges it like any sentence.

A list may run inline, in one sentence: "Your requests have been processed: a
refund of 48.99 USD and the cancellation of <order>." Its items are the parts
after the colon, split at commas, semicolons and "and"; each is read as a line
item would be, and the lead-in before the colon is read as a sentence of its own.

A list whose lead-in says nothing happened claims nothing of its own: steps for
the customer ("Here's what you need to do:"), options ("You can choose:"),
details ("Here are the details:"). Its items are read one by one as sentences,
as before.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from sundry.agent.guards import claimmodes, claimverbs
from sundry.agent.guards.provisional import sentences

DONE, PENDING, FUTURE, REFUSED, DENIED = "done", "pending", "future", "refused", "denied"
REFUND, CANCEL, RETURN, REPLACE, EMAIL, PHONE = "refund", "cancel", "return", "replace", "email", "phone"

# A list item: a bullet, a number or a letter, then its text.
_ITEM = re.compile(
    r"^[ \t]*(?:[-*+\u2022\u00b7\u25aa\u25e6\u2013\u2014]|\d{1,2}[.)]|\(\d{1,2}\)|[a-h][.)])[ \t]+(?=\S)"
)
_MARKUP = re.compile(r"\*\*|__|`")
# The action an item names, by the six kinds' nouns as much as their verbs ("Refund of …", "Order … cancelled").
_ITEM_KINDS = {
    REFUND: re.compile(r"\brefund\w*|\bmoney\s+back\b|\breimburs\w*", re.I),
    CANCEL: re.compile(r"\bcancel\w*", re.I),
    RETURN: re.compile(r"\breturn(?:s|ed)?\b(?!\s+to\s+(?:you|your|the|my)\b)", re.I),
    REPLACE: re.compile(r"\breplace\w*|\bexchang\w*", re.I),
    EMAIL: re.compile(r"\be-?mail(?:ed)?\b", re.I),
    PHONE: re.compile(r"\b(?:phone\s+call|call(?:ed)?\s+(?:you|to\s+you)|called)\b", re.I),
}

# What the lead-in is about: the customer's own doing, options, details — no claim of ours.
_NOT_OURS = re.compile(
    r"\byou(?:'ll|\s+will)?\s+(?:need|have\s+to|can|could|may|might|should|must|want)\b|\bplease\b|\bsteps?\b"
    r"|\boptions?\b|\bchoices?\b|\bchoose\b|\beither\b|\bany\s+of\b|\bwhich\b|\btry\b|\bdetails?\b|\binformation\b"
    r"|\bpolicy\b|\brules?\b|\bhow\s+to\b|\bwhat\s+you\b|\byour\s+requested\b|\byou(?:'re|\s+are|'ve|\s+have)?\s+(?:request|ask|want)\w*"
    r"|\bhelp\b|\bassist\b|\blook\s+into\b|\bcheck\w*|\breview\b",
    re.I,
)
_FAILED = re.compile(
    r"\b(?:could\s*n[o']t|couldn't|was\s+unable\s+to|were\s+unable\s+to|failed\s+to|did\s+not\s+go\s+through"
    r"|didn't\s+go\s+through|not\s+possible)\b",
    re.I,
)
_DONE_WORD = (
    r"(?:processed|done|did|completed?|handled|taken\s+care\s+of|actioned|carried\s+out|made|applied|executed"
    r"|finished|sorted(?:\s+out)?|confirmed|put\s+through|gone\s+through|went\s+through|performed|taken|issued|sent"
    r"|refunded|cancell?ed|booked|arranged|placed|created|initiated|approved|credited|replaced)"
)
_NOT_DONE = re.compile(r"\b(?:not|never|no)\b|n't\b|\bnothing\b|\bnone\b", re.I)
# An item with a verb of its own ("Order <order> has been cancelled", "You'll receive an e-mail") is a
# sentence, read as one; only an item without ("Order <order> cancelled", "Refund of 48.99 USD") takes
# the lead-in's mode.
_OWN_VERB = re.compile(
    r"\b(?:has|have|had|is|are|was|were|will|shall|been|being|i|we|you|it|they)\b|'(?:ll|s|ve|re|d)\b", re.I
)
_LEAD_PENDING = re.compile(
    r"\b(?:being\s+(?:processed|handled|reviewed)|in\s+progress|(?:awaiting|waiting\s+(?:for|on)|pending)\s+"
    r"(?:your\s+|staff\s+|manager\s+|a\s+)?(?:confirmation|approval|review|decision)|(?:is|are)\s+(?:now\s+|still\s+)?"
    r"pending|submitted|(?<!as\s)requested|under\s+review|sent\s+(?:to\s+\w+\s+)?for\s+(?:\w+\s+)?(?:approval|review)"
    r"|on\s+hold|escalated|put\s+through\s+for|raised|queued)\b|^\W*pending\b",
    re.I,
)
# An item's own word that it is pending or not done ("— awaiting your confirmation", "Refund: not
# possible"); "your pending order" or "(no extra charge)" says nothing of the action.
_ITEM_PENDING = re.compile(
    r"\b(?:awaiting|waiting\s+for|pending)\s+(?:your\s+|staff\s+|manager\s+)?(?:confirmation|approval|review|decision)"
    r"\b|\bin\s+progress\b|\bunder\s+review\b|\bon\s+hold\b|[:\u2014\u2013-]\s*(?:submitted|pending)\b",
    re.I,
)
_ITEM_NOT = re.compile(
    r"^\W*(?:not|no|never)\b|[:\u2014\u2013(-]\s*(?:not|never)\b|\bnot\s+(?:yet\s+)?(?:done|processed|completed|made"
    r"|issued|possible|approved)\b",
    re.I,
)
# Ours, to come: "I'll …", "we will …", "… will be processed", "Next, I'm going to …".
_LEAD_FUTURE = re.compile(
    r"\b(?:i|we)(?:'ll|\s+will|\s+shall|(?:'m|\s+am|'re|\s+are)\s+going\s+to|(?:'m|\s+am|'re|\s+are)\s+about\s+to)\s+"
    r"(?!need|have\s+to|be\s+able|not\b)"
    r"|\b(?:will|shall)\s+(?:now\s+|then\s+|also\s+|soon\s+)?be\s+(?!able)\w+"
    r"|'ll\s+(?:now\s+|then\s+|also\s+|soon\s+)?be\s+(?!able)\w+",
    re.I,
)
_LEAD_DONE = re.compile(r"\b" + _DONE_WORD + r"\b", re.I)
_CONDITION = re.compile(r"\b(?:if|once|when|after|unless|until|whether|can|could|would|may|might)\b|'d\b", re.I)


def lead_mode(lead: str) -> str | None:
    """What the lead-in says became of the items that follow it (None: it says nothing happened)."""
    s = _MARKUP.sub("", lead).strip().replace("\u2019", "'")
    if not s or s.rstrip(":").endswith("?") or claimmodes.asks_or_offers(s) or _NOT_OURS.search(s):
        return None
    if claimmodes.offer_rest(s) is not None and not _LEAD_FUTURE.search(s):
        return None  # "I can do the following for you:": an offer, judged item by item as before
    if re.search(r"\b(?:declined|rejected|refused|denied|turned\s+down)\b", s, re.I):
        return REFUSED
    if _FAILED.search(s):
        return DENIED
    if _LEAD_PENDING.search(s) and not _NOT_DONE.search(s):
        return PENDING
    if _LEAD_FUTURE.search(s):
        return FUTURE
    if _LEAD_DONE.search(s):
        if _NOT_DONE.search(s):
            return DENIED
        return None if _CONDITION.search(s) else DONE
    return None


@dataclass(frozen=True)
class Item:
    start: int  # where the item's line starts in the text (an inline item: its sentence)
    end: int  # where it ends (its line break excluded)
    lead: str
    text: str  # without its bullet or number
    mode: str
    kinds: tuple[str, ...]
    inline: bool = False  # one of the parts of a sentence after its lead-in's colon


# An inline list: a lead-in, a colon and a space (not "10:30"), then its items.
_INLINE_LEAD = re.compile(r"^(.*?\w.*?):\s+(?=\S)")
# Between inline items: a semicolon, a comma (not in "1,299.00"), "and", "as well as", "plus".
_INLINE_SPLIT = re.compile(r"\s*;\s*|,\s+(?:and\s+|as\s+well\s+as\s+|plus\s+)?|\s+(?:and|as\s+well\s+as|plus)\s+", re.I)


def _inline(at: int, line: str, vocab) -> list[Item]:
    """The items of each sentence of `line` that lists them after a lead-in's colon."""
    out: list[Item] = []
    pos = 0
    for piece in sentences(line, final=True):
        start, pos = pos, pos + len(piece)
        body = piece.strip()
        m = _INLINE_LEAD.match(body)
        if m is None or body.endswith(":"):
            continue  # no colon, or a lead-in of a list on the lines below
        lead = m.group(1)
        mode = lead_mode(lead)
        if mode is None:
            continue
        lead_kinds = tuple(item_kinds(lead, vocab))
        begin, end = at + start, at + start + len(piece.rstrip())  # as `replyclaims` places its sentences
        for part in _INLINE_SPLIT.split(body[m.end() :].rstrip(".!")):
            said = _MARKUP.sub("", part).strip().replace("\u2019", "'")
            if not said or _OWN_VERB.search(said):
                continue
            kinds = tuple(item_kinds(said, vocab)) or lead_kinds
            out.append(Item(begin, end, lead.strip() + ":", said, _item_mode(said, mode), kinds, True))
    return out


def _lines(text: str):
    at = 0
    for line in text.split("\n"):
        yield at, line
        at += len(line) + 1


def item_kinds(item: str, vocab: claimverbs.Vocabulary = claimverbs.EMPTY) -> list[str]:
    """The kinds of action a list item names: the six kinds' words, and the domain's writes' own
    (`claimverbs`) where the six do not already cover the write."""
    six = [kind for kind, pattern in _ITEM_KINDS.items() if pattern.search(item)]
    own = [k for k in vocab.mentioned(item) if not vocab.read_already(k, set(six))] if vocab else []
    return list(dict.fromkeys(six + own))


def _item_mode(item: str, lead: str) -> str:
    """An item that says its own mode ("— awaiting your confirmation", "declined") keeps it."""
    own = claimmodes.mode_of(item, lambda _plain: False)
    if own in (PENDING, REFUSED):
        return own
    if re.search(r"\b(?:declined|rejected|refused|denied|turned\s+down)\b", item, re.I):
        return REFUSED
    if _ITEM_PENDING.search(item):
        return PENDING
    if _ITEM_NOT.search(item):
        return DENIED
    if own == FUTURE and lead == DONE:
        return FUTURE
    return lead


def items(text: str, vocab: claimverbs.Vocabulary = claimverbs.EMPTY) -> list[Item]:
    """Every item of a list whose lead-in says what became of its items, with the item's mode and the
    kinds of action it names (none: the item names no action, and claims nothing)."""
    out: list[Item] = []
    lead, mode, lead_kinds = "", None, ()
    previous = ""  # the last line that was neither blank nor an item
    in_list = False
    for at, line in _lines(text):
        m = _ITEM.match(line)
        if m is None:
            if line.strip():
                previous, in_list = line, False
                out += _inline(at, line, vocab)
            continue
        if not in_list:
            in_list = True
            # The lead-in is the last sentence of the line before the list ("Thanks! Here's what I did:").
            parts = [p for p in re.split(r"(?<=[.!?])\s+", previous.strip()) if p]
            lead = parts[-1] if parts else ""
            mode = lead_mode(lead)
            lead_kinds = tuple(item_kinds(lead, vocab))
        said = _MARKUP.sub("", line[m.end() :]).strip().replace("\u2019", "'")
        if said.endswith(":"):
            # An item that leads a nested list in its turn ("1. Review your reservations to find:").
            lead, mode = said, lead_mode(said)
            lead_kinds = tuple(item_kinds(lead, vocab))
            continue
        if mode is None:
            continue
        if _OWN_VERB.search(said):
            continue
        # An item that names no action is of the lead-in's ("Return requests have been submitted for:").
        kinds = tuple(item_kinds(said, vocab)) or lead_kinds
        out.append(Item(at, at + len(line), lead.strip(), said, _item_mode(said, mode), kinds))
    return out
