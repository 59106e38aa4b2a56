"""Does a reply state a record's status, a date of it, or a figure of it? Pure.

"Your order <ref> has been delivered", "it shipped on 3 August", "<ref> is still
processing", "order status: delivered", "order date: 2021-08-22", "The amount is
20.00", "the total was $69.98": each tells the customer a fact of their record.
Such a statement is a claim (`replyclaims`, mode STATED) that stands only on the
domain's records (`tooling.records.RecordState`, read from the database) or on
what the tool results the model was shown say (the ledger's status words, the
dates and figures in the results):

- a status stands when the record has it now ("shipped" for a delivered order
  too), or a tool result gave the record that status; "not delivered" when it
  has not;
- a date stands when it is the day the record's event happened (placed, shipped,
  delivered, refunded, cancelled, returned) — a date written without a year on
  that day and month — or the same date a tool result shows; a date this module
  cannot read ("03/08/2026") stands only where a tool result shows those very words;
- an amount stands when it is one of the record's figures (total, paid, refunded,
  left to refund, a line, a payment, a refund), a figure of a card, hold or action
  on the ticket, or a figure a tool result shows.

An order is told only a status its records support: a status word the shop does not use (`_OTHER_WORDS`:
"completed", "on hold", "pending", the parcels', payments', refunds', returns' and tool servers' own
words, an order's condition — "<ref> is a damaged order"), said of an order by its reference or as
"your order" with "is/was/has been", or after "order status:", stands only where a tool result's status
field says that very word. An item's or a parcel's condition, a refund's or a return's status, and
sorrow at the customer's report ("I'm sorry your order is damaged") are not read that way.

The record is the one the sentence names; naming none, any record of the ticket
(as other claims judge "it": `replyclaims._entity`). A question, a condition or a
future ("if it has shipped …", "once it is delivered …", "it should arrive on
3 August"), the customer's words said back ("you said it was delivered") and
anything in quotation marks state nothing.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date

from sundry.agent.guards import relativedates
from sundry.tooling.records import CANCELLED, DELIVERED, LOST, PLACED, REFUNDED, RETURNED, SHIPPED, STATUSES

STATED = "stated"
STATUS, DATE, AMOUNT = "status", "date", "amount"

# A status as replies word it.
# Between two tool results in the `shown` text: a line of its own, so each result can be told apart.
RESULT_BREAK = "\n\x1e\n"
_STATUS_WORDS = {
    PLACED: r"processing|being\s+(?:processed|prepared|packed)|awaiting\s+(?:dispatch|shipment|shipping)"
    r"|placed\s+but\s+not\s+(?:yet\s+)?shipped",
    SHIPPED: r"shipped|dispatched|sent\s+out|on\s+(?:its|the|their)\s+way|in\s+transit|out\s+for\s+delivery",
    DELIVERED: r"delivered",
    CANCELLED: r"cancell?ed",
    RETURNED: r"returned",
    REFUNDED: r"refunded",
    LOST: r"lost(?:\s+in\s+(?:transit|the\s+post))?",
}
_WORD = "|".join(f"(?P<{k}>{p})" for k, p in _STATUS_WORDS.items())
# What a status is of: the order, its parcel, "it", or a record named by its reference.
_SUBJECT = (
    r"(?:\b(?:your|the|this|that)\s+(?:[\w-]+\s+){0,2}?(?:order|package|parcel|shipment|items?|purchase)"
    r"(?:\s+(?:number\s+)?[A-Z][A-Za-z0-9]*[-_][A-Za-z0-9]+)?|\bit|\bthey|\b[A-Z][A-Za-z0-9]*[-_][A-Za-z0-9]*\d[A-Za-z0-9]*)"
)
_ADV = r"(?:(?:now|already|still|just|currently|successfully|finally|also|indeed|actually|yet)\s+)*"
_STATUS_SHAPES = [
    re.compile(p, re.I)
    for p in (
        # "your order SU-1 has been delivered", "it shipped", "SU-1 is still processing", "it hasn't shipped"
        r"(?P<subject>"
        + _SUBJECT
        + r")"
        # "your parcel for order <ref>", "Order <ref> (placed on 2026-08-10)"
        + r"(?:\s+(?:for|of)\s+(?:order\s+)?[A-Z][A-Za-z0-9]*[-_][A-Za-z0-9]+)?(?:\s*\([^()]{0,80}\))?"
        + r"(?:'s|\s+has|\s+have|\s+had|\s+was|\s+were|\s+is|\s+are)?(?P<neg>\s*n't|\s+not)?\s+"
        + _ADV
        + r"(?:been\s+|being\s+(?=processed|prepared|packed))?"
        + _ADV
        + r"(?:marked\s+(?:as\s+)?|shown\s+as\s+|listed\s+as\s+)?(?:"
        + _WORD
        + r")\b",
        # "order status: delivered", "the status of your order is shipped", "status shows as delivered"
        r"\bstatus(?:\s+(?:of|for)\s+(?:your|the|this)\s+(?:order|package|parcel|shipment)"
        r"(?:\s+[A-Z][A-Za-z0-9]*[-_][A-Za-z0-9]+)?)?(?:\s+[A-Z][A-Za-z0-9]*[-_][A-Za-z0-9]+)?"
        r"\s*(?::|=|-|\bis\b(?P<neg>\s+not)?|\bshows(?:\s+as)?|\breads|\bsays)\s*"
        + _ADV
        + r"[\"'“]?(?:"
        + _WORD
        + r")\b",
    )
]
# Status words the shop does not use — common commerce states, the words tool servers' and payment,
# parcel, refund and return records use, and an order's condition ("damaged") — said of an order: no
# record of the shop has such a status, so one stands only where a tool result's status field says that
# very word (`"status": "on_hold"`). Left out: words as often said of a placed order's acknowledgement
# ("received", "confirmed") or of timing ("delayed"). "missing" is said of a lost order: read as lost.
_OTHER_WORDS = (
    r"completed?|fulfilled|unfulfilled|on\s+hold|unconfirmed|pending|awaiting\s+payment|back-?ordered"
    r"|on\s+back-?order|failed|declined|rejected|voided|expired|closed|archived|suspended|disputed"
    r"|authori[sz]ed|captured|issued|booked|label\s+created|return\s+requested|exchange\s+requested"
    r"|ready\s+for\s+(?:pick-?up|collection)|undeliverable"
    # An order's condition: "<ref> is a damaged order."
    r"|damaged|broken|defective|faulty|stolen|destroyed|missing"
)
_SYNONYMS = {"missing": LOST}
_REF_WORD = r"[A-Z][A-Za-z0-9]*[-_][A-Za-z0-9]*\d[A-Za-z0-9]*"
# Only an order is told such a status: its reference or "your order", not "it" (a refund, a request, a
# call) nor a parcel or an item (whose condition the customer reports).
_ORDER_SUBJECT = (
    r"(?:\b(?:your|the|this|that)\s+(?:(?!(?:for|of|on|to|from|in|with|about)\s)[\w-]+\s+){0,2}?(?:order|purchase)"
    r"(?:\s+(?:number\s+)?(?P<ref>" + _REF_WORD + r"))?"
    # a bare reference is the subject, not what a refund or a return is "for", "on" or "of"
    r"|(?<!\bfor\s)(?<!\bof\s)(?<!\bon\s)(?<!\bto\s)(?<!\bin\s)(?<!\bwith\s)(?<!\bfrom\s)(?<!\babout\s)"
    r"\b(?:order\s+(?:number\s+)?|(?<!\border\s)(?<!\bnumber\s))(?P<bare>" + _REF_WORD + r"))"
)
_OTHER_SHAPES = [
    re.compile(p, re.I)
    for p in (
        # "<ref> is a damaged order", "your order is on hold", "<ref> has been marked as completed"
        _ORDER_SUBJECT
        + r"(?:\s*\([^()]{0,80}\))?(?:\s+(?:is|was|are|were)|'s|\s+(?:has|have|had)(?:\s+(?:now|already|just|also|finally))*\s+been)"
        + r"(?P<neg>\s*n't|\s+not)?\s+"
        + _ADV
        + r"(?:marked\s+(?:as\s+)?|shown\s+as\s+|listed\s+as\s+)?(?:(?:an?\s+)?(?P<other>"
        + _OTHER_WORDS
        + r")|an?\s+(?P<known>"
        + "|".join(_STATUS_WORDS.values())
        + r"))(?:\s+(?:order|purchase))?"
        # the end of what is said of it: not "is missing an item", "is pending review"
        + r"(?=\s*(?:[.,;:!?)\n]|$)|\s+(?:and|but|so|because|since|now|too|as\s+well)\b)",
        # "Order status: - Completed - On hold", "the status of order <ref> is pending"
        r"(?<!refund\s)(?<!payment\s)(?<!return\s)(?<!exchange\s)(?<!ticket\s)(?<!request\s)"
        r"\bstatus(?:\s+(?:of|for)\s+(?:(?:your|the|this)\s+)?(?:order|purchase)(?:\s+" + _REF_WORD + r")?)?"
        r"(?:\s+" + _REF_WORD + r")?"
        r"\s*(?::|=|\bis\b(?P<neg>\s+not)?|\bshows(?:\s+as)?|\breads|\bsays)\s*(?:[-*\u2022]\s*)?"
        + _ADV
        + r"[\"'\u201c]?(?P<other>"
        + _OTHER_WORDS
        + r")\b",
    )
]
# Sorry to hear it, said right before the order: "I'm sorry your order is damaged" takes up the customer's report.
_SORRY = re.compile(r"\bsorry\s+(?:(?:to\s+(?:hear|learn|read|see)|about)\s+)?(?:that\s+)?$", re.I)
# The event a date is of, as replies word it (its own word, or a label: "order date", "delivery date").
_EVENTS = {
    PLACED: r"placed|ordered|purchased|bought|order\s+date|date\s+of\s+(?:your\s+|the\s+)?order|order\s+was\s+made",
    SHIPPED: r"shipped|dispatched|sent\s+out|ship(?:ping|ment)?\s+date|dispatch\s+date",
    DELIVERED: r"delivered|delivery\s+date|date\s+of\s+delivery",
    REFUNDED: r"refunded|refund\s+date",
    CANCELLED: r"cancell?ed|cancellation\s+date",
    RETURNED: r"returned|return\s+date",
}
_EVENT = "|".join(f"(?P<{k}>{p})" for k, p in _EVENTS.items())
_MONTHS = {
    m: i + 1
    for i, names in enumerate(
        [
            "jan|january",
            "feb|february",
            "mar|march",
            "apr|april",
            "may",
            "jun|june",
            "jul|july",
            "aug|august",
            "sep|sept|september",
            "oct|october",
            "nov|november",
            "dec|december",
        ]  # fmt: skip
    )
    for m in names.split("|")
}
_MONTH = r"(?:" + "|".join(sorted(_MONTHS, key=len, reverse=True)) + r")\.?"
_DAY = r"(?:[12]\d|3[01]|0?[1-9])(?:st|nd|rd|th)?"
_DATE = (
    r"(?P<date>(?:(?:mon|tues|wednes|thurs|fri|satur|sun)day,?\s+)?(?:the\s+)?"
    r"(?:\d{4}-\d{2}-\d{2}(?:T[\d:.]+Z?)?"
    r"|" + _DAY + r"\s+(?:of\s+)?" + _MONTH + r"(?:,?\s+\d{4})?"
    r"|" + _MONTH + r"\s+" + _DAY + r"(?:,?\s+\d{4})?(?!\d)"
    r"|\d{1,2}[/.]\d{1,2}[/.]\d{2,4}))"
)
_DATE_SHAPE = re.compile(
    r"\b(?:" + _EVENT + r")\b(?:(?!\b(?:" + "|".join(_EVENTS.values()) + r")\b)[^,;\d.!?]){0,40}?" + _DATE, re.I
)
# A time said relative to the reply, of an event (`relativedates`): after it — "it shipped 15 days ago",
# "was delivered to you yesterday", "The order … was shipped in 15 days ago" — or opening the clause
# before it — "Yesterday, your order was delivered". What stands between them keeps them one statement:
# not another event, a verb, a conjunction or a new subject ("the lamp you ordered arrived yesterday"
# says when it arrived, not when it was ordered).
_EVENT_WORDS = "|".join(_EVENTS.values())
_JOINS = (
    r"\w+ed|do|does|did|will|would|should|can|could|may|might|must|and|but|or|nor|so|because|since|as|though"
    r"|although|while|which|that|who|whom|whose|when|where|if|until|unless|after|before|came|got|wrote|said"
    r"|told|took|made|gave|saw|went|left|paid|sent|ago|back"
)
# After the event, a new verb or subject starts another statement; before it, "Yesterday, your order was …".
_BETWEEN_AFTER = (
    r"(?:\s+(?:(?:to|for|with|by)\s+you\b|"
    + _REF_WORD
    + r"|(?!(?:"
    + _EVENT_WORDS
    + r"|"
    + _JOINS
    + r"|is|was|were|are|am|be|been|being|has|have|had|i|you|we|they|he|she)\b)[a-z][\w'-]*))"
)
_BETWEEN_BEFORE = r"(?:\s+(?:" + _REF_WORD + r"|(?!(?:" + _EVENT_WORDS + r"|" + _JOINS + r")\b)[a-z][\w'-]*))"
_RELATIVE_SHAPES = [
    re.compile(p, re.I)
    for p in (
        r"\b(?:" + _EVENT + r")\b:?" + _BETWEEN_AFTER + r"{0,5}?\s+(?P<rel>" + relativedates.RELATIVE + r")",
        r"(?:^[-*\u2022\s]*|(?<=[,;:(])\s*)(?P<rel>"
        + relativedates.RELATIVE
        + r"),?"
        + _BETWEEN_BEFORE
        + r"{0,6}?\s+(?:"
        + _EVENT
        + r")\b",
        # Right before the event's verb, not a label ("delivery date"): "was recently shipped", "has just been
        # delivered", "you just ordered it".
        r"\b(?P<rel>" + relativedates.BEFORE_VERB + r")\s+(?:been\s+)?(?!(?:\w+\s+)?date\b)(?:" + _EVENT + r")\b",
    )
]
# A rule of every order, not a statement of this one: "Orders placed over 30 days ago cannot be returned".
_GENERAL = re.compile(
    r"(?:^|[,;:(]\s*|\b(?:for|on|to|of|with|are|is)\s+)(?:orders|items|purchases|products|parcels|packages)"
    r"(?:\s+(?:that|which)\s+(?:were|are|have\s+been))?\s+$|\b(?:any|all|every|no)\s+(?:[\w-]+\s+){0,2}$"
    # "items you recently bought are …", "orders that you placed over a month ago …"
    r"|\b(?:orders|items|purchases|products|parcels|packages)\s+(?:(?:that|which)\s+)?you(?:'ve|\s+have)?\s+$",
    re.I,
)
# The same rule with the time before the verb: "recently shipped orders show …", "newly placed items".
_GENERAL_AFTER = re.compile(r"\s+(?:orders|items|purchases|products|parcels|packages)\b", re.I)
# An event still to come, said with a time that may be of today or after: "is scheduled to be delivered
# today", "is due to ship this week", "is being delivered this afternoon".
_TO_COME = re.compile(
    r"\b(?:scheduled|due|set|planned|slated|about|yet|ready)\s+(?:to|for)\b|\bto(?:\s+be)?\s*$|\bbeing\s*$", re.I
)
# What the event is of, when it is not the order: "a replacement was shipped today", "the return label
# was sent out yesterday" tell nothing of the order's own days.
_NOT_THE_ORDER = re.compile(
    r"\b(?:replacements?|exchanges?|labels?|e-?mails?|messages?|links?|codes?|invoices?|receipts?|vouchers?"
    r"|coupons?|confirmations?|new\s+(?:one|item|unit|parcel|package|order|lamp))\b",
    re.I,
)
# What a verb's object says it is of, after the verb: "we just shipped a replacement", "I've just placed
# a hold on it", "I just returned your call".
_OTHER_OBJECT = re.compile(
    r"^\s+(?:[\w'-]+\s+){0,3}?(?:holds?|on\s+hold|requests?|notes?|claims?|calls?|tickets?)\b", re.I
)
# A figure of the record: what was paid, charged, refunded, what something cost.
_AMOUNT_WORDS = re.compile(
    r"\b(?:amount|total|subtotal|price|priced|cost|costs|paid|charged|billed|sum|balance|value|worth|came\s+to"
    r"|comes\s+to|refundable)\b",
    re.I,
)
# A condition, a future, a wish or the customer's own words: nothing stated as so.
_NOT_SO = re.compile(
    r"\b(?:if|once|unless|until|whether|when|whenever|after|before|as\s+soon\s+as|in\s+case|will|would|could|can"
    r"|should|may|might|must|expect|expected|expects|estimated|going\s+to|supposed|hope|hopefully|want|wants"
    r"|need|needs)\b|'ll\b|'d\b"
    r"|\byou(?:'ve|\s+have)?\s+(?:said|say|wrote|write|mentioned|told|asked|reported|believe|think|thought)\b"
    r"|\baccording\s+to\s+you\b",
    re.I,
)
_RUN_ON_QUESTION = re.compile(
    r"(?<=[\w)\]])\s+(?=(?:Does|Did|Do|Is|Are|Was|Were|Has|Have|Can|Could|Would|Will|Shall|Should|May|What"
    r"|When|Where|Why|How|Which|Who|Anything)\b[^.!?]*\?$)"
)
_QUOTED = re.compile(r"\"[^\"]*\"|“[^”]*”|(?<!\w)'[^']*'(?!\w)")
_REF = re.compile(r"[A-Z][A-Za-z0-9]*[-_][A-Za-z0-9]*\d[A-Za-z0-9]*")


@dataclass(frozen=True)
class Statement:
    what: str  # STATUS, DATE, AMOUNT
    value: str = ""  # STATUS: the status, "not <status>" when denied; DATE: the event it is of
    said: str = ""  # DATE: the date as written
    day: date | None = None  # DATE: the day it names (None: a form this module cannot read)
    year: bool = True  # DATE: the date names its year
    of: str = ""  # STATUS by `_OTHER_SHAPES`: the reference the sentence tells it of, if it names one
    relative: bool = False  # DATE: `said` is a time relative to the reply ("15 days ago", `relativedates`)


def before_is_so(text: str, at: int) -> bool:
    """Whether what comes before `at` in its clause leaves the statement as stated (no condition, no future)."""
    clause = re.split(r"[,;]|\s-\s|\bbut\b|\band\b", text[:at])[-1]
    return not _NOT_SO.search(clause)


def not_so(text: str) -> bool:
    """Whether `text` holds a condition, a future, a wish or the customer's own words (`_NOT_SO`)."""
    return bool(_NOT_SO.search(text))


def said_as_so(sentence: str) -> str:
    """What of a sentence may state something as so: the sentence without its quotations; of a question,
    only a statement run on before it ("… date: 2021-08-22 Does this help?"); "" for a sentence that is a
    question throughout or says back the customer's words ("you said …")."""
    s = _QUOTED.sub(" ", sentence.strip().replace("\u2019", "'"))
    if s.endswith("?"):
        run_on = list(_RUN_ON_QUESTION.finditer(s))
        s = s[: run_on[-1].start()] if run_on else ""
    if s and re.search(
        r"\byou(?:'ve|\s+have)?\s+(?:said|say|wrote|mentioned|told|reported)\b|\baccording\s+to\s+you\b", s, re.I
    ):
        return ""
    return s


def statements(sentence: str) -> list[Statement]:
    """The statuses, dates and figures a sentence states of a record as so."""
    s = said_as_so(sentence)
    if not s:
        return []
    out: list[Statement] = []
    for shape in _STATUS_SHAPES:
        for m in shape.finditer(s):
            if not before_is_so(s, m.start()) or _NOT_SO.search(m.group(0)):
                continue
            status = next(k for k in _STATUS_WORDS if m.group(k))
            if status == PLACED and (m.groupdict().get("subject") or "").lower() in ("it", "they"):
                continue  # "it is being processed" is as often a refund or a request as the order
            out.append(Statement(STATUS, f"not {status}" if m.group("neg") else status))
    for shape in _OTHER_SHAPES:
        for m in shape.finditer(s):
            if not before_is_so(s, m.start()) or _NOT_SO.search(m.group(0)) or m.group("neg"):
                continue
            if _SORRY.search(s[: m.start()]):
                continue
            out.append(
                Statement(
                    STATUS, _other_status(m), of=(m.groupdict().get("ref") or m.groupdict().get("bare") or "").upper()
                )
            )
    for shape in _RELATIVE_SHAPES:
        for m in shape.finditer(s):
            rel = m.group("rel")
            event = next(k for k in _EVENTS if m.group(k))
            if not relativedates.read(rel):
                continue
            # The words around the time, not the time itself ("the day before yesterday"), say whether it is so.
            around = s[m.start() : m.start("rel")] + " " + s[m.end("rel") : m.end()]
            if not before_is_so(s, m.start()) or _NOT_SO.search(around) or _GENERAL.search(s[: m.start()]):
                continue
            clause = re.split(r"[,;]", s[: m.start(event)])[-1]
            if _TO_COME.search(clause) or _NOT_THE_ORDER.search(clause + " " + around):
                continue
            if m.end() == m.end(event):
                # The time before the verb: what follows it, up to the clause's end, may say what it is of.
                rest = re.split(r"[,;:.!?]|\b(?:and|but|so|because|as|while|which|that)\b", s[m.end() :])[0]
                if _NOT_THE_ORDER.search(rest) or _OTHER_OBJECT.match(rest):
                    continue
                if _GENERAL_AFTER.match(rest) and not re.search(r"\byour\b", clause, re.I):
                    continue
            out.append(Statement(DATE, event, re.sub(r"\s+", " ", rel.strip()), relative=True))
    for m in _DATE_SHAPE.finditer(s):
        if not before_is_so(s, m.start()) or _NOT_SO.search(m.group(0)):
            continue
        event = next(k for k in _EVENTS if m.group(k))
        day, year = parse_date(m.group("date"))
        out.append(Statement(DATE, event, m.group("date").strip(), day, year))
    if _AMOUNT_WORDS.search(s) and not _NOT_SO.search(s):
        out.append(Statement(AMOUNT))
    return list(dict.fromkeys(out))


def _other_status(m: re.Match) -> str:
    """The status an order is told by `_OTHER_SHAPES`: the shop's own for "a lost order", else the word said."""
    if m.group("other") is None:
        return next(k for k, p in _STATUS_WORDS.items() if re.fullmatch(p, m.group("known"), re.I))
    word = re.sub(r"[\s-]+", " ", m.group("other").lower()).replace("authorized", "authorised")
    return _SYNONYMS.get(word, word)


def is_other(status: str) -> bool:
    """A status word the shop's records never have (`_OTHER_WORDS`): only a tool result's status field backs it."""
    return status not in STATUSES


def parse_date(text: str, year: int = 2000) -> tuple[date | None, bool]:
    """(the day a written date names, whether it names its year); (None, True) for a form not read. A date
    without a year is given `year` (a leap year, so 29 February reads)."""
    t = (
        re.sub(r"^(?:\w+day,?\s+)?(?:the\s+)?", "", text.strip(), flags=re.I)
        .lower()
        .replace(",", " ")
        .replace(".", " ")
    )
    iso = re.match(r"(\d{4})-(\d{2})-(\d{2})", t)
    try:
        if iso:
            return date(int(iso[1]), int(iso[2]), int(iso[3])), True
        words = [w for w in t.split() if w != "of"]
        month = next((_MONTHS[w] for w in words if w in _MONTHS), None)
        day = next((int(re.match(r"\d+", w)[0]) for w in words if re.fullmatch(r"\d{1,2}(?:st|nd|rd|th)?", w)), None)
        named = next((int(w) for w in words if re.fullmatch(r"\d{4}", w)), None)
        if month and day:
            return date(named or year, month, day), named is not None
    except ValueError:
        pass
    return None, True


def references(sentence: str) -> set[str]:
    """The record references a sentence names (upper-cased, as records keep them)."""
    return {m.group(0).upper() for m in _REF.finditer(sentence)}


def fault(
    st: Statement,
    states: list,
    shown: str,
    statuses_shown: set[str],
    figures: set[tuple[int, str]],
    amounts,
    today: tuple[date, ...] = (),
) -> str:
    """Why a statement is not so ("" when it stands) on the records it may be about. `states`:
    `RecordState`s; `shown`: the tool results' text; `statuses_shown`: the statuses tool results gave
    these records; `figures`: (cents, currency) of cards, holds and actions; `amounts`: the sentence's
    (`replyclaims.Amount`); `today`: the reply's day (in the shop's time zone and in UTC), which a
    relative time counts from — none given, such a time is not judged."""
    if st.what == DATE and st.relative:
        return _relative_fault(st, states, shown, today)
    if st.what == STATUS:
        denied = st.value.startswith("not ")
        status = st.value.removeprefix("not ")
        has = [status in r.statuses for r in states] + [status in statuses_shown]
        if denied:
            return "the records show it is" if states and all(has[:-1]) else ""
        if not any(has):
            now = ", ".join(sorted({x for r in states for x in r.statuses})) or "no record of it"
            return f"the records show {now}"
        return ""
    if st.what == DATE:
        days = [d for r in states for event, d in r.dates if event == st.value]
        if st.day is None:
            return "" if st.said.lower() in shown.lower() else "a date no record shows"
        shown_days = {parse_date(d)[0] for d in re.findall(r"\d{4}-\d{2}-\d{2}", shown)}
        if st.year:
            ok = st.day in days or st.day in shown_days
        else:
            ok = any((d.month, d.day) == (st.day.month, st.day.day) for d in [*days, *shown_days] if d)
        if ok:
            return ""
        return (
            f"it was {st.value} on {', '.join(sorted({d.isoformat() for d in days}))}"
            if days
            else (f"no record shows it {st.value}")
        )
    # AMOUNT
    known = {f for r in states for f in r.figures} | set(figures)
    cents_shown = {int(c) for c in re.findall(r"_cents\"?\s*[:=]\s*(\d+)", shown)}
    for a in amounts:
        if any(a.minor(cur) == c for c, cur in known):
            continue
        if any(a.minor(cur or "USD") == c for c in cents_shown for cur in {c2 for _, c2 in known} | {""}):
            continue
        if re.search(r"(?<![\d.])" + re.escape(f"{a.value}") + r"(?![\d])", shown):
            continue
        return f"no record shows {a}"
    return ""


def _relative_fault(st: Statement, states: list, shown: str, today: tuple[date, ...]) -> str:
    """Why "it shipped 15 days ago" is not so: no day the record's event happened is one the time may mean.
    The records decide; where they have no day of that event, a date a tool result shows may back it."""
    if not today:
        return ""
    days = [d for r in states for event, d in r.dates if event == st.value]
    # "just", "recently" read before the verb: "not just shipped", "no record shows it just shipped".
    told = f"{st.said} {st.value}" if relativedates.before_verb(st.said) else f"{st.value} {st.said}"
    if not days:
        shown_days = [d for d in (parse_date(x)[0] for x in re.findall(r"\d{4}-\d{2}-\d{2}", shown)) if d]
        ok = any(relativedates.within(st.said, d, today) for d in shown_days)
        return "" if ok else f"no record shows it {told}"
    if any(relativedates.within(st.said, d, today) for d in days):
        return ""
    on = ", ".join(sorted({d.isoformat() for d in days}))
    return f"it was {st.value} on {on}, not {told.removeprefix(st.value + ' ')}"
