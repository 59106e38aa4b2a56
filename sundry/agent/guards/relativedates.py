"""A past time said relative to the reply — "15 days ago", "yesterday", "last week", "two weeks ago",
"earlier today", "a month ago", "3 days back", "this morning", "last Monday" — and the days it may
mean. Pure: the reply's day is given.

People count such times roughly, so each reading keeps an honest tolerance: "15 days ago" is 13 to
17 days before, "yesterday" the day before, "last week" the previous calendar week or 7 to 13 days
before, "a month ago" 3 to 6 weeks, "N months ago" N months give or take half a month, "a few days
ago" 2 to 6 days. "About" and "around" widen a reading by half its width again, "over" and "more
than" leave it open into the past, "less than" and "in the last …" bring it up to the reply's day.

Words that name no count are read with a generous span (`VAGUE`), wide enough that no fair use of the
word is held: "recently" (and "newly", "just recently", "only recently") is within six weeks, "just"
("it just shipped", "has only just been delivered") within a week, "the other day" 1 to 14 days before.
"Recently" and "the other day" follow the event or open the clause ("shipped recently", "Recently,
your order shipped"); "recently", "just" and "newly" also stand right before its verb ("was recently
shipped", "has just been delivered": `BEFORE_VERB`). Not read: "most recently" (which of several
came last, not when), "recent" ("your recent order"), and words with no span one could defend ("a
while ago", "some time ago", "not long ago").
`statusclaims` reads which event of a record such a time is of, and where the words are its.
"""

from __future__ import annotations

import math
import re
from datetime import date, timedelta

_NUMBERS = {
    "a": 1,
    "an": 1,
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
    "eleven": 11,
    "twelve": 12,
    "thirteen": 13,
    "fourteen": 14,
    "fifteen": 15,
    "sixteen": 16,
    "seventeen": 17,
    "eighteen": 18,
    "nineteen": 19,
    "twenty": 20,
    "thirty": 30,
}
# Counts that name a few, as (fewest, most).
_SOME = {"couple": (2, 3), "few": (2, 5), "several": (3, 7)}
_WEEKDAYS = ("mon", "tues", "wednes", "thurs", "fri", "satur", "sun")

_NUM = (
    r"(?:\d{1,3}|half\s+an?|a\s+couple(?:\s+of)?|(?:a\s+)?few|several|"
    + "|".join(sorted(_NUMBERS, key=len, reverse=True))
    + r")"
)
_UNIT = r"(?:minutes?|mins?|hours?|hrs?|(?:business|working)\s+days?|days?|weeks?|months?|years?)"
_QUAL = (
    r"(?:(?:just\s+over|just\s+under|well\s+over|a\s+little\s+over|more\s+than|less\s+than|at\s+least|close\s+to"
    r"|about|around|roughly|approximately|approx\.?|some|almost|nearly|over|under|just|only|exactly)\s+)"
)
_MONTH_NAMES = (
    r"(?:jan|feb|mar|apr|may|jun|jul|aug|sep|sept|oct|nov|dec|january|february|march|april|june|july|august"
    r"|september|october|november|december)\b"
)
_PART = r"(?:\s+(?:morning|afternoon|evening|night))?"
# Words that name no count, as (nearest, farthest) days before the reply. Generous on purpose: a true
# statement must never be held, so each reaches as far back as the word is fairly said of an order.
# "Recently" and "newly" (its synonym): six weeks, the farthest "a month ago" may mean — what one would
# still call a month ago one may call recent; four months is not. "Just": a week, so a dispatch over a
# weekend and a holiday is still news. "The other day": not today, and up to a fortnight back.
# "A while ago" is left out: it is said of minutes and of years alike.
VAGUE = {"recently": (0, 42), "newly": (0, 42), "just": (0, 7), "the other day": (1, 14)}
_RECENTLY = r"(?:(?:just|only|very|quite|fairly)\s+)?recently"
# After the event or opening the clause: "it shipped recently", "the other day, we refunded it" — not
# "recently" of the next verb ("to the address recently updated").
_VAGUE_AROUND = _RECENTLY + r"(?!\s+(?:\w+ed|been)\b)|the\s+other\s+day"
# Right before the event's verb: "was recently shipped", "has just been delivered", "your newly placed
# order"; not "most recently placed" (the latest of several).
BEFORE_VERB = r"(?<!\bmost\s)(?<!\bmore\s)(?<!\bless\s)(?<!\bleast\s)(?:" + _RECENTLY + r"|(?:only\s+)?just|newly)"
# The relative times read, as one pattern without groups (`statusclaims` places it in its own).
RELATIVE = (
    r"(?:"
    # "15 days ago", "about a month ago", "3 days back", "over two weeks ago"
    + _QUAL
    + r"?"
    + _NUM
    + r"\s+"
    + _UNIT
    + r"\s+(?:ago|back)"
    # "in the last 15 days", "within the past week"
    r"|(?:in|within|during)\s+the\s+(?:last|past)\s+(?:"
    + _NUM
    + r"\s+)?"
    + _UNIT
    + r"|yesterday"
    + _PART
    + r"|the\s+day\s+before\s+yesterday|last\s+night|(?:earlier\s+)?today"
    r"|(?:earlier\s+)?this\s+(?:morning|afternoon|evening|week|month|year)"
    r"|just\s+now|(?:a\s+)?(?:few\s+)?moments?\s+ago"
    r"|(?:last|this\s+past|the\s+(?:previous|prior))\s+(?:week|weekend|month|year)"
    # "on Monday", "last Tuesday", "this past Friday" (not "Monday, 3 August": a written date)
    r"|(?:on\s+)?(?:last\s+|this\s+past\s+)?(?:"
    + "|".join(_WEEKDAYS)
    + r")day"
    + _PART
    + r"(?!,?\s+(?:the\s+)?\d|,?\s+"
    + _MONTH_NAMES
    + r")"
    r"|" + _VAGUE_AROUND + r")(?![\w'])"
)
_IS_RELATIVE = re.compile(RELATIVE, re.I)

_COUNTED = re.compile(
    r"(?P<within>(?:in|within|during)\s+the\s+(?:last|past)\s+)?(?P<qual>" + _QUAL + r")?"
    r"(?:(?P<num>" + _NUM + r")\s+)?(?P<unit>" + _UNIT + r")(?:\s+(?:ago|back))?",
    re.I,
)


def _count(word: str) -> tuple[float, float]:
    """(fewest, most) a count may be."""
    w = re.sub(r"\s+", " ", word.lower()).removeprefix("a ").removesuffix(" of")
    if w.startswith("half"):
        return 0.5, 0.5
    if w in _SOME:
        return _SOME[w]
    n = int(w) if w.isdigit() else _NUMBERS[w]
    return n, n


def _around(n: float, unit: str) -> tuple[float, float]:
    """The days before the reply `n` of `unit` ago may mean, (nearest, farthest)."""
    if unit.startswith("min"):
        return 0, 1
    if unit.startswith(("hour", "hr")):
        return n // 24, n // 24 + 1
    if unit.startswith(("business", "working")):
        return n, n * 7 / 5 + 3  # the weekends between, and a holiday
    if unit.startswith("day"):
        tol = 1 + n // 10
        return n - tol, n + tol
    if unit.startswith("week"):
        tol = 3 + n // 2
        return 7 * n - tol, 7 * n + tol
    if unit.startswith("month"):
        return (21, 42) if n <= 1 else (30.44 * n - 15, 30.44 * n + 15)
    return 365 * n - 61, 365 * n + 61  # years


def _counted(m: re.Match) -> tuple[float, float]:
    unit = m.group("unit").lower()
    few, most = _count(m.group("num")) if m.group("num") else (1, 1)
    near, far = _around(few, unit)[0], _around(most, unit)[1]
    qual = re.sub(r"\s+", " ", (m.group("qual") or "").strip().lower())
    if m.group("within") or qual in ("less than", "under", "just under"):
        return 0, far
    if qual in ("over", "more than", "at least", "just over", "well over", "a little over"):
        return near, math.inf
    if qual in ("about", "around", "roughly", "approximately", "approx", "approx.", "some", "almost", "nearly"):
        widen = max(1, (far - near) / 2)
        return near - widen, far + widen
    return near, far


def _month_start(d: date, back: int = 0) -> date:
    y, m = divmod(d.year * 12 + d.month - 1 - back, 12)
    return date(y, m + 1, 1)


def spans(said: str, today: date) -> list[tuple[date, date]]:
    """The days (first, last) a relative time said on `today` may mean; [] for words not read."""
    t = re.sub(r"\s+", " ", said.strip().lower())
    wd = today.weekday()

    def ago(near: float, far: float) -> tuple[date, date]:
        first = date.min if far == math.inf else today - timedelta(days=math.ceil(far))
        return first, today - timedelta(days=max(0, math.floor(near)))

    vague = VAGUE.get(re.sub(r"^(?:(?:just|only|very|quite|fairly) (?=recently)|only (?=just))", "", t))
    if vague:
        return [ago(*vague)]
    if t.startswith("yesterday"):
        return [ago(1, 1)]
    if t == "the day before yesterday":
        return [ago(2, 2)]
    if t == "last night":
        return [ago(0, 1)]
    if re.fullmatch(
        r"(?:earlier )?(?:today|this (?:morning|afternoon|evening))|just now|(?:a )?(?:few )?moments? ago", t
    ):
        return [ago(0, 0)]
    if re.fullmatch(r"(?:earlier )?this week", t):
        return [ago(0, wd)]
    if re.fullmatch(r"(?:earlier )?this month", t):
        return [ago(0, today.day - 1)]
    if re.fullmatch(r"(?:earlier )?this year", t):
        return [ago(0, today.timetuple().tm_yday - 1)]
    if t == "this past week":
        return [ago(0, 7)]
    if re.fullmatch(r"(?:last|the (?:previous|prior)) week", t):
        return [ago(wd + 1, 13)]  # the previous calendar week, or 7 to 13 days before
    if re.fullmatch(r"(?:last|this past) weekend", t):
        sunday = (wd + 1) % 7 or 7
        return [ago(sunday, sunday + 1)]
    if re.fullmatch(r"(?:last|the (?:previous|prior)) month", t):
        # The previous calendar month, or 3 to 6 weeks before.
        first = min(_month_start(today, 1), today - timedelta(days=42))
        return [(first, max(_month_start(today) - timedelta(days=1), today - timedelta(days=21)))]
    if re.fullmatch(r"(?:last|the (?:previous|prior)) year", t):
        first = min(date(today.year - 1, 1, 1), today - timedelta(days=548))
        return [(first, max(date(today.year - 1, 12, 31), today - timedelta(days=183)))]
    day = re.fullmatch(r"(?:on )?(last |this past )?(" + "|".join(_WEEKDAYS) + r")day(?: \w+)?", t)
    if day:
        k = (wd - _WEEKDAYS.index(day[2])) % 7 or 7  # the latest such day before today
        back = [k, k + 7] if day[1] == "last " else [k] + ([0] if k == 7 else [])
        return [ago(b, b) for b in back]
    m = _COUNTED.fullmatch(t)
    if m and (m.group("num") or m.group("within")):
        return [ago(*_counted(m))]
    return []


def within(said: str, day: date, todays) -> bool:
    """Whether `day` is one a relative time may mean, said on any of `todays` (the reply's day in the
    shop's time zone and in UTC)."""
    return any(first <= day <= last for today in todays for first, last in spans(said, today))


def read(said: str) -> bool:
    """Whether this module gives a relative time any days (a word it finds but gives none is not read)."""
    return bool(spans(said, date(2000, 1, 3)))


def before_verb(said: str) -> bool:
    """Whether a time is a word said right before the event's verb ("just", "recently")."""
    return bool(re.fullmatch(BEFORE_VERB, re.sub(r"\s+", " ", said.strip()), re.I))


def is_relative(text: str) -> bool:
    return bool(_IS_RELATIVE.fullmatch(text.strip()))
